package sandbox

import "errors"

// Sentinel errors. Backends wrap them with %w; callers test with errors.Is.
var (
	// ErrInvalidConfig: the backend's configuration cannot work.
	ErrInvalidConfig = errors.New("invalid sandbox configuration")
	// ErrInvalidRequest: the Request itself is malformed (bad limits, a bad
	// binding declaration).
	ErrInvalidRequest = errors.New("invalid request")
	// ErrRefused: a Require… option asked for a protection this host or this
	// backend cannot give, so the run was refused rather than weakened.
	ErrRefused = errors.New("run refused")
	// ErrHostFault: the host failed to set up, watch or tear down the run.
	ErrHostFault = errors.New("sandbox host fault")
	// ErrCannotSuspend: a run cannot be frozen (see Suspend).
	ErrCannotSuspend = errors.New("cannot suspend")
	// ErrBusy: the run could not start because a resource shared by the
	// host's runs (the outside ids) was exhausted for longer than a short
	// bound. Nothing ran; retry later.
	ErrBusy = errors.New("sandbox busy")
	// ErrClosed: Run was called after Close.
	ErrClosed = errors.New("sandbox closed")
)
