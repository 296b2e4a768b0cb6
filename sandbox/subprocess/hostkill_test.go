//go:build linux && cgo

package subprocess

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/psych-runtime/psych/cgroups"
	"github.com/psych-runtime/psych/internal/testutil"
	"github.com/psych-runtime/psych/nsexec"
	"github.com/psych-runtime/psych/sandbox"
	"github.com/psych-runtime/psych/test/contract"
)

// The host helper: a process that starts one run and blocks in it until it
// is killed, standing in for a host that dies mid-run.
// The test binary's helpers: a second host for TestPoolHostKilled, the
// fallback's probe, and a host whose run leaves a sleeper tagged with its
// argument.
const hostHelper = "subprocess-host"

func init() {
	testutil.Register(poolHostHelper, poolHost)
	testutil.Register(fallbackHelperName, func(string) int {
		fallbackHelper()
		return 0
	})
	testutil.Register(hostHelper, hostWithSleeper)
}

func TestMain(m *testing.M) { testutil.Main(m) }

// hostWithSleeper is a host whose run starts a setsid'd sleeper tagged
// marker and sleeps; it waits to be killed.
func hostWithSleeper(marker string) int {
	s, err := New(Config{PythonBin: testPython(), AllowSameUID: os.Geteuid() != 0})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	code := "import subprocess, sys, time\n" +
		"subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)', '" + marker + "'], start_new_session=True)\n" +
		"time.sleep(300)"
	s.Run(context.Background(), sandbox.Request{Code: code, Limits: sandbox.Limits{WallSeconds: 600}})
	return 0
}

// startHost starts a helper host whose run leaves a setsid'd sleeper tagged
// marker, and waits until that sleeper runs.
func startHost(t *testing.T, marker string) *exec.Cmd {
	t.Helper()
	cmd := testutil.HelperCommand(hostHelper, marker)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		exec.Command("pkill", "-f", marker).Run()
		New(Config{PythonBin: testPython(), AllowSameUID: os.Geteuid() != 0}) // removes what it left
	})
	deadline := time.Now().Add(20 * time.Second)
	for len(contract.ProcessesWith(marker)) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the helper host's run never started its sleeper")
		}
		time.Sleep(20 * time.Millisecond)
	}
	return cmd
}

// forkServersOf lists the fork servers whose parent is pid. A run's init,
// cloned from one, shows the same environment but lives in a pid
// namespace of its own.
func forkServersOf(pid int) []int {
	var out []int
	hostNS, _ := os.Readlink("/proc/self/ns/pid")
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		env, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if !slices.Contains(strings.Split(string(env), "\x00"), nsexec.Marker+"="+nsexec.MarkerForkServer) {
			continue
		}
		if ns, _ := os.Readlink(filepath.Join("/proc", e.Name(), "ns/pid")); ns != hostNS {
			continue
		}
		if st, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat")); err == nil {
			f := strings.Fields(string(st[strings.LastIndexByte(string(st), ')')+1:]))
			if len(f) > 1 && f[1] == strconv.Itoa(pid) {
				out = append(out, p)
			}
		}
	}
	return out
}

// alive is a pid that runs (not gone, not a zombie).
func alive(pid int) bool {
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	f := strings.Fields(string(st[strings.LastIndexByte(string(st), ')')+1:]))
	return len(f) > 0 && f[0] != "Z" && f[0] != "X"
}

// ownedBy lists the entries of dir (run directories or run cgroups) named
// after the host process pid.
func ownedBy(dir string, pid int) []string {
	var out []string
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		head, _, _ := strings.Cut(e.Name(), "-")
		if o, ok := cgroups.ParseOwner(head); ok && o.PID == pid {
			out = append(out, filepath.Join(dir, e.Name()))
		}
	}
	return out
}

// TestHostKilledMidRun: a host killed mid-run takes its run's processes
// with it (the init exits on the sync socket's EOF) and leaves its run
// cgroup and run directory behind; the next construction removes those, and
// leaves a live sibling host's run alone.
func TestHostKilledMidRun(t *testing.T) {
	requireRoot(t)
	probe := newTestSandbox(t, Config{})
	if probe.cg == nil {
		t.Fatal("no run cgroup on a root host")
	}
	dead := fmt.Sprintf("psych-dead-host-%d", time.Now().UnixNano())
	live := fmt.Sprintf("psych-live-host-%d", time.Now().UnixNano())
	victim := startHost(t, dead)
	sibling := startHost(t, live)

	victimDirs := ownedBy(probe.cfg.TmpBase, victim.Process.Pid)
	victimCgroups := runCgroupsOf(probe, victim.Process.Pid)
	siblingDirs := ownedBy(probe.cfg.TmpBase, sibling.Process.Pid)
	siblingCgroups := runCgroupsOf(probe, sibling.Process.Pid)
	nh := len(probe.cg.Parents())
	if len(victimDirs) != 1 || len(victimCgroups) != nh || len(siblingDirs) != 1 || len(siblingCgroups) != nh {
		t.Fatalf("expected one run dir and cgroup per host: %v %v %v %v", victimDirs, victimCgroups, siblingDirs, siblingCgroups)
	}
	servers := forkServersOf(victim.Process.Pid)
	if len(servers) != 1 {
		t.Fatalf("the helper host has fork servers %v; want one", servers)
	}
	victim.Process.Signal(syscall.SIGKILL)
	victim.Wait()
	// The init sees its sync socket close and exits, which takes the whole
	// pid namespace with it, setsid'd descendants included.
	deadline := time.Now().Add(5 * time.Second)
	for len(contract.ProcessesWith(dead)) > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if len(contract.ProcessesWith(dead)) > 0 {
		t.Error("the dead host's setsid'd descendant outlived it")
	}
	for deadline := time.Now().Add(5 * time.Second); alive(servers[0]) && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	if alive(servers[0]) {
		t.Errorf("the dead host's fork server %d outlived it", servers[0])
	}
	for _, p := range append(victimDirs, victimCgroups...) {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("the dead host left no %s; the cleanup below proves nothing: %v", p, err)
		}
	}

	newTestSandbox(t, Config{}) // construction cleans up after dead hosts

	for _, p := range append(victimDirs, victimCgroups...) {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("left behind by the dead host: %s", p)
		}
	}
	if len(contract.ProcessesWith(live)) == 0 {
		t.Error("the live sibling host's run was killed")
	}
	for _, p := range append(siblingDirs, siblingCgroups...) {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("the live sibling's %s was removed: %v", p, err)
		}
	}
}
