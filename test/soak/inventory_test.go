//go:build linux && cgo

package soak

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/psych-runtime/psych/cgroups"
	"github.com/psych-runtime/psych/internal/testutil"
	"github.com/psych-runtime/psych/sandbox/container"
)

// TestLeftoversSeen plants one of each thing the soak looks for and checks
// that the inventory reports it: a check that cannot see a leak proves
// nothing.
func TestLeftoversSeen(t *testing.T) {
	requireRoot(t)
	owner := selfOwner()
	base := publicDir(t, "inventory")
	want := func(what string, list []string, sub string) {
		t.Helper()
		if !slices.ContainsFunc(list, func(l string) bool { return strings.Contains(l, sub) }) {
			t.Errorf("the inventory does not see %s (%s) in %v", what, sub, list)
		}
	}

	dir := filepath.Join(base, owner+"-0123456789ab")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	mountTmpfs(t, dir, "size=64k")
	m, err := cgroups.NewManager(cgroups.Config{})
	if err != nil {
		t.Fatal(err)
	}
	for _, parent := range m.Parents() {
		cg := filepath.Join(parent, owner+"-planted")
		if err := os.Mkdir(cg, 0o755); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { unix.Rmdir(cg) })
	}
	left := subprocessLeftovers(base, cgroups.Config{})
	want("a run directory", left, dir)
	want("a mount under a run directory", left, "mount ")
	for _, parent := range m.Parents() {
		want("a run cgroup", left, filepath.Join(parent, owner+"-planted"))
	}

	marker := newMarker("psych-soak-planted-")
	for _, how := range []string{"argv", "environ"} {
		cmd := exec.Command("sleep", "60")
		if how == "argv" {
			cmd = exec.Command("sh", "-c", "sleep 60; : "+marker)
		} else {
			cmd.Env = []string{markerEnv + "=" + marker}
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Until the child has exec'd, its cmdline is this test's: wait for
		// the exec, not for the inventory.
		testutil.WaitFor(t, 5*time.Second, "a process with the marker in its "+how, func() bool { return len(processesWith(marker)) > 0 })
		want("a process with the marker in its "+how, processesWith(marker), "process ")
		cmd.Process.Kill()
		cmd.Wait()
	}
	if left := processesWith(marker); len(left) > 0 {
		t.Errorf("killed processes still seen: %v", left)
	}

	if ip, err := exec.LookPath("ip"); err == nil {
		ns := newMarker("psych-soak-")
		if out, err := exec.Command(ip, "netns", "add", ns).CombinedOutput(); err != nil {
			t.Logf("ip netns add: %v: %s (the named-netns check goes unproved here)", err, out)
		} else {
			want("a named network namespace", namedNetns(), ns)
			exec.Command(ip, "netns", "delete", ns).Run()
		}
	}

	if _, err := exec.LookPath("ctr"); err != nil || exec.Command("ctr", "version").Run() != nil {
		t.Log("no containerd here: the engine's inventory goes unproved")
		return
	}
	id := "psych-" + owner + "-0123456789ab"
	if out, err := exec.Command("ctr", "-n", container.DefaultNamespace, "containers", "create", testutil.Image(), id).CombinedOutput(); err != nil {
		t.Logf("ctr containers create: %v: %s (the engine's inventory goes unproved)", err, out)
		return
	}
	t.Cleanup(func() { removeRuns(container.DefaultContainerdAddress, []string{id}) })
	left = containerdLeftovers(t, container.DefaultContainerdAddress, base)
	want("a container", left, "ctr containers: "+id)
	want("a snapshot", left, "ctr snapshots: "+id)
}
