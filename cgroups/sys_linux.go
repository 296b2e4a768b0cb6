package cgroups

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// The raw system calls of the package, each wrapped once: EINTR is retried,
// and the error names the call (and the path, where there is one).

// goneErr is ENODEV from a file of a cgroup removed meanwhile (a file opened
// before the rmdir): the kernel's word for a cgroup that is gone. It is
// fs.ErrNotExist too, as the same file opened after the rmdir would say.
type goneErr struct{ error }

func (goneErr) Is(target error) bool { return target == fs.ErrNotExist }
func (e goneErr) Unwrap() error      { return e.error }

// gone marks ENODEV as a cgroup that is gone.
func gone(err error) error {
	if errors.Is(err, unix.ENODEV) {
		return goneErr{err}
	}
	return err
}

func retryEINTR(fn func() error) error {
	for {
		if err := fn(); err != unix.EINTR {
			return err
		}
	}
}

// openFd opens path with O_CLOEXEC added to flags.
func openFd(path string, flags int) (int, error) {
	var fd int
	err := retryEINTR(func() (err error) {
		fd, err = unix.Open(path, flags|unix.O_CLOEXEC, 0)
		return err
	})
	if err != nil {
		return -1, gone(&os.PathError{Op: "open", Path: path, Err: err})
	}
	return fd, nil
}

// preadFd reads from offset 0 in one call. A cgroup file is a seq_file, so
// a read at offset 0 renders the current values afresh.
func preadFd(fd int, b []byte) (int, error) {
	var n int
	err := retryEINTR(func() (err error) {
		n, err = unix.Pread(fd, b, 0)
		return err
	})
	if err != nil {
		return 0, gone(os.NewSyscallError("pread", err))
	}
	return n, nil
}

func closeFd(fd *int) {
	if *fd >= 0 {
		unix.Close(*fd)
		*fd = -1
	}
}

// writeFile writes s to an existing cgroup file in a single write(2), as the
// kernel's parsers expect; the write's own errno (EBUSY, EINVAL…) is kept.
func writeFile(path, s string) error {
	fd, err := openFd(path, unix.O_WRONLY)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	var n int
	err = retryEINTR(func() (err error) {
		n, err = unix.Write(fd, []byte(s))
		return err
	})
	if err == nil && n != len(s) {
		err = io.ErrShortWrite
	}
	if err != nil {
		return gone(&os.PathError{Op: "write", Path: path, Err: err})
	}
	return nil
}

func rmdir(path string) error {
	err := retryEINTR(func() error { return unix.Rmdir(path) })
	if err != nil {
		return &os.PathError{Op: "rmdir", Path: path, Err: err}
	}
	return nil
}

// kill sends sig to pid; a process already gone (ESRCH) is no error.
func kill(pid int, sig unix.Signal) error {
	err := retryEINTR(func() error { return unix.Kill(pid, sig) })
	if err != nil && err != unix.ESRCH {
		return os.NewSyscallError("kill", err)
	}
	return nil
}

// writable reports whether this process, with its effective ids, may
// create cgroups in dir.
func writable(dir string) error {
	err := retryEINTR(func() error {
		return unix.Faccessat(unix.AT_FDCWD, dir, unix.W_OK|unix.X_OK, unix.AT_EACCESS)
	})
	if err != nil {
		return &os.PathError{Op: "access", Path: dir, Err: err}
	}
	return nil
}

// mkdirShared creates a directory that other processes may create at the
// same time: one that already exists is no error.
func mkdirShared(dir string) error {
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	return nil
}

// readSmall reads a cgroup file whole: an open, reads until EOF, a close
// (os.ReadFile adds an fstat and the poller's registration, on a run's
// path).
func readSmall(path string) ([]byte, error) {
	fd, err := openFd(path, unix.O_RDONLY)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	b := make([]byte, 0, 512)
	for {
		if len(b) == cap(b) {
			b = slices.Grow(b, cap(b))
		}
		var n int
		err := retryEINTR(func() (err error) {
			n, err = unix.Read(fd, b[len(b):cap(b)])
			return err
		})
		if err != nil {
			return nil, gone(&os.PathError{Op: "read", Path: path, Err: err})
		}
		if n == 0 {
			return b, nil
		}
		b = b[:len(b)+n]
	}
}

// readInt reads a file holding one decimal integer.
func readInt(path string) (int64, error) {
	b, err := readSmall(path)
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseInt(string(bytes.TrimSpace(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("parse %s: %w", path, err)
	}
	return n, nil
}

// keyed finds "key value" in a flat-keyed cgroup file (cpu.stat,
// memory.events, pids.events…).
func keyed(b []byte, key string) (int64, bool) {
	for len(b) > 0 {
		line := b
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			line, b = b[:i], b[i+1:]
		} else {
			b = nil
		}
		k, v, ok := bytes.Cut(line, []byte{' '})
		if ok && string(k) == key {
			n, err := strconv.ParseInt(string(bytes.TrimSpace(v)), 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}

// readKeyed reads key from a flat-keyed file.
func readKeyed(path, key string) (int64, error) {
	b, err := readSmall(path)
	if err != nil {
		return 0, gone(err)
	}
	n, ok := keyed(b, key)
	if !ok {
		return 0, fmt.Errorf("parse %s: no %q", path, key)
	}
	return n, nil
}

// readPids lists the pids in a cgroup.procs file.
func readPids(path string) ([]int, error) {
	b, err := readSmall(path)
	if err != nil {
		return nil, gone(err)
	}
	var pids []int
	for _, f := range bytes.Fields(b) {
		if n, err := strconv.Atoi(string(f)); err == nil {
			pids = append(pids, n)
		}
	}
	return pids, nil
}

// poll calls done with a growing pause (100µs to 10ms) until it reports
// true or an error, or timeout passes; then it reports false.
func poll(timeout time.Duration, done func() (bool, error)) (bool, error) {
	deadline := time.Now().Add(timeout)
	for delay := 100 * time.Microsecond; ; delay = min(2*delay, 10*time.Millisecond) {
		ok, err := done()
		if ok || err != nil {
			return ok, err
		}
		if time.Now().After(deadline) {
			return false, nil
		}
		time.Sleep(delay)
	}
}
