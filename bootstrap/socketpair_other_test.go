//go:build unix && !linux

package bootstrap_test

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// streamPair is a blocking AF_UNIX stream pair, both ends close-on-exec:
// set under ForkLock, as the socket has no SOCK_CLOEXEC here.
func streamPair() ([2]int, error) {
	syscall.ForkLock.RLock()
	defer syscall.ForkLock.RUnlock()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	if err == nil {
		unix.CloseOnExec(fds[0])
		unix.CloseOnExec(fds[1])
	}
	return fds, err
}
