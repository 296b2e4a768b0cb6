//go:build linux && cgo

package container

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/psych-runtime/psych/internal/testutil"
	"github.com/psych-runtime/psych/sandbox"
	"github.com/psych-runtime/psych/sandbox/internal/resources"
	"github.com/psych-runtime/psych/test/contract"
)

// The test binary's helpers: a second host running one long program
// tagged with its argument, and a second host with a full pool.
const (
	hostHelper = "container-host"
	poolHelper = "container-pool-host"
)

func init() {
	testutil.Register(hostHelper, helper)
	testutil.Register(poolHelper, func(string) int { return poolHost() })
}

func TestMain(m *testing.M) { testutil.Main(m) }

// sleeperCode starts a child tagged with m that sleeps for secs, then
// sleeps itself.
func sleeperCode(m string, secs int) string {
	return fmt.Sprintf("import subprocess, sys, time\np = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(%d)', '%s'])\n", secs, m)
}

// helper is a second host: it runs one long program tagged with marker on
// containerd and waits to be killed.
func helper(marker string) int {
	s, err := New(Config{Engine: Containerd, Image: testImage()})
	if err != nil {
		fmt.Println("helper:", err)
		return 1
	}
	fmt.Println("owner", s.owner.String())
	s.Run(context.Background(), sandbox.Request{Code: sleeperCode(marker, 300) + "time.sleep(300)"})
	return 0
}

// leftovers lists what owner left on the host: containers and snapshots at
// the engine, run and scratch directories, cgroups and mounts.
func leftovers(t *testing.T, s *Sandbox, owner string) []string {
	t.Helper()
	out := ownedContainers(t, s, owner)
	for _, base := range []string{s.runs, s.mnts} {
		entries, _ := os.ReadDir(base)
		for _, e := range entries {
			if o, ok := resources.OwnerOf(e.Name()); ok && o.String() == owner {
				out = append(out, filepath.Join(base, e.Name()))
			}
		}
	}
	cgs, _ := filepath.Glob("/sys/fs/cgroup/*/" + DefaultNamespace + "/psych-" + owner + "-*")
	out = append(out, cgs...)
	mi, _ := os.ReadFile("/proc/self/mountinfo")
	for _, l := range strings.Split(string(mi), "\n") {
		if strings.Contains(l, "psych-"+owner) || strings.Contains(l, s.cfg.RunBase+"/mnt/"+owner) {
			out = append(out, l)
		}
	}
	return out
}

// TestNoLeftovers: after 100 runs (four at a time), a cancelled one and one
// the wall limit killed, nothing of them is left: containers, tasks,
// snapshots, mounts, cgroups, run directories.
func TestNoLeftovers(t *testing.T) {
	s := engineOrSkip(t, Containerd)
	ctx := context.Background()
	const runs, workers = 100, 4
	var wg sync.WaitGroup
	var failed atomic.Bool
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < runs && !failed.Load(); i += workers {
				res, err := s.Run(ctx, sandbox.Request{Code: fmt.Sprintf("open('/tmp/f', 'w').write('x')\n%d", i)})
				if err != nil || res.Failure != nil || string(res.Value) != fmt.Sprint(i) {
					t.Errorf("run %d: %v %+v", i, err, res)
					failed.Store(true)
				}
			}
		}()
	}
	wg.Wait()
	if failed.Load() {
		t.FailNow()
	}
	m := contract.Marker()
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := s.Run(cctx, sandbox.Request{Code: sleeperCode(m, 300) + "time.sleep(300)"})
		done <- err
	}()
	testutil.WaitFor(t, 30*time.Second, "the run to start", func() bool { return len(contract.ProcessesWith(m)) > 0 })
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled run: %v", err)
	}
	res, err := s.Run(ctx, sandbox.Request{Code: "import time\ntime.sleep(60)", Limits: sandbox.Limits{WallSeconds: 1}})
	if err != nil || res.LimitHit != sandbox.LimitWallSeconds {
		t.Fatalf("wall-limit run: %v %+v", err, res)
	}
	if left := contract.ProcessesWith(m); len(left) > 0 {
		t.Errorf("processes of a cancelled run are left: %v", left)
	}
	s.settle()
	if left := leftovers(t, s, s.owner.String()); len(left) > 0 {
		t.Fatalf("left after 102 runs: %v", left)
	}
}

// TestHostKilled: a host SIGKILLed mid-run takes its run's processes with
// it (the init exits on its sync socket's end), and the next New removes
// the container, snapshot and directories it left, and only those.
func TestHostKilled(t *testing.T) {
	s := engineOrSkip(t, Containerd)
	m := contract.Marker()
	cmd := testutil.HelperCommand(hostHelper, m)
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var owner string
	if _, err := fmt.Fscanf(out, "owner %s\n", &owner); err != nil {
		cmd.Process.Kill()
		t.Fatalf("helper: %v", err)
	}
	testutil.WaitFor(t, 60*time.Second, "the helper's run to start", func() bool { return len(contract.ProcessesWith(m)) > 0 })
	// A live sibling's run must survive the reaping.
	sib := contract.Marker()
	sibDone := make(chan *sandbox.Result, 1)
	go func() {
		res, _ := s.Run(context.Background(), sandbox.Request{Code: sleeperCode(sib, 5) + "p.wait()\n'sibling'"})
		sibDone <- res
	}()
	testutil.WaitFor(t, 30*time.Second, "the sibling's run to start", func() bool { return len(contract.ProcessesWith(sib)) > 0 })
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	testutil.WaitFor(t, 15*time.Second, "the dead host's run to end", func() bool { return len(contract.ProcessesWith(m)) == 0 })
	if len(leftovers(t, s, owner)) == 0 {
		t.Fatal("the killed host left nothing: the test proves nothing")
	}
	newTestSandbox(t, Containerd, Config{}) // reaps
	s.settle()
	if left := leftovers(t, s, owner); len(left) > 0 {
		t.Fatalf("left after the next New: %v", left)
	}
	if res := <-sibDone; res == nil || string(res.Value) != `"sibling"` {
		t.Fatalf("the live sibling's run did not survive the reaping: %+v", res)
	}
}
