package setup

import (
	"fmt"
	"log/slog"

	"github.com/psych-runtime/psych/sandbox"
	"github.com/psych-runtime/psych/sandbox/internal/host"
	"github.com/psych-runtime/psych/sandbox/wire"
)

// The shared fields' defaults, which each backend's own constants repeat
// for its users.
const (
	DefaultMaxOutputBytes = 1 << 20
	DefaultMaxFrameBytes  = wire.DefaultMaxFrame
	DefaultTmpBytes       = 64 << 20
	DefaultTmpInodes      = 4096
	// MinFrameBytes is the least frame cap: a start frame must fit.
	MinFrameBytes = 4096
)

// Common points at the fields both backends' Configs have, with the same
// meaning: each Config keeps its own layout and hands these over.
type Common struct {
	DefaultLimits                 *sandbox.Limits
	EnvAllowlist                  []string
	TmpBytes, TmpInodes           *int64
	Files                         *sandbox.FileCaps
	MaxOutputBytes, MaxFrameBytes *int
	Logger                        **slog.Logger
	// MinTmpBytes and MinTmpInodes are the backend's least tmpfs (zero:
	// any size that is not negative).
	MinTmpBytes, MinTmpInodes int64
}

// Defaults fills the zero fields: the limits merged over
// sandbox.DefaultLimits, the file caps over sandbox.DefaultFileCaps, and
// the constants above; the logger slog.Default().
func (c Common) Defaults() {
	*c.DefaultLimits = c.DefaultLimits.Merge(sandbox.DefaultLimits())
	*c.Files = c.Files.Merge()
	setZero(c.TmpBytes, DefaultTmpBytes)
	setZero(c.TmpInodes, DefaultTmpInodes)
	setZero(c.MaxOutputBytes, DefaultMaxOutputBytes)
	setZero(c.MaxFrameBytes, DefaultMaxFrameBytes)
	if *c.Logger == nil {
		*c.Logger = slog.Default()
	}
}

func setZero[T int | int64](p *T, v T) {
	if *p == 0 {
		*p = v
	}
}

// Checks are the shared fields' checks, in the style of runc's
// configs/validate: each a small function, for the backend's list. They
// run after Defaults.
func (c Common) Checks() []func() error {
	return []func() error{c.checkAllowlist, c.checkCaps, c.checkLimits, c.checkFiles}
}

// Validate runs checks in order: the first failure wins, wrapped in
// sandbox.ErrInvalidConfig.
func Validate(checks ...func() error) error {
	for _, check := range checks {
		if err := check(); err != nil {
			return fmt.Errorf("%w: %w", sandbox.ErrInvalidConfig, err)
		}
	}
	return nil
}

// checkAllowlist refuses a variable the sandbox sets itself, or a bad name.
func (c Common) checkAllowlist() error { return host.CheckAllowlist(c.EnvAllowlist) }

// checkCaps refuses a negative output cap, a frame cap below MinFrameBytes
// and a tmpfs below the backend's least.
func (c Common) checkCaps() error {
	if *c.MaxOutputBytes < 0 || *c.MaxFrameBytes < MinFrameBytes || *c.TmpBytes < max(c.MinTmpBytes, 0) || *c.TmpInodes < max(c.MinTmpInodes, 0) {
		return fmt.Errorf("output cap %d, frame cap %d (at least %d), tmp %d bytes (at least %d) or %d inodes (at least %d) out of range",
			*c.MaxOutputBytes, *c.MaxFrameBytes, MinFrameBytes, *c.TmpBytes, c.MinTmpBytes, *c.TmpInodes, c.MinTmpInodes)
	}
	return nil
}

// checkLimits refuses default limits out of range.
func (c Common) checkLimits() error { return c.DefaultLimits.Validate() }

// checkFiles refuses a negative file cap.
func (c Common) checkFiles() error { return c.Files.Validate() }
