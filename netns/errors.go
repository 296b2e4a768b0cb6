package netns

import "errors"

// Sentinel errors. Other errors are wrapped with %w and a lowercase action
// prefix; callers test with errors.Is. A namespace that is not empty is never
// an error: it is a Check with Denied false.
var (
	// ErrNotNetlink: the fd is not a NETLINK_ROUTE socket (or not a socket).
	ErrNotNetlink = errors.New("not a NETLINK_ROUTE socket")
	// ErrTimeout: the kernel did not answer before the check's deadline.
	ErrTimeout = errors.New("netlink reply timed out")
	// ErrMalformed: a netlink reply was truncated or did not parse.
	ErrMalformed = errors.New("malformed netlink reply")
	// ErrInterrupted: a dump kept changing under the check (NLM_F_DUMP_INTR,
	// ENOBUFS or a truncated datagram on every attempt).
	ErrInterrupted = errors.New("netlink dump interrupted")
	// ErrInvalidName: AddDummy was given a name the kernel cannot accept.
	ErrInvalidName = errors.New("invalid link name")
	// ErrUnsupported: network namespaces cannot be checked on this platform.
	ErrUnsupported = errors.New("network namespace check not supported on this platform")
)
