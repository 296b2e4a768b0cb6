package cgroups

import "errors"

// Sentinel errors. Other errors wrap them, or the errno beneath, with %w;
// callers test with errors.Is.
var (
	// ErrUnavailable: this process cannot have per-run cgroups here. No
	// cgroup hierarchy is mounted, a parent cannot be created or is not
	// writable, or the memory or pids controller is not delegated to it.
	// The caller decides between refusing to run and running without
	// cgroups, and says which.
	ErrUnavailable = errors.New("cgroups unavailable")
	// ErrNotSupported: the operation needs what this host's hierarchies
	// lack, such as freezing on a v1 host without the freezer controller.
	ErrNotSupported = errors.New("cgroup operation not supported on this host")
	// ErrInvalid: a Config, Limits or run id that cannot work.
	ErrInvalid = errors.New("invalid cgroup request")
	// ErrRemoved: the Run was already removed.
	ErrRemoved = errors.New("run cgroup removed")
	// ErrRemoveDeferred: Remove killed and emptied the run's cgroups but
	// could not remove a directory (its parent unwritable for a while): its
	// Manager removes it at the start of its next run.
	ErrRemoveDeferred = errors.New("run cgroup removal deferred")
)
