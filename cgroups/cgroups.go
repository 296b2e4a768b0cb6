package cgroups

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Layout is how the cgroup hierarchies are mounted on this host.
type Layout string

// Layouts, as DetectLayout reports them.
const (
	// LayoutUnified: one cgroup2 hierarchy and no v1 controller hierarchy.
	LayoutUnified Layout = "unified"
	// LayoutHybrid: a cgroup2 mount beside v1 controller hierarchies.
	LayoutHybrid Layout = "hybrid"
	// LayoutLegacy: v1 controller hierarchies and no cgroup2 mount.
	LayoutLegacy Layout = "legacy"
	// LayoutNone: no cgroup hierarchy is mounted.
	LayoutNone Layout = "none"
)

// Modes, as Manager.Mode reports them for the attestation.
const (
	// ModeV2: the memory and pids controllers come from the unified hierarchy.
	ModeV2 = "v2"
	// ModeV1: the memory or pids controller comes from a v1 hierarchy
	// (a hybrid or legacy host).
	ModeV1 = "v1"
	// ModeNone: no per-run cgroup; a nil *Manager reports it.
	ModeNone = "none"
)

// Controllers whose v1 parent Config.V1Parents may name.
const (
	Memory  = "memory"
	Pids    = "pids"
	Freezer = "freezer"
	CPUAcct = "cpuacct"
)

// Config configures a Manager. The zero value is valid: each parent is a
// "psych" child of the host process's own cgroup in that hierarchy.
type Config struct {
	// UnifiedParent is the cgroup2 directory under which run cgroups are
	// made. It must lie on the cgroup2 mount, and its own parent must
	// exist. Empty: <own unified cgroup>/psych, where "own" is this
	// process's cgroup when NewManager runs (see the package doc for the
	// "host" leaf).
	UnifiedParent string
	// V1Parents maps a v1 controller (Memory, Pids, Freezer, CPUAcct) to
	// the directory under which its run cgroups are made, on that
	// controller's v1 mount. Controllers that share a mount must share a
	// parent. A controller left out: <own cgroup in that hierarchy>/psych.
	V1Parents map[string]string
	// Logger receives notes on what the Manager changed on the host: the
	// stale run cgroups it removed, processes moved into the "host" leaf.
	// Nil: slog.Default().
	Logger *slog.Logger
}

// validate runs the configuration checks, in the style of runc's
// configs/validate: each a small function, the first failure wins.
func (c *Config) validate() error {
	checks := []func() error{
		func() error {
			if c.UnifiedParent != "" && !cleanAbs(c.UnifiedParent) {
				return fmt.Errorf("unified parent %q: want a clean absolute path", c.UnifiedParent)
			}
			return nil
		},
		func() error {
			for ctrl, dir := range c.V1Parents {
				switch ctrl {
				case Memory, Pids, Freezer, CPUAcct:
				default:
					return fmt.Errorf("v1 parent for %q: psych uses no such v1 controller", ctrl)
				}
				if !cleanAbs(dir) {
					return fmt.Errorf("v1 parent %q for %s: want a clean absolute path", dir, ctrl)
				}
			}
			return nil
		},
	}
	for _, check := range checks {
		if err := check(); err != nil {
			return fmt.Errorf("%w: %w", ErrInvalid, err)
		}
	}
	return nil
}

func cleanAbs(p string) bool { return filepath.IsAbs(p) && filepath.Clean(p) == p && p != "/" }

// Limits are one run's cgroup limits. A zero field sets no limit. CPU time
// is not among them: the caller watches Run.CPU and kills.
type Limits struct {
	// MemoryBytes caps the resident memory of the whole run, page cache
	// included: memory.max (v2) or memory.limit_in_bytes (v1). Swap is
	// held to zero where the kernel allows it (Run.SwapGuard says how).
	MemoryBytes int64
	// Pids caps the tasks (processes and threads) of the run: pids.max.
	Pids int64
}

func (l Limits) validate() error {
	if l.MemoryBytes < 0 || l.Pids < 0 {
		return fmt.Errorf("%w: negative limit %+v", ErrInvalid, l)
	}
	return nil
}

// Stats is what a run has consumed so far, read from its cgroups.
type Stats struct {
	// CPU is the CPU time of all the run's processes, exited ones
	// included; CPUKnown is false where the host keeps no whole-run CPU
	// (a v1-only host without cpuacct).
	CPU      time.Duration
	CPUKnown bool
	// MemoryCurrent is the memory charged to the run now.
	MemoryCurrent int64
	// MemoryPeak is the high-water mark of the run's memory. The v2
	// memory.peak file needs Linux 5.19; before that MemoryPeakKnown is
	// false and MemoryPeak is 0.
	MemoryPeak      int64
	MemoryPeakKnown bool
	// PidsCurrent is the number of tasks in the run now.
	PidsCurrent int64
	// PidsPeak is the most tasks the run had at once. The kernel keeps it
	// (pids.peak) from Linux 6.1; before that PidsPeakKnown is false and
	// the caller samples PidsCurrent instead.
	PidsPeak      int64
	PidsPeakKnown bool
	// OOMKills counts the processes the kernel's OOM killer ended in the
	// run: memory.events oom_kill (v2) or memory.oom_control oom_kill
	// (v1). On v1 kernels before 4.13, which have no such line,
	// memory.failcnt stands in: it counts every hit of the limit, so it
	// is at least 1 whenever an OOM kill happened.
	OOMKills int64
	// PidsMaxEvents counts the forks refused because the run was at
	// pids.max ("max" in pids.events).
	PidsMaxEvents int64
}

// Manager makes one cgroup per run under fixed parents. It is safe for
// concurrent use. A nil *Manager stands for "no cgroups": its Mode is
// ModeNone.
type Manager struct{ manager }

// NewManager detects the hierarchies (once per process), creates the parents
// (writable, with the controllers enabled; see the package doc), and removes
// the run cgroups whose owner is dead. It fails with ErrUnavailable when no
// parent can serve: no hierarchy, a parent that cannot be created or is not
// writable, or memory or pids not delegated.
func NewManager(cfg Config) (*Manager, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	m := &Manager{}
	if err := m.init(cfg); err != nil {
		return nil, err
	}
	return m, nil
}

// Mode reports, for the attestation, where the run's resource controllers
// come from: ModeV2, ModeV1, or ModeNone for a nil Manager.
func (m *Manager) Mode() string {
	if m == nil || m.mode == "" {
		return ModeNone
	}
	return m.mode
}

// Layout is the host's layout, as DetectLayout reported it; LayoutNone for
// a nil Manager.
func (m *Manager) Layout() Layout {
	if m == nil {
		return LayoutNone
	}
	return m.layout
}

// Parents maps each hierarchy the Manager uses ("unified", or the v1
// controllers of a mount joined by commas, such as "memory" or
// "cpu,cpuacct") to the parent directory of its run cgroups.
func (m *Manager) Parents() map[string]string {
	if m == nil {
		return nil
	}
	return m.parents()
}

// CanFreeze reports whether the runs this Manager makes can be frozen: it
// has the unified hierarchy (cgroup.freeze) or the v1 freezer controller.
func (m *Manager) CanFreeze() bool {
	if m == nil {
		return false
	}
	for key := range m.parents() {
		if key == "unified" || slices.Contains(strings.Split(key, ","), Freezer) {
			return true
		}
	}
	return false
}

// New creates the cgroups of one run, named "<host pid>.<host start
// time>-<runID>", and applies l. runID is 1 to 64 of [A-Za-z0-9._-] and must
// be unique among this Manager's live runs. On error nothing is left behind.
func (m *Manager) New(runID string, l Limits) (*Run, error) {
	if m == nil || m.mode == "" {
		return nil, fmt.Errorf("new run cgroup: %w: no Manager (use NewManager)", ErrUnavailable)
	}
	if err := validRunID(runID); err != nil {
		return nil, err
	}
	if err := l.validate(); err != nil {
		return nil, err
	}
	r := &Run{}
	if err := m.newRun(&r.run, runID, l); err != nil {
		return nil, err
	}
	return r, nil
}

func validRunID(id string) error {
	if len(id) == 0 || len(id) > 64 {
		return fmt.Errorf("%w: run id %q: want 1 to 64 characters", ErrInvalid, id)
	}
	for _, c := range id {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("%w: run id %q: only [A-Za-z0-9._-]", ErrInvalid, id)
		}
	}
	return nil
}

// Run is one execution's cgroups: a directory in the unified hierarchy
// (when mounted) and one in each v1 hierarchy the Manager uses. Its methods
// are safe for concurrent use.
type Run struct{ run }

// Name is the run's cgroup directory name, the same in every hierarchy.
func (r *Run) Name() string { return r.name }

// Paths maps each hierarchy, keyed as in Manager.Parents, to the run's
// directory in it.
func (r *Run) Paths() map[string]string { return r.paths() }

// CloneFD is an open directory fd of the run's unified cgroup, for
// SysProcAttr.UseCgroupFD/CgroupFD (CLONE_INTO_CGROUP), or -1 where there is
// no unified mount or the Run is removed. The child must be started with it
// when it is not -1; the fd stays open until Remove.
func (r *Run) CloneFD() int { return r.cloneFD() }

// Attach moves pid into the run's v1 cgroups: the hierarchies CloneFD does
// not cover (all of them where CloneFD is -1). Call it before the child is
// let go, so none of its work escapes the limits.
func (r *Run) Attach(pid int) error { return r.attach(pid) }

// OpenTasks opens the tasks file of each of the run's v1 cgroups (those
// CloneFD does not cover) for writing. A single-threaded child that writes
// "0" to each joins them itself, which takes no global lock in the kernel,
// where Attach's pid written to cgroup.procs takes the threadgroup lock (an
// RCU grace period). The kernel checks the writer's right on the opener's
// credentials. The caller closes the files; none where there is no v1
// hierarchy.
func (r *Run) OpenTasks() ([]*os.File, error) { return r.openTasks() }

// CPU is the CPU time of all the run's processes, exited ones included. It
// is one pread of an fd kept open, cheap enough to poll; ErrNotSupported
// where the host keeps no whole-run CPU.
func (r *Run) CPU() (time.Duration, error) { return r.cpu() }

// Stats reads what the run has consumed so far.
func (r *Run) Stats() (Stats, error) { return r.stats() }

// Events reads Stats' two event counters alone, OOMKills and
// PidsMaxEvents: fewer files than Stats.
func (r *Run) Events() (oomKills, pidsMax int64, err error) { return r.events() }

// Kill sends SIGKILL to every process of the run, those that left the
// process tree (setsid, double fork) included, with cgroup.kill where the
// unified hierarchy is mounted (one write: it takes every process cloned
// or attached into the run; one a caller attached to the run's v1
// directories alone is killed by Remove, which sweeps them all); it does
// not wait for them to exit (Remove does). On a v1-only host, which has no
// atomic kill, it freezes, signals each process and thaws, again until
// none is left (a few seconds at most). A process already gone is no
// error.
func (r *Run) Kill() error { return r.kill() }

// SetLimits sets l on the live run as New did: a pooled sandbox's run takes
// its request's limits at dispatch. The kernel may refuse a memory limit
// below what the run holds already (EBUSY on v1).
func (r *Run) SetLimits(l Limits) error { return r.setLimitsLive(l) }

// ResetPeaks makes Stats' MemoryPeak count from now: v1 resets
// memory.max_usage_in_bytes; v2 resets memory.peak through a descriptor of
// its own (Linux 6.12), which Stats reads from then on, and fails with
// ErrNotSupported where the kernel cannot. No kernel resets pids.peak:
// after ResetPeaks, PidsPeakKnown is false and the caller samples.
func (r *Run) ResetPeaks() error { return r.resetPeaks() }

// Freeze stops every process of the run and returns once all are frozen,
// or with an error after a few seconds. ErrNotSupported where the host has
// no freezer (a v1-only host without the freezer controller).
func (r *Run) Freeze() error { return r.freeze() }

// Thaw lets a frozen run go on.
func (r *Run) Thaw() error { return r.thaw() }

// SwapGuard names the file that keeps the run out of swap:
// "memory.swap.max" (v2), "memory.memsw.limit_in_bytes" (v1 with swap
// accounting), "memory.swappiness" (v1 without; it discourages swapping
// the run's anonymous memory but does not forbid it), or "" where nothing
// does (no memory limit asked for, or a v2 kernel without swap accounting).
func (r *Run) SwapGuard() string { return r.swapGuard }

// Remove kills the run's processes, waits (a few seconds at most) until
// none is left, and removes the run's directory in every hierarchy (an
// opened Run's directories are left to the manager that made them). It is
// idempotent: after a Remove that succeeded, it returns nil.
func (r *Run) Remove() error { return r.remove() }

// Mode is where the run's memory and pids controllers come from: ModeV2,
// ModeV1, or ModeNone where neither is there.
func (r *Run) Mode() string { return r.mode }

// Open returns a Run over the cgroups another manager (a container engine)
// made for the process pid: its unified cgroup (CPU, kill, freeze) and its
// memory and pids cgroups, wherever they are mounted. A hierarchy where pid
// shares this process's cgroup, or one above it, or sits at the root, is
// left out, so that Kill and Freeze never reach the host; with none left it
// fails with ErrInvalid. Attach is refused, and Remove
// kills and waits but removes nothing.
func Open(pid int) (*Run, error) { return open(pid) }

// DetectLayout reports how the cgroup hierarchies are mounted, from
// /proc/self/mountinfo, read once per process.
func DetectLayout() (Layout, error) { return detectLayout() }
