package run

import (
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// requestFile holds the request line the lean psych read, for psych-full
// to read again (--request-fd): a memfd, left open across exec.
func requestFile(line []byte) (fd int, err error) {
	fd, err = unix.MemfdCreate("psych-request", 0) // no MFD_CLOEXEC: it crosses the exec
	if err != nil {
		return -1, fmt.Errorf("hand the request over: %w", err)
	}
	f := os.NewFile(uintptr(fd), "psych-request")
	if _, err := f.Write(append(line, '\n')); err != nil {
		f.Close()
		return -1, fmt.Errorf("hand the request over: %w", err)
	}
	if _, err := f.Seek(0, 0); err != nil {
		f.Close()
		return -1, fmt.Errorf("hand the request over: %w", err)
	}
	// os.NewFile set no close-on-exec; keep the fd from the GC's finalizer.
	fd, err = unix.Dup(fd)
	f.Close()
	if err != nil {
		return -1, fmt.Errorf("hand the request over: %w", err)
	}
	return fd, nil
}

func fdArg(fd int) string { return "--request-fd=" + strconv.Itoa(fd) }

// takeRequestFile is psych-full's side of --request-fd: the handed-over fd,
// close-on-exec from here on, so that nothing psych-full starts inherits it.
func takeRequestFile(fd int) *os.File {
	unix.CloseOnExec(fd)
	return os.NewFile(uintptr(fd), "request")
}
