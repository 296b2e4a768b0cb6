package eintr

import (
	"os"

	"golang.org/x/sys/unix"
)

// Waitid is waitid(2), retried on EINTR.
func Waitid(idType, id int, info *unix.Siginfo, options int, ru *unix.Rusage) error {
	err := Retry(func() error { return unix.Waitid(idType, id, info, options, ru) })
	return os.NewSyscallError("waitid", err)
}

// Fstatfs is fstatfs(2), retried on EINTR.
func Fstatfs(fd int, st *unix.Statfs_t) error {
	return os.NewSyscallError("fstatfs", Retry(func() error { return unix.Fstatfs(fd, st) }))
}

// Recvmsg is recvmsg(2), retried on EINTR: a socket with a receive timeout
// is not restarted after a signal, and the Go runtime signals its threads
// to preempt them.
func Recvmsg(fd int, p, oob []byte, flags int) (n, oobn int, err error) {
	err = Retry(func() (err error) {
		n, oobn, _, _, err = unix.Recvmsg(fd, p, oob, flags)
		return err
	})
	return n, oobn, os.NewSyscallError("recvmsg", err)
}
