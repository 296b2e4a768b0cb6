//go:build !linux || !cgo

package container

import (
	"context"
	"fmt"
	"runtime"

	"github.com/psych-runtime/psych/sandbox"
)

// Sandbox is the container backend. This build has none: it needs Linux
// and cgo (the init psych provides to each container is this binary's
// nsexec constructor).
type Sandbox struct{}

var _ sandbox.Sandbox = (*Sandbox)(nil)

var errUnsupported = fmt.Errorf("%w: the container backend needs linux with cgo (this build: %s/%s)",
	sandbox.ErrInvalidConfig, runtime.GOOS, runtime.GOARCH)

// New always fails in this build.
func New(Config) (*Sandbox, error) { return nil, errUnsupported }

// Engine is empty in this build.
func (*Sandbox) Engine() Engine { return "" }

// CanFreeze reports false: no run exists here.
func (*Sandbox) CanFreeze() bool { return false }

// Image is empty in this build.
func (*Sandbox) Image() sandbox.Image { return sandbox.Image{} }

// Run always fails in this build.
func (*Sandbox) Run(context.Context, sandbox.Request) (*sandbox.Result, error) {
	return nil, errUnsupported
}

// Close does nothing in this build.
func (*Sandbox) Close() error { return nil }

// WaitWarm returns at once in this build: no pool exists.
func (*Sandbox) WaitWarm(context.Context) error { return nil }

// PoolStatus is zero in this build: no pool exists.
func (*Sandbox) PoolStatus() sandbox.PoolStatus { return sandbox.PoolStatus{} }
