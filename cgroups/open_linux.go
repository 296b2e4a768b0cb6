package cgroups

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// open builds a Run over the cgroups pid is in (see Open).
func open(pid int) (*Run, error) {
	ms, err := hostMounts()
	if err != nil {
		return nil, err
	}
	f, err := os.Open(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return nil, fmt.Errorf("open the cgroups of pid %d: %w", pid, err)
	}
	pc, err := parseProcCgroup(f)
	f.Close()
	if err != nil {
		return nil, err
	}
	own, err := ownCgroups()
	if err != nil {
		return nil, err
	}
	// A cgroup this process shares, or a hierarchy's root, is no run's own:
	// killing or freezing it would reach the host. Such a hierarchy is left
	// out.
	dedicated := func(mine, theirs string) bool {
		// Nor one that holds this process below it: its kill would too.
		return theirs != "" && theirs != "/" && theirs != mine && !strings.HasPrefix(mine, theirs+"/")
	}
	r := &Run{}
	r.dirFd, r.cpuFd = -1, -1
	r.adopted = true
	r.dirs = map[string]string{}
	if ms.unified != nil && dedicated(own.unified, pc.unified) {
		if r.unified, err = ms.unified.dir(pc.unified); err != nil {
			return nil, err
		}
		r.dirs[unifiedKey] = r.unified
		if r.cpuFd, err = openFd(filepath.Join(r.unified, "cpu.stat"), unix.O_RDONLY); err != nil {
			return nil, fmt.Errorf("open the cgroups of pid %d: %w", pid, err)
		}
		r.cpuV2 = true
		ctrls, _ := os.ReadFile(filepath.Join(r.unified, "cgroup.controllers"))
		have := strings.Fields(string(ctrls))
		if slices.Contains(have, Memory) {
			r.mem, r.memV2 = r.unified, true
		}
		if slices.Contains(have, Pids) {
			r.pids = r.unified
		}
	}
	for _, mp := range ms.v1 {
		var use []string
		for _, c := range mp.ctrls {
			if c == Memory && r.mem == "" || c == Pids && r.pids == "" || c == Freezer && r.unified == "" || c == CPUAcct && r.cpuFd < 0 {
				use = append(use, c)
			}
		}
		if len(use) == 0 {
			continue
		}
		theirs := pc.v1[use[0]]
		if !dedicated(own.v1[use[0]], theirs) {
			continue
		}
		dir, err := mp.dir(theirs)
		if err != nil {
			r.close()
			return nil, err
		}
		r.dirs[strings.Join(mp.ctrls, ",")] = dir
		if err := r.useV1(dir, use); err != nil {
			r.close()
			return nil, fmt.Errorf("open the cgroups of pid %d: %w", pid, err)
		}
	}
	if len(r.dirs) == 0 {
		return nil, fmt.Errorf("%w: pid %d is in no cgroup of its own (%+v; this process's: %+v)", ErrInvalid, pid, pc, own)
	}
	switch {
	case r.memV2 && r.pids == r.unified:
		r.mode = ModeV2
	case r.mem != "" || r.pids != "":
		r.mode = ModeV1
	default:
		r.mode = ModeNone
	}
	return r, nil
}

func (r *run) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closing = true
	closeFd(&r.cpuFd)
	closeFd(&r.dirFd)
}
