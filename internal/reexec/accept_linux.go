//go:build linux && cgo

package reexec

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"time"

	"golang.org/x/sys/unix"

	"github.com/psych-runtime/psych/nsexec"
)

// ContainerEnv is the environment of an init an engine starts in container
// mode: the marker, and dir (where the plan and the sync socket are, as the
// container sees them; "" for nsexec.ContainerDir).
func ContainerEnv(dir string) []string {
	env := []string{nsexec.Marker + "=" + nsexec.MarkerContainer}
	if dir != "" {
		env = append(env, nsexec.EnvDir+"="+dir)
	}
	return env
}

// Encode returns the plan's bytes, for an init that reads them from a file
// (container mode). A plan with tree fds cannot be encoded so.
func (p *Plan) Encode() ([]byte, error) {
	b, trees, err := p.encode()
	if err != nil {
		return nil, err
	}
	if len(trees) > 0 {
		return nil, fmt.Errorf("plan: tree fds cannot reach an init by file: %w", ErrInvalidPlan)
	}
	return b, nil
}

// AcceptOptions describe an init that connects back: one an engine started
// in container mode, whose sync socket is a connection to Listener.
type AcceptOptions struct {
	// Listener is a "unixpacket" listener on the sync socket's path.
	Listener *net.UnixListener
	// UID is the uid (as the host sees it) the peer must run as; -1: any.
	UID int
	// Ready runs once the init has connected and read its plan, before the
	// go-ahead, with the init's pid in the host's pid namespace. An error
	// aborts the start.
	Ready func(initPID int) error
	// Timeout bounds the setup, the wait for the connection included. Zero:
	// 30 s.
	Timeout time.Duration
}

// Accept waits for the init to connect, runs the sync protocol up to the
// interpreter's exec, and returns the init as a Process. The Process is
// adopted: Kill signals it (it is pid 1 of its pid namespace, so everything
// in the namespace dies with it) and Wait reads its report, but reaping is
// its parent's (the engine's) business; Exit.Rusage stays empty. ctx ending
// aborts the wait. On any error the init, if it connected, is killed.
func Accept(ctx context.Context, o *AcceptOptions) (_ *Process, retErr error) {
	timeout := o.Timeout
	if timeout == 0 {
		timeout = 30 * time.Second
	}
	deadline := time.Now().Add(timeout)
	o.Listener.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { o.Listener.SetDeadline(time.Now()) })
	conn, err := o.Listener.AcceptUnix()
	stop()
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return nil, fmt.Errorf("the init did not connect within %v: %w", timeout, ErrSetupTimeout)
		}
		return nil, fmt.Errorf("accept the init: %w", err)
	}
	p := newProcess(conn, true)
	defer func() {
		if retErr != nil {
			p.Kill()
			p.reap()
		}
	}()
	cred, err := PeerCred(conn)
	if err != nil {
		return nil, err
	}
	if o.UID >= 0 && int(cred.Uid) != o.UID {
		return nil, fmt.Errorf("the sync socket's peer runs as uid %d, not the run's %d: %w", cred.Uid, o.UID, ErrProtocol)
	}
	p.InitPID = int(cred.Pid)
	// The init cannot exit before the go-ahead unless it fails, and then the
	// pid is checked against the connection below.
	if p.pidfd, err = unix.PidfdOpen(p.InitPID, 0); err != nil {
		return nil, os.NewSyscallError("pidfd_open init", err)
	}
	p.sync.SetDeadline(deadline)
	stop = context.AfterFunc(ctx, func() { p.sync.SetDeadline(time.Now()) })
	defer stop()
	m, fd, err := p.recv()
	closeFD(fd)
	if err != nil {
		return nil, err
	}
	if m.typ != nsexec.SyncReady {
		return nil, fmt.Errorf("want ready, got message %d: %w", m.typ, ErrProtocol)
	}
	if o.Ready != nil {
		if err := o.Ready(p.InitPID); err != nil {
			return nil, err
		}
	}
	if err := p.goAhead(); err != nil {
		return nil, err
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return p, nil
}

// PeerCred is the credentials of the process at the other end of c when it
// connected (SO_PEERCRED), its pid in this process's pid namespace.
func PeerCred(c *net.UnixConn) (*unix.Ucred, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return nil, err
	}
	var cred *unix.Ucred
	var cerr error
	if err := rc.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return nil, err
	}
	if cerr != nil {
		return nil, os.NewSyscallError("getsockopt SO_PEERCRED", cerr)
	}
	return cred, nil
}

// NetlinkIn returns a NETLINK_ROUTE socket opened inside the network
// namespace netns (an open /proc/PID/ns/net) by a short-lived helper: this
// binary re-executed in nsexec's "netns" mode, which enters the namespace
// before any Go runtime starts and hands the socket back. No thread of this
// process ever enters the namespace. The socket has the host's credentials,
// so it can also bring a link up.
func NetlinkIn(netns *os.File) (*os.File, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, os.NewSyscallError("socketpair", err)
	}
	hostEnd := os.NewFile(uintptr(fds[0]), "psych-netns")
	childEnd := os.NewFile(uintptr(fds[1]), "psych-netns-child")
	c, err := net.FileConn(hostEnd)
	hostEnd.Close()
	if err != nil {
		childEnd.Close()
		return nil, err
	}
	p := newProcess(c.(*net.UnixConn), false)
	defer p.sync.Close()
	null, err := os.Open(os.DevNull)
	if err != nil {
		childEnd.Close()
		return nil, err
	}
	defer null.Close()
	cmd := command(nsexec.MarkerNetns, []*os.File{childEnd, netns}, -1)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = null, null, null
	err = cmd.Start()
	childEnd.Close()
	if err != nil {
		return nil, fmt.Errorf("start the netns helper: %w", err)
	}
	p.sync.SetDeadline(time.Now().Add(10 * time.Second))
	m, fd, rerr := p.recv()
	werr := cmd.Wait()
	var ee *exec.ExitError
	switch {
	case rerr != nil:
		return nil, fmt.Errorf("netns helper: %w", rerr)
	case m.typ != nsexec.SyncReady || fd < 0:
		closeFD(fd)
		return nil, fmt.Errorf("netns helper sent message %d without a socket: %w", m.typ, ErrProtocol)
	case werr != nil && !errors.As(werr, &ee):
		closeFD(fd)
		return nil, fmt.Errorf("netns helper: %w", werr)
	}
	return os.NewFile(uintptr(fd), "psych-netlink"), nil
}
