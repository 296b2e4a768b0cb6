//go:build linux && cgo

package reexec

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/psych-runtime/psych/internal/eintr"
	"github.com/psych-runtime/psych/nsexec"
)

// The fork server is the host binary started once per host process with
// the forkserver marker: the nsexec constructor serves it, so the Go
// runtime never starts there. It clones P for each Start, instead of the
// host forking and execing its own binary and the dynamic linker loading
// it again (about 1 ms a run here). P is still the host's child
// (CLONE_PARENT), with the descriptors the exec path gives it; nothing of
// one run passes through the server to another: it holds a request's
// descriptors only until P is cloned. It dies with the host (its death
// signal, and EOF on its socket). Where it cannot be started, or dies and
// cannot be started again, Start takes the exec path.
type forkServer struct {
	mu   sync.Mutex
	fd   int // the host's end of its socket; -1 when there is none
	proc *os.Process
}

var server = &forkServer{fd: -1}

// forkServerOff makes Start take the exec path (UseForkServer).
var forkServerOff atomic.Bool

// UseForkServer turns the fork server on (the default) or off, for psych's
// own tests and benchmarks: off, every Start forks and execs the host
// binary. Either way P, and all that follows, is the same.
func UseForkServer(on bool) { forkServerOff.Store(!on) }

// WarmForkServer starts the fork server now, off the first run's path.
// It is a no-op when it runs already or is turned off.
func WarmForkServer() {
	if forkServerOff.Load() {
		return
	}
	go func() {
		server.mu.Lock()
		defer server.mu.Unlock()
		if server.fd < 0 {
			server.startLocked()
		}
	}()
}

// ForkServerPID is the running fork server's pid, 0 when there is none;
// for tests.
func ForkServerPID() int {
	server.mu.Lock()
	defer server.mu.Unlock()
	if server.proc == nil {
		return 0
	}
	return server.proc.Pid
}

// errServerGone is a server that closed its socket or did not answer.
var errServerGone = errors.New("the fork server is gone")

// errCloneRefused is a server whose clone the kernel refuses where the
// host's own fork may still work: clone3 or CLONE_PARENT denied by a
// seccomp filter the host runs under (a container engine's default returns
// ENOSYS for clone3), or not in the kernel. The process then takes the
// exec path from here on.
var errCloneRefused = errors.New("the fork server cannot clone here")

// startLocked starts a server. Its parent is a thread locked to the
// goroutine that waits for it, so that the thread outlives it: the
// server's death signal follows the thread that forked it, and P and the
// init, cloned with CLONE_PARENT, have that same thread as parent.
func (s *forkServer) startLocked() error {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return os.NewSyscallError("fork server socketpair", err)
	}
	// A server that stops answering (stopped, wedged) is given up on.
	tv := unix.Timeval{Sec: 5}
	if err := unix.SetsockoptTimeval(fds[0], unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		unix.Close(fds[0])
		unix.Close(fds[1])
		return os.NewSyscallError("fork server timeout", err)
	}
	child := os.NewFile(uintptr(fds[1]), "psych-forkserver")
	started := make(chan error, 1)
	proc := make(chan *os.Process, 1)
	go func() {
		runtime.LockOSThread()
		cmd := command(nsexec.MarkerForkServer, []*os.File{child}, -1)
		err := cmd.Start()
		child.Close()
		started <- err
		if err != nil {
			runtime.UnlockOSThread()
			return
		}
		proc <- cmd.Process
		cmd.Wait()
		// Runs the server cloned may still be in flight; their parent
		// is this thread, which goes back to the pool, not away.
		runtime.UnlockOSThread()
	}()
	if err := <-started; err != nil {
		unix.Close(fds[0])
		return fmt.Errorf("start fork server: %w", err)
	}
	s.fd, s.proc = fds[0], <-proc
	return nil
}

// closeLocked drops the current server; closing its socket ends it.
func (s *forkServer) closeLocked() {
	if s.fd >= 0 {
		unix.Close(s.fd)
	}
	if s.proc != nil {
		s.proc.Kill() // ErrProcessDone once reaped: never another's pid
	}
	s.fd, s.proc = -1, nil
}

// spawn clones P with files as its descriptors 0, 1, 2, ..., in the
// unified cgroup cgroupFD unless it is -1, and returns P's pid and pidfd.
// errServerGone means no server took the request, errCloneRefused that the
// kernel refused the clone: the caller takes the exec path. A server that
// took the request and died before answering fails the Start.
func (s *forkServer) spawn(files []*os.File, cgroupFD int) (int, int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for range 2 { // a server that died is started again once
		if s.fd < 0 {
			if err := s.startLocked(); err != nil {
				return 0, -1, fmt.Errorf("%w: %w", errServerGone, err)
			}
		}
		pid, pidfd, err := s.requestLocked(files, cgroupFD)
		if !errors.Is(err, errServerGone) {
			return pid, pidfd, err
		}
		s.closeLocked()
	}
	return 0, -1, errServerGone
}

func (s *forkServer) requestLocked(files []*os.File, cgroupFD int) (int, int, error) {
	fds := make([]int, 0, len(files)+1)
	for _, f := range files {
		fds = append(fds, int(f.Fd()))
	}
	cg := uint32(nsexec.ForkNoCgroup)
	if cgroupFD >= 0 {
		cg = uint32(len(fds))
		fds = append(fds, cgroupFD)
	}
	if len(fds) > nsexec.ForkMaxFDs {
		return 0, -1, fmt.Errorf("%w: %d descriptors for P, at most %d", errServerGone, len(fds), nsexec.ForkMaxFDs)
	}
	req := make([]byte, nsexec.ForkReqSize)
	binary.NativeEndian.PutUint32(req[0:], nsexec.ForkMagic)
	binary.NativeEndian.PutUint32(req[4:], cg)
	err := unix.Sendmsg(s.fd, req, unix.UnixRights(fds...), nil, unix.MSG_NOSIGNAL)
	runtime.KeepAlive(files)
	if err != nil {
		return 0, -1, fmt.Errorf("%w: %w", errServerGone, err)
	}
	rep := make([]byte, nsexec.ForkRepSize)
	oob := make([]byte, unix.CmsgSpace(4))
	n, oobn, err := eintr.Recvmsg(s.fd, rep, oob, unix.MSG_CMSG_CLOEXEC)
	pidfd := -1
	if err == nil {
		pidfd = firstFD(oob[:oobn])
	}
	pid := int32(-1)
	if n == nsexec.ForkRepSize {
		pid = int32(binary.NativeEndian.Uint32(rep))
	}
	switch {
	case err != nil || n == 0:
		// The request went out: a server that died or stalled since may
		// have cloned a P that now holds this run's descriptors, so the
		// run is not tried again with them. The next Start starts a new
		// server.
		closeFD(pidfd)
		s.closeLocked()
		if err == nil {
			err = errors.New("EOF")
		}
		return 0, -1, fmt.Errorf("the fork server did not answer: %w: %w", err, ErrProtocol)
	case n != nsexec.ForkRepSize:
		closeFD(pidfd)
		return 0, -1, fmt.Errorf("fork server reply of %d bytes: %w", n, ErrProtocol)
	case pid < 0:
		closeFD(pidfd)
		if e := syscall.Errno(-pid); e == unix.ENOSYS || e == unix.EPERM || e == unix.EINVAL {
			forkServerOff.Store(true)
			return 0, -1, fmt.Errorf("%w: clone P: %w", errCloneRefused, e)
		}
		return 0, -1, fmt.Errorf("fork server: clone P: %w", syscall.Errno(-pid))
	case pidfd < 0:
		return 0, -1, fmt.Errorf("fork server: no pidfd for P %d: %w", pid, ErrProtocol)
	}
	return int(pid), pidfd, nil
}

// waitPidfd reaps the process of pidfd, closes it, and reports a non-zero
// exit as os/exec does.
func waitPidfd(pidfd int) error {
	defer unix.Close(pidfd)
	var info unix.Siginfo
	if err := eintr.Waitid(unix.P_PIDFD, pidfd, &info, unix.WEXITED, nil); err != nil {
		return err
	}
	if st := siginfoStatus(&info); !st.Exited() || st.ExitStatus() != 0 {
		if st.Signaled() {
			return fmt.Errorf("signal: %v", st.Signal())
		}
		return fmt.Errorf("exit status %d", st.ExitStatus())
	}
	return nil
}
