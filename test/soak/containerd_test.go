//go:build linux && cgo

package soak

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/psych-runtime/psych/internal/testutil"
	"github.com/psych-runtime/psych/sandbox"
	"github.com/psych-runtime/psych/sandbox/container"
)

// openContainerd opens the container backend on the containerd at addr
// ("" for the default) with cfg's other fields, or skips where this host
// cannot have it: not root, or (outside CI) no reachable containerd or no
// image. In CI a missing engine or image fails instead.
func openContainerd(t *testing.T, addr string, cfg container.Config) *container.Sandbox {
	t.Helper()
	testutil.RequireRoot(t, "the container backend needs a root host")
	cfg.Engine, cfg.ContainerdAddress = container.Containerd, addr
	if cfg.Image == "" {
		cfg.Image = testutil.Image()
	}
	s, err := container.New(cfg)
	if err != nil {
		if (errors.Is(err, container.ErrEngineUnreachable) || errors.Is(err, container.ErrImageNotFound)) && !testutil.InCI() {
			t.Skipf("containerd: %v (scripts/engines.sh start and make image prepare it; CI does)", err)
		}
		t.Fatalf("container.New: %v", err)
	}
	return s
}

// containerdTarget is the container backend on the shared containerd.
func containerdTarget() *target {
	return &target{
		name: "containerd",
		open: func(t *testing.T) (sandbox.Sandbox, func() error) {
			s := openContainerd(t, "", container.Config{EnvAllowlist: []string{markerEnv}})
			return s, s.Close
		},
		leftovers: func(t *testing.T) []string {
			return containerdLeftovers(t, container.DefaultContainerdAddress, container.DefaultRunBase)
		},
		clean: func(left []string) {
			removeRuns(container.DefaultContainerdAddress, left)
		},
	}
}

// removeRuns removes, as well as it can, the containers, tasks, snapshots,
// processes, mounts and cgroups of the runs named in left: what a known
// issue leaves on a shared daemon must not stay there.
func removeRuns(addr string, left []string) {
	ids := map[string]bool{}
	for _, l := range left {
		if id := runIDRe.FindString(l); id != "" {
			ids[id] = true
		}
	}
	for id := range ids {
		ctr := func(args ...string) {
			exec.Command("ctr", append([]string{"-a", addr, "-n", container.DefaultNamespace}, args...)...).Run()
		}
		ctr("tasks", "kill", "-a", "-s", "SIGKILL", id)
		// A task with no container has a shim started with its id: it and
		// what is in the cgroups go, whatever containerd knows.
		cgs, _ := filepath.Glob("/sys/fs/cgroup/*/" + container.DefaultNamespace + "/" + id)
		for _, cg := range cgs {
			if b, err := os.ReadFile(filepath.Join(cg, "cgroup.procs")); err == nil {
				for _, p := range strings.Fields(string(b)) {
					if pid, err := strconv.Atoi(p); err == nil {
						syscall.Kill(pid, syscall.SIGKILL)
					}
				}
			}
		}
		ctr("tasks", "delete", "-f", id)
		ctr("containers", "delete", id)
		ctr("snapshots", "--snapshotter", "overlayfs", "rm", id)
		for _, m := range mountsWith(id) {
			if f := strings.Fields(strings.TrimPrefix(m, "mount ")); len(f) > 4 {
				unix.Unmount(f[4], unix.MNT_DETACH)
			}
		}
		for _, cg := range cgs {
			for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
				if err := syscall.Rmdir(cg); err == nil || errors.Is(err, syscall.ENOENT) {
					break
				}
			}
		}
		paths, _ := filepath.Glob("/proc/[0-9]*/cmdline")
		for _, p := range paths {
			if b, err := os.ReadFile(p); err == nil && bytes.Contains(b, []byte("containerd-shim")) && bytes.Contains(b, []byte(id)) {
				var pid int
				fmt.Sscanf(p, "/proc/%d/cmdline", &pid)
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
}

// runIDRe matches a container run's id, psych-OWNER-RANDOM.
var runIDRe = regexp.MustCompile(`psych-[0-9]+\.[0-9]+-[0-9a-f]{12}`)

// containerdLeftovers lists what this host left of its container runs:
// containers, tasks and snapshots at the engine (named and labelled after
// the owner), run, scratch and boot directories under runBase, the
// containers' cgroups, mounts.
func containerdLeftovers(t *testing.T, addr, runBase string) []string {
	owner := selfOwner()
	id := "psych-" + owner + "-"
	var out []string
	ctr := func(args ...string) []string {
		b, err := exec.Command("ctr", append([]string{"-a", addr, "-n", container.DefaultNamespace}, args...)...).CombinedOutput()
		if err != nil {
			return []string{fmt.Sprintf("ctr %v: %v: %s", args, err, b)}
		}
		var lines []string
		for _, l := range strings.Split(string(b), "\n") {
			if strings.Contains(l, id) || strings.Contains(l, owner) {
				lines = append(lines, "ctr "+args[0]+": "+strings.Join(strings.Fields(l), " "))
			}
		}
		return lines
	}
	out = append(out, ctr("containers", "ls")...)
	out = append(out, ctr("tasks", "ls")...)
	out = append(out, ctr("snapshots", "--snapshotter", "overlayfs", "ls")...)
	for _, dir := range []string{runBase, filepath.Join(runBase, "runs"), filepath.Join(runBase, "mnt")} {
		out = append(out, entriesWithPrefix(dir, owner+"-")...)
	}
	parents, _ := filepath.Glob("/sys/fs/cgroup/*/" + container.DefaultNamespace)
	for _, p := range parents {
		out = append(out, cgroupsOf(p, id)...)
	}
	return append(out, mountsWith(id, runBase+"/runs/"+owner+"-", runBase+"/mnt/"+owner+"-", runBase+"/"+owner+"-")...)
}

// TestSoakContainerd soaks the container backend on containerd.
func TestSoakContainerd(t *testing.T) {
	soakGuard(t)
	soak(t, containerdTarget())
}
