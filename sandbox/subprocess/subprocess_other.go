//go:build !linux || !cgo

package subprocess

import (
	"context"
	"fmt"
	"runtime"

	"github.com/psych-runtime/psych/sandbox"
)

// Sandbox is the subprocess backend. This build has none: it needs Linux
// and cgo (the nsexec init and the seccomp compiler).
type Sandbox struct{}

var _ sandbox.Sandbox = (*Sandbox)(nil)

// errUnsupported says why this build has no subprocess backend.
var errUnsupported = fmt.Errorf("%w: the subprocess backend needs linux with cgo (this build: %s/%s, cgo %v)",
	sandbox.ErrInvalidConfig, runtime.GOOS, runtime.GOARCH, cgoEnabled)

// New always fails in this build.
func New(Config) (*Sandbox, error) { return nil, errUnsupported }

// Python is empty in this build.
func (*Sandbox) Python() string { return "" }

// CanFreeze reports false: no run exists here.
func (*Sandbox) CanFreeze() bool { return false }

// Run always fails in this build.
func (*Sandbox) Run(context.Context, sandbox.Request) (*sandbox.Result, error) {
	return nil, errUnsupported
}

// Close is a no-op in this build.
func (*Sandbox) Close() error { return nil }

// Settle returns at once in this build: no run exists.
func (*Sandbox) Settle() {}

// WaitWarm returns at once in this build: no pool exists.
func (*Sandbox) WaitWarm(context.Context) error { return nil }

// PoolStatus is zero in this build: no pool exists.
func (*Sandbox) PoolStatus() sandbox.PoolStatus { return sandbox.PoolStatus{} }
