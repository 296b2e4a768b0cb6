package subprocess

import (
	"strings"
	"syscall"

	"github.com/psych-runtime/psych/sandbox"
	"github.com/psych-runtime/psych/sandbox/wire"
)

// evidence is what the host observed about how a run ended.
type evidence struct {
	wallFired bool // the host's wall timer killed the run
	cpuFired  bool // the host's CPU watch killed the run
	oomFired  bool // the host killed the run on the cgroup's OOM kill
	// oomKills and pidsMaxEvents are the run cgroup's counters.
	oomKills, pidsMaxEvents int64
	// exited/status describe the interpreter's end.
	status   syscall.WaitStatus
	cpuUsed  float64 // whole-run CPU seconds where known, else the interpreter's
	cpuLimit float64
	program  *wire.Failure // the program's own failure report, if any
}

const (
	errnoEAGAIN = 11
	errnoEFBIG  = 27
)

// attribute decides which cap ended the run (DESIGN.md §2), and on what
// evidence: the host's timers first, then kernel signals, then, marked as
// such, the program's own report of an uncaught failure.
func attribute(ev evidence) (sandbox.LimitName, string) {
	switch {
	case ev.wallFired:
		return sandbox.LimitWallSeconds, sandbox.SourceHost
	case ev.cpuFired:
		return sandbox.LimitCPUSeconds, sandbox.SourceHost
	case ev.oomFired, ev.oomKills > 0:
		return sandbox.LimitMemoryBytes, sandbox.SourceKernel
	case ev.status.Signaled() && ev.status.Signal() == syscall.SIGXCPU:
		return sandbox.LimitCPUSeconds, sandbox.SourceKernel
	case ev.status.Signaled() && ev.status.Signal() == syscall.SIGKILL && ev.cpuLimit > 0 && ev.cpuUsed >= ev.cpuLimit:
		return sandbox.LimitCPUSeconds, sandbox.SourceKernel
	}
	f := ev.program
	if f == nil && !ev.failed() {
		return "", ""
	}
	if ev.pidsMaxEvents > 0 {
		// The kernel refused a task at pids.max and the program failed.
		return sandbox.LimitProcessCount, sandbox.SourceKernel
	}
	if f == nil {
		return "", ""
	}
	switch {
	case f.Type == "MemoryError":
		return sandbox.LimitAddressSpaceBytes, sandbox.SourceProgram
	case f.Errno == errnoEFBIG:
		return sandbox.LimitFileSizeBytes, sandbox.SourceProgram
	case f.Type == "RuntimeError" && strings.Contains(f.Message, "can't start new thread"),
		f.Errno == errnoEAGAIN && (f.Type == "BlockingIOError" || f.Type == "OSError"):
		return sandbox.LimitProcessCount, sandbox.SourceProgram
	}
	return "", ""
}

// failed reports whether the interpreter ended badly on its own.
func (ev evidence) failed() bool {
	return ev.status.Signaled() || ev.status.ExitStatus() != 0
}
