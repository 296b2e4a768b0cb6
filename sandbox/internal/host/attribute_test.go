package host

import (
	"syscall"
	"testing"

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
		{"cpu watch", Ending{Evidence: Evidence{CPUFired: true}, Status: signaled(syscall.SIGKILL)}, sandbox.LimitCPUSeconds, sandbox.SourceHost},
		{"oom", Ending{Evidence: Evidence{OOMKills: 1}, Status: signaled(syscall.SIGKILL)}, sandbox.LimitMemoryBytes, sandbox.SourceKernel},
		{"sigxcpu", Ending{Status: signaled(syscall.SIGXCPU)}, sandbox.LimitCPUSeconds, sandbox.SourceKernel},
		{"sigkill at cpu limit", Ending{Status: signaled(syscall.SIGKILL), CPUUsed: 3, CPULimit: 2}, sandbox.LimitCPUSeconds, sandbox.SourceKernel},
		{"sigkill below cpu limit", Ending{Status: signaled(syscall.SIGKILL), CPUUsed: 1, CPULimit: 2}, "", ""},
		{"pids.max refused a task", Ending{Evidence: Evidence{PidsMaxEvents: 3}, Status: exited(1), Program: &wire.Failure{Type: "RuntimeError"}}, sandbox.LimitProcessCount, sandbox.SourceKernel},
		{"pids.max, clean end", Ending{Evidence: Evidence{PidsMaxEvents: 3}, Status: exited(0)}, "", ""},
		{"memory error", Ending{Status: exited(1), Program: &wire.Failure{Type: "MemoryError"}}, sandbox.LimitAddressSpaceBytes, sandbox.SourceProgram},
		{"efbig", Ending{Status: exited(1), Program: &wire.Failure{Type: "OSError", Errno: 27}}, sandbox.LimitFileSizeBytes, sandbox.SourceProgram},
		{"thread start", Ending{Status: exited(1), Program: &wire.Failure{Type: "RuntimeError", Message: "can't start new thread"}}, sandbox.LimitProcessCount, sandbox.SourceProgram},
		{"fork eagain", Ending{Status: exited(1), Program: &wire.Failure{Type: "BlockingIOError", Errno: 11}}, sandbox.LimitProcessCount, sandbox.SourceProgram},
		{"other runtime error", Ending{Status: exited(1), Program: &wire.Failure{Type: "RuntimeError", Message: "x"}}, "", ""},
		// An engine's 128+n is the same evidence as the wait status.
		{"engine sigxcpu", Ending{Status: EngineStatus(128 + 24)}, sandbox.LimitCPUSeconds, sandbox.SourceKernel},
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
