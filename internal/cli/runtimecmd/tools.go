package runtimecmd

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

// newDemoDir makes the demo directory with its files.
func newDemoDir() (string, error) {
	dir, err := os.MkdirTemp("", "psych-demo-")
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
		return &ttyApprover{tty: tty, in: bufio.NewReader(tty)}, func() { tty.Close() }, nil
	}
	return nil, nil, fmt.Errorf("--approve %q: want yes, no or ask", mode)
}

// ttyApprover asks a person on the terminal, one question at a time.
type ttyApprover struct {
	mu  sync.Mutex
	tty io.Writer
	in  *bufio.Reader
}

func (a *ttyApprover) Approve(ctx context.Context, req psych.ApprovalRequest) (psych.Approval, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	fmt.Fprintf(a.tty, "psych: %s wants to call %s(%s) [%s]. Allow? [y/N] ", req.Call.Via, req.Spec.Name, compact(req.Call.Args), req.Decision.Reason)
	line := make(chan string, 1)
	go func() {
		s, _ := a.in.ReadString('\n')
		line <- s
	}()
	select {
	case s := <-line:
		ok := strings.EqualFold(strings.TrimSpace(s), "y") || strings.EqualFold(strings.TrimSpace(s), "yes")
		return psych.Approval{Approved: ok, By: "tty", Reason: "refused on the terminal"}, nil
	case <-ctx.Done():
		fmt.Fprintln(a.tty)
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
