package host

import (
	"context"
	"encoding/json"
	"net"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/psych-runtime/psych/cgroups"

	"github.com/psych-runtime/psych/sandbox"
	"github.com/psych-runtime/psych/sandbox/wire"
)

func TestAttribute(t *testing.T) {
	signaled := func(sig syscall.Signal) ExitStatus { return ExitStatus{Signal: sig} }
	exited := func(code int) ExitStatus { return ExitStatus{Code: code} }
	cases := []struct {
		name   string
		en     Ending
		limit  sandbox.LimitName
		source string
	}{
		{"clean", Ending{Status: exited(0)}, "", ""},
		{"plain error", Ending{Status: exited(1), Program: &wire.Failure{Type: "ValueError"}}, "", ""},
		{"wall first", Ending{Evidence: Evidence{WallFired: true}, Status: signaled(syscall.SIGKILL), Program: &wire.Failure{Type: "MemoryError"}}, sandbox.LimitWallSeconds, sandbox.SourceHost},
		{"approval", Ending{Evidence: Evidence{ApprovalFired: true}, Status: signaled(syscall.SIGKILL)}, sandbox.LimitApprovalSeconds, sandbox.SourceHost},
		{"cpu watch", Ending{Evidence: Evidence{CPUFired: true}, Status: signaled(syscall.SIGKILL)}, sandbox.LimitCPUSeconds, sandbox.SourceHost},
		{"oom", Ending{Evidence: Evidence{OOMKills: 1}, Status: signaled(syscall.SIGKILL)}, sandbox.LimitMemoryBytes, sandbox.SourceKernel},
		{"oom, host killed", Ending{Evidence: Evidence{OOMFired: true, OOMKills: 1}, Status: signaled(syscall.SIGKILL)}, sandbox.LimitMemoryBytes, sandbox.SourceKernel},
		// A program whose result arrived completed: a child's OOM kill is usage.
		{"oom, then the result", Ending{Evidence: Evidence{OOMKills: 1}, Status: exited(0), Reported: true}, "", ""},
		{"oom, result, host killed", Ending{Evidence: Evidence{OOMFired: true, OOMKills: 1}, Status: exited(0), Reported: true}, "", ""},
		{"oom, then a memory error", Ending{Evidence: Evidence{OOMKills: 1}, Status: exited(1), Reported: true, Program: &wire.Failure{Type: "MemoryError"}}, sandbox.LimitAddressSpaceBytes, sandbox.SourceProgram},
		{"sigxcpu at cpu limit", Ending{Status: signaled(syscall.SIGXCPU), CPUUsed: 2, CPULimit: 2}, sandbox.LimitCPUSeconds, sandbox.SourceKernel},
		// The rlimit's tick-sampled clock runs ahead of the precise one.
		{"sigxcpu, precise cpu behind the rlimit's", Ending{Status: signaled(syscall.SIGXCPU), CPUUsed: 0.85, CPULimit: 1}, sandbox.LimitCPUSeconds, sandbox.SourceKernel},
		{"sigxcpu, fractional limit", Ending{Status: signaled(syscall.SIGXCPU), CPUUsed: 1.9, CPULimit: 1.5}, sandbox.LimitCPUSeconds, sandbox.SourceKernel},
		{"sigkill, rusage rounding", Ending{Status: signaled(syscall.SIGKILL), CPUUsed: 1.999999, CPULimit: 2}, sandbox.LimitCPUSeconds, sandbox.SourceKernel},
		{"self-sent sigxcpu", Ending{Status: signaled(syscall.SIGXCPU), CPUUsed: 0.03, CPULimit: 10}, "", ""},
		{"sigxcpu, cpu unknown", Ending{Status: signaled(syscall.SIGXCPU)}, "", ""},
		{"sigbus, tmpfs full", Ending{Status: signaled(syscall.SIGBUS), TmpFull: true}, sandbox.LimitTmpBytes, sandbox.SourceKernel},
		{"sigbus, tmpfs not full", Ending{Status: signaled(syscall.SIGBUS)}, "", ""},
		{"sigsegv, tmpfs full", Ending{Status: signaled(syscall.SIGSEGV), TmpFull: true}, "", ""},
		{"sigkill at cpu limit", Ending{Status: signaled(syscall.SIGKILL), CPUUsed: 3, CPULimit: 2}, sandbox.LimitCPUSeconds, sandbox.SourceKernel},
		{"sigkill below cpu limit", Ending{Status: signaled(syscall.SIGKILL), CPUUsed: 1, CPULimit: 2}, "", ""},
		{"pids.max refused a task", Ending{Evidence: Evidence{PidsMaxEvents: 3}, Status: exited(1), Program: &wire.Failure{Type: "RuntimeError"}}, sandbox.LimitProcessCount, sandbox.SourceKernel},
		{"pids.max, clean end", Ending{Evidence: Evidence{PidsMaxEvents: 3}, Status: exited(0)}, "", ""},
		{"memory error", Ending{Status: exited(1), Program: &wire.Failure{Type: "MemoryError"}}, sandbox.LimitAddressSpaceBytes, sandbox.SourceProgram},
		{"efbig", Ending{Status: exited(1), Program: &wire.Failure{Type: "OSError", Errno: 27}}, sandbox.LimitFileSizeBytes, sandbox.SourceProgram},
		{"thread start, no pids cgroup", Ending{Status: exited(1), Program: &wire.Failure{Type: "RuntimeError", Message: "can't start new thread"}}, sandbox.LimitProcessCount, sandbox.SourceProgram},
		{"fork eagain, no pids cgroup", Ending{Status: exited(1), Program: &wire.Failure{Type: "BlockingIOError", Errno: 11}}, sandbox.LimitProcessCount, sandbox.SourceProgram},
		// The pids cgroup was watched and refused nothing: the kernel
		// contradicts the program's report of a cap on tasks.
		{"thread start, pids below the cap", Ending{Evidence: Evidence{PidsPeak: 55}, Status: exited(1), Program: &wire.Failure{Type: "RuntimeError", Message: "can't start new thread"}}, sandbox.LimitAddressSpaceBytes, sandbox.SourceProgram},
		{"thread start, pids.max refused", Ending{Evidence: Evidence{PidsPeak: 65, PidsMaxEvents: 1}, Status: exited(1), Program: &wire.Failure{Type: "RuntimeError", Message: "can't start new thread"}}, sandbox.LimitProcessCount, sandbox.SourceKernel},
		{"fork eagain, pids below the cap", Ending{Evidence: Evidence{PidsPeak: 3}, Status: exited(1), Program: &wire.Failure{Type: "BlockingIOError", Errno: 11}}, "", ""},
		{"other runtime error", Ending{Status: exited(1), Program: &wire.Failure{Type: "RuntimeError", Message: "x"}}, "", ""},
		// An engine's 128+n is the same evidence as the wait status.
		{"engine sigxcpu", Ending{Status: EngineStatus(128 + 24), CPUUsed: 3, CPULimit: 2}, sandbox.LimitCPUSeconds, sandbox.SourceKernel},
		{"engine sigbus, tmpfs full", Ending{Status: EngineStatus(128 + 7), TmpFull: true}, sandbox.LimitTmpBytes, sandbox.SourceKernel},
		{"engine sigkill at cpu limit", Ending{Status: EngineStatus(137), CPUUsed: 3, CPULimit: 2}, sandbox.LimitCPUSeconds, sandbox.SourceKernel},
	}
	for _, c := range cases {
		if limit, source := Attribute(c.en); limit != c.limit || source != c.source {
			t.Errorf("%s: got %q/%q, want %q/%q", c.name, limit, source, c.limit, c.source)
		}
	}
}

func TestExitStatus(t *testing.T) {
	cases := []struct {
		got  ExitStatus
		want ExitStatus
		str  string
	}{
		{WaitStatus(syscall.WaitStatus(3 << 8)), ExitStatus{Code: 3}, "exit status 3"},
		{WaitStatus(syscall.WaitStatus(syscall.SIGSEGV)), ExitStatus{Signal: syscall.SIGSEGV}, "killed by SIGSEGV"},
		{EngineStatus(0), ExitStatus{}, "exit status 0"},
		{EngineStatus(7), ExitStatus{Code: 7}, "exit status 7"},
		{EngineStatus(128), ExitStatus{Code: 128}, "exit status 128"},
		{EngineStatus(137), ExitStatus{Signal: syscall.SIGKILL}, "killed by SIGKILL"},
		{EngineStatus(139), ExitStatus{Signal: syscall.SIGSEGV}, "killed by SIGSEGV"},
		{EngineStatus(255), ExitStatus{Code: 255}, "exit status 255"},
	}
	for _, c := range cases {
		if c.got != c.want || c.got.String() != c.str {
			t.Errorf("got %+v (%s), want %+v (%s)", c.got, c.got, c.want, c.str)
		}
	}
	if n := SignalName(35); n != "SIGRTMIN+1" {
		t.Errorf("SignalName(35) = %q", n)
	}
}

// oomMeter reports the run's tasks, and an OOM kill once oom is set.
type oomMeter struct{ oom atomic.Int64 }

func (m *oomMeter) Stats() (cgroups.Stats, error) {
	return cgroups.Stats{PidsCurrent: 2, OOMKills: m.oom.Load()}, nil
}

// TestOOMAndResult: a run with an OOM kill either completed (its result
// arrived: no limit, no failure, the kill in usage) or was ended by the
// memory limit (no result: memory_bytes and a failure), never both, even
// when the host's kill on the OOM comes after the result.
func TestOOMAndResult(t *testing.T) {
	for _, sendResult := range []bool{true, false} {
		m := &oomMeter{}
		req, err := Prepare(sandbox.Request{Code: "x"}, sandbox.DefaultLimits(), wire.DefaultMaxFrame, nil)
		if err != nil {
			t.Fatal(err)
		}
		hostEnd, child := net.Pipe()
		f := &fakeRun{exited: make(chan struct{}), child: child}
		go func() {
			wire.NewDecoder(child, 0).Next()
			if sendResult {
				// net.Pipe: the write returns once the host has read it.
				wire.NewEncoder(child, wire.DefaultMaxFrame).Encode(&wire.Result{Value: json.RawMessage("1")})
			}
			m.oom.Store(1) // a child dies at the cap; the host kills the run
		}()
		e := Begin(context.Background(), Setup{Request: req, Wire: hostEnd, MaxFrame: wire.DefaultMaxFrame, MaxOutput: 1 << 20,
			Stdout: strings.NewReader(""), Stderr: strings.NewReader(""),
			Exited: f.exited, Kill: f.kill, Started: time.Now(), Meter: m})
		if err := e.Supervise(context.Background()); err != nil {
			t.Fatal(err)
		}
		usage := e.Usage(sandbox.Usage{}, 1)
		e.Finish()
		res := e.Result(Outcome{Status: ExitStatus{Signal: sigKILL}, Usage: usage})
		if f.kills == 0 {
			t.Fatalf("result sent %v: the host did not kill the run on its OOM kill", sendResult)
		}
		if res.Usage.OOMKills != 1 {
			t.Errorf("result sent %v: usage.oom_kills %d, want 1", sendResult, res.Usage.OOMKills)
		}
		switch {
		case sendResult && (res.Failure != nil || res.LimitHit != "" || string(res.Value) != "1"):
			t.Errorf("result sent, then the OOM kill: failure %+v, limit_hit %q, value %s; want a completed run", res.Failure, res.LimitHit, res.Value)
		case !sendResult && (res.Failure == nil || res.LimitHit != sandbox.LimitMemoryBytes || res.LimitSource != sandbox.SourceKernel):
			t.Errorf("no result: failure %+v, limit_hit %q/%q; want a failure and memory_bytes/kernel", res.Failure, res.LimitHit, res.LimitSource)
		}
	}
}

// TestTmpfsWatchNil: a watch that could not be had attributes nothing.
func TestTmpfsWatchNil(t *testing.T) {
	var w *TmpfsWatch
	if w.Full() {
		t.Error("a nil watch is full")
	}
	w.Close()
	if w := WatchTmpfs(0); w.Full() {
		t.Error("a watch of no process is full")
	}
}
