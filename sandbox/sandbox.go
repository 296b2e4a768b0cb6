package sandbox

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
)

// Sandbox runs one program per call.
//
// Run returns a Result whenever the program ran, whatever it did. It returns
// an error only when the sandbox could not run it (see the package doc), and
// the context's error when ctx ended first. Either way every process of the
// run has been sent SIGKILL before Run returns, so none runs another
// instruction of its own after; what the run leaves on the host (a
// cgroup, directories, a container) may be removed after, off the
// request's path, and is gone when Close returns.
//
// Close releases what the Sandbox holds between runs (a warm pool's
// sandboxes, an engine connection) once the runs in flight are done, and
// waits until it is gone; a Run after it fails with ErrClosed. Calling it
// again is a no-op.
type Sandbox interface {
	Run(ctx context.Context, req Request) (*Result, error)
	Close() error
}

// Request is one execution.
type Request struct {
	// ID identifies the execution (see CheckID); the backend makes a ULID
	// when it is empty. It is on the Result and on the context of every
	// Bindings.Call of the run.
	ID string
	// Code is the Python program, run as the __main__ module.
	Code string
	// Limits overrides the backend's defaults field by field; a zero field
	// keeps the default.
	Limits Limits
	// Network asks for network access. Off by default.
	Network bool
	// Bindings are the host functions the program may call. Nil offers none.
	Bindings Bindings
	// Env sets variables of the program's environment. Each name must be
	// on the backend's EnvAllowlist (else ErrInvalidRequest); its value
	// takes the place of the host's. The bootstrap sets the environment
	// before the program's first line, on cold and warm runs alike.
	Env map[string]string
	// Output, when set, receives the run's stdout and stderr as the program
	// writes them, decoded as the Result decodes them: for each stream, the
	// data of its calls concatenate to exactly the Result's Stdout or
	// Stderr (nothing past the output cap; a UTF-8 sequence split between
	// reads waits for its next bytes). See Output for the calls' promises.
	Output Output
	// Started, when set, is told that the program is about to start, and
	// whether a warm pool's sandbox took the run. See Started.
	Started Started
	// Files are written into WorkDir, the program's working directory,
	// before its first line (on a warm run, at dispatch), owned by the
	// run's user; see CheckFiles for the rules and the backend's FileCaps
	// for the caps. Past any, ErrInvalidRequest and nothing runs.
	Files []File
}

// Started is called once per Run that gets as far as starting the program
// (Request.Started): after a warm pool's sandbox was dispatched the
// request, or once a cold run's sandbox is started, and before the start
// frame, so before the program's first line, its first binding call and
// any Output call. warm is what the Result's Isolation.Warm says. A Run
// that fails before the program could start never calls it; none comes
// after Run returned. (On the remote backend it is called as the server's
// started event arrives, still before any output or binding call.)
//
// It must not block: the run's start waits for it. A call that panics is
// recovered; the run goes on.
type Started func(warm bool)

// Stream names one of a run's output streams.
type Stream uint8

// The streams an Output is called for.
const (
	Stdout Stream = iota + 1
	Stderr
)

// String returns "stdout" or "stderr".
func (s Stream) String() string {
	switch s {
	case Stdout:
		return "stdout"
	case Stderr:
		return "stderr"
	}
	return fmt.Sprintf("Stream(%d)", uint8(s))
}

// Output receives a run's output as it comes (Request.Output). It is
// called from the host's drain of that stream: in order and one call at a
// time for one stream, but the two streams' calls may run at once, on two
// goroutines. data is never empty and never splits a UTF-8 sequence. Every
// call has returned before Run returns; none comes after.
//
// It must not block: the drain waits for it, the program's pipe fills
// while it waits, and Run cannot return before it does. Hand data (an
// immutable string, the callee's to keep) on and return. A call that
// panics ends the delivery of the run's output (the panic is recovered;
// the Result holds the whole output all the same).
type Output func(stream Stream, data string)

// Binding declares one host function as the program sees it.
type Binding struct {
	// Name is the Python identifier the program calls.
	Name string `json:"name"`
	// Params are the parameter names in order, so positional arguments map
	// to names. A binding may also be called with other keyword arguments.
	Params []string `json:"params"`
	// Doc becomes the function's docstring.
	Doc string `json:"doc"`
}

// Bindings is the host side of the program's binding calls. The sandbox
// calls Call for every call frame the program sends, one at a time.
//
// args is a JSON object (positional arguments already mapped to Params); the
// reply must be JSON. An error from Call reaches the program as a
// BindingError carrying err.Error(); it never ends the run. ctx ends when
// the run ends, or when the program's result arrives while the call still
// runs (a thread of the program waiting in it then gets a BindingError); it
// carries the run's id (RunID) and, where the backend can freeze, the means
// to suspend the run while the call waits for a person (Suspend).
type Bindings interface {
	List() []Binding
	Call(ctx context.Context, name string, args json.RawMessage) (json.RawMessage, error)
}

// identifier reports whether s is an ASCII Python identifier.
func identifier(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', c == '_':
		case '0' <= c && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// pythonKeywords are Python's hard keywords (keyword.kwlist, the same from
// 3.8 to 3.13). Soft keywords (match, case, type, _) are ordinary names.
var pythonKeywords = map[string]bool{
	"False": true, "None": true, "True": true, "and": true, "as": true, "assert": true,
	"async": true, "await": true, "break": true, "class": true, "continue": true,
	"def": true, "del": true, "elif": true, "else": true, "except": true,
	"finally": true, "for": true, "from": true, "global": true, "if": true,
	"import": true, "in": true, "is": true, "lambda": true, "nonlocal": true,
	"not": true, "or": true, "pass": true, "raise": true, "return": true,
	"try": true, "while": true, "with": true, "yield": true,
}

// IsIdentifier reports whether s is an ASCII Python identifier that is not a
// keyword: the names a binding's parameters may have.
func IsIdentifier(s string) bool { return identifier(s) && !pythonKeywords[s] }

// IsReservedName reports whether name may not be a binding's (or a tool's)
// name although it is an identifier: run_code, the sandbox's own tool;
// BindingError, which the bootstrap defines; and every __dunder__ name
// (a name that starts and ends with two underscores, "__" itself included),
// which Python and the bootstrap own. The bootstrap applies the same rule to
// the start frame (a test holds the two to it).
func IsReservedName(name string) bool {
	return name == "run_code" || name == "BindingError" ||
		strings.HasPrefix(name, "__") && strings.HasSuffix(name, "__")
}

// CheckName returns why name cannot be a binding's or a tool's name, or nil:
// it must be an ASCII Python identifier, not a keyword and not reserved
// (IsReservedName). The error wraps ErrInvalidRequest.
func CheckName(name string) error {
	switch {
	case !IsIdentifier(name):
		return fmt.Errorf("name %.64q is not a Python identifier (ASCII letters, digits, _; not a keyword): %w", name, ErrInvalidRequest)
	case IsReservedName(name):
		return fmt.Errorf("name %q is reserved (run_code, BindingError and __dunder__ names): %w", name, ErrInvalidRequest)
	}
	return nil
}

// ValidateBindings checks that every declared name passes CheckName and is
// declared once, and that every parameter is a distinct identifier.
func ValidateBindings(list []Binding) error {
	seen := map[string]bool{}
	for _, b := range list {
		if err := CheckName(b.Name); err != nil {
			return fmt.Errorf("binding: %w", err)
		}
		if seen[b.Name] {
			return fmt.Errorf("binding %q: declared twice: %w", b.Name, ErrInvalidRequest)
		}
		seen[b.Name] = true
		params := map[string]bool{}
		for _, p := range b.Params {
			if !IsIdentifier(p) || params[p] {
				return fmt.Errorf("binding %q: bad or repeated parameter %q: %w", b.Name, p, ErrInvalidRequest)
			}
			params[p] = true
		}
	}
	return nil
}
