//go:build linux && cgo

package subprocess

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/psych-runtime/psych/bootstrap"
	"github.com/psych-runtime/psych/cgroups"
	"github.com/psych-runtime/psych/internal/layers"
	"github.com/psych-runtime/psych/internal/reexec"
	"github.com/psych-runtime/psych/sandbox"
	"github.com/psych-runtime/psych/sandbox/internal/attest"
	"github.com/psych-runtime/psych/sandbox/internal/host"
	"github.com/psych-runtime/psych/sandbox/internal/pool"
	"github.com/psych-runtime/psych/sandbox/internal/pyfacts"
	"github.com/psych-runtime/psych/sandbox/internal/resources"
	"github.com/psych-runtime/psych/sandbox/internal/setup"
	"github.com/psych-runtime/psych/seccomp"
)

// Sandbox is the subprocess backend. It is safe for concurrent use; each Run
// is independent of every other.
type Sandbox struct {
	cfg      Config
	python   string
	hostUID  int
	owner    cgroups.Owner
	cg       *cgroups.Manager // nil where no run cgroup can be made
	cgErr    error            // why not
	launcher *bootstrap.Launcher
	// userns is whether user namespaces can be had (probed at New); without
	// them every run takes the fallback.
	userns   bool
	view     *view
	fonts    *pyfacts.FontList // matplotlib's, for viewed runs; nil without
	filter   *seccomp.Filter
	landlock uint64
	// fallback is what a fallback run gets beyond the above; zero with
	// user namespaces.
	fallback fallback
	hostNS   map[string]string // the host's own namespace links
	hooks    hooks
	ids      *resources.IDs // nil: one id for all runs
	log      *slog.Logger

	pool     *pool.Pool[*run] // nil without Config.Pool
	imports  *pool.ImportEnv  // what the pool's preloads read; nil without
	preload  []string         // the pool's Preload, set before its fills start
	poolCaps sandbox.Limits
	mu       sync.Mutex
	closed   bool
	running  sync.WaitGroup
	removing removals // served runs' removals, after their results
}

// removals are the served runs' removals in flight. Unlike a WaitGroup's,
// a Wait may run beside new ones (Settle beside Run), and waits only for
// those begun before it.
type removals struct {
	mu      sync.Mutex
	pending map[chan struct{}]struct{} // each closed when its removal ends
}

// Go runs f, a removal, in a goroutine of its own.
func (r *removals) Go(f func()) {
	done := make(chan struct{})
	r.mu.Lock()
	if r.pending == nil {
		r.pending = map[chan struct{}]struct{}{}
	}
	r.pending[done] = struct{}{}
	r.mu.Unlock()
	go func() {
		defer func() {
			r.mu.Lock()
			delete(r.pending, done)
			r.mu.Unlock()
			close(done)
		}()
		f()
	}()
}

// Wait returns once every removal begun before it has ended.
func (r *removals) Wait() {
	for _, done := range r.inFlight() {
		<-done
	}
}

// inFlight is the removals running now, each as the channel its end closes.
func (r *removals) inFlight() []chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Collect(maps.Keys(r.pending))
}

var _ sandbox.Sandbox = (*Sandbox)(nil)

// runSeq numbers the runs of this process, whatever their Sandbox: a run
// cgroup's name is the process's (cgroups.Owner) and this number.
var runSeq atomic.Uint64

// New validates cfg, resolves the interpreter once and checks that the run
// user can execute it, and removes what dead earlier hosts left behind.
// Its phases: the defaults and checks, the probes (user namespaces, the
// seccomp filter, the cgroup manager) started beside the interpreter's
// facts, the run ids and the base directory, the mode (full or fallback),
// the interpreter's reach, the view and bootstrap, the cgroups, the pool.
func New(cfg Config) (*Sandbox, error) {
	s := &Sandbox{cfg: cfg, hostUID: os.Geteuid()}
	c := &s.cfg
	if err := c.withDefaults(s.hostUID); err != nil {
		return nil, err
	}
	s.log = c.Logger
	if err := c.validate(s.hostUID); err != nil {
		return nil, err
	}
	pr := s.startProbes()
	python, err := resolveInterpreter(c.PythonBin)
	if err != nil {
		return nil, err
	}
	s.python = python
	pr.startCgroups(s)
	// The interpreter's facts (for the view and the bootstrap: one
	// interpreter start, or none on a cache hit) are the longest part: they
	// are learnt here while the probes run beside, and dropped if the
	// fallback needs none.
	l := learnView(python, c.CacheDir, s.log)
	if err := s.prepareIDs(); err != nil {
		return nil, err
	}
	probe, m, f := <-pr.probe, <-pr.cgroups, <-pr.filter
	if err := s.chooseMode(probe, l.err); err != nil {
		return nil, err
	}
	if err := s.checkReach(); err != nil {
		return nil, err
	}
	if err := s.useInterpreter(l, f); err != nil {
		return nil, err
	}
	// The fork server starts (an exec of this binary) off the first run's
	// path, once New's own work is done.
	reexec.WarmForkServer()
	if err := s.useCgroups(m); err != nil {
		return nil, err
	}
	if c.Pool != nil {
		if err := s.startPool(*c.Pool); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// probes are New's work that runs beside the interpreter's facts, each
// answering once on its channel (buffered: an early return leaks nothing
// but the goroutine's short remaining work).
type probes struct {
	probe   chan probed
	filter  chan compiled
	cgroups chan managed
}

type probed struct {
	ok       bool
	why, err error
}

type compiled struct {
	f   *seccomp.Filter
	err error
}

type managed struct {
	cg  *cgroups.Manager
	err error
}

// startProbes starts the user namespace probe and the filter's compile.
// The probe is a cgo call, which holds its P while it runs: it starts
// first, so that the work on the critical path (the interpreter's facts)
// is not queued behind it. The filter is the one for a user namespace,
// where the run's ids are known.
func (s *Sandbox) startProbes() *probes {
	c := &s.cfg
	pr := &probes{probe: make(chan probed, 1), filter: make(chan compiled, 1), cgroups: make(chan managed, 1)}
	go func() {
		ok, why, err := reexec.Probe(c.RunAs.UID, c.RunAs.GID)
		pr.probe <- probed{ok, why, err}
	}()
	go func() {
		f, err := confinedFilter(c.CacheDir, s.log)
		pr.filter <- compiled{f, err}
	}()
	return pr
}

// startCgroups removes what dead hosts left in the base and makes the
// cgroup manager, beside the interpreter's facts.
func (pr *probes) startCgroups(s *Sandbox) {
	c := &s.cfg
	go func() {
		resources.RemoveStale(c.TmpBase)
		cgcfg := c.Cgroups
		if cgcfg.Logger == nil {
			cgcfg.Logger = s.log
		}
		cg, err := cgroups.NewManager(cgcfg)
		pr.cgroups <- managed{cg, err}
	}()
}

// resolveInterpreter is PythonBin, or python3 on PATH asked for its
// sys.executable, as an absolute path.
func resolveInterpreter(python string) (string, error) {
	var err error
	if python == "" {
		if python, err = resolvePython(); err != nil {
			return "", fmt.Errorf("%w: %w", sandbox.ErrInvalidConfig, err)
		}
	}
	if python, err = filepath.Abs(python); err != nil {
		return "", fmt.Errorf("%w: %w", sandbox.ErrInvalidConfig, err)
	}
	return python, nil
}

// learned is what the interpreter's facts give a Sandbox with a view.
type learned struct {
	view     *view
	launcher *bootstrap.Launcher
	prefixes []string
	fonts    *pyfacts.FontList
	err      error
}

// learnView learns python's facts and builds its view, launcher and
// matplotlib font list.
func learnView(python, cacheDir string, log *slog.Logger) learned {
	var l learned
	facts, err := learnPython(python, cacheDir, log)
	if err == nil {
		l.prefixes = facts.Prefixes
		l.view, err = resolveView(python, facts.Prefixes)
	}
	if err == nil {
		l.launcher, err = bootstrap.NewLauncherCode(facts.Code)
		l.fonts = learnFonts(python, facts.Prefixes, l.view, cacheDir, log)
	}
	l.err = err
	return l
}

// prepareIDs takes the RunAs range (checked unused on the host), this
// process's cgroup owner and the base of the run directories.
func (s *Sandbox) prepareIDs() error {
	c := &s.cfg
	if c.RunAs.Size() > 1 {
		s.ids = c.RunAs
		if err := s.ids.Check(); err != nil {
			return err
		}
	}
	var err error
	if s.owner, err = cgroups.SelfOwner(); err != nil {
		return fmt.Errorf("%w: %w", sandbox.ErrHostFault, err)
	}
	if err := resources.PrepareBase(c.TmpBase, s.hostUID); err != nil {
		return fmt.Errorf("%w: %w", sandbox.ErrInvalidConfig, err)
	}
	return nil
}

// chooseMode takes the probe's answer: user namespaces, or the fallback
// where it is allowed (with the other namespaces and the view on a root
// host that can make them, learnErr nil), said in a warning.
func (s *Sandbox) chooseMode(pr probed, learnErr error) error {
	c := &s.cfg
	if testNoUserns {
		pr.ok, pr.why = false, syscall.ENOSPC
	}
	const fallbackBare = "psych: no user namespace can be had here; runs take the fallback, as asked: no namespaces and no filesystem view, but rlimits, the uid drop, seccomp and Landlock where the kernel has it"
	switch s.userns = pr.ok; {
	case errors.Is(pr.err, reexec.ErrRunIDs):
		return fmt.Errorf("%w: run as %d:%d (map them into this user namespace, or set RunAs to ids it maps): %w", sandbox.ErrInvalidConfig, c.RunAs.UID, c.RunAs.GID, pr.err)
	case pr.err != nil:
		return fmt.Errorf("%w: %w", sandbox.ErrHostFault, pr.err)
	case !s.userns && !c.AllowFallback:
		return fmt.Errorf("%w (the kernel answered %v to uid %d); the fallback, with weaker isolation, must be asked for (Config.AllowFallback): %w",
			ErrNoUserNamespace, errnoName(pr.why), c.RunAs.UID, sandbox.ErrRefused)
	case !s.userns && s.hostUID == 0 && learnErr == nil:
		// A root host makes the other namespaces and the view without one.
		if err := rootNamespaces(); err != nil {
			s.log.Warn(fallbackBare, "why", errnoName(pr.why), "no_namespaces", err)
			break
		}
		s.fallback.rootNS = true
		s.log.Warn("psych: no user namespace can be had here; runs take the fallback, as asked: network, pid, ipc, uts, mount and cgroup namespaces and the view made as root, the program under its outside ids with no mapping, rlimits, seccomp", "why", errnoName(pr.why))
	case !s.userns:
		s.log.Warn(fallbackBare, "why", errnoName(pr.why))
	}
	return nil
}

// checkReach checks that every run id can reach the interpreter and its
// run directory (the init mounts the new root on it). Through a view, a
// root host hands the interpreter's trees over as open_tree clones, so
// only the file's own mode matters; otherwise the run id must reach the
// interpreter by path. The ids of a range own nothing on the host
// (IDRange.Check), so what the first may reach, every one may: only it is
// checked.
func (s *Sandbox) checkReach() error {
	c := &s.cfg
	uid, gid := c.RunAs.UID, c.RunAs.GID
	viaTrees := (s.userns || s.fallback.rootNS) && s.hostUID == 0
	if err := CheckInterpreter(s.python, uid, gid, viaTrees); err != nil {
		if !viaTrees {
			err = interpreterError(s.python, uid, err)
		}
		return fmt.Errorf("%w: %w", sandbox.ErrInvalidConfig, err)
	}
	if err := checkSearchable(c.TmpBase, uid, gid); err != nil {
		return fmt.Errorf("%w: tmp base %s cannot hold run directories for uid %d: %w", sandbox.ErrInvalidConfig, c.TmpBase, uid, err)
	}
	return nil
}

// useInterpreter takes the view and launcher where the mode has a view,
// the filter (the fallback's own, confining no ids, where it has no user
// namespace), and the fallback's extras. An interpreter the bootstrap
// cannot serve is refused in either mode.
func (s *Sandbox) useInterpreter(l learned, f compiled) error {
	if errors.Is(l.err, pyfacts.ErrUnsupportedPython) || s.userns && l.err != nil {
		return fmt.Errorf("%w: %w", sandbox.ErrInvalidConfig, l.err)
	}
	if s.userns || s.fallback.rootNS {
		s.view, s.launcher, s.fonts = l.view, l.launcher, l.fonts
	}
	s.landlock = attest.LandlockScopes()
	s.hostNS = attest.HostNamespaces()
	if !s.userns {
		// The fallback runs as host ids from a range: id 0 alone is refused.
		f.f, f.err = seccomp.DefaultFilter()
		if f.err == nil {
			rootNS := s.fallback.rootNS
			s.fallback, f.err = newFallback(s.python, l.prefixes)
			s.fallback.rootNS = rootNS
		}
	}
	var err error
	if s.filter, err = f.f, f.err; err != nil {
		return fmt.Errorf("%w: %w", sandbox.ErrHostFault, err)
	}
	if s.launcher == nil { // the fallback: no view, the bootstrap compiled here
		if s.launcher, err = bootstrap.Prepare(s.python); err != nil {
			return fmt.Errorf("%w: %w", sandbox.ErrInvalidConfig, err)
		}
	}
	return nil
}

// useCgroups takes the cgroup manager, or runs without run cgroups, said
// in a warning; a cgroup configuration that is wrong is refused.
func (s *Sandbox) useCgroups(m managed) error {
	if s.cg = m.cg; m.err == nil {
		return nil
	}
	if errors.Is(m.err, cgroups.ErrInvalid) {
		return fmt.Errorf("%w: %w", sandbox.ErrInvalidConfig, m.err)
	}
	s.cg = nil
	s.cgErr = m.err
	s.log.Warn("psych: no run cgroup; rlimits alone hold: cpu_seconds per process (RLIMIT_CPU), no whole-run memory cap or usage", "err", m.err)
	return nil
}

// Python is the interpreter this Sandbox runs.
func (s *Sandbox) Python() string { return s.python }

// acquire claims the run's outside ids: its own from the range (waiting for
// one, at most resources.IDWait, then sandbox.ErrBusy), or the one id all runs
// share.
func (s *Sandbox) acquire(ctx context.Context) (uid, gid uint32, release func(), err error) {
	if s.ids == nil {
		return s.cfg.RunAs.UID, s.cfg.RunAs.GID, func() {}, nil
	}
	id, release, err := s.ids.Claim(ctx, 1)
	if err != nil {
		return 0, 0, nil, err
	}
	return id, s.cfg.RunAs.GID + (id - s.cfg.RunAs.UID), release, nil
}

// confinedFilter is psych's filter with the id-changing calls confined to
// the sandbox's own ids inside a user namespace (any other id is EPERM, not
// the kernel's EINVAL for an unmapped id). It is compiled once per process,
// and kept in the interpreter cache's directory, so that a new process
// reads it back instead of paying libseccomp's 2-3 ms again. The entry is
// this executable's own (pyfacts.LoadExeBlob: keyed on its identity), and
// the compiler's (seccomp.CompilerFingerprint): the policy is this code's,
// so a hit is taken back as this executable compiled and checked it
// (seccomp.Compiled), without building the policy again. Where the
// executable cannot be identified, the entry is keyed on the policy's
// fingerprint (pyfacts.LoadBlob) and a hit is checked against the policy
// (Policy.Restore).
func confinedFilter(cacheDir string, log *slog.Logger) (*seccomp.Filter, error) {
	confined.Lock()
	defer confined.Unlock()
	if confined.f != nil {
		return confined.f, nil
	}
	policy := func() *seccomp.Policy {
		p := seccomp.Default()
		p.ConfineIDs(resources.SandboxUID, resources.SandboxGID)
		return p
	}
	var p *seccomp.Policy
	var f *seccomp.Filter
	build := func() ([]byte, error) {
		if p == nil {
			p = policy()
		}
		var err error
		if f, err = p.Compile(); err != nil {
			return nil, err
		}
		return json.Marshal(cachedFilter{BPF: f.Bytes(), Unresolved: f.Unresolved()})
	}
	check := func(b []byte) error {
		var c cachedFilter
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&c); err != nil {
			return err
		}
		var g *seccomp.Filter
		var err error
		if p == nil {
			g, err = seccomp.Compiled(c.BPF, c.Unresolved)
		} else {
			g, err = p.Restore(c.BPF, c.Unresolved)
		}
		if err == nil {
			f = g
		}
		return err
	}
	// This executable's own entry, keyed on the compiler; else one keyed
	// on the policy.
	opts := pyfacts.Options{Dir: cacheDir, Logger: log}
	key, err := seccomp.CompilerFingerprint()
	if err == nil {
		key = fmt.Sprintf("%s; confined %d:%d", key, resources.SandboxUID, resources.SandboxGID)
		_, _, err = pyfacts.LoadExeBlob(opts, "seccomp-confined", key, build, check)
	}
	if errors.Is(err, seccomp.ErrUnsupported) || errors.Is(err, pyfacts.ErrNoExecutable) {
		p = policy()
		if key, err = p.Fingerprint(); err != nil {
			return nil, err
		}
		_, _, err = pyfacts.LoadBlob(opts, "seccomp-confined", key, build, check)
	}
	if err != nil {
		return nil, err
	}
	confined.f = f
	return f, nil
}

// confined holds confinedFilter's program once made.
var confined struct {
	sync.Mutex
	f *seccomp.Filter
}

// cachedFilter is confinedFilter's cache entry.
type cachedFilter struct {
	BPF        []byte   `json:"bpf"`
	Unresolved []string `json:"unresolved"`
}

// CanFreeze reports whether runs can be frozen while a binding call waits
// for a person (sandbox.Suspend): they get a cgroup with a freezer.
func (s *Sandbox) CanFreeze() bool { return s.cg.CanFreeze() }

// Run executes req.Code once. See sandbox.Sandbox for the contract.
func (s *Sandbox) Run(ctx context.Context, req sandbox.Request) (*sandbox.Result, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	switch {
	case s.cfg.RequireCgroup && s.cg == nil:
		return nil, fmt.Errorf("a cgroup is required but none can be made here (%v): %w", s.cgErr, sandbox.ErrRefused)
	case s.cfg.RequireNetworkDenial && !s.userns && !s.fallback.rootNS:
		return nil, fmt.Errorf("network denial is required but no network namespace can be made here: %w", sandbox.ErrRefused)
	case s.cfg.RequireNetworkDenial && req.Network:
		return nil, fmt.Errorf("network denial is required but the request grants the network: %w", sandbox.ErrRefused)
	}
	hr, err := host.Prepare(req, s.cfg.DefaultLimits, s.cfg.MaxFrameBytes, s.cfg.EnvAllowlist)
	if err != nil {
		return nil, err
	}
	if err := hr.SetFiles(req.Files, s.cfg.Files, s.cfg.TmpBytes); err != nil {
		return nil, err
	}
	if !s.enter() {
		return nil, fmt.Errorf("run: %w", sandbox.ErrClosed)
	}
	defer s.running.Done()
	set := layers.From(ctx)
	coldReason := ""
	if s.pool != nil && set == layers.Full() {
		var r *run
		if r, coldReason = s.warm(ctx, hr); r != nil {
			return r.serveThenRemove(ctx)
		}
	}
	uid, gid, release, err := s.acquire(ctx)
	if err != nil {
		return nil, err
	}
	r := &run{s: s, req: hr, limits: hr.Limits, uid: uid, gid: gid, release: release, layers: set}
	r.iso.ColdReason = coldReason
	if err := r.start(); err != nil {
		return nil, errors.Join(err, r.cleanup())
	}
	if err := r.writeFiles(); err != nil {
		r.destroy()
		return nil, err
	}
	return r.serveThenRemove(ctx)
}

// enter counts a run in, unless the Sandbox is closed.
func (s *Sandbox) enter() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.running.Add(1)
	return true
}

// Settle waits until the removal of every run served before it has ended:
// a run's cgroup and directory are removed after its Run returns, and
// Close waits for them too. psych's benchmark settles between executions,
// so that no row is measured beside an earlier run's teardown.
func (s *Sandbox) Settle() { s.removing.Wait() }

// Close waits for the runs in flight, then destroys the warm pool's
// sandboxes, unused; Run fails with sandbox.ErrClosed after it.
func (s *Sandbox) Close() error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.running.Wait()
	if s.pool != nil {
		s.pool.Close()
	}
	s.removing.Wait()
	return nil
}

// run is one execution's state: started (start), served (serve) and
// removed (cleanup). A pooled run is started ahead of its request and
// dispatched to one (dispatch).
type run struct {
	s        *Sandbox
	req      *host.Request // nil in a pooled run until dispatch
	limits   sandbox.Limits
	uid, gid uint32
	release  func() // gives the outside ids back
	// layers are Full but in psych's own benchmark (internal/layers).
	layers layers.Set

	dir  string
	cg   *cgroups.Run
	proc *reexec.Process
	host *os.File // host end of the wire socket
	iso  sandbox.Isolation
	// netOK is true only when this run's own namespace was verified.
	netOK bool
	// pidNS is whether the run got a pid namespace (plan).
	pidNS bool
	// filter is the seccomp filter the run loads (plan).
	filter *seccomp.Filter
	env    []string // the program's environment, as planned
	home   string   // HOME, as the program sees it

	outR, errR *os.File
	tmp        *host.TmpfsWatch // the view's /tmp and /dev/shm
	// ws is the run's /tmp and /work, held by the host (a root host's
	// view); nil without one, when the run takes no files.
	ws       *host.Workspace
	exited   chan struct{} // closed once the program's end is known (start)
	exit     reexec.Exit   // valid once exited is closed
	reaped   chan struct{} // closed once the init is reaped
	reapExit reexec.Exit   // valid once reaped is closed
	started  time.Time
	warmRun
}

// startFrame makes a cold run's start frame, with its environment, before
// anything starts (a pooled run's is made at dispatch): one past the frame
// cap is the request's error. Figures are collected where the host holds
// the run's tmpfs.
func (r *run) startFrame() error {
	if r.req == nil {
		return nil
	}
	r.req.Figures = r.ws != nil
	return r.req.SetStart(r.env)
}

// start sets the run up to the interpreter waiting for its start frame.
// On error the caller still calls cleanup.
func (r *run) start() error {
	s := r.s
	var err error
	name := strconv.FormatUint(runSeq.Add(1), 10)
	if r.dir, err = resources.NewRunDir(s.cfg.TmpBase, s.owner, 0o700, s.hostUID == 0, r.uid, r.gid); err != nil {
		return fmt.Errorf("%w: %w", sandbox.ErrHostFault, err)
	}
	if s.cg != nil && r.layers.Cgroup {
		// The init is a task of the run too: pids.max is the count plus one.
		if r.cg, err = s.cg.New(name, r.cgLimits()); err != nil {
			return fmt.Errorf("%w: %w", sandbox.ErrHostFault, err)
		}
	}

	// What the init inherits (the wire's and the pipes' child ends, the
	// tree clones, the v1 tasks files) is closed here once it holds them,
	// or on failure.
	var child setup.Undo
	defer child.Unwind()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("%w: wire socketpair: %w", sandbox.ErrHostFault, err)
	}
	// Blocking, so a reply wakes the serving thread straight from the kernel
	// (not through the netpoller); teardown shuts it down to unblock it.
	r.host = os.NewFile(uintptr(fds[0]), "psych-wire-host")
	wire := os.NewFile(uintptr(fds[1]), "psych-wire-child")
	child.Push(wire.Close)
	var outW, errW *os.File
	if r.outR, outW, err = os.Pipe(); err != nil {
		return fmt.Errorf("%w: stdout pipe: %w", sandbox.ErrHostFault, err)
	}
	child.Push(outW.Close)
	if r.errR, errW, err = os.Pipe(); err != nil {
		return fmt.Errorf("%w: stderr pipe: %w", sandbox.ErrHostFault, err)
	}
	child.Push(errW.Close)
	plan, trees, err := r.plan()
	if err != nil {
		return fmt.Errorf("%w: %w", sandbox.ErrHostFault, err)
	}
	child.PushClose(func() { closeAll(trees) })
	if err := r.startFrame(); err != nil {
		return err
	}
	opts := &reexec.Options{
		Plan: plan, Stdout: outW, Stderr: errW, Wire: wire, CgroupFD: -1,
		Ready:   r.ready,
		Timeout: 30 * time.Second,
	}
	if r.cg != nil {
		opts.CgroupFD = r.cg.CloneFD()
		// On a hybrid host memory and pids are v1 controllers, which
		// CLONE_INTO_CGROUP cannot reach: the first process joins them
		// itself before the init forks anything.
		if plan.CgroupTasks, err = r.cg.OpenTasks(); err != nil {
			return fmt.Errorf("%w: %w", sandbox.ErrHostFault, err)
		}
		child.PushClose(func() { closeAll(plan.CgroupTasks) })
	}
	r.started = time.Now()
	r.proc, err = reexec.Start(opts)
	child.Unwind()
	if err != nil {
		r.proc = nil
		if errors.Is(err, sandbox.ErrRefused) {
			return err
		}
		return fmt.Errorf("%w: start the sandbox: %w", sandbox.ErrHostFault, err)
	}
	// From here the init exists: every path ends by killing the whole tree
	// and reaping the init.
	r.attest()
	if plan.Root != "" {
		r.tmp = host.WatchTmpfs(r.proc.InterpPID)
	}
	r.exited, r.reaped = make(chan struct{}), make(chan struct{})
	go func() { r.reapExit, _ = r.proc.Wait(); close(r.reaped) }()
	go func() {
		if r.endsAtReport() {
			<-r.proc.Reported()
			if st, ok := r.proc.ReportedStatus(); ok {
				r.exit = reexec.Exit{Status: st, Reported: true}
				close(r.exited)
				return
			}
		}
		<-r.reaped
		r.exit = r.reapExit
		close(r.exited)
	}()
	return nil
}

// endsAtReport says the run is over once the init has reported the
// interpreter's exit: with a pid namespace the init's own exit kills what
// is left, and with a cgroup serve kills it too; cleanup waits for the
// init's reap. Without, only the reap says the tree is gone, and gives the
// usage.
func (r *run) endsAtReport() bool { return r.pidNS && r.cg != nil }

// cgLimits are the run cgroup's limits; the init is one of its tasks.
func (r *run) cgLimits() cgroups.Limits {
	return cgroups.Limits{MemoryBytes: r.limits.MemoryBytes, Pids: int64(r.limits.ProcessCount) + 1}
}

// serve runs the program to its end: the start frame, the wire, the limits,
// the output, the teardown of its processes.
func (r *run) serve(ctx context.Context) (*sandbox.Result, error) {
	s := r.s
	setup := host.Setup{
		Request: r.req, Wire: r.host, MaxFrame: s.cfg.MaxFrameBytes, MaxOutput: s.cfg.MaxOutputBytes,
		Stdout: r.outR, Stderr: r.errR, Exited: r.exited, Kill: r.killTree, Started: r.started,
		CPUBase: r.cpuBase, SetupInPidsPeak: r.dispatched, Warm: r.iso.Warm,
		// The cgroup's kill takes the whole tree at once.
		EndAtExitFrame: r.endsAtReport(),
	}
	if r.cg != nil {
		setup.Meter = r.cg
		if s.cg.CanFreeze() {
			setup.Freeze = func(frozen bool) error {
				if frozen {
					return r.cg.Freeze()
				}
				return r.cg.Thaw()
			}
		}
	}
	e := host.Begin(ctx, setup)
	cancelled := e.Supervise(ctx)
	var exit reexec.Exit // the init's report; none yet at the program's own end
	if !e.EndedAtExitFrame() {
		exit = r.exit
		if r.endsAtReport() {
			r.cg.Kill() // what the init's exit has not yet taken
		}
	}
	ru := exit.Rusage
	usage := e.Usage(sandbox.Usage{
		CPUSeconds:      time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds(),
		PeakMemoryBytes: ru.Maxrss << 10,
	}, 1) // the init is not the program's
	r.teardown()
	e.Finish()
	if cancelled != nil {
		return nil, cancelled
	}
	iso := r.iso
	res := e.Result(host.Outcome{
		Status: host.WaitStatus(exit.Status), Usage: usage,
		NetworkDenied: r.netOK, Isolation: &iso, TmpFull: r.tmp.Full(),
	})
	r.collectFiles(res)
	return res, nil
}

// writeFiles writes the request's files into the run's /work, before the
// start frame: a cold run's after its start, a warm one's at dispatch. A
// run without a workspace takes none (Config.Files).
func (r *run) writeFiles() error {
	if len(r.req.Files) == 0 {
		return nil
	}
	if r.ws == nil {
		return fmt.Errorf("files: this run has no /work of its own (it needs a root host and the run's own view): %w", sandbox.ErrRefused)
	}
	if err := r.ws.Write(r.req.Files); err != nil {
		return fmt.Errorf("%w: %w", sandbox.ErrHostFault, err)
	}
	return nil
}

// collectFiles fills res's files from the run's /work once every process
// of the run is dead: the init reaped, which a pid namespace's end waits
// for.
func (r *run) collectFiles(res *sandbox.Result) {
	if r.ws == nil {
		return
	}
	<-r.reaped
	res.Files, res.FilesOmitted = r.ws.Collect(r.s.cfg.Files)
	res.FilesTruncated = len(res.FilesOmitted) > 0
	res.Artifacts, res.ArtifactsOmitted = r.ws.Artifacts(r.s.cfg.Files)
	if res.Isolation != nil {
		res.Isolation.FilesOut = true
	}
}

// serveThenRemove serves a started run, cold or dispatched, and returns its
// result once its processes are gone; its cgroup and directory are removed
// after, off the request's path. Close waits for that, and a host killed
// meanwhile leaves them to the next New's sweep of dead owners. A removal's
// failure cannot reach the result any more: it is logged.
func (r *run) serveThenRemove(ctx context.Context) (*sandbox.Result, error) {
	res, err := r.serve(ctx)
	r.s.removing.Go(func() {
		if err := r.cleanup(); err != nil {
			r.s.log.Warn("psych: removing a served run", "run", r.dir, "err", err)
		}
	})
	return res, err
}

// destroy kills a run that will not be served, waits for its init, and
// removes it.
func (r *run) destroy() {
	if r.proc != nil {
		r.killTree()
		<-r.reaped
		r.teardown()
	}
	if err := r.cleanup(); err != nil {
		r.s.log.Warn("psych: removing an unserved sandbox", "err", err)
	}
}

// cleanup removes what start made, once every process of the run is dead
// (serve's teardown, or destroy). Where the run had a pid namespace, its
// end killed them all, and the run directory and the run cgroup are
// removed side by side; else the cgroup's removal, which kills what is
// left, comes first.
func (r *run) cleanup() error {
	s := r.s
	if r.reaped != nil {
		<-r.reaped
	}
	for _, f := range []*os.File{r.host, r.outR, r.errR, r.netlink} {
		if f != nil {
			f.Close()
		}
	}
	r.tmp.Close()
	r.ws.Close()
	defer r.release()
	if r.dir == "" {
		return nil
	}
	var dirErr, cgErr error
	removeCg := func() {
		if r.cg != nil {
			cgErr = r.cg.Remove()
		}
	}
	if r.pidNS {
		var wg sync.WaitGroup
		wg.Go(removeCg)
		dirErr = resources.RemoveAll(r.dir)
		wg.Wait()
	} else {
		removeCg()
		dirErr = resources.RemoveAll(r.dir)
	}
	var err error
	if dirErr != nil {
		err = fmt.Errorf("%w: %w", sandbox.ErrHostFault, dirErr)
	}
	switch {
	case errors.Is(cgErr, cgroups.ErrRemoveDeferred):
		// Emptied, and removed at the next run: the result stands.
		s.log.Warn("psych: a run's cgroups could not be removed yet; the next run removes them", "err", cgErr)
	case cgErr != nil:
		err = errors.Join(err, fmt.Errorf("%w: %w", sandbox.ErrHostFault, cgErr))
	}
	return err
}

// ready runs between the init's creation and the go-ahead: it verifies the
// run's own network namespace through the netlink socket the init opened in
// it. No Go thread enters the namespace.
func (r *run) ready(initPID int, netlink *os.File) error {
	if netlink == nil {
		return nil
	}
	fd := int(netlink.Fd())
	nc, err := attest.CheckNetwork(fd, r.s.hooks.beforeNetCheck)
	if err != nil {
		return err
	}
	r.iso.Network = nc
	r.netOK = nc.Verified
	if r.req == nil { // pooled: served only verified, checked again at dispatch
		if !r.netOK {
			return fmt.Errorf("the pooled sandbox's network namespace failed its check (%s)", nc.Reason)
		}
		if r.netlink, err = dupFile(netlink); err != nil {
			return err
		}
		return nil
	}
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
func (r *run) teardown() {
	outR, errR := r.outR, r.errR
	if r.s.userns || r.pidNS {
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

// errnoName is err with its errno's name: "no space left on device (ENOSPC)".
func errnoName(err error) string {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		if n := unix.ErrnoName(errno); n != "" {
			return fmt.Sprintf("%v (%s)", errno, n)
		}
	}
	return fmt.Sprint(err)
}
