//go:build linux && cgo

package subprocess

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/psych-runtime/psych/internal/testutil"
	"github.com/psych-runtime/psych/sandbox"
	"github.com/psych-runtime/psych/test/contract"
)

// scaled stretches a time bound on slow hosts (the emulated VM lane).
func scaled(d time.Duration) time.Duration { return time.Duration(float64(d) * contract.TimeScale()) }

// cgroupSandbox is a Sandbox whose runs have cgroups: always on a root host
// (CI), never on an unprivileged one without delegation.
func cgroupSandbox(t *testing.T) *Sandbox {
	t.Helper()
	s := newTestSandbox(t, Config{})
	if s.cg == nil {
		if os.Geteuid() == 0 {
			t.Fatalf("no run cgroup on a root host: %v", s.cgErr)
		}
		t.Skipf("no writable cgroup for an unprivileged host without delegation (%v); CI runs this as root", s.cgErr)
	}
	return s
}

// Four processes each spinning: the whole run's CPU reaches cpu_seconds
// long before 4 × cpu_seconds of wall time (or of any one process's CPU).
func TestCgroupCPUAcrossProcesses(t *testing.T) {
	s := cgroupSandbox(t)
	code := "import multiprocessing as mp\ndef spin():\n    while True: pass\n" +
		"ps = [mp.Process(target=spin) for _ in range(4)]\n[p.start() for p in ps]\n[p.join() for p in ps]"
	res, err := s.Run(context.Background(), sandbox.Request{Code: code, Limits: sandbox.Limits{CPUSeconds: 2, WallSeconds: 60}})
	if err != nil {
		t.Fatal(err)
	}
	if res.LimitHit != sandbox.LimitCPUSeconds || res.Failure == nil {
		t.Fatalf("limit_hit %q, failure %+v; want cpu_seconds", res.LimitHit, res.Failure)
	}
	if res.Usage == nil || res.Usage.CPUSeconds < 2 || res.Usage.PeakProcesses < 5 {
		t.Fatalf("usage %+v: want at least 2 s of CPU over 5 processes", res.Usage)
	}
	// Counted per process, the four spinners would burn 4 × 2 s before the
	// first was stopped. CPU, not wall time: the bound holds at any load.
	if res.Usage.CPUSeconds > 4 {
		t.Errorf("the run used %.2f s of CPU; counted across its processes it ends near 2 s, not 4 × 2 s", res.Usage.CPUSeconds)
	}
}

// Eight processes of 200 MiB each under memory_bytes=512 MiB: the cgroup's
// OOM kill ends the run with memory_bytes, and the host is unharmed.
func TestCgroupMemoryAcrossProcesses(t *testing.T) {
	s := cgroupSandbox(t)
	code := "import multiprocessing as mp, time\ndef hog():\n    b = bytearray(200 << 20)\n    for i in range(0, len(b), 4096): b[i] = 1\n    time.sleep(30)\n" +
		"ps = [mp.Process(target=hog) for _ in range(8)]\n[p.start() for p in ps]\n[p.join() for p in ps]"
	// CPU to spare: under emulation (the VM lane) touching 1.6 GiB of pages
	// across eight processes passed the default 10 s before the memory cap.
	res, err := s.Run(context.Background(), sandbox.Request{Code: code, Limits: sandbox.Limits{MemoryBytes: 512 << 20, WallSeconds: 60, CPUSeconds: 60}})
	if err != nil {
		t.Fatal(err)
	}
	if res.LimitHit != sandbox.LimitMemoryBytes || res.LimitSource != sandbox.SourceKernel || res.Failure == nil {
		t.Fatalf("limit_hit %q/%q, failure %+v; want memory_bytes from the kernel", res.LimitHit, res.LimitSource, res.Failure)
	}
	if res.Usage == nil || res.Usage.PeakMemoryBytes > 512<<20+(16<<20) || res.Usage.PeakMemoryBytes < 256<<20 {
		t.Fatalf("usage %+v: want a peak near the 512 MiB cap", res.Usage)
	}
	again, err := s.Run(context.Background(), sandbox.Request{Code: "6 * 7"})
	if err != nil || string(again.Value) != "42" {
		t.Fatalf("after the OOM kill: %v %+v", err, again)
	}
}

// A fork bomb meets pids.max: pids.events shows it, limit_hit says
// process_count, and peak_processes is exactly the cap.
func TestCgroupForkBomb(t *testing.T) {
	s := cgroupSandbox(t)
	code := "import os, time\nkids = []\nwhile True:\n    pid = os.fork()\n    if pid == 0:\n        time.sleep(30)\n        os._exit(0)\n    kids.append(pid)"
	res, err := s.Run(context.Background(), sandbox.Request{Code: code, Limits: sandbox.Limits{ProcessCount: 16, WallSeconds: 30}})
	if err != nil {
		t.Fatal(err)
	}
	if res.LimitHit != sandbox.LimitProcessCount || res.LimitSource != sandbox.SourceKernel {
		t.Fatalf("limit_hit %q/%q, failure %+v; want process_count from the kernel", res.LimitHit, res.LimitSource, res.Failure)
	}
	t.Logf("duration %v usage %+v", res.Duration, res.Usage)
	if res.Usage == nil || res.Usage.PeakProcesses != 16 {
		t.Fatalf("usage %+v: want peak_processes 16", res.Usage)
	}
}

// 500 runs in a row leave no run cgroup behind once the Sandbox is closed
// (a run's removal may finish after its result).
func TestCgroup500Runs(t *testing.T) {
	s := cgroupSandbox(t)
	for i := 0; i < 500; i++ {
		res, err := s.Run(context.Background(), sandbox.Request{Code: "None"})
		if err != nil || res.Failure != nil {
			t.Fatalf("run %d: %v %+v", i, err, res)
		}
	}
	s.Close()
	if left := ownCgroups(s); len(left) > 0 {
		t.Fatalf("run cgroups left behind after 500 runs: %v", left)
	}
}

// Runs at once: each run's usage counts only its own processes.
func TestCgroupUsageIsPerRun(t *testing.T) {
	s := cgroupSandbox(t)
	var wg sync.WaitGroup
	res := make([]*sandbox.Result, 3)
	errs := make([]error, 3)
	codes := []string{
		"import time\nt = time.process_time()\nwhile time.process_time() - t < 1.5: pass",
		"import time\ntime.sleep(2)",
		"import time\ntime.sleep(2)",
	}
	for i, code := range codes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res[i], errs[i] = s.Run(context.Background(), sandbox.Request{Code: code})
		}()
	}
	wg.Wait()
	for i := range res {
		if errs[i] != nil || res[i].Failure != nil || res[i].Usage == nil {
			t.Fatalf("run %d: %v %+v", i, errs[i], res[i])
		}
	}
	if u := res[0].Usage.CPUSeconds; u < 1.5 {
		t.Errorf("the spinner's usage is %.2f s, want at least 1.5", u)
	}
	for _, r := range res[1:] {
		if u := r.Usage.CPUSeconds; u > 0.5*contract.TimeScale() {
			t.Errorf("a sleeper was charged %.2f s of CPU: another run's processes counted", u)
		}
	}
}

// RequireCgroup refuses where the parent is not writable: here, a host
// process without root and without delegation.
func TestRequireCgroupRefuses(t *testing.T) {
	if os.Geteuid() != 0 {
		s, err := New(Config{PythonBin: testPython(), AllowSameUID: true, RequireCgroup: true})
		if err != nil {
			t.Fatal(err)
		}
		if s.cg != nil {
			t.Skip("this unprivileged host has a delegated cgroup")
		}
		_, err = s.Run(context.Background(), sandbox.Request{Code: "1"})
		if !errors.Is(err, sandbox.ErrRefused) || !strings.Contains(err.Error(), "cgroup is required") {
			t.Fatalf("Run without a cgroup under RequireCgroup: %v, want ErrRefused", err)
		}
		return
	}
	// As root, run this test again from a copy of the binary as uid 1000.
	dir := testutil.PublicDir(t, "", "psych-test-", 0o755)
	bin := filepath.Join(dir, "subprocess.test")
	src, err := os.Open(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	dst, err := os.OpenFile(bin, os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	_, err = io.Copy(dst, src)
	src.Close()
	if err := errors.Join(err, dst.Close()); err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(dir, "home")
	if err := os.Mkdir(home, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(home, 1000, 1000); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-test.run=^TestRequireCgroupRefuses$", "-test.v")
	cmd.Dir = dir
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + home, "TMPDIR=" + home, testutil.PythonEnv + "=" + testPython()}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 1000, Gid: 1000, Groups: []uint32{}}}
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestRequireCgroupRefuses") {
		t.Fatalf("as uid 1000: %v\n%s", err, out)
	}
}

// The attestation names the cgroup mode the run actually had: "v2" where the
// unified hierarchy delegates memory and pids, else "v1". The VM lane
// requires the marker line this prints to say v2.
func TestCgroupModeAttested(t *testing.T) {
	s := cgroupSandbox(t)
	res := run1(t, s, sandbox.Request{Code: "None"})
	want := "v1"
	if b, err := os.ReadFile(filepath.Join(unifiedRoot(t), "cgroup.controllers")); err == nil {
		f := strings.Fields(string(b))
		if slices.Contains(f, "memory") && slices.Contains(f, "pids") {
			want = "v2"
		}
	}
	if res.Isolation.Cgroup != want {
		t.Fatalf("attested cgroup mode %q, want %q", res.Isolation.Cgroup, want)
	}
	fmt.Printf("PSYCH-CGROUP-MODE: %s\n", res.Isolation.Cgroup)
}

func unifiedRoot(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		pre, post, ok := strings.Cut(line, " - ")
		if f := strings.Fields(pre); ok && strings.HasPrefix(post, "cgroup2 ") && len(f) >= 5 {
			return f[4]
		}
	}
	return "/nonexistent"
}
