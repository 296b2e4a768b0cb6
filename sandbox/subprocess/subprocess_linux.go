package subprocess

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/psych-runtime/psych/bootstrap"
	"github.com/psych-runtime/psych/cgroups"
	"github.com/psych-runtime/psych/internal/reexec"
	"github.com/psych-runtime/psych/netns"
	"github.com/psych-runtime/psych/sandbox"
	"github.com/psych-runtime/psych/sandbox/wire"
	"github.com/psych-runtime/psych/seccomp"
)

// Sandbox is the subprocess backend. It is safe for concurrent use; each Run
// is independent of every other.
type Sandbox struct {
	cfg      Config
	python   string
	hostUID  int
	owner    ownerID
	cg       *cgroups.Manager // nil where no run cgroup can be made
	cgErr    error            // why not
	launcher *bootstrap.Launcher
	// userns is whether user namespaces can be had (probed at New); without
	// them every run takes the fallback.
	userns   bool
	view     *view
	filter   *seccomp.Filter
	landlock uint64
	hostNS   map[string]string // the host's own namespace links
	hooks    hooks
	ids      chan uint32
	log      *slog.Logger
	seq      atomic.Uint64
}

var _ sandbox.Sandbox = (*Sandbox)(nil)

// New validates cfg, resolves the interpreter once and checks that the run
// user can execute it, and removes what dead earlier hosts left behind.
func New(cfg Config) (*Sandbox, error) {
	s := &Sandbox{cfg: cfg, hostUID: os.Geteuid(), log: cfg.Logger}
	if s.log == nil {
		s.log = slog.Default()
	}
	c := &s.cfg
	c.DefaultLimits = c.DefaultLimits.Merge(sandbox.DefaultLimits())
	if c.RunAs == nil {
		if s.hostUID == 0 {
			c.RunAs = SingleID(nobodyID, nobodyID)
		} else {
			c.RunAs = SingleID(uint32(s.hostUID), uint32(os.Getegid()))
		}
	} else {
		r := *c.RunAs
		c.RunAs = &r
	}
	if c.MaxOutputBytes == 0 {
		c.MaxOutputBytes = DefaultMaxOutputBytes
	}
	if c.MaxFrameBytes == 0 {
		c.MaxFrameBytes = wire.DefaultMaxFrame
	}
	if c.TmpBase == "" {
		c.TmpBase = rootTmpBase
		if s.hostUID != 0 {
			c.TmpBase = filepath.Join(os.TempDir(), fmt.Sprintf("psych-%d", s.hostUID))
		}
	}
	if err := c.validate(s.hostUID); err != nil {
		return nil, err
	}
	var err error
	python := c.PythonBin
	if python == "" {
		if python, err = resolvePython(); err != nil {
			return nil, fmt.Errorf("%w: %w", sandbox.ErrInvalidConfig, err)
		}
	}
	if python, err = filepath.Abs(python); err != nil {
		return nil, fmt.Errorf("%w: %w", sandbox.ErrInvalidConfig, err)
	}
	s.python = python
	if n := c.RunAs.size(); n > 1 {
		s.ids = make(chan uint32, n)
		for i := uint32(0); i < n; i++ {
			s.ids <- i
		}
	}
	if s.owner, err = selfOwner(); err != nil {
		return nil, fmt.Errorf("%w: %w", sandbox.ErrHostFault, err)
	}
	if err := prepareTmpBase(c.TmpBase, s.hostUID); err != nil {
		return nil, fmt.Errorf("%w: %w", sandbox.ErrInvalidConfig, err)
	}
	if c.TmpBytes == 0 {
		c.TmpBytes = DefaultTmpBytes
	}
	if c.TmpInodes == 0 {
		c.TmpInodes = DefaultTmpInodes
	}
	if s.userns, err = reexec.Probe(c.RunAs.UID, c.RunAs.GID); err != nil {
		return nil, fmt.Errorf("%w: %w", sandbox.ErrHostFault, err)
	}
	if !s.userns {
		s.log.Warn("psych: no user namespace can be had here; runs take the fallback (rlimits, uid drop, seccomp) with no namespaces, no filesystem view and no network denial")
	}
	// Every run id must reach its run directory (the init mounts the new
	// root on it). Through a view, a root host hands the interpreter's trees
	// over as open_tree clones, so only the file's own mode matters;
	// otherwise the run id must reach the interpreter by path.
	for i := uint32(0); i < c.RunAs.size(); i++ {
		uid, gid := c.RunAs.UID+i, c.RunAs.GID+i
		if s.userns && s.hostUID == 0 {
			if err := checkOthersExec(python); err != nil {
				return nil, fmt.Errorf("%w: %w", sandbox.ErrInvalidConfig, err)
			}
		} else if err := checkExecutable(python, uid, gid); err != nil {
			return nil, fmt.Errorf("%w: %w", sandbox.ErrInvalidConfig, interpreterError(python, uid, err))
		}
		if err := checkSearchable(c.TmpBase, uid, gid); err != nil {
			return nil, fmt.Errorf("%w: tmp base %s cannot hold run directories for uid %d: %w", sandbox.ErrInvalidConfig, c.TmpBase, uid, err)
		}
	}
	if s.userns {
		if s.view, err = resolveView(python); err != nil {
			return nil, fmt.Errorf("%w: %w", sandbox.ErrInvalidConfig, err)
		}
	}
	s.landlock = landlockScopes()
	s.hostNS = hostNamespaces()
	if s.filter, err = seccomp.DefaultFilter(); err != nil {
		return nil, fmt.Errorf("%w: %w", sandbox.ErrHostFault, err)
	}
	if s.launcher, err = bootstrap.Prepare(python); err != nil {
		return nil, fmt.Errorf("%w: %w", sandbox.ErrInvalidConfig, err)
	}
	removeStale(c.TmpBase)
	cgcfg := c.Cgroups
	if cgcfg.Logger == nil {
		cgcfg.Logger = s.log
	}
	if s.cg, err = cgroups.NewManager(cgcfg); err != nil {
		if errors.Is(err, cgroups.ErrInvalid) {
			return nil, fmt.Errorf("%w: %w", sandbox.ErrInvalidConfig, err)
		}
		s.cg = nil
		s.cgErr = err
		s.log.Warn("psych: no run cgroup; rlimits alone hold: cpu_seconds per process (RLIMIT_CPU), no whole-run memory cap or usage", "err", err)
	}
	return s, nil
}

// Python is the interpreter this Sandbox runs.
func (s *Sandbox) Python() string { return s.python }

// acquire takes a run id from the range, waiting for one to be free.
func (s *Sandbox) acquire(ctx context.Context) (uid, gid uint32, release func(), err error) {
	if s.ids == nil {
		return s.cfg.RunAs.UID, s.cfg.RunAs.GID, func() {}, nil
	}
	select {
	case i := <-s.ids:
		return s.cfg.RunAs.UID + i, s.cfg.RunAs.GID + i, func() { s.ids <- i }, nil
	case <-ctx.Done():
		return 0, 0, nil, ctx.Err()
	}
}

// Run executes req.Code once. See sandbox.Sandbox for the contract.
func (s *Sandbox) Run(ctx context.Context, req sandbox.Request) (*sandbox.Result, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	limits := req.Limits.Merge(s.cfg.DefaultLimits)
	if err := limits.Validate(); err != nil {
		return nil, err
	}
	switch {
	case s.cfg.RequireCgroup && s.cg == nil:
		return nil, fmt.Errorf("a cgroup is required but none can be made here (%v): %w", s.cgErr, sandbox.ErrRefused)
	case s.cfg.RequireIsolation && !s.userns:
		return nil, fmt.Errorf("isolation is required but no user namespace can be had here: %w", sandbox.ErrRefused)
	case s.cfg.RequireNetworkDenial && !s.userns:
		return nil, fmt.Errorf("network denial is required but no network namespace can be made here: %w", sandbox.ErrRefused)
	case s.cfg.RequireNetworkDenial && req.Network:
		return nil, fmt.Errorf("network denial is required but the request grants the network: %w", sandbox.ErrRefused)
	}
	if !utf8.ValidString(req.Code) {
		return nil, fmt.Errorf("code is not valid UTF-8: %w", sandbox.ErrInvalidRequest)
	}
	var decls []sandbox.Binding
	if req.Bindings != nil {
		decls = req.Bindings.List()
		if err := sandbox.ValidateBindings(decls); err != nil {
			return nil, err
		}
	}
	start, err := wire.Marshal(&wire.Start{V: wire.Version, Code: req.Code, Bindings: decls, MaxFrame: s.cfg.MaxFrameBytes})
	if err != nil || len(start) > s.cfg.MaxFrameBytes {
		return nil, fmt.Errorf("code and bindings exceed the %d-byte frame cap: %w", s.cfg.MaxFrameBytes, sandbox.ErrInvalidRequest)
	}
	uid, gid, release, err := s.acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer release()
	r := &run{s: s, req: req, decls: decls, limits: limits, uid: uid, gid: gid, start: start}
	return r.execute(ctx)
}

// run is one execution's state.
type run struct {
	s        *Sandbox
	req      sandbox.Request
	decls    []sandbox.Binding
	limits   sandbox.Limits
	start    []byte // the start frame's body
	uid, gid uint32

	dir  string
	cg   *cgroups.Run
	proc *reexec.Process
	host *os.File // host end of the wire socket
	iso  sandbox.Isolation
	// netOK is true only when this run's own namespace was verified.
	netOK bool
	// What the host sampled of the run's cgroup.
	pidsPeak, oomKills, pidsMax int64
}

// execute sets up, runs and tears down; every resource it creates is
// released before it returns, on every path.
func (r *run) execute(ctx context.Context) (res *sandbox.Result, retErr error) {
	s := r.s
	var err error
	name := strconv.FormatUint(s.seq.Add(1), 10)
	if r.dir, err = newRunDir(s.cfg.TmpBase, s.owner, r.uid, r.gid, s.hostUID == 0); err != nil {
		return nil, fmt.Errorf("%w: %w", sandbox.ErrHostFault, err)
	}
	defer func() {
		// Only after every process of the run is dead (see teardown).
		if err := removeAll(r.dir); err != nil {
			retErr = errors.Join(retErr, fmt.Errorf("%w: %w", sandbox.ErrHostFault, err))
		}
	}()
	if s.cg != nil {
		// The init is a task of the run too: pids.max is the count plus one.
		lim := cgroups.Limits{MemoryBytes: r.limits.MemoryBytes, Pids: int64(r.limits.ProcessCount) + 1}
		if r.cg, err = s.cg.New(name, lim); err != nil {
			return nil, fmt.Errorf("%w: %w", sandbox.ErrHostFault, err)
		}
		defer func() {
			if err := r.cg.Remove(); err != nil {
				retErr = errors.Join(retErr, fmt.Errorf("%w: %w", sandbox.ErrHostFault, err))
			}
		}()
	}

	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("%w: wire socketpair: %w", sandbox.ErrHostFault, err)
	}
	// Blocking, so a reply wakes the serving thread straight from the kernel
	// (not through the netpoller); teardown shuts it down to unblock it.
	r.host = os.NewFile(uintptr(fds[0]), "psych-wire-host")
	child := os.NewFile(uintptr(fds[1]), "psych-wire-child")
	defer r.host.Close()
	outR, outW, err := os.Pipe()
	if err != nil {
		child.Close()
		return nil, fmt.Errorf("%w: stdout pipe: %w", sandbox.ErrHostFault, err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		child.Close()
		outR.Close()
		outW.Close()
		return nil, fmt.Errorf("%w: stderr pipe: %w", sandbox.ErrHostFault, err)
	}
	defer outR.Close()
	defer errR.Close()

	plan, trees, err := r.plan()
	if err != nil {
		child.Close()
		outW.Close()
		errW.Close()
		return nil, fmt.Errorf("%w: %w", sandbox.ErrHostFault, err)
	}
	opts := &reexec.Options{
		Plan: plan, Stdout: outW, Stderr: errW, Wire: child, CgroupFD: -1,
		UIDMap:  fmt.Sprintf("%d %d 1", sandboxUID, r.uid),
		GIDMap:  fmt.Sprintf("%d %d 1", sandboxGID, r.gid),
		Ready:   r.ready,
		Timeout: 30 * time.Second,
	}
	if r.cg != nil {
		opts.CgroupFD = r.cg.CloneFD()
		// On a hybrid host memory and pids are v1 controllers, which
		// CLONE_INTO_CGROUP cannot reach: the tree joins them before the
		// init forks anything.
		opts.Attach = r.cg.Attach
	}
	started := time.Now()
	r.proc, err = reexec.Start(opts)
	closeAll(trees)
	child.Close()
	outW.Close()
	errW.Close()
	if err != nil {
		if errors.Is(err, sandbox.ErrRefused) {
			return nil, err
		}
		return nil, fmt.Errorf("%w: start the sandbox: %w", sandbox.ErrHostFault, err)
	}
	// From here the init exists: every path below ends by killing the
	// whole tree and reaping the init.
	r.attest()
	var exit reexec.Exit
	exited := make(chan struct{})
	go func() { exit, _ = r.proc.Wait(); close(exited) }()
	killed := false
	var srv *server
	kill := func() {
		killed = true
		srv.hostKilled.Store(true)
		r.killTree()
	}
	var stdout, stderr capture
	stdout.max, stderr.max = s.cfg.MaxOutputBytes, s.cfg.MaxOutputBytes
	var drains sync.WaitGroup
	drains.Add(2)
	go func() { defer drains.Done(); stdout.drain(outR) }()
	go func() { defer drains.Done(); stderr.drain(errR) }()

	runCtx, cancelRun := context.WithCancel(ctx)
	defer cancelRun()
	srv = &server{
		start:    r.start,
		dec:      wire.NewDecoder(bufio.NewReaderSize(r.host, 64<<10), s.cfg.MaxFrameBytes),
		enc:      wire.NewEncoder(r.host, s.cfg.MaxFrameBytes),
		bindings: r.req.Bindings, names: map[string]bool{},
		violation: make(chan struct{}),
	}
	for _, b := range r.decls {
		srv.names[b.Name] = true
	}
	served := make(chan struct{})
	go func() { srv.serve(runCtx); close(served) }()

	wall := time.NewTimer(time.Duration(r.limits.WallSeconds * float64(time.Second)))
	defer wall.Stop()
	var cpuTick <-chan time.Time
	if r.cg != nil {
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		cpuTick = t.C
	}
	var ev evidence
	ev.cpuLimit = r.limits.CPUSeconds
	cpuLimit := time.Duration(r.limits.CPUSeconds * float64(time.Second))
	violation := srv.violation
	done := ctx.Done()
	cancelled := false
wait:
	for {
		select {
		case <-exited:
			break wait
		case <-wall.C:
			ev.wallFired = !killed
			kill()
		case <-cpuTick:
			if killed {
				break
			}
			st, err := r.cg.Stats()
			if err != nil {
				break
			}
			r.sample(&st)
			switch {
			case st.OOMKills > 0:
				// One OOM kill ends the run: a program that lost a
				// process to the cap has hit it.
				ev.oomFired = true
				kill()
			case st.CPUKnown && st.CPU >= cpuLimit:
				ev.cpuFired = true
				kill()
			}
		case <-violation:
			violation = nil
			kill()
		case <-done:
			// Kill, then tear down exactly as after any other end, so
			// nothing of the run outlives Run.
			done, cancelled = nil, true
			kill()
		}
	}
	finished := time.Now()
	ev.status = exit.Status
	usage := r.usage(&exit)
	ev.cpuUsed = usage.CPUSeconds
	ev.oomKills, ev.pidsMaxEvents = r.oomKills, r.pidsMax
	cancelRun()
	r.teardown(outR, errR)
	<-served
	drains.Wait()
	if cancelled {
		return nil, ctx.Err()
	}

	res = &sandbox.Result{
		Stdout: stdout.text(), Stderr: stderr.text(),
		StdoutTruncated: stdout.truncated, StderrTruncated: stderr.truncated,
		Duration:      finished.Sub(started),
		NetworkDenied: r.netOK,
		Usage:         usage,
	}
	iso := r.iso
	res.Isolation = &iso
	r.describe(res, srv, &ev)
	return res, nil
}

// ready runs between the init's creation and the go-ahead: it verifies the
// run's own network namespace through the netlink socket the init opened in
// it. No Go thread enters the namespace.
func (r *run) ready(initPID int, netlink *os.File) error {
	if netlink == nil {
		return nil
	}
	fd := int(netlink.Fd())
	if h := r.s.hooks.beforeNetCheck; h != nil {
		if err := h(fd); err != nil {
			return err
		}
	}
	check, err := netns.Verify(fd)
	nc := &sandbox.NetworkCheck{Verified: err == nil && check.Denied, Reason: check.Reason}
	for _, l := range check.Links {
		nc.Links = append(nc.Links, l.Name)
	}
	if err != nil {
		nc.Reason = err.Error()
	}
	r.iso.Network = nc
	r.netOK = nc.Verified
	if !r.netOK {
		if r.s.cfg.RequireNetworkDenial {
			return fmt.Errorf("network denial is required but this run's namespace failed the check (%s): %w", nc.Reason, sandbox.ErrRefused)
		}
		r.s.log.Warn("psych: the run's network namespace failed its check; the run goes on with network_denied=false", "reason", nc.Reason)
	}
	return nil
}

// killTree kills every process of the run. ESRCH counts as success.
func (r *run) killTree() {
	if r.cg != nil {
		r.cg.Kill()
	}
	// The init is pid 1 of the run's pid namespace: its death takes every
	// other process of the namespace with it.
	r.proc.Kill()
	if !r.s.userns {
		syscall.Kill(-r.proc.PGID, syscall.SIGKILL)
	}
}

// teardown runs after the init was reaped: with a pid namespace nothing of
// the run is left. In the fallback it kills what is left and waits for it,
// so that the pipes and the socket reach EOF; without a cgroup there, a
// setsid'd straggler may hold them open, so they are closed after a grace.
func (r *run) teardown(outR, errR *os.File) {
	if r.s.userns {
		return
	}
	if r.cg != nil {
		r.cg.Kill()
		if r.waitEmpty(10 * time.Second) {
			return
		}
	}
	r.killTree()
	time.AfterFunc(200*time.Millisecond, func() {
		outR.Close()
		errR.Close()
		// The socket is blocking: only shutdown wakes a blocked read or write.
		if rc, err := r.host.SyscallConn(); err == nil {
			rc.Control(func(fd uintptr) { unix.Shutdown(int(fd), unix.SHUT_RDWR) })
		}
	})
}

// waitEmpty waits until the run's cgroup has no task left.
func (r *run) waitEmpty(d time.Duration) bool {
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		if st, err := r.cg.Stats(); err == nil && st.PidsCurrent == 0 {
			return true
		}
	}
	return false
}

// sample keeps what the host must watch for itself: the most tasks seen
// (where the kernel keeps no pids.peak) and the kernel's event counters.
func (r *run) sample(st *cgroups.Stats) {
	if st.PidsCurrent > r.pidsPeak {
		r.pidsPeak = st.PidsCurrent
	}
	r.oomKills = max(r.oomKills, st.OOMKills)
	r.pidsMax = max(r.pidsMax, st.PidsMaxEvents)
}

// usage is what the whole run consumed: from its cgroup where it has one,
// else from the init's rusage, which covers every process it reaped (peak
// memory is then the largest single process's, and peak processes unknown).
func (r *run) usage(ex *reexec.Exit) *sandbox.Usage {
	ru := ex.Rusage
	u := &sandbox.Usage{
		CPUSeconds:      time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds(),
		PeakMemoryBytes: ru.Maxrss << 10,
	}
	if r.cg == nil {
		return u
	}
	st, err := r.cg.Stats()
	if err != nil {
		return u
	}
	r.sample(&st)
	if st.CPUKnown {
		u.CPUSeconds = st.CPU.Seconds()
	}
	if st.MemoryPeakKnown {
		u.PeakMemoryBytes = st.MemoryPeak
	}
	peak := r.pidsPeak
	if st.PidsPeakKnown {
		peak = max(peak, st.PidsPeak)
	}
	if r.pidsMax > 0 {
		peak = int64(r.limits.ProcessCount) + 1 // the kernel refused a task at the cap
	}
	u.PeakProcesses = max(peak-1, 0) // the init is not the program's
	return u
}

// describe fills the result's value, failure and limit from what the host
// observed and, where nothing host-side explains the end, what the program
// reported.
func (r *run) describe(res *sandbox.Result, srv *server, ev *evidence) {
	st := ev.status
	if srv.protoErr == nil && srv.result != nil {
		res.Value = srv.result.Value
		ev.program = srv.result.Failure
	}
	res.LimitHit, res.LimitSource = attribute(*ev)
	var f *sandbox.Failure
	switch {
	case ev.wallFired:
		f = &sandbox.Failure{Type: sandbox.FailureWallTimeout, Message: fmt.Sprintf("the run exceeded its wall limit of %gs", r.limits.WallSeconds)}
	case res.LimitHit == sandbox.LimitCPUSeconds:
		f = &sandbox.Failure{Type: sandbox.FailureCPUTimeout, Message: fmt.Sprintf("the run exceeded its CPU limit of %gs", r.limits.CPUSeconds)}
	case srv.protoErr != nil:
		f = &sandbox.Failure{Type: sandbox.FailureProtocol, Message: srv.protoErr.Error()}
	case ev.program != nil:
		p := ev.program
		f = &sandbox.Failure{Type: p.Type, Message: p.Message, Traceback: p.Traceback}
	case srv.result == nil && st.Signaled():
		f = &sandbox.Failure{Type: sandbox.FailureSignal, Message: "the interpreter was killed by " + unix.SignalName(st.Signal()) + " before it sent a result"}
	case srv.result == nil:
		f = &sandbox.Failure{Type: sandbox.FailureExit, Message: fmt.Sprintf("the interpreter exited with status %d before it sent a result", st.ExitStatus())}
	case st.Signaled() || st.ExitStatus() != 0:
		f = &sandbox.Failure{Type: sandbox.FailureExit, Message: "the interpreter ended abnormally after its result: " + statusText(st)}
	}
	if f != nil {
		if st.Signaled() {
			f.Signal = sandbox.SignalName(unix.SignalName(st.Signal()))
		} else {
			code := st.ExitStatus()
			f.ExitCode = &code
		}
		res.Value = nil
		if srv.protoErr == nil && srv.result != nil && ev.program == nil {
			res.Value = srv.result.Value
		}
	}
	res.Failure = f
}

func statusText(st syscall.WaitStatus) string {
	if st.Signaled() {
		return "killed by " + unix.SignalName(st.Signal())
	}
	return fmt.Sprintf("exit status %d", st.ExitStatus())
}

// server answers the program's frames. It reads every frame as hostile: a
// malformed, oversized, unexpected or duplicate one is a protocol violation
// that ends the run.
type server struct {
	start     []byte // the start frame's body, sent first
	dec       *wire.Decoder
	enc       *wire.Encoder
	bindings  sandbox.Bindings
	names     map[string]bool
	violation chan struct{} // closed on the first protocol violation
	// hostKilled is set when the host itself ended the run: a frame cut
	// short then is not the program's violation.
	hostKilled atomic.Bool

	result   *wire.Result
	protoErr error
	lastID   uint64
	anyCall  bool
}

func (v *server) fail(err error) {
	v.protoErr = err
	close(v.violation)
}

func (v *server) serve(ctx context.Context) {
	// Sent here, not before the host starts watching: a child that does not
	// read it is still bound by the wall limit and the context. A start that
	// cannot be written means the interpreter is gone; its status tells why.
	if err := v.enc.WriteBody(v.start); err != nil {
		return
	}
	for {
		m, err := v.dec.Next()
		if err != nil {
			// EOF, or the host closed the socket at teardown: the end. A
			// decoding error is the program's violation.
			if errors.Is(err, wire.ErrFrameTooLarge) || errors.Is(err, wire.ErrMalformed) ||
				errors.Is(err, wire.ErrUnknownType) || errors.Is(err, wire.ErrTruncated) && v.result == nil && !v.hostKilled.Load() {
				v.fail(fmt.Errorf("protocol: %w", err))
			}
			return
		}
		switch m := m.(type) {
		case *wire.Call:
			switch {
			case v.result != nil:
				v.fail(errors.New("protocol: call after result"))
				return
			case v.anyCall && m.ID <= v.lastID:
				v.fail(fmt.Errorf("protocol: call id %d repeats or goes back (last %d)", m.ID, v.lastID))
				return
			case !v.names[m.Name]:
				v.fail(fmt.Errorf("protocol: call to undeclared binding %.64q", m.Name))
				return
			}
			v.anyCall, v.lastID = true, m.ID
			err := v.enc.Encode(v.call(ctx, m))
			if errors.Is(err, wire.ErrFrameTooLarge) {
				err = v.enc.Encode(errorReply(m, "the host's reply to "+m.Name+" exceeds the frame cap"))
			}
			if err != nil {
				return // the program is gone
			}
		case *wire.Result:
			if v.result != nil {
				v.fail(errors.New("protocol: second result"))
				return
			}
			v.result = m
		default:
			v.fail(fmt.Errorf("protocol: unexpected %T frame from the program", m))
			return
		}
	}
}

// call runs one binding. Its errors go back to the program as BindingError.
func (v *server) call(ctx context.Context, c *wire.Call) *wire.Reply {
	out, err := v.bindings.Call(ctx, c.Name, c.Args)
	if err != nil {
		return errorReply(c, err.Error())
	}
	if len(out) == 0 {
		out = json.RawMessage("null")
	}
	if !json.Valid(out) {
		return errorReply(c, "the host's reply to "+c.Name+" is not valid JSON")
	}
	return &wire.Reply{ID: c.ID, Value: out}
}

func errorReply(c *wire.Call, msg string) *wire.Reply {
	return &wire.Reply{ID: c.ID, Error: &wire.ReplyError{Type: "BindingError", Message: msg}}
}
