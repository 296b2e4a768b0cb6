//go:build linux && cgo

package subprocess

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/psych-runtime/psych/internal/reexec"
	"github.com/psych-runtime/psych/internal/testutil"
	"github.com/psych-runtime/psych/netns"
	"github.com/psych-runtime/psych/sandbox"
)

// newPooled is a Sandbox with a pool of size, full when it returns.
func newPooled(t *testing.T, size int, cfg Config) *Sandbox {
	t.Helper()
	requireRootPool(t)
	if cfg.Pool == nil {
		cfg.Pool = &sandbox.PoolConfig{Size: size, Caps: sandbox.Limits{CPUSeconds: 30, ProcessCount: 128}}
	}
	s := newTestSandbox(t, cfg)
	t.Cleanup(func() { s.Close() })
	waitWarm(t, s)
	return s
}

// newHooked is a Sandbox whose pool (pc) starts after set has set its
// hooks, so that no fill reads them while they change.
func newHooked(t *testing.T, pc sandbox.PoolConfig, set func(h *hooks)) *Sandbox {
	t.Helper()
	requireRootPool(t)
	s := newTestSandbox(t, Config{})
	set(&s.hooks)
	s.cfg.Pool = &pc
	if err := s.startPool(pc); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func waitWarm(t *testing.T, s *Sandbox) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := s.WaitWarm(ctx); err != nil {
		t.Fatalf("WaitWarm: %v", err)
	}
}

func requireRootPool(t *testing.T) {
	t.Helper()
	testutil.RequireRoot(t, "a pool needs a run cgroup and a range of outside ids")
}

func runReq(t *testing.T, s *Sandbox, req sandbox.Request) *sandbox.Result {
	t.Helper()
	res, err := s.Run(context.Background(), req)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	return res
}

func wantWarm(t *testing.T, res *sandbox.Result) {
	t.Helper()
	if res.Isolation == nil || !res.Isolation.Warm || res.Isolation.ColdReason != "" {
		t.Fatalf("want a warm run, got isolation %+v", res.Isolation)
	}
}

// TestPoolRefusedWithoutItsNeeds: a pool needs a range of outside ids.
func TestPoolRefusedWithoutItsNeeds(t *testing.T) {
	requireRootPool(t)
	_, err := New(Config{PythonBin: testPython(), RunAs: SingleID(65534, 65534), Pool: &sandbox.PoolConfig{Size: 1}})
	if !errors.Is(err, sandbox.ErrInvalidConfig) {
		t.Fatalf("a pool with one outside id: %v, want ErrInvalidConfig", err)
	}
	_, err = New(Config{PythonBin: testPython(), Pool: &sandbox.PoolConfig{Size: 0}})
	if !errors.Is(err, sandbox.ErrInvalidConfig) {
		t.Fatalf("a pool of 0: %v, want ErrInvalidConfig", err)
	}
}

// TestPoolClose: the pooled sandboxes, served and never served, are gone
// after Close, and a Run after it fails with ErrClosed. (What one run
// leaves is not in the next: the pooled contract suite's NoStateAcrossRuns.)
// TestPoolStatus: a pooled Sandbox tells its size and how many are ready;
// one without a pool tells zero.
func TestPoolStatus(t *testing.T) {
	s := newPooled(t, 2, Config{})
	if st := sandbox.PoolStatusOf(s); st != (sandbox.PoolStatus{Size: 2, Ready: 2}) {
		t.Fatalf("PoolStatus of a full pool of 2: %+v", st)
	}
	cold := newTestSandbox(t, Config{})
	if st := sandbox.PoolStatusOf(cold); st != (sandbox.PoolStatus{}) {
		t.Fatalf("PoolStatus without a pool: %+v", st)
	}
}

func TestPoolClose(t *testing.T) {
	s := newPooled(t, 2, Config{})
	wantWarm(t, runReq(t, s, sandbox.Request{Code: "open('/tmp/x', 'w').write('x')"}))
	if left := append(ownedBy(s.cfg.TmpBase, os.Getpid()), runCgroupsOf(s, os.Getpid())...); len(left) == 0 {
		t.Fatal("a full pool holds no run directory or cgroup: the test proves nothing")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Run(context.Background(), sandbox.Request{Code: "1"}); !errors.Is(err, sandbox.ErrClosed) {
		t.Fatalf("Run after Close: %v, want ErrClosed", err)
	}
	assertNothingLeft(t, s)
}

// assertNothingLeft: no run directory and no run cgroup of this process
// remains.
func assertNothingLeft(t *testing.T, s *Sandbox) {
	t.Helper()
	if left := append(ownedBy(s.cfg.TmpBase, os.Getpid()), runCgroupsOf(s, os.Getpid())...); len(left) > 0 {
		t.Errorf("left after Close: %v", left)
	}
}

// TestPoolHostKilled: a host killed with a full pool takes the pooled
// sandboxes' processes with it, and the next construction removes their
// directories and cgroups.
func TestPoolHostKilled(t *testing.T) {
	requireRootPool(t)
	probe := newTestSandbox(t, Config{})
	cmd := testutil.HelperCommand(poolHostHelper, "")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer cmd.Process.Kill()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || line != "ready\n" {
		t.Fatalf("the pool host said %q (%v)", line, err)
	}
	pid := cmd.Process.Pid
	dirs, cgs := ownedBy(probe.cfg.TmpBase, pid), runCgroupsOf(probe, pid)
	if len(dirs) != 2 || len(cgs) != 2*len(probe.cg.Parents()) {
		t.Fatalf("a pool of 2 has run dirs %v and cgroups %v", dirs, cgs)
	}
	tasks := func() int {
		n := 0
		for _, cg := range cgs {
			b, _ := os.ReadFile(filepath.Join(cg, "cgroup.procs"))
			n += len(strings.Fields(string(b)))
		}
		return n
	}
	if tasks() == 0 {
		t.Fatal("the pooled sandboxes' cgroups hold no process")
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	for deadline := time.Now().Add(5 * time.Second); tasks() > 0 && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	if n := tasks(); n > 0 {
		t.Fatalf("%d processes of the dead host's pool outlived it", n)
	}
	newTestSandbox(t, Config{}) // construction cleans up after dead hosts
	for _, p := range append(dirs, cgs...) {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("left behind by the dead host's pool: %s", p)
		}
	}
}

// poolHost is TestPoolHostKilled's host: a full pool of 2, then it waits
// to be killed.
const poolHostHelper = "subprocess-pool-host"

func poolHost(string) int {
	s, err := New(Config{PythonBin: testPython(), Pool: &sandbox.PoolConfig{Size: 2}})
	if err == nil {
		err = s.WaitWarm(context.Background())
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println("ready")
	select {}
}

// TestPoolLimitsFromDispatch: a pooled sandbox that burnt CPU and waited
// past the wall limit before dispatch still gives its request its whole CPU
// budget (from dispatch) and wall budget, and usage counts from dispatch.
func TestPoolLimitsFromDispatch(t *testing.T) {
	requireRootPool(t)
	burn := "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.6: pass\n"
	pooled := make(chan *run, 4)
	s := newHooked(t, sandbox.PoolConfig{Size: 1, Caps: sandbox.Limits{CPUSeconds: 30}}, func(h *hooks) {
		h.poolPlan = func(p *reexec.Plan) {
			for i, a := range p.Args {
				if a == "-c" {
					p.Args[i+1] = burn + p.Args[i+1]
					break
				}
			}
		}
		h.pooled = func(r *run) { pooled <- r }
	})
	waitWarm(t, s)
	r := <-pooled
	// A wall budget wide enough for 1 s of CPU on a 2-CPU machine at a load
	// of 12 (a 4 s budget ran out there first), and a wait past it before
	// dispatch.
	const wall = 8.0
	time.Sleep(time.Duration((wall + 0.5) * float64(time.Second)))
	st, err := r.cg.Stats()
	if err != nil || st.CPU < 500*time.Millisecond {
		t.Fatalf("the pooled sandbox burnt %v (%v) before dispatch, want >= 0.5 s", st.CPU, err)
	}
	res := runReq(t, s, sandbox.Request{Code: "while True: pass", Limits: sandbox.Limits{CPUSeconds: 1, WallSeconds: wall}})
	wantWarm(t, res)
	if res.LimitHit != sandbox.LimitCPUSeconds {
		t.Fatalf("limit_hit %q, want cpu_seconds (usage %+v, duration %v)", res.LimitHit, res.Usage, res.Duration)
	}
	if c := res.Usage.CPUSeconds; c < 0.9 || c > 1.1 {
		t.Errorf("usage cpu %.3f s, want 1.0 ± 0.1 counted from dispatch", c)
	}
	if res.Duration >= time.Duration(wall*float64(time.Second)) {
		t.Errorf("duration %v: the wall clock ran before dispatch", res.Duration)
	}
	if res.Usage.PeakProcesses != 1 {
		t.Errorf("peak processes %d, want 1", res.Usage.PeakProcesses)
	}
	if res.Usage.PeakMemoryBytes <= 0 || res.Usage.PeakMemoryBytes > 64<<20 {
		t.Errorf("peak memory %d, want the run's own", res.Usage.PeakMemoryBytes)
	}
}

// TestPoolPerRequestLimits: a pool started at wide caps gives each request
// exactly its own rlimits and cgroup limits.
func TestPoolPerRequestLimits(t *testing.T) {
	s := newPooled(t, 1, Config{})
	mem := `
import resource
got = [resource.getrlimit(resource.RLIMIT_AS)[0]]
try:
    b = bytearray(80 << 20)
    got.append('ok')
except MemoryError:
    got.append('MemoryError')
got
`
	res := runReq(t, s, sandbox.Request{Code: mem, Limits: sandbox.Limits{AddressSpaceBytes: 64 << 20}})
	wantWarm(t, res)
	if string(res.Value) != fmt.Sprintf(`[%d,"MemoryError"]`, 64<<20) {
		t.Errorf("with address_space_bytes 64 MiB: %s %+v; want RLIMIT_AS 64 MiB and a MemoryError at 80 MiB", res.Value, res.Failure)
	}
	threads := `
import threading
ev = threading.Event()
n = 0
for _ in range(10):
    try:
        threading.Thread(target=ev.wait).start()
        n += 1
    except RuntimeError:
        break
ev.set()
n
`
	waitWarm(t, s)
	res = runReq(t, s, sandbox.Request{Code: threads, Limits: sandbox.Limits{ProcessCount: 4}})
	wantWarm(t, res)
	if string(res.Value) != "3" || res.Failure != nil {
		t.Errorf("with process_count 4: %s threads beside the main one (%+v), want 3", res.Value, res.Failure)
	}
}

// TestPoolMaxAge: a pooled sandbox older than MaxAge is destroyed unused
// and replaced; the one served is younger.
func TestPoolMaxAge(t *testing.T) {
	requireRootPool(t)
	pooled := make(chan *run, 64)
	s := newHooked(t, sandbox.PoolConfig{Size: 1, MaxAge: 300 * time.Millisecond}, func(h *hooks) {
		h.pooled = func(r *run) {
			select {
			case pooled <- r:
			default:
			}
		}
	})
	waitWarm(t, s)
	time.Sleep(time.Second)
	waitWarm(t, s)
	res := runReq(t, s, sandbox.Request{Code: "1"})
	wantWarm(t, res)
	if res.Isolation.AgeSeconds >= 0.3 {
		t.Errorf("served at age %.3f s, past MaxAge", res.Isolation.AgeSeconds)
	}
	if n := len(pooled); n < 2 {
		t.Errorf("%d sandboxes were started in a second with MaxAge 300 ms; want the expired one replaced", n)
	}
	// Each but the last pooled is gone: expired and destroyed, or served
	// and removed after its result (both in the background, so within a
	// moment).
	for len(pooled) > 1 {
		r := <-pooled
		if r.dir == "" {
			continue
		}
		deadline := time.Now().Add(scaled(5 * time.Second))
		for {
			_, err := os.Stat(r.dir)
			if err != nil {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("an expired or served sandbox's directory %s is still there", r.dir)
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// TestPoolNetnsCheckedAtDispatch: a pooled sandbox whose network namespace
// gains a link before dispatch is not served: the run goes cold, says why,
// and is still denied the network.
func TestPoolNetnsCheckedAtDispatch(t *testing.T) {
	s := newHooked(t, sandbox.PoolConfig{Size: 1}, func(h *hooks) {
		h.atDispatch = func(fd int) error { return netns.AddDummy(fd, "dummy0") }
	})
	waitWarm(t, s)
	res := runReq(t, s, sandbox.Request{Code: "1"})
	if res.Isolation.Warm || !strings.Contains(res.Isolation.ColdReason, "network") || !res.NetworkDenied {
		t.Fatalf("a pooled sandbox with a link served: warm %v, cold reason %q, network denied %v", res.Isolation.Warm, res.Isolation.ColdReason, res.NetworkDenied)
	}
}

// TestPoolColdReasons: what the pool cannot serve runs cold and says so;
// a variable the loader reads as the interpreter starts is in force in the
// cold run's interpreter (LD_BIND_NOW: the loader resolved every symbol
// before the program's first line, which its link map cannot show, so the
// program reads its own /proc/self/environ: the interpreter's start).
func TestPoolColdReasons(t *testing.T) {
	s := newPooled(t, 1, Config{EnvAllowlist: []string{"LD_BIND_NOW"}})
	for _, tc := range []struct {
		req  sandbox.Request
		want string
	}{
		{sandbox.Request{Code: "1", Limits: sandbox.Limits{CPUSeconds: 60}}, "cpu_seconds above the pool's cap"},
		{sandbox.Request{Code: "1", Network: true}, "the request grants the network"},
		{sandbox.Request{Code: "b'LD_BIND_NOW=1' in open('/proc/self/environ', 'rb').read().split(b'\\0') or 1/0", Env: map[string]string{"LD_BIND_NOW": "1"}},
			"env LD_BIND_NOW is read by the loader or libc as the interpreter starts"},
	} {
		res := runReq(t, s, tc.req)
		if res.Isolation.Warm || res.Isolation.ColdReason != tc.want || res.Failure != nil {
			t.Errorf("%+v: warm %v, cold reason %q, failure %+v; want cold because %q", tc.req.Limits, res.Isolation.Warm, res.Isolation.ColdReason, res.Failure, tc.want)
		}
	}
	res := runReq(t, s, sandbox.Request{Code: "1"})
	wantWarm(t, res)
	if res.Isolation.AgeSeconds <= 0 {
		t.Errorf("age %v, want > 0", res.Isolation.AgeSeconds)
	}
}

// TestPoolPreloadRefused: a Preload that names no module is refused at
// construction, saying which; one that names a module the interpreter
// lacks fails every fill with the import's own error (the pool's log and
// Err say it), and its runs go cold.
func TestPoolPreloadRefused(t *testing.T) {
	requireRootPool(t)
	_, err := New(Config{PythonBin: testutil.Python(), Pool: &sandbox.PoolConfig{Size: 1, Preload: []string{"numpy; import os"}}})
	if !errors.Is(err, sandbox.ErrInvalidConfig) || !strings.Contains(err.Error(), `"numpy; import os"`) {
		t.Errorf("a bad module name: %v, want ErrInvalidConfig naming it", err)
	}
	s := newHooked(t, sandbox.PoolConfig{Size: 1, Preload: []string{"psych_no_such_module"}}, func(*hooks) {})
	testutil.WaitFor(t, time.Minute, "a failed fill", func() bool { return s.pool.Err() != nil })
	if err := s.pool.Err(); !strings.Contains(err.Error(), "No module named 'psych_no_such_module'") {
		t.Errorf("the fill's error: %v, want the import's", err)
	}
	res := runReq(t, s, sandbox.Request{Code: "1"})
	if res.Isolation.Warm || res.Isolation.ColdReason == "" || res.Failure != nil {
		t.Errorf("warm %v, cold reason %q, failure %+v; want a cold success", res.Isolation.Warm, res.Isolation.ColdReason, res.Failure)
	}
}
