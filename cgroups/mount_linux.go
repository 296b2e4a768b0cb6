package cgroups

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path"
	"slices"
	"strings"
	"sync"

	"github.com/moby/sys/mountinfo"
)

// mountPoint is one cgroup hierarchy as mounted.
type mountPoint struct {
	point string   // where it is mounted
	root  string   // the cgroup shown at point ("/" unless a bind or cgroup-namespace mount)
	ctrls []string // v1: the controllers bound to the hierarchy; v2: none
}

// dir is the directory of cgroup cg (a path from /proc/PID/cgroup) under
// this mount.
func (mp *mountPoint) dir(cg string) (string, error) {
	if !strings.HasPrefix(cg, "/") || strings.Contains(cg+"/", "/../") {
		return "", fmt.Errorf("cgroup %q is outside this cgroup namespace", cg)
	}
	rel := cg
	if mp.root != "/" {
		var ok bool
		if rel, ok = strings.CutPrefix(cg, mp.root); !ok || rel != "" && rel[0] != '/' {
			return "", fmt.Errorf("cgroup %s is outside the mount at %s (root %s)", cg, mp.point, mp.root)
		}
	}
	return path.Join(mp.point, "/"+rel), nil
}

// mounts is what /proc/self/mountinfo says of the cgroup hierarchies.
type mounts struct {
	unified *mountPoint
	v1      []mountPoint // controller hierarchies; named ones (name=systemd) left out
}

func (ms *mounts) layout() Layout {
	switch {
	case ms.unified != nil && len(ms.v1) > 0:
		return LayoutHybrid
	case ms.unified != nil:
		return LayoutUnified
	case len(ms.v1) > 0:
		return LayoutLegacy
	}
	return LayoutNone
}

// v1For is the v1 hierarchy the controller is bound to, or nil.
func (ms *mounts) v1For(ctrl string) *mountPoint {
	for i := range ms.v1 {
		if slices.Contains(ms.v1[i].ctrls, ctrl) {
			return &ms.v1[i]
		}
	}
	return nil
}

// v1Controllers are the kernel's v1 controller names: a v1 mount with none
// of them (name=systemd) carries no resource control.
var v1Controllers = []string{
	"cpuset", "cpu", "cpuacct", "blkio", "io", "memory", "devices", "freezer",
	"net_cls", "perf_event", "net_prio", "hugetlb", "pids", "rdma", "misc", "debug",
}

// parseMountinfo reads the cgroup mounts from a mountinfo file
// (proc_pid_mountinfo(5), read by moby/sys/mountinfo). Where a hierarchy is
// mounted more than once, the first mount wins, as it is the one mounted
// first (/sys/fs/cgroup).
func parseMountinfo(r io.Reader) (mounts, error) {
	infos, err := mountinfo.GetMountsFromReader(r, mountinfo.FSTypeFilter("cgroup", "cgroup2"))
	if err != nil {
		return mounts{}, fmt.Errorf("read mountinfo: %w", err)
	}
	var ms mounts
	for _, m := range infos {
		mp := mountPoint{root: m.Root, point: m.Mountpoint}
		switch m.FSType {
		case "cgroup2":
			if ms.unified == nil {
				ms.unified = &mp
			}
		case "cgroup":
			for _, o := range strings.Split(m.VFSOptions, ",") {
				if slices.Contains(v1Controllers, o) {
					mp.ctrls = append(mp.ctrls, o)
				}
			}
			if len(mp.ctrls) > 0 && ms.v1For(mp.ctrls[0]) == nil {
				ms.v1 = append(ms.v1, mp)
			}
		}
	}
	return ms, nil
}

// hostMounts reads /proc/self/mountinfo once per process.
var hostMounts = sync.OnceValues(func() (mounts, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return mounts{}, fmt.Errorf("detect cgroup layout: %w", err)
	}
	defer f.Close()
	return parseMountinfo(f)
})

func detectLayout() (Layout, error) {
	ms, err := hostMounts()
	if err != nil {
		return LayoutNone, err
	}
	return ms.layout(), nil
}

// procCgroups is a process's membership, from /proc/PID/cgroup.
type procCgroups struct {
	unified string            // the "0::" line; "" without one
	v1      map[string]string // controller → cgroup
}

func parseProcCgroup(r io.Reader) (procCgroups, error) {
	pc := procCgroups{v1: map[string]string{}}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		// ID:CONTROLLERS:PATH; the path may hold ':'.
		f := strings.SplitN(sc.Text(), ":", 3)
		if len(f) != 3 {
			continue
		}
		if f[0] == "0" && f[1] == "" {
			pc.unified = f[2]
			continue
		}
		for _, c := range strings.Split(f[1], ",") {
			pc.v1[c] = f[2]
		}
	}
	if err := sc.Err(); err != nil {
		return procCgroups{}, fmt.Errorf("read cgroup membership: %w", err)
	}
	return pc, nil
}

func ownCgroups() (procCgroups, error) {
	f, err := os.Open("/proc/self/cgroup")
	if err != nil {
		return procCgroups{}, fmt.Errorf("read own cgroup: %w", err)
	}
	defer f.Close()
	return parseProcCgroup(f)
}
