package seccomp

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
)

// Filter is a compiled policy: a classic BPF program for seccomp on x86_64.
// It is immutable and safe for concurrent use.
type Filter struct {
	raw        []byte
	prog       []insn
	err        error // why the program would not load; nil after Compile
	digest     string
	unresolved []string
}

// Compiled takes back a program that Compile, in this very executable,
// made (Bytes, and Unresolved as it was), as a store only this host can
// write returns it. It checks what the kernel checks (whole instructions,
// known opcodes, jumps inside the program, a return at the end), not the
// rules: those Compile checked when it made the program. Where the bytes
// may come from another build, Restore checks them against the policy.
func Compiled(raw []byte, unresolved []string) (*Filter, error) {
	f := newFilter(slices.Clone(raw))
	if f.err != nil {
		return nil, fmt.Errorf("take back seccomp program: %w", f.err)
	}
	f.unresolved = slices.Sorted(slices.Values(unresolved))
	return f, nil
}

// newFilter wraps raw sock_filter bytes, checking them as the kernel would.
func newFilter(raw []byte) *Filter {
	f := &Filter{raw: raw}
	sum := sha256.Sum256(raw)
	f.digest = "sha256:" + hex.EncodeToString(sum[:])
	f.prog, f.err = decodeProgram(raw)
	if f.err == nil {
		f.err = checkProgram(f.prog)
	}
	return f
}

// Bytes returns the program as the kernel takes it in struct sock_fprog:
// an array of struct sock_filter (8 bytes each: code u16, jt u8, jf u8,
// k u32) in native byte order. The slice is a copy.
func (f *Filter) Bytes() []byte { return slices.Clone(f.raw) }

// Len is the number of instructions (sock_fprog.len).
func (f *Filter) Len() int { return len(f.raw) / insnSize }

// Digest is "sha256:" and the hex SHA-256 of Bytes. Compiling the same
// policy with the same libseccomp gives the same digest.
func (f *Filter) Digest() string { return f.digest }

// Unresolved lists, sorted, the policy's syscall names that this
// libseccomp could not resolve to an x86_64 syscall: names newer than its
// table (their numbers fail with UnknownErrno) and other ABIs' syscalls.
func (f *Filter) Unresolved() []string { return slices.Clone(f.unresolved) }

// Evaluate runs the program against one syscall, as the kernel would, and
// returns its SECCOMP_RET_* value (see DecodeReturn). It fails with
// ErrInvalidProgram for a program the kernel would refuse to load.
func (f *Filter) Evaluate(d Data) (uint32, error) {
	if f.err != nil {
		return 0, f.err
	}
	return run(f.prog, &d), nil
}
