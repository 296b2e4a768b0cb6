package seccomp

import "errors"

// Sentinel errors. Other errors wrap them with %w; callers test with
// errors.Is.
var (
	// ErrInvalidPolicy: the Policy cannot be compiled as written (an
	// unknown syscall name, a bad condition, an errno out of range).
	ErrInvalidPolicy = errors.New("invalid seccomp policy")
	// ErrInvalidProgram: the BPF program is one the kernel would refuse to
	// load (bad jump, bad load, unknown opcode, no final return).
	ErrInvalidProgram = errors.New("invalid seccomp BPF program")
	// ErrUnsupported: this platform or this libseccomp cannot compile the
	// policy, or libseccomp built a filter that fails Compile's own checks.
	ErrUnsupported = errors.New("seccomp policy compilation not supported")
)
