//go:build linux && cgo

package container

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/psych-runtime/psych/internal/testutil"
	"github.com/psych-runtime/psych/netns"
	"github.com/psych-runtime/psych/sandbox"
)

func waitWarm(t *testing.T, s *Sandbox) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := s.WaitWarm(ctx); err != nil {
		t.Fatalf("WaitWarm: %v", err)
	}
	if st := sandbox.PoolStatusOf(s); st.Size != s.cfg.Pool.Size || st.Ready != st.Size {
		t.Fatalf("PoolStatus after WaitWarm: %+v, want size and ready %d", st, s.cfg.Pool.Size)
	}
}

// TestPoolCloseLeavesNothing: a served pooled container and the unserved
// ones are all gone after Close; the served run was warm, and a request
// above the caps ran cold and said so.
func TestPoolCloseLeavesNothing(t *testing.T) {
	probe := engineOrSkip(t, Containerd)
	s, err := New(Config{Engine: Containerd, Image: testImage(), Pool: &sandbox.PoolConfig{Size: 2}})
	if err != nil {
		t.Fatal(err)
	}
	waitWarm(t, s)
	owner := s.owner.String()
	if len(ownedContainers(t, probe, owner)) == 0 {
		t.Fatal("a full pool holds no container at the engine: the test proves nothing")
	}
	res, err := s.Run(context.Background(), sandbox.Request{Code: "6 * 7"})
	if err != nil || string(res.Value) != "42" || !res.Isolation.Warm {
		t.Fatalf("warm run: %v %+v", err, res)
	}
	res, err = s.Run(context.Background(), sandbox.Request{Code: "1", Limits: sandbox.Limits{CPUSeconds: 60}})
	if err != nil || res.Isolation.Warm || res.Isolation.ColdReason != "cpu_seconds above the pool's cap" {
		t.Fatalf("a request above the caps: %v %+v", err, res.Isolation)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if left := leftovers(t, probe, owner); len(left) > 0 {
		t.Fatalf("left after Close: %v", left)
	}
}

// TestPoolNetnsCheckedAtDispatch: a pooled container whose network
// namespace gains a link before dispatch is not served.
func TestPoolNetnsCheckedAtDispatch(t *testing.T) {
	engineOrSkip(t, Containerd)
	s, err := New(Config{Engine: Containerd, Image: testImage()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.hooks.atDispatch = func(fd int) error { return netns.AddDummy(fd, "dummy0") }
	if err := s.startPool(sandbox.PoolConfig{Size: 1}); err != nil {
		t.Fatal(err)
	}
	s.cfg.Pool = &sandbox.PoolConfig{Size: 1}
	waitWarm(t, s)
	res, err := s.Run(context.Background(), sandbox.Request{Code: "1"})
	if err != nil || res.Isolation.Warm || !strings.Contains(res.Isolation.ColdReason, "network") || !res.NetworkDenied {
		t.Fatalf("a pooled container with a link served: %v %+v", err, res)
	}
}

// poolHost is TestPoolHostKilled's host: a full pool, then it waits to
// be killed.
func poolHost() int {
	s, err := New(Config{Engine: Containerd, Image: testImage(), Pool: &sandbox.PoolConfig{Size: 2}})
	if err == nil {
		err = s.WaitWarm(context.Background())
	}
	if err != nil {
		fmt.Println("helper:", err)
		return 1
	}
	fmt.Println("owner", s.owner.String())
	select {}
}

// TestPoolHostKilled: a host SIGKILLed with a full pool takes its pooled
// containers' processes with it, and the next New removes what is left.
func TestPoolHostKilled(t *testing.T) {
	s := engineOrSkip(t, Containerd)
	cmd := testutil.HelperCommand(poolHelper, "")
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer cmd.Process.Kill()
	var owner string
	if _, err := fmt.Fscanf(out, "owner %s\n", &owner); err != nil {
		t.Fatalf("helper: %v", err)
	}
	running := func() int {
		n := 0
		for _, p := range pidsOfOwner(owner) {
			if p > 0 {
				n++
			}
		}
		return n
	}
	if running() == 0 {
		t.Fatal("the helper's pool runs no process: the test proves nothing")
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	testutil.WaitFor(t, 15*time.Second, "the dead host's pooled containers to stop", func() bool { return running() == 0 })
	newTestSandbox(t, Containerd, Config{}) // reaps
	s.settle()
	if left := leftovers(t, s, owner); len(left) > 0 {
		t.Fatalf("left after the next New: %v", left)
	}
}

// pidsOfOwner lists the processes in the run cgroups of owner's
// containers.
func pidsOfOwner(owner string) []int {
	var out []int
	procs, _ := filepath.Glob("/sys/fs/cgroup/unified/" + DefaultNamespace + "/psych-" + owner + "-*/cgroup.procs")
	more, _ := filepath.Glob("/sys/fs/cgroup/" + DefaultNamespace + "/psych-" + owner + "-*/cgroup.procs")
	for _, f := range append(procs, more...) {
		b, _ := os.ReadFile(f)
		for _, l := range strings.Fields(string(b)) {
			var p int
			fmt.Sscan(l, &p)
			out = append(out, p)
		}
	}
	return out
}
