// Package eintr calls a raw system call again while a signal interrupts it
// (EINTR), as runc's internal/linux does: Retry and Value for any call, and
// named wrappers for the calls several packages make, whose errors name the
// call (os.NewSyscallError). It is for raw calls only: os and net retry
// their own. A loop that also waits out EAGAIN, a poll or a deadline keeps
// that logic and passes only the call through here.
//
// It is called eintr, not linux, because what it promises is the retry and
// Retry serves every unix (the interpreter-facts cache runs on macOS too);
// the named wrappers are Linux's. It is a leaf: it imports nothing of this
// module. The other leaves (cgroups, netns) may import nothing of it either,
// so cgroups keeps its own retryEINTR and netns its loops.
package eintr

import (
	"errors"
	"syscall"
)

// Retry calls fn until it returns anything but EINTR (bare or wrapped), and
// returns that, unchanged.
func Retry(fn func() error) error {
	for {
		if err := fn(); !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}

// Value is Retry for a call that returns a value with its error.
func Value[T any](fn func() (T, error)) (T, error) {
	for {
		v, err := fn()
		if !errors.Is(err, syscall.EINTR) {
			return v, err
		}
	}
}
