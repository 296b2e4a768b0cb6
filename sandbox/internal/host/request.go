package host

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/oklog/ulid/v2"

	"github.com/psych-runtime/psych/sandbox"
	"github.com/psych-runtime/psych/sandbox/wire"
)

// Request is a validated execution, ready for a backend.
type Request struct {
	// ID is the caller's id, or a ULID made here.
	ID       string
	Code     string
	Network  bool
	Bindings sandbox.Bindings
	// Limits are the request's merged with the backend's defaults, validated.
	Limits sandbox.Limits
	// Decls are the bindings the program is offered, validated.
	Decls []sandbox.Binding
	// Env are the request's variables, each on the allowlist.
	Env map[string]string
	// Output receives the output as it comes; nil when not asked for.
	Output sandbox.Output
	// Started is told the program is about to start; nil when not asked for.
	Started sandbox.Started
	// Start is the start frame's body: with no environment until SetStart.
	Start []byte
	// Files are written into the run's work directory (SetFiles).
	Files []sandbox.File
	// Figures says the host collects the run's figures (a Workspace holds
	// its tmpfs): the start frame then names sandbox.FiguresDir.
	Figures bool

	maxFrame int
}

// Prepare validates req against a backend's merged defaults, frame cap and
// environment allowlist. Every error wraps sandbox.ErrInvalidRequest.
func Prepare(req sandbox.Request, defaults sandbox.Limits, maxFrame int, allowlist []string) (*Request, error) {
	r := &Request{ID: req.ID, Code: req.Code, Network: req.Network, Bindings: req.Bindings, Output: req.Output, Started: req.Started, Limits: req.Limits.Merge(defaults), maxFrame: maxFrame}
	if err := r.Limits.Validate(); err != nil {
		return nil, err
	}
	if err := checkEnv(req.Env, allowlist); err != nil {
		return nil, err
	}
	r.Env = maps.Clone(req.Env)
	if r.ID == "" {
		r.ID = ulid.Make().String()
	} else if err := sandbox.CheckID(r.ID); err != nil {
		return nil, err
	}
	if !utf8.ValidString(req.Code) {
		return nil, fmt.Errorf("code is not valid UTF-8: %w", sandbox.ErrInvalidRequest)
	}
	if req.Bindings != nil {
		r.Decls = req.Bindings.List()
		if err := sandbox.ValidateBindings(r.Decls); err != nil {
			return nil, err
		}
	}
	start, err := wire.Marshal(&wire.Start{V: wire.Version, Code: req.Code, Bindings: r.Decls, MaxFrame: maxFrame})
	if err != nil || len(start) > maxFrame {
		return nil, fmt.Errorf("code and bindings exceed the %d-byte frame cap: %w", maxFrame, sandbox.ErrInvalidRequest)
	}
	r.Start = start
	return r, nil
}

// SetFiles checks files against caps (merged) and the backend's tmpfs
// size, and takes them.
func (r *Request) SetFiles(files []sandbox.File, caps sandbox.FileCaps, tmpBytes int64) error {
	if err := sandbox.CheckFiles(files, caps, tmpBytes); err != nil {
		return err
	}
	r.Files = files
	return nil
}

// SetStart makes the start frame carry the program's whole environment,
// and sandbox.FiguresDir if Figures is set.
func (r *Request) SetStart(env []string) error {
	var figures string
	if r.Figures {
		figures = sandbox.FiguresDir
	}
	start, err := wire.Marshal(&wire.Start{V: wire.Version, Code: r.Code, Bindings: r.Decls, MaxFrame: r.maxFrame, Env: env, Figures: figures})
	if err != nil || len(start) > r.maxFrame {
		return fmt.Errorf("code, bindings and environment exceed the %d-byte frame cap: %w", r.maxFrame, sandbox.ErrInvalidRequest)
	}
	r.Start = start
	return nil
}

// checkEnv refuses a variable whose name is not on the allowlist, or whose
// value is not UTF-8 or holds a NUL.
func checkEnv(env map[string]string, allowlist []string) error {
	for name, v := range env {
		if !slices.Contains(allowlist, name) {
			return fmt.Errorf("env %q is not on the sandbox's env allowlist: %w", name, sandbox.ErrInvalidRequest)
		}
		if !utf8.ValidString(v) || strings.ContainsRune(v, 0) {
			return fmt.Errorf("env %q: the value is not UTF-8 without NUL: %w", name, sandbox.ErrInvalidRequest)
		}
	}
	return nil
}
