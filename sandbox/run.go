package sandbox

import (
	"context"
	"fmt"
)

// validID reports whether id is 1 to 64 characters of ASCII letters, digits
// and "._:-", so that it is safe in a file name, a label and a log line. (A
// regexp with {1,64} costs 0.1 ms to compile at every process start.)
func validID(id string) bool {
	if len(id) == 0 || len(id) > 64 {
		return false
	}
	for i := 0; i < len(id); i++ {
		switch c := id[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '.', c == '_', c == ':', c == '-':
		default:
			return false
		}
	}
	return true
}

// CheckID returns why id cannot be an execution's id, or nil. The error
// wraps ErrInvalidRequest.
func CheckID(id string) error {
	if !validID(id) {
		return fmt.Errorf("run id %.80q: want 1 to 64 of A-Z a-z 0-9 . _ : -: %w", id, ErrInvalidRequest)
	}
	return nil
}

// Freezer is implemented by a Sandbox that states whether it can freeze a
// run while one of its binding calls waits for a person (Suspend). A
// Sandbox that does not implement it cannot.
type Freezer interface {
	CanFreeze() bool
}

// CanFreeze reports whether s can freeze its runs.
func CanFreeze(s Sandbox) bool {
	f, ok := s.(Freezer)
	return ok && f.CanFreeze()
}

// RunContext is what a backend puts on the context Bindings.Call receives.
type RunContext struct {
	// ID is the execution's id.
	ID string
	// Suspend freezes the run and pauses its wall clock until resume is
	// called; nil where the backend cannot freeze.
	Suspend func() (resume func(), err error)
}

type runKey struct{}

// WithRun returns ctx carrying rc. Backends call it; callers read it back
// with RunID and Suspend.
func WithRun(ctx context.Context, rc RunContext) context.Context {
	return context.WithValue(ctx, runKey{}, rc)
}

// RunID is the id of the execution whose binding call ctx belongs to, or
// "" outside one.
func RunID(ctx context.Context) string {
	rc, _ := ctx.Value(runKey{}).(RunContext)
	return rc.ID
}

// Suspend freezes the run that the binding call's ctx belongs to, so that
// no thread of the program progresses and its wall clock stops while the
// call waits for a person. The caller must call resume, once, when the wait
// ends; the run then goes on. A run's suspensions together last at most its
// Limits.ApprovalSeconds: past it the host ends the run (limit_hit
// approval_seconds), and ctx with it. Suspend returns an error wrapping
// ErrCannotSuspend outside a run, where the backend cannot freeze, or when
// the freeze failed (the run then goes on unfrozen).
func Suspend(ctx context.Context) (resume func(), err error) {
	rc, _ := ctx.Value(runKey{}).(RunContext)
	if rc.Suspend == nil {
		return nil, fmt.Errorf("suspend run %q: %w", rc.ID, ErrCannotSuspend)
	}
	return rc.Suspend()
}
