package full

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/psych-runtime/psych"
	"github.com/psych-runtime/psych/cgroups"
	"github.com/psych-runtime/psych/sandbox/demotools"
)

// demoFiles are what the demo directory holds at the start, for
// remove_file to act on.
var demoFiles = []string{"notes.txt", "draft.txt", "old.log"}

// demoRegistry is psych run --demo-tools's registry: echo, sleep and fail
// (sandbox/demotools's), and a destructive remove_file(path) that acts only
// inside dir (through os.Root: no absolute path, "..", or symlink leads out).
func demoRegistry(dir string) (*psych.Registry, error) {
	reg := psych.NewRegistry()
	demo := demotools.Bindings{}
	via := func(name string) psych.Handler {
		return func(ctx context.Context, c psych.Call) (any, error) {
			out, err := demo.Call(ctx, name, c.Args)
			if err != nil {
				return nil, err
			}
			return out, nil
		}
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("demo tools: %w", err)
	}
	specs := []psych.Spec{
		{Name: "echo", Description: "Return the keyword arguments as a dict.", Handler: via("echo")},
		{Name: "sleep", Description: "Sleep on the host, then return seconds.", Params: []string{"seconds"}, Handler: via("sleep"),
			Parameters: json.RawMessage(`{"type":"object","properties":{"seconds":{"type":"number","minimum":0,"maximum":60}},"required":["seconds"],"additionalProperties":false}`)},
		{Name: "fail", Description: "Make the host fail with message.", Params: []string{"message"}, Handler: via("fail"),
			Parameters: json.RawMessage(`{"type":"object","properties":{"message":{"type":"string"}},"required":["message"],"additionalProperties":false}`)},
		{Name: "remove_file", Description: "Remove a file from the demo directory (" + strings.Join(demoFiles, ", ") + ").", Destructive: true,
			Parameters: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string","minLength":1}},"required":["path"],"additionalProperties":false}`),
			Handler: func(_ context.Context, c psych.Call) (any, error) {
				var a struct{ Path string }
				if err := json.Unmarshal(c.Args, &a); err != nil {
					return nil, err
				}
				if err := root.Remove(a.Path); err != nil {
					return nil, fmt.Errorf("remove_file: %w", err)
				}
				return "removed " + a.Path, nil
			}},
	}
	for _, s := range specs {
		if err := reg.Register(s); err != nil {
			return nil, err
		}
	}
	return reg, nil
}

// demoPrefix begins a demo directory's name: demoPrefix, the owner
// (cgroups.Owner: this process), "-", MkdirTemp's random digits.
const demoPrefix = "psych-demo-"

// newDemoDir makes the demo directory with its files, named after this
// process, after removing those whose owner is dead (a CLI killed by
// SIGKILL cannot remove its own).
func newDemoDir() (string, error) {
	base := os.TempDir()
	removeStaleDemoDirs(base, os.Geteuid())
	owner, err := cgroups.SelfOwner()
	if err != nil {
		return "", fmt.Errorf("demo directory: %w", err)
	}
	dir, err := os.MkdirTemp(base, demoPrefix+owner.String()+"-")
	if err != nil {
		return "", fmt.Errorf("demo directory: %w", err)
	}
	for _, name := range demoFiles {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("demo\n"), 0o600); err != nil {
			os.RemoveAll(dir)
			return "", fmt.Errorf("demo directory: %w", err)
		}
	}
	return dir, nil
}

// removeStaleDemoDirs removes the demo directories under base that uid
// owns and whose owning process is dead (cgroups.Owner.Dead: when in
// doubt, alive). Anything else under base, another user's directory of
// the same form included, is left alone.
func removeStaleDemoDirs(base string, uid int) {
	entries, err := os.ReadDir(base)
	if err != nil {
		return
	}
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), demoPrefix)
		if !ok || !e.IsDir() {
			continue
		}
		head, rnd, ok := strings.Cut(rest, "-")
		if !ok || rnd == "" || strings.Trim(rnd, "0123456789") != "" {
			continue
		}
		owner, ok := cgroups.ParseOwner(head)
		if !ok || !owner.Dead() {
			continue
		}
		path := filepath.Join(base, e.Name())
		fi, err := os.Lstat(path)
		if err != nil || !fi.IsDir() {
			continue
		}
		if owner, ok := fileUID(fi); !ok || owner != uid {
			continue
		}
		os.RemoveAll(path)
	}
}

// newApprover is --approve's: yes approves every ask, no (nil) denies it,
// ask prompts on the terminal (an error without one).
func newApprover(mode string) (psych.Approver, func(), error) {
	switch mode {
	case "yes":
		return psych.ApproverFunc(func(context.Context, psych.ApprovalRequest) (psych.Approval, error) {
			return psych.Approval{Approved: true, By: "--approve=yes"}, nil
		}), func() {}, nil
	case "no":
		return nil, func() {}, nil
	case "ask":
		tty, err := os.OpenFile("/dev/tty", os.O_RDWR, 0)
		if err != nil {
			return nil, nil, fmt.Errorf("--approve ask needs a terminal: %w", err)
		}
		a := newTTYApprover(tty, tty)
		return a, func() { a.close(); tty.Close() }, nil
	}
	return nil, nil, fmt.Errorf("--approve %q: want yes, no or ask", mode)
}

// promptArgsRunes caps the arguments an approval prompt shows; it says how
// many bytes more there are.
const promptArgsRunes = 2048

// ttyApprover asks a person on the terminal, one question at a time. One
// goroutine reads the terminal for the approver's life, so a prompt given
// up (its context ended) leaves no reader behind to take the next
// prompt's answer; a line typed while no question is open answers none.
type ttyApprover struct {
	mu    sync.Mutex
	out   io.Writer
	lines chan string   // the terminal's lines; closed when it ends
	quit  chan struct{} // closed by close: the reader stops offering lines
}

func newTTYApprover(in io.Reader, out io.Writer) *ttyApprover {
	a := &ttyApprover{out: out, lines: make(chan string), quit: make(chan struct{})}
	go func() {
		defer close(a.lines)
		r := bufio.NewReader(in)
		for {
			s, err := r.ReadString('\n')
			if s != "" {
				select {
				case a.lines <- s:
				case <-a.quit:
					return
				}
			}
			if err != nil {
				return
			}
		}
	}()
	return a
}

// close stops the reader from offering lines; it ends once the terminal
// does (the caller closes it).
func (a *ttyApprover) close() { close(a.quit) }

func (a *ttyApprover) Approve(ctx context.Context, req psych.ApprovalRequest) (psych.Approval, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	// Lines the reader has ready from before this question are not its
	// answer.
	for {
		select {
		case _, ok := <-a.lines:
			if ok {
				continue
			}
		default:
		}
		break
	}
	// The arguments are the canonical form the tool will get (the Runtime
	// gives every consumer that one), escaped and capped: nothing the
	// program wrote reaches the terminal as it wrote it.
	args, _ := Shown(req.Call.Args, promptArgsRunes)
	fmt.Fprintf(a.out, "psych: %s wants to call %s(%s) [%s]. Allow? [y/N] ", Escape(string(req.Call.Via), true), Escape(req.Spec.Name, true), args, Escape(req.Decision.Reason, true))
	select {
	case s, ok := <-a.lines:
		if !ok {
			fmt.Fprintln(a.out)
			return psych.Approval{}, errors.New("the terminal closed without an answer")
		}
		yes := strings.EqualFold(strings.TrimSpace(s), "y") || strings.EqualFold(strings.TrimSpace(s), "yes")
		return psych.Approval{Approved: yes, By: "tty", Reason: "refused on the terminal"}, nil
	case <-ctx.Done():
		fmt.Fprintln(a.out)
		return psych.Approval{}, errors.New("no answer on the terminal")
	}
}

func compact(raw json.RawMessage) string {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return string(raw)
	}
	return b.String()
}
