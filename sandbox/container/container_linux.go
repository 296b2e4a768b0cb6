//go:build linux && cgo

package container

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/psych-runtime/psych/bootstrap"
	"github.com/psych-runtime/psych/cgroups"
	"github.com/psych-runtime/psych/internal/reexec"
	"github.com/psych-runtime/psych/nsexec"
	"github.com/psych-runtime/psych/sandbox"
	"github.com/psych-runtime/psych/sandbox/internal/attest"
	"github.com/psych-runtime/psych/sandbox/internal/host"
	"github.com/psych-runtime/psych/sandbox/internal/pool"
	"github.com/psych-runtime/psych/sandbox/internal/resources"
	"github.com/psych-runtime/psych/sandbox/internal/setup"
	"github.com/psych-runtime/psych/seccomp"
)

// Sandbox is the container backend. It is safe for concurrent use; each Run
// is its own container.
type Sandbox struct {
	cfg     Config
	eng     engine
	owner   cgroups.Owner
	boot    *boot
	runs    string // the per-run directories' base
	mnts    string // the base of the runs' scratch directories (mounts an engine makes)
	filter  *seccomp.Filter
	oci     *specs.LinuxSeccomp
	hostNS  map[string]string
	scopes  uint64 // Landlock scopes the init applies
	log     *slog.Logger
	hooks   hooks
	ids     resources.IDs // the runs' own outside ids, where RunAs is nil
	mu      sync.Mutex
	closed  bool
	running sync.WaitGroup

	pool     *pool.Pool[*run] // nil without Config.Pool
	imports  *pool.ImportEnv  // what the pool's preloads read; nil without
	preload  []string         // the pool's Preload, set before its fills start
	poolCaps sandbox.Limits
}

// hooks are test-only controls, set by the package's tests and nothing else.
type hooks struct {
	// beforeNetCheck runs on the run's netlink socket before the check.
	beforeNetCheck func(fd int) error
	// atDispatch runs on a pooled sandbox's netlink socket before its
	// check at dispatch.
	atDispatch func(fd int) error
	// initFilter, where set, is the filter the init loads instead of
	// psych's (the floor must refuse it).
	initFilter *seccomp.Filter
}

var _ sandbox.Sandbox = (*Sandbox)(nil)

// New validates cfg, reaches the engine, checks that it holds the image
// (never pulling it), prepares the init's files, and removes what dead
// earlier hosts left behind (psych-labelled containers and snapshots, run
// directories). A missing image is ErrImageNotFound; an unreachable engine
// ErrEngineUnreachable. A root host is needed: the engines are root's.
func New(cfg Config) (_ *Sandbox, retErr error) {
	cfg.defaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("%w: the container backend needs a root host (the engines' sockets are root's)", sandbox.ErrInvalidConfig)
	}
	s := &Sandbox{cfg: cfg, log: cfg.Logger, hostNS: attest.HostNamespaces(),
		ids: resources.DefaultIDs()}
	if cfg.RunAs == nil {
		if err := s.ids.Mapped(); err != nil {
			s.log.Warn("psych: the runs' own outside ids cannot be had here; every run is nobody, and the kernel's per-uid quotas cross runs", "err", err)
			s.cfg.RunAs = &IDs{UID: resources.NobodyID, GID: resources.NobodyID}
		} else if err := s.ids.Check(); err != nil {
			return nil, err
		}
	}
	var err error
	if s.owner, err = cgroups.SelfOwner(); err != nil {
		return nil, fmt.Errorf("%w: %w", sandbox.ErrHostFault, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if s.eng, err = openEngine(ctx, &s.cfg); err != nil {
		return nil, err
	}
	var undo setup.Undo
	defer undo.OnError(&retErr)
	undo.PushClose(func() { s.eng.close() })
	// The id-changing calls may name only the run's own ids (any other is
	// EPERM): the engine's rendering and psych's own filter agree. Without
	// a user namespace every id is mapped, so the kernel itself refuses
	// another id with EPERM (no capabilities): runs with ids of their own
	// need no confinement there, and one filter serves them all.
	pol := seccomp.Default()
	switch {
	case s.eng.userNS():
		pol.ConfineIDs(resources.SandboxUID, resources.SandboxGID)
	case s.cfg.RunAs != nil:
		pol.ConfineIDs(s.cfg.RunAs.UID, s.cfg.RunAs.GID)
	}
	if s.filter, err = pol.Compile(); err != nil {
		return nil, fmt.Errorf("%w: %w", sandbox.ErrHostFault, err)
	}
	if s.oci, err = pol.OCI(); err != nil {
		return nil, fmt.Errorf("%w: %w", sandbox.ErrHostFault, err)
	}
	s.scopes = attest.LandlockScopes()
	if err := resources.PrepareBase(cfg.RunBase, 0); err != nil {
		return nil, fmt.Errorf("%w: %w", sandbox.ErrInvalidConfig, err)
	}
	s.runs, s.mnts = filepath.Join(cfg.RunBase, "runs"), filepath.Join(cfg.RunBase, "mnt")
	for _, d := range []string{s.runs, s.mnts} {
		if err := resources.PrepareBase(d, 0); err != nil {
			return nil, fmt.Errorf("%w: %w", sandbox.ErrInvalidConfig, err)
		}
		if err := os.Chmod(d, 0o711); err != nil {
			return nil, fmt.Errorf("%w: %w", sandbox.ErrHostFault, err)
		}
	}
	s.reap(ctx)
	if s.boot, err = newBoot(cfg.RunBase, s.owner, s.oci); err != nil {
		return nil, fmt.Errorf("%w: prepare the init: %w", sandbox.ErrHostFault, err)
	}
	undo.PushClose(func() { resources.RemoveAll(s.boot.dir) })
	if cfg.Pool != nil {
		if err := s.startPool(*cfg.Pool); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// openEngine opens the configured engine, or the first reachable one.
func openEngine(ctx context.Context, cfg *Config) (engine, error) {
	try := engines
	if cfg.Engine != "" {
		try = []Engine{cfg.Engine}
	}
	var errs []error
	for _, name := range try {
		var e engine
		var err error
		switch name {
		case Containerd:
			e, err = newContainerd(ctx, cfg, cfg.ContainerPythonBin)
		case Podman, Docker:
			e, err = newCLI(ctx, cfg, name, cfg.ContainerPythonBin)
		}
		if err == nil {
			cfg.Engine = name
			return e, nil
		}
		if !errors.Is(err, ErrEngineUnreachable) || cfg.Engine != "" {
			return nil, err
		}
		errs = append(errs, err)
	}
	return nil, errors.Join(errs...)
}

// reap removes what dead hosts left: their containers, snapshots and run
// directories.
func (s *Sandbox) reap(ctx context.Context) {
	dead := func(o string) bool {
		owner, ok := cgroups.ParseOwner(o)
		return ok && owner.Dead()
	}
	if n, err := s.eng.reap(ctx, dead); n > 0 || err != nil {
		s.log.Info("psych: reaped what dead hosts left", "engine", s.eng.name(), "removed", n, "err", err)
	}
	resources.RemoveStale(s.runs)
	resources.RemoveStale(s.mnts)
	resources.RemoveStale(s.cfg.RunBase)
}

// Engine is the engine this Sandbox runs on.
func (s *Sandbox) Engine() Engine { return s.eng.name() }

// Image is the image this Sandbox runs, as the engine resolved it.
func (s *Sandbox) Image() sandbox.Image { img, _ := s.eng.image(); return img }

// settle waits for the runs in flight and the background removals.
// CanFreeze reports true: every engine pauses a container (the cgroup
// freezer, through the engine's pause).
func (s *Sandbox) CanFreeze() bool { return true }

func (s *Sandbox) settle() { s.running.Wait() }

// Close waits for the runs in flight, removes the init's files and closes
// the engine connection. Runs after Close fail.
func (s *Sandbox) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	if s.pool != nil {
		s.pool.Close() // its sandboxes, never served, removed
	}
	s.running.Wait()
	err := resources.RemoveAll(s.boot.dir)
	return errors.Join(err, s.eng.close())
}

// Run executes req.Code once in a fresh container. See sandbox.Sandbox for
// the contract.
func (s *Sandbox) Run(ctx context.Context, req sandbox.Request) (*sandbox.Result, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if s.cfg.RequireNetworkDenial && req.Network {
		return nil, fmt.Errorf("network denial is required but the request grants the network: %w", sandbox.ErrRefused)
	}
	hr, err := host.Prepare(req, s.cfg.DefaultLimits, s.cfg.MaxFrameBytes, s.cfg.EnvAllowlist)
	if err != nil {
		return nil, err
	}
	if err := hr.SetFiles(req.Files, s.cfg.Files, s.cfg.TmpBytes); err != nil {
		return nil, err
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, fmt.Errorf("run: %w", sandbox.ErrClosed)
	}
	s.running.Add(1)
	s.mu.Unlock()
	defer s.running.Done()
	coldReason := ""
	if s.pool != nil {
		var r *run
		if r, coldReason = s.warm(ctx, hr); r != nil {
			return r.serveDetached(ctx)
		}
	}
	r := &run{s: s, req: hr, limits: hr.Limits}
	r.iso.ColdReason = coldReason
	return r.execute(ctx)
}

// workspaceDir is where a run's workspace is mounted on the host, in its
// run directory, for the engine to bind.
const workspaceDir = "workspace"

// writeFiles writes the request's files into the run's /work before the
// start frame: a cold run's once started, a warm one's at dispatch.
func (r *run) writeFiles() error {
	if len(r.req.Files) == 0 {
		return nil
	}
	if err := r.ws.Write(r.req.Files); err != nil {
		return fmt.Errorf("%w: %w", sandbox.ErrHostFault, err)
	}
	return nil
}

// run is one execution's state: started (start), served (serve) and
// removed (unwind). A pooled run is started ahead of its request and
// dispatched to one (dispatch).
type run struct {
	s      *Sandbox
	req    *host.Request // nil in a pooled run until dispatch
	limits sandbox.Limits
	id     string
	dir    string
	// inside ids of the init and the program
	uid, gid uint32
	task     task
	proc     *reexec.Process
	cg       *cgroups.Run
	iso      sandbox.Isolation
	netOK    bool
	wire     *net.UnixConn
	undo     setup.Undo // what start made, undone by unwind
	env      []string   // the program's environment, as planned

	outR, errR   *os.File
	closeWriters func()
	tmp          *host.TmpfsWatch
	// ws is the run's /tmp and /work, one tmpfs the host holds.
	ws      *host.Workspace
	exited  chan struct{} // closed once the init is reaped
	exit    reexec.Exit   // valid once exited is closed
	lost    atomic.Bool   // the engine lost the container
	started time.Time
	warmRun
}

// network says the request grants the network (never for a pooled run).
func (r *run) network() bool { return r.req != nil && r.req.Network }

// execute starts, serves and removes a cold run. What a run makes goes
// on r.undo as it is made; a run that failed undoes it before returning,
// and one that ran hands the removal of its dead container to the
// background (Close waits for it), so that the result does not wait on the
// engine's bookkeeping.
func (r *run) execute(ctx context.Context) (*sandbox.Result, error) {
	if err := r.start(ctx); err != nil {
		return nil, errors.Join(err, r.unwind())
	}
	if err := r.writeFiles(); err != nil {
		r.killAll()
		return nil, errors.Join(err, r.unwind())
	}
	return r.serveDetached(ctx)
}

// serveDetached serves the started run, then removes it in the background
// (or at once, when it failed to serve).
func (r *run) serveDetached(ctx context.Context) (*sandbox.Result, error) {
	s := r.s
	res, err := r.serve(ctx)
	if err != nil || res == nil {
		return nil, errors.Join(err, r.unwind())
	}
	s.running.Add(1)
	go func() {
		defer s.running.Done()
		if err := r.unwind(); err != nil {
			s.log.Warn("psych: removing a run's container failed; a later New reaps it", "engine", s.eng.name(), "id", r.id, "err", err)
		}
	}()
	return res, nil
}

// startFrame makes a cold run's start frame, with its environment, before
// the engine starts anything (a pooled run's is made at dispatch): one past
// the frame cap is the request's error. The workspace's tmp is the run's
// /tmp, so its figures are collected.
func (r *run) startFrame() error {
	if r.req == nil {
		return nil
	}
	r.req.Figures = true
	return r.req.SetStart(r.env)
}

// start makes the run's container and waits for its interpreter to block
// on its start frame, attested and checked against the floor. Each phase
// pushes the undo of what it made on r.undo; on error the caller unwinds.
func (r *run) start(ctx context.Context) error {
	var st starting
	defer st.closeListeners()
	if err := r.startIDs(ctx, &st); err != nil {
		return err
	}
	if err := r.startChannels(&st); err != nil {
		return err
	}
	rs, err := r.startSpec(&st)
	if err != nil {
		return err
	}
	if err := r.launch(ctx, rs); err != nil {
		return err
	}
	if err := r.handshake(ctx, &st); err != nil {
		return err
	}
	r.watch()
	return nil
}

// starting is what start's phases hand on to the next, and no further.
type starting struct {
	scratch        string // the run's scratch directory, for the engine's mounts
	outer          IDs    // the program's outside ids
	uidMap, gidMap []specs.LinuxIDMapping
	syncL, wireL   *net.UnixListener
	outW, errW     *os.File // the output pipes' write ends, for the engine
}

// closeListeners closes the sockets the init and the bootstrap connect to:
// once start returns, nothing else may reach the host through them.
func (st *starting) closeListeners() {
	for _, l := range []*net.UnixListener{st.syncL, st.wireL} {
		if l != nil {
			l.Close()
		}
	}
}

// startIDs makes the run's directories and claims its outside ids, and the
// user namespace's maps where the engine gives one.
func (r *run) startIDs(ctx context.Context, st *starting) error {
	s := r.s
	var err error
	if r.dir, err = resources.NewRunDir(s.runs, s.owner, 0o711, false, 0, 0); err != nil {
		return fmt.Errorf("%w: %w", sandbox.ErrHostFault, err)
	}
	r.undo.Push(func() error { return resources.RemoveAll(r.dir) })
	r.id = "psych-" + filepath.Base(r.dir)
	scratch, err := resources.NewRunDir(s.mnts, s.owner, 0o711, false, 0, 0)
	if err != nil {
		return fmt.Errorf("%w: %w", sandbox.ErrHostFault, err)
	}
	r.undo.Push(func() error { return resources.RemoveAll(scratch) })
	st.scratch = scratch
	if s.cfg.RunAs != nil {
		st.outer = *s.cfg.RunAs
	} else {
		// A pair of its own: the container's root (under a user namespace)
		// and the program.
		base, release, err := s.ids.Claim(ctx, 2)
		if err != nil {
			return err
		}
		r.undo.PushClose(release)
		st.outer = IDs{UID: base + 1, GID: base + 1}
	}
	outer := st.outer
	r.uid, r.gid = outer.UID, outer.GID
	if s.eng.userNS() {
		// runc sets the container up as uid 0 inside, which must be mapped:
		// to the id below the run's, never to the host's root.
		r.uid, r.gid = resources.SandboxUID, resources.SandboxGID
		st.uidMap = []specs.LinuxIDMapping{{ContainerID: 0, HostID: outer.UID - 1, Size: 1}, {ContainerID: r.uid, HostID: outer.UID, Size: 1}}
		st.gidMap = []specs.LinuxIDMapping{{ContainerID: 0, HostID: outer.GID - 1, Size: 1}, {ContainerID: r.gid, HostID: outer.GID, Size: 1}}
	}
	return nil
}

// startChannels makes what the run talks through: the workspace (/tmp and
// /work, one tmpfs the host mounts and holds, bound in), the plan and the
// start frame, the sockets the init and the bootstrap connect to in the
// run directory, and the output pipes.
func (r *run) startChannels(st *starting) error {
	s := r.s
	var err error
	if r.ws, err = host.NewWorkspace(filepath.Join(r.dir, workspaceDir), s.cfg.TmpBytes, s.cfg.TmpInodes, st.outer.UID, st.outer.GID); err != nil {
		return fmt.Errorf("%w: %w", sandbox.ErrHostFault, err)
	}
	r.undo.Push(r.ws.Close)
	plan, err := r.plan()
	if err != nil {
		return fmt.Errorf("%w: %w", sandbox.ErrHostFault, err)
	}
	if err := r.startFrame(); err != nil {
		return err
	}
	if err := writeOwned(filepath.Join(r.dir, nsexec.ContainerPlan), plan, st.outer); err != nil {
		return fmt.Errorf("%w: %w", sandbox.ErrHostFault, err)
	}
	if st.syncL, err = listen(filepath.Join(r.dir, nsexec.ContainerSync), "unixpacket", st.outer); err != nil {
		return fmt.Errorf("%w: %w", sandbox.ErrHostFault, err)
	}
	if st.wireL, err = listen(filepath.Join(r.dir, wireSock), "unix", st.outer); err != nil {
		return fmt.Errorf("%w: %w", sandbox.ErrHostFault, err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("%w: stdout pipe: %w", sandbox.ErrHostFault, err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return fmt.Errorf("%w: stderr pipe: %w", sandbox.ErrHostFault, err)
	}
	r.outR, r.errR = outR, errR
	st.outW, st.errW = outW, errW
	r.closeWriters = sync.OnceFunc(func() { outW.Close(); errW.Close() })
	r.undo.PushClose(func() { r.closeWriters(); outR.Close(); errR.Close() })
	return nil
}

// startSpec mounts the init's files for the engine and describes the
// container; where the program runs as its outside ids, /etc names them.
func (r *run) startSpec(st *starting) (*runSpec, error) {
	s := r.s
	bootHost, err := s.boot.mount(st.scratch)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", sandbox.ErrHostFault, err)
	}
	r.undo.Push(func() error { return unmountBoot(bootHost) })
	limits := r.limits
	rs := &runSpec{
		id:     r.id,
		labels: map[string]string{ownerLabel: s.owner.String(), runLabel: filepath.Base(r.dir)},
		args:   s.boot.args,
		env:    reexec.ContainerEnv(""),
		uid:    r.uid, gid: r.gid,
		uidMap: st.uidMap, gidMap: st.gidMap,
		network:  r.network(),
		binds:    append([]bind{{bootHost, bootDir}, {r.dir, runDir}}, etcBinds(bootHost)...),
		tmpBytes: s.cfg.TmpBytes, tmpInodes: s.cfg.TmpInodes,
		tmpDir: r.ws.Path(host.WorkspaceTmp), workDir: r.ws.Path(host.WorkspaceWork),
		memoryBytes: limits.MemoryBytes,
		pids:        int64(limits.ProcessCount) + 1, // the init is one of the run's tasks
		rlimits:     ociRlimits(limits),
		seccomp:     s.oci,
		seccompFile: filepath.Join(s.boot.dir, "seccomp.json"),
		empty:       filepath.Join(s.boot.dir, "empty"),
		scratch:     st.scratch,
		stdout:      st.outW, stderr: st.errW,
	}
	if !s.eng.userNS() && r.uid != resources.SandboxUID {
		if err := ownEtc(filepath.Join(st.scratch, "etc"), r.uid, r.gid, rs.binds); err != nil {
			return nil, fmt.Errorf("%w: the run's /etc: %w", sandbox.ErrHostFault, err)
		}
	}
	return rs, nil
}

// launch has the engine start the container.
func (r *run) launch(ctx context.Context, rs *runSpec) error {
	s := r.s
	var err error
	r.started = time.Now()
	if r.task, err = s.eng.start(ctx, rs); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("%w: %s: %w", sandbox.ErrHostFault, s.eng.name(), err)
	}
	r.undo.Push(func() error {
		if err := r.task.remove(context.WithoutCancel(ctx)); err != nil {
			return fmt.Errorf("%s: remove the container: %w", s.eng.name(), err)
		}
		return nil
	})
	r.undo.Push(func() error {
		// Before the engine removes the container: kill what is left and
		// wait until the cgroup is empty, so that the engine's removal of
		// it cannot fail on a process still dying.
		if r.cg != nil {
			return r.cg.Remove()
		}
		return nil
	})
	return nil
}

// handshake waits for the init and the bootstrap to connect (the network
// namespace verified before the go-ahead), attests the run and checks it
// against the floor.
func (r *run) handshake(ctx context.Context, st *starting) error {
	if err := r.connect(ctx, st.syncL, st.wireL, st.outer); err != nil {
		r.killAll()
		r.release()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return err
	}
	r.undo.PushClose(func() {
		if r.netlink != nil {
			r.netlink.Close()
		}
		r.wire.Close()
	})
	r.attest()
	if err := r.floor(); err != nil {
		r.killAll()
		r.release()
		return err
	}
	return nil
}

// watch holds the container's /tmp and /dev/shm open to be read after the
// run, reaps the init, and ends the run as a host fault where the engine
// loses its container (containerd died) before the result was in.
func (r *run) watch() {
	r.tmp = host.WatchTmpfs(r.proc.InterpPID)
	r.undo.PushClose(r.tmp.Close)
	r.exited = make(chan struct{})
	go func() { r.exit, _ = r.proc.Wait(); close(r.exited) }()
	r.undo.PushClose(func() {
		select {
		case <-r.exited:
		default: // never served: killed here
			r.killAll()
			<-r.exited
		}
	})
	go func() {
		select {
		case <-r.task.done():
			if r.task.lost() {
				r.lost.Store(true)
				r.killAll()
			}
		case <-r.exited:
		}
	}()
}

// serve runs the program to its end: the start frame, the wire, the limits,
// the output, its processes' end.
func (r *run) serve(ctx context.Context) (*sandbox.Result, error) {
	s := r.s
	setup := host.Setup{
		Request: r.req, Wire: r.wire, MaxFrame: s.cfg.MaxFrameBytes, MaxOutput: s.cfg.MaxOutputBytes,
		Stdout: r.outR, Stderr: r.errR, Exited: r.exited, Kill: r.killAll, Started: r.started,
		SetupInPidsPeak: true,
		Freeze:          r.freeze,
		CPUBase:         r.cpuBase,
		Warm:            r.iso.Warm,
	}
	if r.cg != nil {
		setup.Meter = r.cg
	}
	e := host.Begin(ctx, setup)
	cancelled := e.Supervise(ctx)
	usage := e.Usage(sandbox.Usage{}, 1) // the init is not the program's
	if r.cg != nil {
		r.cg.Remove() // nothing of the run runs on
	}
	// The wire is read to its end: a result the program sent just before it
	// exited is still in the socket. With every process gone its peer is
	// closed; the deadline bounds a straggler that holds it (no cgroup).
	r.wire.SetReadDeadline(time.Now().Add(2 * time.Second))
	// The output is complete once the engine has copied the dead
	// container's streams.
	r.task.waitOutput(ctx)
	r.closeWriters()
	e.Finish()
	r.wire.Close()
	if cancelled != nil {
		return nil, cancelled
	}
	status := host.WaitStatus(r.exit.Status)
	if !r.exit.Reported {
		code, ok := r.task.exitCode()
		if ok {
			status = host.EngineStatus(code)
		}
	}
	iso := r.iso
	res := e.Result(host.Outcome{Status: status, Usage: usage, NetworkDenied: r.netOK, Isolation: &iso, TmpFull: r.tmp.Full()})
	r.tmp.Close()
	// The init was reaped (Supervise): the pid namespace, and every process
	// of the run with it, is gone.
	<-r.exited
	res.Files, res.FilesOmitted = r.ws.Collect(s.cfg.Files)
	res.FilesTruncated = len(res.FilesOmitted) > 0
	res.Artifacts, res.ArtifactsOmitted = r.ws.Artifacts(s.cfg.Files)
	iso.FilesOut = true
	if r.lost.Load() && !e.Reported() {
		return nil, fmt.Errorf("%w: %s lost the container during the run; what is left is removed once it answers again", sandbox.ErrHostFault, s.eng.name())
	}
	return res, nil
}

// unwind undoes what the run made, newest first, and reports what failed.
func (r *run) unwind() error {
	if err := r.undo.Unwind(); err != nil {
		return fmt.Errorf("%w: %w", sandbox.ErrHostFault, err)
	}
	return nil
}

// connect waits for the init to connect back (verifying the network
// namespace before the go-ahead), then for the bootstrap's wire.
func (r *run) connect(ctx context.Context, syncL, wireL *net.UnixListener, outer IDs) error {
	// The container failing before it connects ends the wait at once.
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-r.task.done():
			cancel()
		case <-wctx.Done():
		}
	}()
	var err error
	r.proc, err = reexec.Accept(wctx, &reexec.AcceptOptions{
		Listener: syncL, UID: int(outer.UID), Timeout: 60 * time.Second,
		Ready: r.ready,
	})
	syncL.Close() // one init, one connection: nothing else may reach the host
	os.Remove(filepath.Join(r.dir, nsexec.ContainerSync))
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if errors.Is(err, sandbox.ErrRefused) {
			return err
		}
		var ie *reexec.InitError
		if errors.As(err, &ie) && ie.Step == "exec" && (ie.Errno == unix.ENOENT || ie.Errno == unix.EACCES) {
			_, python := r.s.eng.image()
			return fmt.Errorf("%w: the image cannot run the interpreter %s (%v); set ContainerPythonBin, or the image label %s", sandbox.ErrInvalidConfig, python, ie.Errno, ImageLabelPython)
		}
		if code, ok := r.task.exitCode(); ok {
			return fmt.Errorf("%w: the container exited with status %d before its init reported (%v): %.2000s", sandbox.ErrHostFault, code, err, r.task.why())
		}
		return fmt.Errorf("%w: the container's init: %w", sandbox.ErrHostFault, err)
	}
	wireL.SetDeadline(time.Now().Add(60 * time.Second))
	stop := context.AfterFunc(wctx, func() { wireL.SetDeadline(time.Now()) })
	r.wire, err = wireL.AcceptUnix()
	stop()
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("%w: the bootstrap never connected: %w", sandbox.ErrHostFault, err)
	}
	wireL.Close()
	os.Remove(filepath.Join(r.dir, wireSock))
	cred, err := reexec.PeerCred(r.wire)
	if err != nil || int(cred.Uid) != int(outer.UID) || attest.PPid(int(cred.Pid)) != r.proc.InitPID {
		r.wire.Close()
		return fmt.Errorf("%w: the wire's peer (%+v, %v) is not the run's interpreter", sandbox.ErrHostFault, cred, err)
	}
	r.proc.InterpPID = int(cred.Pid)
	return nil
}

// ready runs once the init connected: it opens the run's cgroups and
// verifies its network namespace, through a netlink socket a helper opened
// inside it, before the go-ahead.
func (r *run) ready(initPID int) error {
	var err error
	if r.cg, err = cgroups.Open(initPID); err != nil {
		return fmt.Errorf("%w: the container's cgroups: %w", sandbox.ErrHostFault, err)
	}
	if r.network() {
		return nil
	}
	ns, err := os.Open(fmt.Sprintf("/proc/%d/ns/net", initPID))
	if err != nil {
		return fmt.Errorf("%w: the container's network namespace: %w", sandbox.ErrHostFault, err)
	}
	defer ns.Close()
	nl, err := reexec.NetlinkIn(ns)
	if err != nil {
		return fmt.Errorf("%w: the container's network namespace: %w", sandbox.ErrHostFault, err)
	}
	fd := int(nl.Fd())
	nc, err := attest.CheckNetwork(fd, r.s.hooks.beforeNetCheck)
	if err != nil {
		nl.Close()
		return err
	}
	if r.req == nil {
		r.netlink = nl // pooled: checked again at dispatch
	} else {
		nl.Close()
	}
	r.iso.Network = nc
	r.netOK = nc.Verified
	if !r.netOK {
		// A container's network is the engine's doing, --network=none: a
		// namespace that fails the check is a broken engine, never run.
		return fmt.Errorf("the container's network namespace failed its check (%s): %w", nc.Reason, sandbox.ErrRefused)
	}
	return nil
}

// attest reads what the run actually has, from the kernel, before the
// start frame is sent.
func (r *run) attest() {
	s := r.s
	iso := &r.iso
	iso.Backend = "container"
	iso.Engine = string(s.eng.name())
	img, _ := s.eng.image()
	iso.Image = &img
	iso.Mode = "namespaces"
	iso.SeccompDigest = s.filter.Digest()
	iso.LandlockScoped = attest.ScopeNames(s.scopes)
	iso.Cgroup = cgroups.ModeNone
	if r.cg != nil {
		iso.Cgroup = r.cg.Mode()
	}
	attest.AttestProcesses(iso, r.proc.InitPID, r.proc.InterpPID, s.hostNS)
}

// floor refuses a run below psych's floor, whatever options said: no
// capabilities, psych's own seccomp filter (the newest, by digest, read
// through ptrace) with no other after it, no_new_privs, in both the init and
// the interpreter; the init started in psych's environment alone; and the
// network denial verified unless it was granted.
func (r *run) floor() error {
	iso := &r.iso
	for _, p := range []struct {
		name string
		st   sandbox.ProcessStatus
	}{{"init", iso.Init}, {"interpreter", iso.Interpreter}} {
		if strings.Trim(p.st.CapEff, "0") != "" || p.st.CapEff == "" || p.st.Seccomp != 2 || p.st.NoNewPrivs != 1 {
			return fmt.Errorf("the container's %s is below the floor (cap_eff %q, seccomp %d, no_new_privs %d): %w", p.name, p.st.CapEff, p.st.Seccomp, p.st.NoNewPrivs, sandbox.ErrRefused)
		}
		for _, id := range append(slices.Clone(p.st.UID), p.st.GID...) {
			if id == 0 {
				return fmt.Errorf("the container's %s runs with id 0: %w", p.name, sandbox.ErrRefused)
			}
		}
	}
	if !r.network() && !r.netOK {
		return fmt.Errorf("the container's network denial is not verified: %w", sandbox.ErrRefused)
	}
	if err := checkInitEnv(r.proc.InitPID, reexec.ContainerEnv("")); err != nil {
		return fmt.Errorf("%w: %w", err, sandbox.ErrRefused)
	}
	// "seccomp 2" holds with the engine's filter alone: psych's own must be
	// the newest in both, by digest, and the interpreter have no filter the
	// init has not (the same count, as the kernel counts them).
	want := r.s.filter.Digest()
	var counts [2]int
	for i, p := range []struct {
		name string
		pid  int
		st   sandbox.ProcessStatus
	}{{"init", r.proc.InitPID, iso.Init}, {"interpreter", r.proc.InterpPID, iso.Interpreter}} {
		n, digest, err := seccompFilters(p.pid)
		if err != nil {
			return fmt.Errorf("the container's %s: psych's seccomp filter cannot be verified: %w: %w", p.name, err, sandbox.ErrRefused)
		}
		if digest != want || n != p.st.SeccompFilters {
			return fmt.Errorf("the container's %s lacks psych's seccomp filter: %d filters (status says %d), the newest %s, want %s: %w", p.name, n, p.st.SeccompFilters, digest, want, sandbox.ErrRefused)
		}
		counts[i] = n
	}
	if counts[0] != counts[1] {
		return fmt.Errorf("the container's interpreter has %d seccomp filters, its init %d: %w", counts[1], counts[0], sandbox.ErrRefused)
	}
	return nil
}

// killAll kills the whole container: its init (pid 1 of its pid
// namespace, so everything in it dies too), its cgroup, and through the
// engine.
func (r *run) killAll() {
	if r.proc != nil {
		r.proc.Kill()
	}
	if r.cg != nil {
		r.cg.Kill()
	}
	if r.task != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		r.task.kill(ctx)
		cancel()
	}
}

// freeze pauses or resumes the container through its engine, within a
// bound: a wedged engine must not hold the binding call for ever.
func (r *run) freeze(frozen bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return r.task.pause(ctx, frozen)
}

// release waits for a killed init's sync socket to end (bounded by the
// setup deadline) and closes its pidfd, on a path that never reaches Wait.
func (r *run) release() {
	if r.proc != nil {
		r.proc.Wait()
	}
}

// plan is what the init carries out in the container: the rlimits, the
// drop to the run ids (a no-op: the engine started it as them), Landlock,
// psych's own seccomp filter over the engine's, and the interpreter.
func (r *run) plan() ([]byte, error) {
	s := r.s
	_, python := s.eng.image()
	filter := s.filter
	if s.hooks.initFilter != nil {
		filter = s.hooks.initFilter
	}
	p := &reexec.Plan{
		OuterUID: r.uid, OuterGID: r.gid, InnerUID: r.uid, InnerGID: r.gid,
		Exe:      python,
		Args:     append([]string{python}, bootstrap.SocketArgs(runDir+"/"+wireSock)...),
		Env:      r.environ(python),
		Cwd:      sandbox.WorkDir,
		Rlimits:  r.rlimits(),
		Landlock: s.scopes,
		Seccomp:  filter.Bytes(),
	}
	if r.req == nil {
		p.Args = append(p.Args, bootstrap.PreloadArgs(s.preload)...)
	}
	r.env = p.Env
	r.iso.EnvKeys = host.EnvKeys(p.Env)
	r.iso.PythonPath = python
	return p.Encode()
}

// rlimits are the per-process limits, as on the subprocess backend but for
// RLIMIT_NPROC: without a user namespace of its own a container's uid is
// shared with every other process of that uid on the host, so the pids
// cgroup alone caps the run, and NPROC is left high enough not to reach
// across runs.
func (r *run) rlimits() []reexec.Rlimit {
	l := r.limits
	cpu := uint64(math.Ceil(l.CPUSeconds))
	as, fsize := uint64(l.AddressSpaceBytes), uint64(l.FileSizeBytes)
	stack, nofile := uint64(l.StackBytes), uint64(l.OpenFiles)
	return []reexec.Rlimit{
		{Resource: unix.RLIMIT_CPU, Soft: cpu, Hard: cpu + 1},
		{Resource: unix.RLIMIT_AS, Soft: as, Hard: as},
		{Resource: unix.RLIMIT_FSIZE, Soft: fsize, Hard: fsize},
		{Resource: unix.RLIMIT_NPROC, Soft: 1024, Hard: 1024},
		{Resource: unix.RLIMIT_NOFILE, Soft: nofile, Hard: nofile},
		{Resource: unix.RLIMIT_STACK, Soft: stack, Hard: stack},
		{Resource: unix.RLIMIT_CORE, Soft: 0, Hard: 0},
	}
}

// ociRlimits are the engine's rlimits: only those the engine must set
// before the init (which only lowers, and sets the rest itself before any
// line of the program): NPROC at 1024 and NOFILE at 1024 or the run's
// OpenFiles where that is more (the init cannot raise it; an engine whose
// own hard limit is lower refuses to start the run), and no core dumps. An
// RLIMIT_AS set by the engine would bind runc's own init, whose Go runtime
// then cannot load the seccomp filter.
func ociRlimits(l sandbox.Limits) []specs.POSIXRlimit {
	nofile := max(1024, uint64(l.OpenFiles))
	return []specs.POSIXRlimit{
		{Type: "RLIMIT_NOFILE", Soft: nofile, Hard: nofile},
		{Type: "RLIMIT_NPROC", Soft: 1024, Hard: 1024},
		{Type: "RLIMIT_CORE", Soft: 0, Hard: 0},
	}
}

// etcBinds bind the sandbox's /etc files from the boot directory.
func etcBinds(bootHost string) []bind {
	var out []bind
	for _, t := range etcTargets() {
		out = append(out, bind{filepath.Join(bootHost, t), t})
	}
	return out
}

// ownEtc writes into dir the sandbox's /etc/passwd and /etc/group with the
// sandbox user at uid/gid (an engine without a user namespace runs the
// program as its outside ids), and points binds' passwd and group at them.
func ownEtc(dir string, uid, gid uint32, binds []bind) error {
	if err := os.Mkdir(dir, 0o755); err != nil {
		return err
	}
	for _, f := range resources.EtcFilesFor(uid, gid) {
		if f.Path != "/etc/passwd" && f.Path != "/etc/group" {
			continue
		}
		p := filepath.Join(dir, filepath.Base(f.Path))
		if err := os.WriteFile(p, []byte(f.Content), 0o444); err != nil {
			return err
		}
		for i := range binds {
			if binds[i].target == f.Path {
				binds[i].source = p
			}
		}
	}
	return nil
}

// listen makes a Unix socket at path that only the run's uid (and root)
// may connect to.
func listen(path, network string, owner IDs) (*net.UnixListener, error) {
	l, err := net.ListenUnix(network, &net.UnixAddr{Name: path, Net: network})
	if err != nil {
		return nil, err
	}
	if err := os.Chown(path, int(owner.UID), int(owner.GID)); err != nil {
		l.Close()
		return nil, err
	}
	if err := os.Chmod(path, 0o600); err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}

// writeOwned writes a file only owner may read.
func writeOwned(path string, b []byte, owner IDs) error {
	if err := os.WriteFile(path, b, 0o400); err != nil {
		return err
	}
	return os.Chown(path, int(owner.UID), int(owner.GID))
}
