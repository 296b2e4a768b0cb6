package host

import (
	"fmt"
	"strings"

	"github.com/psych-runtime/psych/sandbox"
	"github.com/psych-runtime/psych/sandbox/wire"
)

// Ending is everything attribution reads.
type Ending struct {
	Evidence
	Status ExitStatus
	// CPUUsed is the whole run's CPU seconds where known, else the
	// interpreter's; CPULimit the limit.
	CPUUsed, CPULimit float64
	// Program is the program's own failure report, if it sent one.
	Program *wire.Failure
}

// Linux errnos the program reports (the child is always Linux).
const (
	errnoEAGAIN = 11
	errnoEFBIG  = 27
)

// Attribute decides which cap ended the run (DESIGN.md §2), and on what
// evidence: the host's own watch first, then the kernel's, then, marked as
// such, the program's own report of an uncaught failure.
func Attribute(en Ending) (sandbox.LimitName, string) {
	st := en.Status
	switch {
	case en.WallFired:
		return sandbox.LimitWallSeconds, sandbox.SourceHost
	case en.CPUFired:
		return sandbox.LimitCPUSeconds, sandbox.SourceHost
	case en.OOMFired, en.OOMKills > 0:
		return sandbox.LimitMemoryBytes, sandbox.SourceKernel
	case st.Signal == sigXCPU:
		return sandbox.LimitCPUSeconds, sandbox.SourceKernel
	case st.Signal == sigKILL && en.CPULimit > 0 && en.CPUUsed >= en.CPULimit:
		return sandbox.LimitCPUSeconds, sandbox.SourceKernel
	}
	f := en.Program
	if f == nil && !st.Failed() {
		return "", ""
	}
	if en.PidsMaxEvents > 0 {
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

// describe fills the result's value, failure and limit from what the host
// observed and, where nothing host-side explains the end, what the program
// reported.
func describe(res *sandbox.Result, limits sandbox.Limits, srv *Server, en Ending) {
	st := en.Status
	result := srv.Result()
	if result != nil {
		res.Value = result.Value
		en.Program = result.Failure
	}
	en.CPULimit = limits.CPUSeconds
	res.LimitHit, res.LimitSource = Attribute(en)
	var f *sandbox.Failure
	switch {
	case en.WallFired:
		f = &sandbox.Failure{Type: sandbox.FailureWallTimeout, Message: fmt.Sprintf("the run exceeded its wall limit of %gs", limits.WallSeconds)}
	case res.LimitHit == sandbox.LimitCPUSeconds:
		f = &sandbox.Failure{Type: sandbox.FailureCPUTimeout, Message: fmt.Sprintf("the run exceeded its CPU limit of %gs", limits.CPUSeconds)}
	case srv.ProtocolError() != nil:
		f = &sandbox.Failure{Type: sandbox.FailureProtocol, Message: srv.ProtocolError().Error()}
	case en.Program != nil:
		p := en.Program
		f = &sandbox.Failure{Type: p.Type, Message: p.Message, Traceback: p.Traceback}
	case result == nil && st.Signaled():
		f = &sandbox.Failure{Type: sandbox.FailureSignal, Message: "the interpreter was killed by " + SignalName(st.Signal) + " before it sent a result"}
	case result == nil:
		f = &sandbox.Failure{Type: sandbox.FailureExit, Message: fmt.Sprintf("the interpreter exited with status %d before it sent a result", st.Code)}
	case st.Failed():
		f = &sandbox.Failure{Type: sandbox.FailureExit, Message: "the interpreter ended abnormally after its result: " + st.String()}
	}
	if f != nil {
		if st.Signaled() {
			f.Signal = sandbox.SignalName(SignalName(st.Signal))
		} else {
			code := st.Code
			f.ExitCode = &code
		}
		res.Value = nil
		if result != nil && en.Program == nil {
			res.Value = result.Value
		}
	}
	res.Failure = f
}
