package cgroups

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

const (
	// parentName is the default parent of the run cgroups, in each
	// hierarchy, below the host's own cgroup.
	parentName = "psych"
	// hostLeaf is where the processes of the host's own cgroup go on v2
	// when controllers must be enabled below it (no internal processes).
	hostLeaf = "host"
	// settleTimeout bounds each wait: for a run to empty, to freeze, for
	// an rmdir to stop failing with EBUSY, for the host's cgroup to empty.
	settleTimeout = 5 * time.Second
	// unifiedKey names the unified hierarchy in Parents and Paths.
	unifiedKey = "unified"
)

// neededControllers are the controllers every run gets, from whichever
// hierarchy has them.
var neededControllers = []string{Memory, Pids}

// v1Hier is one v1 hierarchy the Manager uses.
type v1Hier struct {
	key    string   // the mount's controllers joined by ","
	parent string   // parent of the run cgroups
	use    []string // the controllers psych uses from it
}

type manager struct {
	mode    string
	layout  Layout
	owner   Owner
	log     *slog.Logger
	unified string   // parent on the unified hierarchy; "" without a cgroup2 mount
	v2      []string // controllers the runs get from the unified hierarchy
	v1      []v1Hier

	pendMu  sync.Mutex
	pending []string // emptied run directories a Remove could not remove
}

// deferRemoval keeps emptied run directories whose removal failed, for the
// next run's retryPending.
func (m *manager) deferRemoval(dirs []string) {
	m.pendMu.Lock()
	defer m.pendMu.Unlock()
	m.pending = append(m.pending, dirs...)
}

// retryPending removes the run directories an earlier Remove could not;
// those it still cannot remove wait for the next run.
func (m *manager) retryPending() {
	m.pendMu.Lock()
	defer m.pendMu.Unlock()
	var still []string
	for _, d := range m.pending {
		if err := rmdirTree(d); err != nil {
			still = append(still, d)
		}
	}
	if n := len(m.pending) - len(still); n > 0 {
		m.log.Info("cgroups: removed run cgroups an earlier removal left", "count", n)
	}
	m.pending = still
}

func unavailable(action string, err error) error {
	return fmt.Errorf("%s: %w: %w", action, ErrUnavailable, err)
}

func (m *manager) init(cfg Config) error {
	ms, err := hostMounts()
	if err != nil {
		return unavailable("detect cgroups", err)
	}
	return m.initFrom(cfg, ms)
}

// initFrom sets the Manager up on the hierarchies of ms.
func (m *manager) initFrom(cfg Config, ms mounts) (err error) {
	m.layout, m.log = ms.layout(), cfg.Logger
	if m.layout == LayoutNone {
		return fmt.Errorf("detect cgroups: %w: no cgroup hierarchy is mounted", ErrUnavailable)
	}
	if m.owner, err = SelfOwner(); err != nil {
		return err
	}
	own, err := ownCgroups()
	if err != nil {
		return err
	}

	// Where each controller comes from: the unified hierarchy where the
	// kernel offers it there (a controller bound to a v1 hierarchy is
	// missing from the v2 root's cgroup.controllers), else its v1 mount.
	var rootCtrls []string
	if ms.unified != nil {
		b, err := os.ReadFile(filepath.Join(ms.unified.point, "cgroup.controllers"))
		if err != nil {
			return unavailable("read cgroup2 controllers", err)
		}
		rootCtrls = strings.Fields(string(b))
	}
	uses := map[*mountPoint][]string{}
	var v1Order []*mountPoint
	useV1 := func(mp *mountPoint, ctrl string) {
		if _, ok := uses[mp]; !ok {
			v1Order = append(v1Order, mp)
		}
		uses[mp] = append(uses[mp], ctrl)
	}
	for _, c := range neededControllers {
		switch mp := ms.v1For(c); {
		case slices.Contains(rootCtrls, c):
			m.v2 = append(m.v2, c)
		case mp != nil:
			useV1(mp, c)
		default:
			return fmt.Errorf("detect cgroups: %w: the %s controller is in no mounted hierarchy", ErrUnavailable, c)
		}
	}
	if ms.unified == nil {
		// Legacy: kill, freeze and CPU also come from v1.
		for _, c := range []string{Freezer, CPUAcct} {
			if mp := ms.v1For(c); mp != nil {
				useV1(mp, c)
			}
		}
	}

	if ms.unified != nil {
		if m.unified, err = m.unifiedParent(ms.unified, own.unified, cfg.UnifiedParent); err != nil {
			return err
		}
	}
	for _, mp := range v1Order {
		h := v1Hier{key: strings.Join(mp.ctrls, ","), use: uses[mp]}
		if h.parent, err = v1Parent(mp, own, uses[mp], cfg.V1Parents); err != nil {
			return err
		}
		m.v1 = append(m.v1, h)
	}
	m.mode = ModeV2
	if len(m.v2) < len(neededControllers) {
		m.mode = ModeV1
	}
	m.removeStale()
	return nil
}

func (m *manager) parents() map[string]string {
	p := map[string]string{}
	if m.unified != "" {
		p[unifiedKey] = m.unified
	}
	for _, h := range m.v1 {
		p[h.key] = h.parent
	}
	return p
}

// unifiedParent makes the parent of the run cgroups on the unified
// hierarchy, with m.v2 enabled for its children.
func (m *manager) unifiedParent(mp *mountPoint, own, configured string) (string, error) {
	if configured != "" {
		if !under(configured, mp.point) {
			return "", fmt.Errorf("%w: unified parent %s is not on the cgroup2 mount %s", ErrInvalid, configured, mp.point)
		}
		return configured, makeParent(configured, m.v2)
	}
	if own == "" {
		return "", fmt.Errorf("find own cgroup: %w: no unified entry in /proc/self/cgroup", ErrUnavailable)
	}
	ownDir, err := mp.dir(own)
	if err != nil {
		return "", unavailable("find own cgroup", err)
	}
	// A host leaf that a psych host made (this process, before this
	// Manager; another host sharing the cgroup; the parent that started
	// this one): serve from above it. The leaf is known by its sibling
	// parent, which is made before any process is moved.
	if path.Base(ownDir) == hostLeaf && isDir(filepath.Join(path.Dir(ownDir), parentName)) {
		ownDir = path.Dir(ownDir)
	}
	parent := filepath.Join(ownDir, parentName)
	if err := mkdirShared(parent); err != nil {
		return "", unavailable("create cgroup parent", err)
	}
	if err := m.delegateOwn(ownDir, m.v2); err != nil {
		return "", err
	}
	return parent, makeParent(parent, m.v2)
}

// delegateOwn enables ctrls in the host's own cgroup's subtree_control. The
// kernel refuses that (EBUSY) while the cgroup holds processes, except at
// the root: then every process in it (this one, and the others of the same
// unit or session, such as parallel test binaries) moves into the
// <own>/host leaf, as systemd expects of a Delegate=yes service and as
// container inits do. Concurrent hosts sharing the cgroup converge: each
// moves what is left and retries.
func (m *manager) delegateOwn(own string, ctrls []string) error {
	missing, err := missingControllers(own, ctrls)
	if err != nil || len(missing) == 0 {
		return err
	}
	err = enableControllers(own, missing)
	if !errors.Is(err, unix.EBUSY) {
		return err
	}
	leaf := filepath.Join(own, hostLeaf)
	if err := mkdirShared(leaf); err != nil {
		return unavailable("create host leaf cgroup", err)
	}
	moved := 0
	done, err := poll(settleTimeout, func() (bool, error) {
		pids, err := readPids(filepath.Join(own, "cgroup.procs"))
		if err != nil {
			return false, err
		}
		for _, pid := range pids {
			err := writeFile(filepath.Join(leaf, "cgroup.procs"), strconv.Itoa(pid))
			if err != nil && !errors.Is(err, unix.ESRCH) {
				return false, fmt.Errorf("move pid %d into the host leaf: %w", pid, err)
			}
			moved++
		}
		err = enableControllers(own, missing)
		if errors.Is(err, unix.EBUSY) {
			return false, nil
		}
		return err == nil, err
	})
	if err == nil && !done {
		err = fmt.Errorf("processes kept entering %s for %v", own, settleTimeout)
	}
	if err != nil && !errors.Is(err, ErrUnavailable) {
		err = unavailable("enable controllers below own cgroup", err)
	}
	if err != nil {
		return err
	}
	m.log.Info("cgroups: moved the processes of the host's own cgroup into a leaf, so that controllers can be enabled below it",
		"cgroup", own, "leaf", leaf, "moved", moved, "controllers", missing)
	return nil
}

// makeParent creates a parent directory of run cgroups (one that exists is
// fine), enables ctrls for its children and checks that this process may
// create cgroups in it.
func makeParent(dir string, ctrls []string) error {
	if err := mkdirShared(dir); err != nil {
		return unavailable("create cgroup parent", err)
	}
	if err := writable(dir); err != nil {
		return unavailable("create cgroup parent", err)
	}
	missing, err := missingControllers(dir, ctrls)
	if err == nil && len(missing) > 0 {
		err = enableControllers(dir, missing)
	}
	if errors.Is(err, unix.EBUSY) {
		err = unavailable("enable controllers", fmt.Errorf("%s holds processes of its own: %w", dir, err))
	}
	return err
}

// missingControllers lists those of ctrls that dir's subtree_control
// lacks, and fails when dir itself was not given one of them.
func missingControllers(dir string, ctrls []string) ([]string, error) {
	if len(ctrls) == 0 {
		return nil, nil
	}
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.subtree_control"))
	if err != nil {
		return nil, unavailable("read enabled controllers", err)
	}
	enabled := strings.Fields(string(b))
	var missing []string
	for _, c := range ctrls {
		if !slices.Contains(enabled, c) {
			missing = append(missing, c)
		}
	}
	if len(missing) == 0 {
		return nil, nil
	}
	b, err = os.ReadFile(filepath.Join(dir, "cgroup.controllers"))
	if err != nil {
		return nil, unavailable("read available controllers", err)
	}
	avail := strings.Fields(string(b))
	for _, c := range missing {
		if !slices.Contains(avail, c) {
			return nil, fmt.Errorf("enable controllers: %w: the %s controller is not delegated to %s (enable it in the parent's cgroup.subtree_control; under systemd, Delegate=yes)",
				ErrUnavailable, c, dir)
		}
	}
	return missing, nil
}

// enableControllers enables ctrls for dir's children in one write, so the
// kernel applies all or none. EBUSY (dir holds processes) is returned bare
// for delegateOwn.
func enableControllers(dir string, ctrls []string) error {
	err := writeFile(filepath.Join(dir, "cgroup.subtree_control"), "+"+strings.Join(ctrls, " +"))
	if err != nil && !errors.Is(err, unix.EBUSY) {
		return unavailable("enable controllers", err)
	}
	return err
}

// v1Parent makes the parent of the run cgroups on one v1 hierarchy.
func v1Parent(mp *mountPoint, own procCgroups, use []string, configured map[string]string) (string, error) {
	parent := ""
	for _, c := range use {
		p, ok := configured[c]
		if !ok {
			continue
		}
		if parent != "" && p != parent {
			return "", fmt.Errorf("%w: v1 parents %s and %s for controllers of one hierarchy (%s)", ErrInvalid, parent, p, strings.Join(mp.ctrls, ","))
		}
		parent = p
	}
	if parent != "" && !under(parent, mp.point) {
		return "", fmt.Errorf("%w: v1 parent %s is not on the %s mount %s", ErrInvalid, parent, strings.Join(mp.ctrls, ","), mp.point)
	}
	if parent == "" {
		cg, ok := own.v1[mp.ctrls[0]]
		if !ok {
			return "", fmt.Errorf("find own cgroup: %w: no %s entry in /proc/self/cgroup", ErrUnavailable, mp.ctrls[0])
		}
		ownDir, err := mp.dir(cg)
		if err != nil {
			return "", unavailable("find own cgroup", err)
		}
		parent = filepath.Join(ownDir, parentName)
	}
	return parent, makeParent(parent, nil)
}

// removeStale removes the runs whose owner is dead, in every hierarchy at
// once (on a legacy host, its freezer directory must be thawed for the
// others to empty), killing what is left in them. A live owner's runs, this
// Manager's own and any name that is not a run cgroup's are left alone.
// Failures are logged: they do not stop the Manager.
func (m *manager) removeStale() {
	stale := map[string]*run{}
	var names []string
	visit := func(key, parent string, ctrls []string) {
		entries, err := os.ReadDir(parent)
		if err != nil {
			m.log.Warn("cgroups: cannot list run cgroups", "parent", parent, "err", err)
			return
		}
		for _, e := range entries {
			o, ok := parseRunName(e.Name())
			if !ok || !e.IsDir() || o == m.owner || !o.Dead() {
				continue
			}
			r := stale[e.Name()]
			if r == nil {
				r = &run{name: e.Name(), dirs: map[string]string{}, dirFd: -1, cpuFd: -1}
				stale[e.Name()] = r
				names = append(names, e.Name())
			}
			dir := filepath.Join(parent, e.Name())
			r.dirs[key] = dir
			switch {
			case key == unifiedKey:
				r.unified = dir
			case slices.Contains(ctrls, Freezer):
				r.freezer = dir
				fallthrough
			default:
				r.v1 = append(r.v1, dir)
			}
		}
	}
	if m.unified != "" {
		visit(unifiedKey, m.unified, nil)
	}
	for _, h := range m.v1 {
		visit(h.key, h.parent, h.use)
	}
	for _, name := range names {
		r := stale[name]
		if err := r.remove(); err != nil {
			m.log.Warn("cgroups: cannot remove a stale run cgroup", "paths", r.dirs, "err", err)
			continue
		}
		m.log.Info("cgroups: removed a stale run cgroup of a dead host", "paths", r.dirs)
	}
}

// killUnified kills every process in a unified cgroup: cgroup.kill, or
// on kernels before 5.14, which lack it, freeze and signal each. An empty
// cgroup needs no kill, which an unwritable one refuses: that refusal is
// no error.
func killUnified(dir string) error {
	err := writeFile(filepath.Join(dir, "cgroup.kill"), "1")
	if !errors.Is(err, fs.ErrNotExist) {
		if err != nil {
			if empty, uerr := unpopulated(dir); uerr == nil && empty {
				return nil
			}
		}
		return err
	}
	if !isDir(dir) {
		return nil
	}
	// A frozen task still dies of SIGKILL on v2, and cannot fork first.
	if err := writeFile(filepath.Join(dir, "cgroup.freeze"), "1"); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	_, err = signalAll(dir)
	return err
}

// signalAll sends SIGKILL to each process in dir's cgroup.procs and reports
// whether there was none. A directory already gone is empty.
func signalAll(dir string) (bool, error) {
	pids, err := readPids(filepath.Join(dir, "cgroup.procs"))
	if errors.Is(err, fs.ErrNotExist) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	for _, pid := range pids {
		if err := kill(pid, unix.SIGKILL); err != nil {
			return false, fmt.Errorf("kill pid %d: %w", pid, err)
		}
	}
	return len(pids) == 0, nil
}

// unpopulated reports whether a unified cgroup and its descendants hold
// no process ("populated 0" in cgroup.events). A directory already gone
// is unpopulated.
func unpopulated(dir string) (bool, error) {
	n, err := readKeyed(filepath.Join(dir, "cgroup.events"), "populated")
	if errors.Is(err, fs.ErrNotExist) {
		return true, nil
	}
	return n == 0, err
}

// rmdirBusy removes an emptied cgroup directory, retrying while the kernel
// still says EBUSY (exiting tasks are released a moment after they leave
// cgroup.procs). A directory already gone is no error.
func rmdirBusy(dir string) error {
	var last error
	done, err := poll(settleTimeout, func() (bool, error) {
		last = rmdir(dir)
		switch {
		case last == nil, errors.Is(last, fs.ErrNotExist):
			return true, nil
		case errors.Is(last, unix.EBUSY):
			return false, nil
		}
		return false, last
	})
	if err == nil && !done {
		err = last
	}
	return err
}

// rmdirTree removes an emptied cgroup directory and the child cgroups
// made inside it, deepest first.
func rmdirTree(dir string) error {
	// Most often there is no child: one rmdir, without listing the
	// directory's control files first.
	switch err := rmdir(dir); {
	case err == nil, errors.Is(err, fs.ErrNotExist):
		return nil
	case !errors.Is(err, unix.EBUSY) && !errors.Is(err, unix.ENOTEMPTY):
		return err
	}
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.IsDir() {
			if err := rmdirTree(filepath.Join(dir, e.Name())); err != nil {
				return err
			}
		}
	}
	return rmdirBusy(dir)
}

// under reports whether dir lies strictly below mount point mnt.
func under(dir, mnt string) bool {
	return strings.HasPrefix(dir, strings.TrimSuffix(mnt, "/")+"/")
}

func isDir(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}
