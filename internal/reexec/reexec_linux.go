//go:build linux && cgo

package reexec

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/psych-runtime/psych/internal/eintr"
	"github.com/psych-runtime/psych/nsexec"
)

// Options describe one start of the init.
type Options struct {
	Plan *Plan
	// Stdout and Stderr become the interpreter's fds 1 and 2.
	Stdout, Stderr *os.File
	// Wire is the program's channel; the interpreter gets it as fd 3.
	Wire *os.File
	// CgroupFD is a unified cgroup directory the first process is cloned
	// into (CLONE_INTO_CGROUP); -1 for none.
	CgroupFD int
	// Ready runs after the init exists and before the go-ahead, with the
	// init's pid and, when it made a network namespace, a NETLINK_ROUTE
	// socket opened inside it (nil otherwise; closed after Ready). An error
	// aborts the start.
	Ready func(initPID int, netlink *os.File) error
	// Timeout bounds the whole setup. Zero: 10 s.
	Timeout time.Duration
}

// Process is a started init with its interpreter running.
type Process struct {
	// InitPID is the init's pid in the host's pid namespace.
	InitPID int
	// InterpPID is the interpreter's pid in the host's pid namespace; 0
	// if it had already gone when the host looked.
	InterpPID int
	// PGID is the process group (and session) the tree started in.
	PGID int
	sync *net.UnixConn
	// mu guards pidfd and done: Kill may run on any goroutine while Wait
	// reaps, and a pidfd number closed by the reap could be reused by a
	// later run's pidfd, which a late Kill would then signal.
	mu    sync.Mutex
	pidfd int
	done  bool
	// adopted is an init this process did not start (Accept): it is never
	// waited for, only watched through its sync socket and signalled.
	adopted bool
	// lowered carries LOWERED answers from Wait's reading to Lower.
	lowered  chan msg
	waitDone chan struct{} // closed once Wait stopped reading
	// reported is closed once the init reported the interpreter's exit
	// (status), or once Wait stopped reading without a report.
	reported   chan struct{}
	reportOnce sync.Once
	status     syscall.WaitStatus
	statusOK   bool
}

func newProcess(conn *net.UnixConn, adopted bool) *Process {
	return &Process{sync: conn, pidfd: -1, adopted: adopted, lowered: make(chan msg, 1),
		waitDone: make(chan struct{}), reported: make(chan struct{})}
}

// Reported is closed once the init has reported the interpreter's exit
// (ReportedStatus), which it does before it exits, or once Wait ended
// without a report. It needs Wait running.
func (p *Process) Reported() <-chan struct{} { return p.reported }

// ReportedStatus is the interpreter's wait status as the init reported it;
// ok is false where it reported none. Valid once Reported is closed.
func (p *Process) ReportedStatus() (status syscall.WaitStatus, ok bool) { return p.status, p.statusOK }

func (p *Process) report(st syscall.WaitStatus, ok bool) {
	p.reportOnce.Do(func() {
		p.status, p.statusOK = st, ok
		close(p.reported)
	})
}

// Exit is how the run ended.
type Exit struct {
	// Status is the interpreter's wait status, as the init reported it.
	// When the init died without a report (it was killed, so the whole
	// namespace was), Status says SIGKILL and Reported is false.
	Status   syscall.WaitStatus
	Reported bool
	// Init is the init's own wait status and Rusage its resource usage,
	// which includes every process it reaped.
	Init   syscall.WaitStatus
	Rusage unix.Rusage
}

// Probe reports whether a process with the given outer ids can create a
// user namespace here (one that grants capabilities in it), by forking a
// child of this process that tries (nsexec.ProbeUserns). Where the kernel
// refuses, whatever its errno, ok is false and why says what it answered:
// a host without user namespaces, not an error. An error is ErrRunIDs
// (the child could not take the ids) or the probe's own failure.
func Probe(uid, gid uint32) (ok bool, why error, err error) {
	ok, why, err = nsexec.ProbeUserns(uid, gid)
	var ids *nsexec.IDsError
	switch {
	case errors.As(err, &ids):
		return false, nil, fmt.Errorf("probe user namespaces: %w: %w", ErrRunIDs, err)
	case err != nil:
		return false, nil, fmt.Errorf("probe user namespaces: %w", err)
	}
	return ok, why, nil
}

// WireFD is the program's channel as the interpreter gets it, the fd a
// bootstrap's arguments name (nsexec.h's PSYCH_FD_PROGRAM_WIRE).
const WireFD = nsexec.FDProgramWire

// extraFirst is the number of ExtraFiles' first descriptor (os/exec).
const extraFirst = 3

// initFiles are the init's ExtraFiles: each descriptor at the number
// nsexec.h names for it, the trees from PSYCH_FD_TREES on.
func initFiles(sync, wire, plan *os.File, trees []*os.File) []*os.File {
	files := make([]*os.File, nsexec.FDTrees-extraFirst, nsexec.FDTrees-extraFirst+len(trees))
	files[nsexec.FDSync-extraFirst] = sync
	files[nsexec.FDWire-extraFirst] = wire
	files[nsexec.FDPlan-extraFirst] = plan
	return append(files, trees...)
}

func command(marker string, extra []*os.File, cgroupFD int) *exec.Cmd {
	cmd := &exec.Cmd{
		Path:       "/proc/self/exe",
		Args:       []string{"psych-init"},
		Env:        []string{nsexec.Marker + "=" + marker},
		ExtraFiles: extra,
		SysProcAttr: &syscall.SysProcAttr{
			Setsid:    true,
			Pdeathsig: syscall.SIGKILL,
		},
	}
	if cgroupFD >= 0 {
		cmd.SysProcAttr.UseCgroupFD = true
		cmd.SysProcAttr.CgroupFD = cgroupFD
	}
	return cmd
}

func planMemfd(p *Plan) (*os.File, []*os.File, error) {
	b, trees, err := p.encode()
	if err != nil {
		return nil, nil, err
	}
	fd, err := unix.MemfdCreate("psych-plan", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, nil, os.NewSyscallError("memfd_create", err)
	}
	f := os.NewFile(uintptr(fd), "psych-plan")
	if _, err := f.Write(b); err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("write plan: %w", err)
	}
	seals := unix.F_SEAL_SEAL | unix.F_SEAL_SHRINK | unix.F_SEAL_GROW | unix.F_SEAL_WRITE
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, seals); err != nil {
		f.Close()
		return nil, nil, os.NewSyscallError("seal plan", err)
	}
	return f, trees, nil
}

// Start runs the plan: it starts the init, writes the maps, hands the
// netlink socket to Ready, sends the go-ahead and returns once the
// interpreter was exec'd. An init that fails reports an *InitError. On any
// error nothing of the run is left: the init is killed and reaped.
func Start(o *Options) (_ *Process, retErr error) {
	planFile, trees, err := planMemfd(o.Plan)
	if err != nil {
		return nil, err
	}
	defer planFile.Close()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, os.NewSyscallError("sync socketpair", err)
	}
	hostEnd := os.NewFile(uintptr(fds[0]), "psych-sync")
	childEnd := os.NewFile(uintptr(fds[1]), "psych-sync-child")
	c, err := net.FileConn(hostEnd)
	hostEnd.Close()
	if err != nil {
		childEnd.Close()
		return nil, fmt.Errorf("sync conn: %w", err)
	}
	p := newProcess(c.(*net.UnixConn), false)
	defer func() {
		if retErr != nil {
			p.Kill()
			p.reap()
		}
	}()

	null, err := os.Open(os.DevNull)
	if err != nil {
		childEnd.Close()
		return nil, err
	}
	defer null.Close()
	extra := initFiles(childEnd, o.Wire, planFile, trees)
	pid, waitP, killP, err := startP(null, o, extra)
	childEnd.Close()
	if err != nil {
		return nil, fmt.Errorf("start init: %w", err)
	}
	p.PGID = pid
	// P exits on its own after reporting; reap it on every path.
	pWaited := false
	defer func() {
		if retErr != nil && !pWaited {
			killP()
			waitP()
		}
	}()
	timeout := o.Timeout
	if timeout == 0 {
		timeout = 10 * time.Second
	}
	p.sync.SetDeadline(time.Now().Add(timeout))

	m, fd, err := p.recv()
	if err != nil {
		return nil, err
	}
	if m.typ != nsexec.SyncPID || m.a <= 0 {
		return nil, fmt.Errorf("want the init's pid, got message %d: %w", m.typ, ErrProtocol)
	}
	p.InitPID = int(m.a)
	// The init is this process's child (CLONE_PARENT) and cannot have been
	// reaped by anyone else, so the pid is still its own.
	if p.pidfd, err = unix.PidfdOpen(p.InitPID, 0); err != nil {
		return nil, os.NewSyscallError("pidfd_open init", err)
	}
	pWaited = true
	if err := waitP(); err != nil {
		return nil, fmt.Errorf("first process: %w", err)
	}
	if m, fd, err = p.recv(); err != nil {
		return nil, err
	}
	var netlink *os.File
	if fd >= 0 {
		netlink = os.NewFile(uintptr(fd), "psych-netlink")
	}
	if m.typ != nsexec.SyncReady {
		netlink.Close()
		return nil, fmt.Errorf("want ready, got message %d: %w", m.typ, ErrProtocol)
	}
	if o.Ready != nil {
		err = o.Ready(p.InitPID, netlink)
	}
	netlink.Close()
	if err != nil {
		return nil, err
	}
	if err := p.goAhead(); err != nil {
		return nil, err
	}
	return p, nil
}

// startP starts P with stdin null, o's stdout and stderr and extra from fd
// 3 on: cloned by the fork server, or where there is none forked and
// exec'd here. It returns P's pid, which is also its session's, and how to
// reap and kill it.
func startP(null *os.File, o *Options, extra []*os.File) (pid int, wait func() error, kill func(), err error) {
	// No stdout or stderr given: /dev/null, never a closed descriptor (the
	// init's signalfd would take its number, and its close of 0-2).
	stdout, stderr := o.Stdout, o.Stderr
	if stdout == nil {
		stdout = null
	}
	if stderr == nil {
		stderr = null
	}
	if !forkServerOff.Load() {
		files := append([]*os.File{null, stdout, stderr}, extra...)
		for _, f := range files {
			if f == nil {
				return 0, nil, nil, fmt.Errorf("a nil descriptor for P: %w", ErrInvalidPlan)
			}
		}
		pid, pidfd, err := server.spawn(files, o.CgroupFD)
		if err == nil {
			return pid, func() error { return waitPidfd(pidfd) },
				func() { unix.PidfdSendSignal(pidfd, unix.SIGKILL, nil, 0) }, nil
		}
		if !errors.Is(err, errServerGone) && !errors.Is(err, errCloneRefused) {
			return 0, nil, nil, err
		}
	}
	cmd := command(nsexec.MarkerInit, extra, o.CgroupFD)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = null, stdout, stderr
	if err := cmd.Start(); err != nil {
		return 0, nil, nil, err
	}
	return cmd.Process.Pid, cmd.Wait, func() { cmd.Process.Kill() }, nil
}

// goAhead sends the go-ahead and waits for the interpreter's exec, then
// lifts the setup deadline.
func (p *Process) goAhead() error {
	// The init works on until the go-ahead, so one that failed meanwhile
	// has left its report in the socket and exited: the write of GO may
	// then fail (EPIPE), and a read report the reset its unread GO caused
	// (ECONNRESET) before the report queued ahead of it.
	sendErr := p.send(nsexec.SyncGo)
	m, _, err := p.recv()
	if errors.Is(err, syscall.ECONNRESET) {
		m, _, err = p.recv()
	}
	var ie *InitError
	switch {
	case errors.As(err, &ie):
		return err
	case sendErr != nil:
		return sendErr
	case err != nil:
		return err
	}
	if m.typ != nsexec.SyncExec {
		return fmt.Errorf("want exec, got message %d: %w", m.typ, ErrProtocol)
	}
	p.InterpPID = childPID(p.InitPID)
	p.sync.SetDeadline(time.Time{})
	return nil
}

type msg struct {
	typ  uint32
	a, b int32
	text string
}

// recv reads one message; an error report becomes an *InitError, and EOF
// (the init died without one) an error naming that.
func (p *Process) recv() (msg, int, error) {
	buf := make([]byte, nsexec.SyncSize)
	oob := make([]byte, unix.CmsgSpace(4))
	n, oobn, _, _, err := p.sync.ReadMsgUnix(buf, oob)
	fd := -1
	if err == nil {
		fd = firstFD(oob[:oobn])
	}
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		return msg{}, -1, ErrSetupTimeout
	case err != nil:
		return msg{}, -1, fmt.Errorf("read init sync: %w", err)
	case n == 0:
		return msg{}, -1, fmt.Errorf("the init exited during setup without a report: %w", ErrProtocol)
	case n != nsexec.SyncSize:
		closeFD(fd)
		return msg{}, -1, fmt.Errorf("sync message of %d bytes: %w", n, ErrProtocol)
	}
	m := msg{
		typ: binary.NativeEndian.Uint32(buf[0:]),
		a:   int32(binary.NativeEndian.Uint32(buf[4:])),
		b:   int32(binary.NativeEndian.Uint32(buf[8:])),
	}
	text := buf[12:]
	if i := bytes.IndexByte(text, 0); i >= 0 {
		text = text[:i]
	}
	m.text = string(text)
	if m.typ == nsexec.SyncError {
		closeFD(fd)
		step := nsexec.Steps[int(m.a)]
		if step == "" {
			step = "step " + strconv.Itoa(int(m.a))
		}
		return msg{}, -1, &InitError{Step: step, Errno: syscall.Errno(m.b), Message: m.text}
	}
	return m, fd, nil
}

// firstFD takes the first descriptor an SCM_RIGHTS message in oob carries
// and closes any other; -1 when there is none.
func firstFD(oob []byte) int {
	fd := -1
	cms, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return -1
	}
	for _, cm := range cms {
		fds, err := unix.ParseUnixRights(&cm)
		if err != nil {
			continue
		}
		for _, f := range fds {
			if fd < 0 {
				fd = f
			} else {
				unix.Close(f)
			}
		}
	}
	return fd
}

func closeFD(fd int) {
	if fd >= 0 {
		unix.Close(fd)
	}
}

func (p *Process) send(typ uint32) error {
	buf := make([]byte, nsexec.SyncSize)
	binary.NativeEndian.PutUint32(buf, typ)
	if _, err := p.sync.Write(buf); err != nil {
		return fmt.Errorf("write init sync: %w", err)
	}
	return nil
}

// childPID finds the init's only child, the interpreter, in the host's pid
// namespace.
func childPID(initPID int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", initPID, initPID))
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	pid, _ := strconv.Atoi(f[0])
	return pid
}

// Lower has the init lower the interpreter's rlimits to rl (a hard limit
// is never raised) and waits for its answer, at most timeout. Call it after
// Start, while Wait runs on another goroutine (it reads the answer), and
// before the interpreter's start frame: a pooled sandbox takes its
// request's rlimits so. It fails once the init is gone.
func (p *Process) Lower(rl []Rlimit, timeout time.Duration) error {
	wait, err := p.StartLower(rl)
	if err != nil {
		return err
	}
	return wait(timeout)
}

// StartLower is Lower in two halves: it sends the request, and wait waits
// for the answer, so that the host works on while the init lowers.
func (p *Process) StartLower(rl []Rlimit) (wait func(timeout time.Duration) error, err error) {
	if len(rl) > nsexec.LowerMax {
		return nil, fmt.Errorf("lower %d rlimits, more than %d: %w", len(rl), nsexec.LowerMax, ErrInvalidPlan)
	}
	buf := make([]byte, nsexec.SyncSize)
	binary.NativeEndian.PutUint32(buf, nsexec.SyncLower)
	binary.NativeEndian.PutUint32(buf[4:], uint32(len(rl)))
	for i, r := range rl {
		rec := buf[12+i*nsexec.LowerRecord:]
		binary.NativeEndian.PutUint32(rec, uint32(r.Resource))
		binary.NativeEndian.PutUint64(rec[4:], r.Soft)
		binary.NativeEndian.PutUint64(rec[12:], r.Hard)
	}
	if _, err := p.sync.Write(buf); err != nil {
		return nil, fmt.Errorf("write init sync: %w", err)
	}
	return func(timeout time.Duration) error {
		t := time.NewTimer(timeout)
		defer t.Stop()
		select {
		case m := <-p.lowered:
			if m.a != 0 {
				return fmt.Errorf("the init lowering rlimit %d: %w", m.b, syscall.Errno(-m.a))
			}
			return nil
		case <-p.waitDone:
			return fmt.Errorf("the init is gone: %w", ErrProtocol)
		case <-t.C:
			return fmt.Errorf("lower rlimits: %w", ErrSetupTimeout)
		}
	}, nil
}

// FromNow is rl for an interpreter that has had used of CPU already, as a
// pooled sandbox's at dispatch: RLIMIT_CPU counts the process's whole life,
// so its soft and hard limits move up by a second more than used's whole
// seconds, and the program still has its budget whatever the fraction (the
// run cgroup's watch is the exact limit; this is the backstop).
func FromNow(rl []Rlimit, used time.Duration) []Rlimit {
	out := slices.Clone(rl)
	for i := range out {
		if out[i].Resource == unix.RLIMIT_CPU {
			base := uint64(used/time.Second) + 1
			out[i].Soft += base
			out[i].Hard += base
		}
	}
	return out
}

// Kill sends SIGKILL to the init. Everything in its pid namespace dies with
// it. A process that has already exited counts as success.
func (p *Process) Kill() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.pidfd < 0 || p.done {
		return nil
	}
	if err := unix.PidfdSendSignal(p.pidfd, unix.SIGKILL, nil, 0); err != nil && err != unix.ESRCH {
		return os.NewSyscallError("pidfd_send_signal", err)
	}
	return nil
}

// Wait blocks until the init has exited and reaps it. It returns the
// interpreter's status as the init reported it.
func (p *Process) Wait() (Exit, error) {
	var ex Exit
	defer close(p.waitDone)
	defer func() { p.report(ex.Status, ex.Reported) }()
	for {
		m, fd, err := p.recv()
		closeFD(fd)
		if err != nil {
			break // EOF: the init is gone
		}
		if m.typ == nsexec.SyncExit {
			ex.Status, ex.Reported = syscall.WaitStatus(m.a), true
			p.report(ex.Status, true)
		}
		if m.typ == nsexec.SyncLowered {
			select {
			case p.lowered <- m:
			default: // unasked for: dropped
			}
		}
	}
	st, ru, err := p.reap()
	ex.Init, ex.Rusage = st, ru
	if !ex.Reported {
		ex.Status = syscall.WaitStatus(syscall.SIGKILL)
	}
	return ex, err
}

// reap waits for the init to exit and closes everything. Idempotent.
func (p *Process) reap() (syscall.WaitStatus, unix.Rusage, error) {
	var ru unix.Rusage
	p.mu.Lock()
	if p.done {
		p.mu.Unlock()
		return 0, ru, nil
	}
	pidfd := p.pidfd
	p.mu.Unlock()
	p.sync.Close()
	if p.adopted {
		pidfd = -1 // closed below, never waited for: another process reaps it
	}
	// The pidfd stays open while waitid blocks (Kill may still use it: a
	// pidfd of an exited process only reports ESRCH), and is closed only
	// once no Kill can reach it any more.
	defer func() {
		p.mu.Lock()
		p.done = true
		if p.pidfd >= 0 {
			unix.Close(p.pidfd)
		}
		p.pidfd = -1
		p.mu.Unlock()
	}()
	if pidfd < 0 {
		return 0, ru, nil
	}
	var info unix.Siginfo
	if err := eintr.Waitid(unix.P_PIDFD, pidfd, &info, unix.WEXITED, &ru); err != nil {
		return 0, ru, fmt.Errorf("wait for the init: %w", err)
	}
	return siginfoStatus(&info), ru, nil
}

// siginfoStatus turns waitid's report into a wait status.
func siginfoStatus(info *unix.Siginfo) syscall.WaitStatus {
	// struct siginfo: si_signo, si_errno, si_code, pad, then for SIGCHLD
	// si_pid, si_uid, si_status.
	raw := (*[128]byte)(unsafe.Pointer(info))
	code := int32(binary.NativeEndian.Uint32(raw[8:]))
	status := int32(binary.NativeEndian.Uint32(raw[24:]))
	const cldExited = 1
	if code == cldExited {
		return syscall.WaitStatus(status&0xff) << 8
	}
	return syscall.WaitStatus(status & 0x7f)
}
