package cgroups

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// run is the Linux side of a Run. The paths are fixed at creation; mu
// guards the fds and the removal state.
type run struct {
	name      string
	unified   string   // the run's unified directory; "" without a cgroup2 mount
	v1        []string // the run's directory in each v1 hierarchy
	mem       string   // directory holding the memory.* files
	memV2     bool
	pids      string            // directory holding the pids.* files
	freezer   string            // v1 freezer directory (legacy hosts only)
	dirs      map[string]string // hierarchy key → the run's directory; nil in a Run not made by New
	swapGuard string
	mode      string
	// adopted is a Run of cgroups another manager made (Open): never
	// attached to, never removed.
	adopted bool
	// m made the run (nil where adopted): what Remove cannot remove, m does
	// later.
	m *manager

	mu      sync.Mutex
	dirFd   int // the unified directory, for CLONE_INTO_CGROUP
	cpuFd   int // cpu.stat (unified) or cpuacct.usage (v1)
	cpuV2   bool
	buf     [512]byte
	closing bool // Remove has begun: the fds are closed
	removed bool // Remove succeeded
	// peak is the v2 memory.peak file ResetPeaks reset, read from then on
	// (nil: none; a zero run holds no descriptor); peaksReset says
	// pids.peak, which no kernel resets, is stale.
	peak       *os.File
	peaksReset bool
}

func (m *manager) newRun(r *run, runID string, l Limits) (retErr error) {
	m.retryPending()
	r.m = m
	r.name = m.owner.String() + "-" + runID
	r.mode = m.mode
	r.dirFd, r.cpuFd = -1, -1
	r.dirs = map[string]string{}
	var made []string
	defer func() {
		if retErr != nil {
			closeFd(&r.cpuFd)
			closeFd(&r.dirFd)
			for _, d := range slices.Backward(made) {
				rmdir(d)
			}
		}
	}()
	mkdir := func(key, parent string) (string, error) {
		dir := filepath.Join(parent, r.name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			return "", fmt.Errorf("create run cgroup: %w", err)
		}
		made = append(made, dir)
		r.dirs[key] = dir
		return dir, nil
	}

	var err error
	if m.unified != "" {
		if r.unified, err = mkdir(unifiedKey, m.unified); err != nil {
			return err
		}
		if r.dirFd, err = openFd(r.unified, unix.O_RDONLY|unix.O_DIRECTORY); err != nil {
			return fmt.Errorf("open run cgroup: %w", err)
		}
		if r.cpuFd, err = openFd(filepath.Join(r.unified, "cpu.stat"), unix.O_RDONLY); err != nil {
			return fmt.Errorf("open run cgroup: %w", err)
		}
		r.cpuV2 = true
		if slices.Contains(m.v2, Memory) {
			r.mem, r.memV2 = r.unified, true
		}
		if slices.Contains(m.v2, Pids) {
			r.pids = r.unified
		}
	}
	for _, h := range m.v1 {
		dir, err := mkdir(h.key, h.parent)
		if err != nil {
			return err
		}
		if err := r.useV1(dir, h.use); err != nil {
			return fmt.Errorf("open run cgroup: %w", err)
		}
	}
	return r.setLimits(l)
}

// useV1 takes the controllers ctrls of the run from its v1 directory dir.
func (r *run) useV1(dir string, ctrls []string) error {
	r.v1 = append(r.v1, dir)
	for _, c := range ctrls {
		switch c {
		case Memory:
			r.mem = dir
		case Pids:
			r.pids = dir
		case Freezer:
			r.freezer = dir
		case CPUAcct:
			var err error
			if r.cpuFd, err = openFd(filepath.Join(dir, "cpuacct.usage"), unix.O_RDONLY); err != nil {
				return err
			}
		}
	}
	return nil
}

func (r *run) setLimits(l Limits) error {
	if l.MemoryBytes > 0 {
		v := strconv.FormatInt(l.MemoryBytes, 10)
		if r.memV2 {
			if err := writeFile(filepath.Join(r.mem, "memory.max"), v); err != nil {
				return fmt.Errorf("set memory limit: %w", err)
			}
			// Without swap accounting (CONFIG_MEMCG_SWAP, swapaccount=0)
			// the file is missing and nothing holds swap.
			switch err := writeFile(filepath.Join(r.mem, "memory.swap.max"), "0"); {
			case err == nil:
				r.swapGuard = "memory.swap.max"
			case !errors.Is(err, fs.ErrNotExist):
				return fmt.Errorf("set swap limit: %w", err)
			}
		} else {
			if err := writeFile(filepath.Join(r.mem, "memory.limit_in_bytes"), v); err != nil {
				return fmt.Errorf("set memory limit: %w", err)
			}
			// memory+swap no higher than memory: no swap. It exists only
			// with swap accounting; else swappiness 0 discourages swap.
			switch err := writeFile(filepath.Join(r.mem, "memory.memsw.limit_in_bytes"), v); {
			case err == nil:
				r.swapGuard = "memory.memsw.limit_in_bytes"
			case !errors.Is(err, fs.ErrNotExist):
				return fmt.Errorf("set swap limit: %w", err)
			default:
				switch err := writeFile(filepath.Join(r.mem, "memory.swappiness"), "0"); {
				case err == nil:
					r.swapGuard = "memory.swappiness"
				case !errors.Is(err, fs.ErrNotExist):
					return fmt.Errorf("set swappiness: %w", err)
				}
			}
		}
	}
	if l.Pids > 0 {
		if err := writeFile(filepath.Join(r.pids, "pids.max"), strconv.FormatInt(l.Pids, 10)); err != nil {
			return fmt.Errorf("set pids limit: %w", err)
		}
	}
	return nil
}

func (r *run) paths() map[string]string { return maps.Clone(r.dirs) }

func (r *run) setLimitsLive(l Limits) error {
	if err := r.live(); err != nil {
		return fmt.Errorf("set limits: %w", err)
	}
	if err := l.validate(); err != nil {
		return err
	}
	return r.setLimits(l)
}

func (r *run) resetPeaks() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.liveLocked(); err != nil {
		return fmt.Errorf("reset peaks: %w", err)
	}
	r.peaksReset = true
	switch {
	case r.mem == "":
		return nil
	case !r.memV2:
		if err := writeFile(filepath.Join(r.mem, "memory.max_usage_in_bytes"), "0"); err != nil {
			return fmt.Errorf("reset memory peak: %w", err)
		}
		return nil
	}
	// Linux 6.12: a write to memory.peak resets the mark that this one
	// open file reads.
	if r.peak != nil {
		r.peak.Close()
		r.peak = nil
	}
	f, err := os.OpenFile(filepath.Join(r.mem, "memory.peak"), os.O_RDWR, 0)
	if err != nil { // missing before 5.19, read-only before 6.12
		return fmt.Errorf("reset memory peak: %w: %w", ErrNotSupported, err)
	}
	if _, err := f.Write([]byte("reset\n")); err != nil {
		f.Close()
		return fmt.Errorf("reset memory peak: %w: %w", ErrNotSupported, err)
	}
	r.peak = f
	return nil
}

func (r *run) reset() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.peaksReset
}

// memoryPeakV2 reads memory.peak: through ResetPeaks's file once there is
// one, else by its path.
func (r *run) memoryPeakV2(optional func(string) (int64, bool, error)) (int64, bool, error) {
	r.mu.Lock()
	f := r.peak
	if f == nil {
		r.mu.Unlock()
		return optional(filepath.Join(r.mem, "memory.peak"))
	}
	defer r.mu.Unlock()
	var b [32]byte
	n, err := f.ReadAt(b[:], 0)
	if err != nil && n == 0 {
		return 0, false, err
	}
	v, err := strconv.ParseInt(string(bytes.TrimSpace(b[:n])), 10, 64)
	return v, err == nil, err
}

func (r *run) cloneFD() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.dirs == nil {
		return -1
	}
	return r.dirFd
}

// live fails once Remove has begun, and for a Run not made by New.
func (r *run) live() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.liveLocked()
}

func (r *run) liveLocked() error {
	switch {
	case r.dirs == nil:
		return fmt.Errorf("%w: a Run not made by Manager.New", ErrInvalid)
	case r.closing:
		return fmt.Errorf("%s: %w", r.name, ErrRemoved)
	}
	return nil
}

func (r *run) attach(pid int) error {
	if err := r.live(); err != nil {
		return fmt.Errorf("attach pid %d: %w", pid, err)
	}
	if r.adopted {
		return fmt.Errorf("attach pid %d: %w: the cgroups are another manager's", pid, ErrInvalid)
	}
	for _, dir := range r.v1 {
		if err := writeFile(filepath.Join(dir, "cgroup.procs"), strconv.Itoa(pid)); err != nil {
			return fmt.Errorf("attach pid %d: %w", pid, err)
		}
	}
	return nil
}

func (r *run) openTasks() ([]*os.File, error) {
	if err := r.live(); err != nil {
		return nil, fmt.Errorf("open tasks: %w", err)
	}
	if r.adopted {
		return nil, fmt.Errorf("open tasks: %w: the cgroups are another manager's", ErrInvalid)
	}
	var files []*os.File
	for _, dir := range r.v1 {
		f, err := os.OpenFile(filepath.Join(dir, "tasks"), os.O_WRONLY, 0) // os opens close-on-exec
		if err != nil {
			for _, f := range files {
				f.Close()
			}
			return nil, fmt.Errorf("open tasks: %w", err)
		}
		files = append(files, f)
	}
	return files, nil
}

func (r *run) cpu() (time.Duration, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.liveLocked(); err != nil {
		return 0, fmt.Errorf("read run cpu: %w", err)
	}
	if r.cpuFd < 0 {
		return 0, fmt.Errorf("read run cpu: %w: no cpu accounting (v1 without cpuacct)", ErrNotSupported)
	}
	n, err := preadFd(r.cpuFd, r.buf[:])
	if err != nil {
		return 0, fmt.Errorf("read run cpu: %w", err)
	}
	b := r.buf[:n]
	if r.cpuV2 {
		// cpu.stat: "usage_usec N" comes first; the rest may not fit.
		if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
			b = b[:i]
		}
		if us, ok := keyed(b, "usage_usec"); ok {
			return time.Duration(us) * time.Microsecond, nil
		}
		return 0, fmt.Errorf("read run cpu: no usage_usec in cpu.stat")
	}
	ns, err := strconv.ParseInt(string(bytes.TrimSpace(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("read run cpu: parse cpuacct.usage: %w", err)
	}
	return time.Duration(ns), nil
}

func (r *run) stats() (Stats, error) {
	var s Stats
	var err error
	switch s.CPU, err = r.cpu(); {
	case err == nil:
		s.CPUKnown = true
	case !errors.Is(err, ErrNotSupported):
		return Stats{}, err
	}
	wrap := func(err error) (Stats, error) { return Stats{}, fmt.Errorf("read run stats: %w", err) }
	// optional reads a file newer kernels have: missing, it is unknown.
	optional := func(path string) (int64, bool, error) {
		n, err := readInt(path)
		if errors.Is(err, fs.ErrNotExist) {
			return 0, false, nil
		}
		return n, err == nil, err
	}

	if r.memV2 {
		if s.MemoryCurrent, err = readInt(filepath.Join(r.mem, "memory.current")); err != nil {
			return wrap(err)
		}
		if s.MemoryPeak, s.MemoryPeakKnown, err = r.memoryPeakV2(optional); err != nil {
			return wrap(err)
		}
		if s.OOMKills, err = r.oomKills(); err != nil {
			return wrap(err)
		}
	} else if r.mem != "" {
		if s.MemoryCurrent, err = readInt(filepath.Join(r.mem, "memory.usage_in_bytes")); err != nil {
			return wrap(err)
		}
		if s.MemoryPeak, err = readInt(filepath.Join(r.mem, "memory.max_usage_in_bytes")); err != nil {
			return wrap(err)
		}
		s.MemoryPeakKnown = true
		if s.OOMKills, err = r.oomKills(); err != nil {
			return wrap(err)
		}
	}
	if r.pids != "" {
		if s.PidsCurrent, err = readInt(filepath.Join(r.pids, "pids.current")); err != nil {
			return wrap(err)
		}
		if s.PidsPeak, s.PidsPeakKnown, err = optional(filepath.Join(r.pids, "pids.peak")); err != nil {
			return wrap(err)
		}
		if r.reset() {
			s.PidsPeak, s.PidsPeakKnown = 0, false
		}
		if s.PidsMaxEvents, err = readKeyed(filepath.Join(r.pids, "pids.events"), "max"); err != nil {
			return wrap(err)
		}
	}
	return s, nil
}

// oomKills reads the OOM kills (see Stats.OOMKills); 0 without memory.
func (r *run) oomKills() (int64, error) {
	switch {
	case r.memV2:
		return readKeyed(filepath.Join(r.mem, "memory.events"), "oom_kill")
	case r.mem == "":
		return 0, nil
	}
	b, err := readSmall(filepath.Join(r.mem, "memory.oom_control"))
	if err != nil {
		return 0, err
	}
	if n, ok := keyed(b, "oom_kill"); ok {
		return n, nil
	}
	// Before Linux 4.13: the limit's hit count stands in.
	return readInt(filepath.Join(r.mem, "memory.failcnt"))
}

func (r *run) events() (oomKills, pidsMax int64, err error) {
	if err := r.live(); err != nil {
		return 0, 0, fmt.Errorf("read run events: %w", err)
	}
	if oomKills, err = r.oomKills(); err != nil {
		return 0, 0, fmt.Errorf("read run events: %w", err)
	}
	if r.pids != "" {
		if pidsMax, err = readKeyed(filepath.Join(r.pids, "pids.events"), "max"); err != nil {
			return 0, 0, fmt.Errorf("read run events: %w", err)
		}
	}
	return oomKills, pidsMax, nil
}

func (r *run) kill() error {
	r.mu.Lock()
	removed := r.removed || r.dirs == nil
	r.mu.Unlock()
	if removed {
		return nil
	}
	if r.unified != "" {
		// cgroup.kill is atomic: it also takes the forks in flight. One
		// write, the whole of it on a run's path: the sweep of the v1
		// directories is Remove's.
		if err := killUnified(r.unified); err != nil {
			return fmt.Errorf("kill run: %w", err)
		}
		return nil
	}
	// v1 has no atomic kill: repeat until no process is left.
	empty, err := poll(settleTimeout, r.killOnce)
	if err == nil && !empty {
		err = fmt.Errorf("processes left after %v", settleTimeout)
	}
	if err != nil {
		return fmt.Errorf("kill run: %w", err)
	}
	return nil
}

// killOnce sends SIGKILL to every process of the run and reports whether
// none is left in it.
func (r *run) killOnce() (bool, error) {
	empty := true
	if r.unified != "" {
		if err := killUnified(r.unified); err != nil {
			return false, err
		}
		var err error
		if empty, err = unpopulated(r.unified); err != nil {
			return false, err
		}
	} else if r.freezer != "" {
		// v1 freezer: freeze so that nothing forks while it is signalled,
		// signal, thaw so that the signals are delivered.
		state := filepath.Join(r.freezer, "freezer.state")
		if err := writeFile(state, "FROZEN"); errors.Is(err, fs.ErrNotExist) {
			return true, nil // removed meanwhile
		} else if err != nil {
			return false, err
		}
		poll(settleTimeout/5, func() (bool, error) { return v1Frozen(r.freezer) })
		_, err := signalAll(r.freezer)
		if terr := writeFile(state, "THAWED"); err == nil {
			err = terr
		}
		if err != nil {
			return false, err
		}
	}
	// The v1 directories too: a process attached to them but, by a
	// caller's mistake, not cloned into the unified one is not spared.
	for _, dir := range r.v1 {
		e, err := signalAll(dir)
		if err != nil {
			return false, err
		}
		empty = empty && e
	}
	return empty, nil
}

func v1Frozen(dir string) (bool, error) {
	b, err := readSmall(filepath.Join(dir, "freezer.state"))
	return string(bytes.TrimSpace(b)) == "FROZEN", err
}

func (r *run) freeze() error {
	if err := r.live(); err != nil {
		return fmt.Errorf("freeze run: %w", err)
	}
	var frozen func() (bool, error)
	switch {
	case r.unified != "":
		if err := writeFile(filepath.Join(r.unified, "cgroup.freeze"), "1"); err != nil {
			return fmt.Errorf("freeze run: %w", err)
		}
		frozen = func() (bool, error) {
			n, err := readKeyed(filepath.Join(r.unified, "cgroup.events"), "frozen")
			return n == 1, err
		}
	case r.freezer != "":
		if err := writeFile(filepath.Join(r.freezer, "freezer.state"), "FROZEN"); err != nil {
			return fmt.Errorf("freeze run: %w", err)
		}
		frozen = func() (bool, error) { return v1Frozen(r.freezer) }
	default:
		return fmt.Errorf("freeze run: %w: no freezer (v1 without the freezer controller)", ErrNotSupported)
	}
	ok, err := poll(settleTimeout, frozen)
	if err == nil && !ok {
		err = fmt.Errorf("not frozen after %v", settleTimeout)
	}
	if err != nil {
		return fmt.Errorf("freeze run: %w", err)
	}
	return nil
}

func (r *run) thaw() error {
	if err := r.live(); err != nil {
		return fmt.Errorf("thaw run: %w", err)
	}
	var err error
	switch {
	case r.unified != "":
		err = writeFile(filepath.Join(r.unified, "cgroup.freeze"), "0")
	case r.freezer != "":
		err = writeFile(filepath.Join(r.freezer, "freezer.state"), "THAWED")
	default:
		err = fmt.Errorf("%w: no freezer (v1 without the freezer controller)", ErrNotSupported)
	}
	if err != nil {
		return fmt.Errorf("thaw run: %w", err)
	}
	return nil
}

func (r *run) remove() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.removed || r.dirs == nil {
		return nil
	}
	r.closing = true
	closeFd(&r.cpuFd)
	closeFd(&r.dirFd)
	if r.peak != nil {
		r.peak.Close()
		r.peak = nil
	}

	empty, err := poll(settleTimeout, r.killOnce)
	if err == nil && !empty {
		err = fmt.Errorf("processes left after %v", settleTimeout)
	}
	if err != nil {
		return fmt.Errorf("remove run cgroup %s: %w", r.name, err)
	}
	if r.adopted {
		r.removed = true // the directories are their manager's to remove
		return nil
	}
	// One hierarchy's removal does not wait for another's.
	dirs := slices.Sorted(maps.Values(r.dirs))
	rmErrs := make([]error, len(dirs))
	var wg sync.WaitGroup
	for i, dir := range dirs {
		wg.Go(func() { rmErrs[i] = rmdirTree(dir) })
	}
	wg.Wait()
	var errs []error
	var left []string
	for i, err := range rmErrs {
		if err != nil {
			errs = append(errs, fmt.Errorf("remove run cgroup: %w", err))
			left = append(left, dirs[i])
		}
	}
	if len(errs) > 0 && r.m != nil {
		// Empty, so nothing runs in them: their manager removes them later.
		r.m.deferRemoval(left)
		r.removed = true
		return fmt.Errorf("%w: %w", ErrRemoveDeferred, errors.Join(errs...))
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	r.removed = true
	return nil
}
