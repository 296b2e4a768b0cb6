//go:build linux && cgo

package subprocess

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/psych-runtime/psych/internal/testutil"
	"github.com/psych-runtime/psych/netns"
	"github.com/psych-runtime/psych/sandbox"
	"github.com/psych-runtime/psych/test/contract"
)

// requireRoot ends a test that needs a root host (testutil.RequireRoot).
func requireRoot(t *testing.T) {
	t.Helper()
	testutil.RequireRoot(t, "a root host")
}

func TestCheckExecutable(t *testing.T) {
	requireRoot(t)
	if err := checkExecutable(testPython(), nobodyID, nobodyID); err != nil {
		t.Fatalf("nobody cannot run %s: %v", testPython(), err)
	}
	outer := testutil.PublicDir(t, "", "psych-test-", 0o755)
	private := filepath.Join(outer, "private")
	if err := os.Mkdir(private, 0o700); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(private, "python3")
	if err := os.Symlink(testPython(), link); err != nil {
		t.Fatal(err)
	}
	// The symlink resolves out of the private dir: fine.
	err := checkExecutable(link, nobodyID, nobodyID)
	if err != nil {
		t.Errorf("a symlink to a public interpreter: %v", err)
	}
	copyPath := filepath.Join(private, "python-copy")
	if out, err := exec.Command("cp", testPython(), copyPath).CombinedOutput(); err != nil {
		t.Fatal(err, string(out))
	}
	err = checkExecutable(copyPath, nobodyID, nobodyID)
	if err == nil || !strings.Contains(err.Error(), private+" ") {
		t.Fatalf("an interpreter in a 0700 dir: %v, want an error naming %s", err, private)
	}
	// Through the view a root host hands the tree over by fd, so an
	// interpreter that the run user could not reach by path still runs (as
	// pyenv's under /root does). It must live outside the sandbox's own
	// /tmp, which hides everything beneath it.
	hidden, err := os.MkdirTemp("/var/lib", "psych-test-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(hidden)
	if err := os.Mkdir(filepath.Join(hidden, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	hiddenPython := filepath.Join(hidden, "bin", "python3")
	if out, err := exec.Command("cp", testPython(), hiddenPython).CombinedOutput(); err != nil {
		t.Fatal(err, string(out))
	}
	s := newTestSandbox(t, Config{PythonBin: hiddenPython})
	res, err := s.Run(context.Background(), sandbox.Request{Code: "import sys\nsys.executable"})
	if err != nil || res.Failure != nil || string(res.Value) != `"`+hiddenPython+`"` {
		t.Fatalf("an interpreter in a 0700 dir through the view: %v %+v", err, res)
	}
	_, err = New(Config{PythonBin: copyPath})
	if !errors.Is(err, sandbox.ErrInvalidConfig) || !strings.Contains(err.Error(), "/tmp") {
		t.Fatalf("New with an interpreter under /tmp: %v, want a config error naming /tmp", err)
	}
}

func TestConfigValidate(t *testing.T) {
	requireRoot(t)
	bad := []struct {
		name string
		cfg  Config
		want string
	}{
		{"reserved env", Config{EnvAllowlist: []string{"HOME"}}, "set by the sandbox"},
		{"bad env name", Config{EnvAllowlist: []string{"A=B"}}, "bad name"},
		{"uid 0", Config{RunAs: SingleID(0, 0)}, "never used"},
		{"same uid", Config{RunAs: SingleID(0, 5)}, "never used"},
		{"overflow", Config{RunAs: &IDRange{UID: 1<<32 - 2, GID: 1000, Count: 10}}, "overflows"},
		{"small frame", Config{MaxFrameBytes: 100}, "frame cap"},
		{"bad limits", Config{DefaultLimits: sandbox.Limits{CPUSeconds: -1}}, "cpu_seconds"},
	}
	for _, c := range bad {
		c.cfg.PythonBin = testPython()
		_, err := New(c.cfg)
		if !errors.Is(err, sandbox.ErrInvalidConfig) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want a config error with %q", c.name, err, c.want)
		}
	}
}

func TestRequireNetworkDenial(t *testing.T) {
	s := newTestSandbox(t, Config{RequireNetworkDenial: true})
	res, err := s.Run(context.Background(), sandbox.Request{Code: "1"})
	if err != nil || res.Failure != nil || !res.NetworkDenied {
		t.Fatalf("a verified run: %v %+v", err, res)
	}
	res, err = s.Run(context.Background(), sandbox.Request{Code: "1", Network: true})
	if !errors.Is(err, sandbox.ErrRefused) || res != nil {
		t.Fatalf("granted network under RequireNetworkDenial: %v, %v; want ErrRefused", res, err)
	}
	// A namespace that fails the check is refused, not run.
	s.hooks.beforeNetCheck = func(fd int) error { return netns.AddDummy(fd, "dummy0") }
	res, err = s.Run(context.Background(), sandbox.Request{Code: "1"})
	if !errors.Is(err, sandbox.ErrRefused) || res != nil {
		t.Fatalf("a failed check under RequireNetworkDenial: %v, %v; want ErrRefused", res, err)
	}
}

func TestInvalidRequests(t *testing.T) {
	s := newTestSandbox(t, Config{MaxFrameBytes: 4096})
	for name, req := range map[string]sandbox.Request{
		"bad utf-8":     {Code: "x = '\xff'"},
		"over the cap":  {Code: strings.Repeat("#", 5000)},
		"negative wall": {Code: "1", Limits: sandbox.Limits{WallSeconds: -1}},
	} {
		if _, err := s.Run(context.Background(), req); !errors.Is(err, sandbox.ErrInvalidRequest) {
			t.Errorf("%s: %v, want ErrInvalidRequest", name, err)
		}
	}
}

// TestIDRange: concurrent runs each get their own uid from the range.
func TestIDRange(t *testing.T) {
	requireRoot(t)
	s := newTestSandbox(t, Config{RunAs: &IDRange{UID: 61000, GID: 61000, Count: 3}})
	var mu sync.Mutex
	seen := map[string]bool{}
	var wg sync.WaitGroup
	for i := 0; i < 3; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := s.Run(context.Background(), sandbox.Request{Code: "import time\ntime.sleep(0.5)"})
			if err != nil || res.Failure != nil {
				t.Errorf("run: %v %+v", err, res)
				return
			}
			// The outside ids, as the host saw them.
			st := res.Isolation.Interpreter
			mu.Lock()
			seen[fmt.Sprintf("[%d,%d]", st.UID[0], st.GID[0])] = true
			mu.Unlock()
		}()
	}
	wg.Wait()
	for _, want := range []string{"[61000,61000]", "[61001,61001]", "[61002,61002]"} {
		if !seen[want] {
			t.Errorf("no run had ids %s; saw %v", want, seen)
		}
	}
}

// TestNoLeaks: many runs leave no fd, cgroup, directory or goroutine behind
// once the Sandbox is closed.
func TestNoLeaks(t *testing.T) {
	s := newTestSandbox(t, Config{})
	run := func() {
		res, err := s.Run(context.Background(), sandbox.Request{Code: "import subprocess\nsubprocess.Popen(['sleep', '30'], start_new_session=True)\n1"})
		if err != nil || res.Failure != nil {
			t.Fatalf("run: %v %+v", err, res)
		}
	}
	run()             // warm up lazily opened fds
	s.removing.Wait() // the warm-up run's removal: its fds close there
	before := testutil.CountFDs()
	for i := 0; i < 20; i++ {
		run()
	}
	s.Close()
	if after := testutil.CountFDs(); after != before {
		t.Errorf("open fds went from %d to %d over 20 runs", before, after)
	}
	mine := s.owner.String() + "-"
	if entries, _ := os.ReadDir(s.cfg.TmpBase); len(entries) > 0 {
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), mine) {
				t.Errorf("run dir left behind: %s", e.Name())
			}
		}
	}
	for _, left := range ownCgroups(s) {
		t.Errorf("run cgroup left behind: %s", left)
	}
}

// ownCgroups lists this Sandbox's run cgroups in every hierarchy.
func ownCgroups(s *Sandbox) []string { return runCgroupsOf(s, os.Getpid()) }

// runCgroupsOf lists, in every hierarchy s uses, the run cgroups named after
// the host process pid.
func runCgroupsOf(s *Sandbox, pid int) []string {
	var out []string
	for _, parent := range s.cg.Parents() {
		out = append(out, ownedBy(parent, pid)...)
	}
	return out
}

// TestNoCgroupFallback: without a run cgroup the backend still runs, ends
// wall limits, and returns promptly even when a setsid'd descendant holds
// the output pipes (which it cannot kill: the documented weakness).
func TestNoCgroupFallback(t *testing.T) {
	s := newTestSandbox(t, Config{})
	s.cg = nil
	m := fmt.Sprintf("psych-fallback-%d", time.Now().UnixNano())
	code := "import subprocess, sys\nsubprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)', '" + m + "'], start_new_session=True)\n'ok'"
	start := time.Now()
	res, err := s.Run(context.Background(), sandbox.Request{Code: code})
	if err != nil || res.Failure != nil || string(res.Value) != `"ok"` {
		t.Fatalf("run: %v %+v", err, res)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Run took %v with a straggler holding its pipes", d)
	}
	exec.Command("pkill", "-f", m).Run()
	res, err = s.Run(context.Background(), sandbox.Request{Code: "import time\ntime.sleep(30)", Limits: sandbox.Limits{WallSeconds: 1}})
	if err != nil || res.LimitHit != sandbox.LimitWallSeconds {
		t.Fatalf("wall limit without a cgroup: %v %+v", err, res)
	}
}

// TestDefaultPython: with no PythonBin, New asks python3 on PATH for its
// sys.executable once, and either uses that interpreter or says why the run
// user cannot and how to fix it.
func TestDefaultPython(t *testing.T) {
	resolved, err := resolvePython()
	if err != nil {
		t.Fatalf("resolve python3: %v", err)
	}
	if !filepath.IsAbs(resolved) || strings.Contains(resolved, "/shims/") {
		t.Fatalf("resolved %q, want the real interpreter", resolved)
	}
	cfg := Config{AllowSameUID: os.Geteuid() != 0}
	s, err := New(cfg)
	switch {
	case err == nil:
		if s.Python() != resolved {
			t.Fatalf("New uses %s, resolved %s", s.Python(), resolved)
		}
	case errors.Is(err, sandbox.ErrInvalidConfig):
		if !strings.Contains(err.Error(), resolved) || !strings.Contains(err.Error(), "--python") {
			t.Fatalf("config error %q does not name the interpreter and the fix", err)
		}
		t.Logf("default interpreter refused as expected here: %v", err)
	default:
		t.Fatalf("New: %v", err)
	}
}

// TestCancelLeavesNothing: a cancelled run's processes are killed when Run
// returns (gone within a moment, where a sleeper left alone would live a
// minute), and its cgroup and run directory are gone after Close.
func TestCancelLeavesNothing(t *testing.T) {
	s := newTestSandbox(t, Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	marker := contract.Marker()
	code := "import subprocess, sys, time\n" +
		"subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)', '" + marker + "'], start_new_session=True)\n" +
		"time.sleep(60)"
	_, err := s.Run(ctx, sandbox.Request{Code: code})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Run: %v, want the context's error", err)
	}
	for end := time.Now().Add(2 * time.Second); len(contract.ProcessesWith(marker)) > 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("processes alive 2 s after Run returned: %v", contract.ProcessesWith(marker))
		}
	}
	s.Close()
	for _, left := range append(ownedBy(s.cfg.TmpBase, os.Getpid()), ownCgroups(s)...) {
		t.Errorf("left behind after cancel: %s", left)
	}
}

// TestTmpBaseChecks: a base the run user cannot enter, or one others may
// write, is a configuration error at construction, not a failed first run.
func TestTmpBaseChecks(t *testing.T) {
	requireRoot(t)
	outer := testutil.PublicDir(t, "", "psych-test-", 0o755)
	closed := filepath.Join(outer, "closed")
	os.Mkdir(closed, 0o700)
	_, err := New(Config{PythonBin: testPython(), TmpBase: filepath.Join(closed, "runs")})
	if !errors.Is(err, sandbox.ErrInvalidConfig) || !strings.Contains(err.Error(), "cannot search directory "+closed) {
		t.Errorf("unreachable base: %v", err)
	}
	open := filepath.Join(outer, "open")
	os.Mkdir(open, 0o777)
	os.Chmod(open, 0o777)
	_, err = New(Config{PythonBin: testPython(), TmpBase: open})
	if !errors.Is(err, sandbox.ErrInvalidConfig) || !strings.Contains(err.Error(), "writable by no one else") {
		t.Errorf("world-writable base: %v", err)
	}
	// A relative interpreter path works from the run's own directory.
	wd, _ := os.Getwd()
	defer os.Chdir(wd)
	os.Chdir(filepath.Dir(testPython()))
	s, err := New(Config{PythonBin: "./" + filepath.Base(testPython())})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := s.Run(context.Background(), sandbox.Request{Code: "1"}); err != nil || res.Failure != nil {
		t.Fatalf("relative PythonBin: %v %+v", err, res)
	}
}

// TestTwoSandboxesOneProcess: two Sandboxes of one process name their run
// cgroups apart (the names were each Sandbox's own count: the second's
// first run found the first's first run's cgroup).
func TestTwoSandboxesOneProcess(t *testing.T) {
	a, b := newTestSandbox(t, Config{}), newTestSandbox(t, Config{})
	done := make(chan error, 1)
	go func() {
		res, err := a.Run(context.Background(), sandbox.Request{Code: "import time\ntime.sleep(1)"})
		if err == nil && res.Failure != nil {
			err = fmt.Errorf("%+v", res.Failure)
		}
		done <- err
	}()
	time.Sleep(300 * time.Millisecond) // a's run is under way
	res, err := b.Run(context.Background(), sandbox.Request{Code: "1"})
	if err != nil || res.Failure != nil {
		t.Fatalf("the second Sandbox's run beside the first's: %v %+v", err, res)
	}
	if err := <-done; err != nil {
		t.Fatalf("the first Sandbox's run: %v", err)
	}
}

// TestEnvPastFrameCap: an environment that takes the start frame past the
// frame cap is the request's error, found before a sandbox starts.
func TestEnvPastFrameCap(t *testing.T) {
	s := newTestSandbox(t, Config{MaxFrameBytes: 4096, EnvAllowlist: []string{"PSYCH_BIG"}})
	_, err := s.Run(context.Background(), sandbox.Request{Code: "1", Env: map[string]string{"PSYCH_BIG": strings.Repeat("x", 5000)}})
	if !errors.Is(err, sandbox.ErrInvalidRequest) || errors.Is(err, sandbox.ErrHostFault) {
		t.Fatalf("Run: %v, want ErrInvalidRequest alone", err)
	}
	res, err := s.Run(context.Background(), sandbox.Request{Code: "import os\nlen(os.environ['PSYCH_BIG'])", Env: map[string]string{"PSYCH_BIG": "xy"}})
	if err != nil || string(res.Value) != "2" {
		t.Fatalf("a small one: %v %+v", err, res)
	}
}

// TestSettle: after Settle, the runs served before it are removed (their
// directories and cgroups gone) without Close; it may be called while
// other runs are in flight.
func TestSettle(t *testing.T) {
	s := newTestSandbox(t, Config{})
	defer s.Close()
	stop := make(chan struct{})
	settled := make(chan struct{})
	go func() {
		defer close(settled)
		for {
			select {
			case <-stop:
				return
			default:
				s.Settle()
				time.Sleep(time.Millisecond)
			}
		}
	}()
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			for range 3 {
				if res, err := s.Run(context.Background(), sandbox.Request{Code: "None"}); err != nil || res.Failure != nil {
					t.Errorf("Run: %v, %+v", err, res)
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	<-settled
	if _, err := s.Run(context.Background(), sandbox.Request{Code: "None"}); err != nil {
		t.Fatal(err)
	}
	s.Settle()
	left := append(ownedBy(s.cfg.TmpBase, os.Getpid()), ownCgroups(s)...)
	if len(left) > 0 {
		t.Fatalf("left after Settle: %v", left)
	}
}

// TestRemovalsWaitForEarlierOnly: a Wait waits for the removals begun
// before it, not for one begun after it (a Settle beside a stream of runs
// ends).
func TestRemovalsWaitForEarlierOnly(t *testing.T) {
	var r removals
	first, second := make(chan struct{}), make(chan struct{})
	r.Go(func() { <-first })
	before := r.inFlight() // what a Wait now waits for
	r.Go(func() { <-second })
	if len(before) != 1 || len(r.inFlight()) != 2 {
		t.Fatalf("in flight: %d before the second removal, %d after; want 1 and 2", len(before), len(r.inFlight()))
	}
	close(first)
	select {
	case <-before[0]:
	case <-time.After(5 * time.Second):
		t.Fatal("the first removal's end was not signalled")
	}
	close(second)
	r.Wait()
	if n := len(r.inFlight()); n != 0 {
		t.Fatalf("%d removals in flight after both ended and a Wait", n)
	}
}
