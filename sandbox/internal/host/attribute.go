package host

import (
	"fmt"
	"math"
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
	// Reported says the program's result frame arrived: the program ran
	// to its end (successfully or with the failure it reported) before
	// anything killed it.
	Reported bool
	// Program is the program's own failure report, if it sent one.
	Program *wire.Failure
	// TmpFull says the host found one of the run's own tmpfs mounts
	// (/tmp, /dev/shm) at its cap after the run (Outcome.TmpFull).
	TmpFull bool
}

// cpuSlack absorbs the rounding of CPU counters to microseconds (rusage
// rounds user and system time separately) when the CPU used is compared
// with the limit.
const cpuSlack = 0.001

// cpuAtLimit says the run's CPU reached its limit: the evidence that a
// SIGKILL came from the CPU limit (RLIMIT_CPU's hard value, one second
// past its soft one) and not from the program, which can send itself one.
func (en Ending) cpuAtLimit() bool {
	return en.CPULimit > 0 && en.CPUUsed+cpuSlack >= en.CPULimit
}

// xcpuAtLimit says the run's CPU is evidence that a SIGXCPU came from
// RLIMIT_CPU's soft value, ceil(CPULimit), and not from the program: at
// least half of it was used. Not all of it: the kernel compares the
// rlimit with the process's tick-sampled CPU time, which runs ahead of the
// precise counters the host reads (the cgroup's usage, the rusage), and a
// real SIGXCPU comes with 85-99% of the soft value measured on this CI
// machine (an emulated VM), so that the host's own watch at the limit never
// fires first there. A program that signals itself far below its limit
// gets no limit_hit.
func (en Ending) xcpuAtLimit() bool {
	return en.CPULimit > 0 && en.CPUUsed >= math.Ceil(en.CPULimit)/2
}

// pidsWatched says the host read the run's task count from its pids
// cgroup: then a cap on tasks that acted shows in PidsMaxEvents, and its
// absence is evidence too.
func (ev Evidence) pidsWatched() bool { return ev.PidsPeak > 0 }

// Linux errnos the program reports (the child is always Linux).
const (
	errnoEAGAIN = 11
	errnoEFBIG  = 27
)

// Attribute decides which cap ended the run (Result.LimitHit), and on what
// evidence: the host's own watch first, then the kernel's, then, marked as
// such, the program's own report of an uncaught failure. Where the kernel's
// evidence contradicts the program's report, the kernel wins.
//
//   - An OOM kill in the run ended it only if the program's result had not
//     arrived: a program that sent its result completed, and its OOM kills
//     are reported in Usage.OOMKills alone.
//   - SIGXCPU and SIGKILL are the CPU limit only with the CPU used near
//     the limit (xcpuAtLimit, cpuAtLimit): a program may send either to
//     itself.
//   - SIGBUS is tmp_bytes when the host found a tmpfs of the run at its cap
//     (a shared mapping of a tmpfs file faults past the cap with SIGBUS).
//   - A thread or process that could not start is process_count on the
//     kernel's word when pids.max refused a task. Where the run's pids
//     cgroup was watched and refused none, the cap on tasks was not what
//     acted: a thread that could not start then ran out of address space
//     for its stack (address_space_bytes, on the program's report), and a
//     fork's EAGAIN is no cap of this run. Only without a pids cgroup does
//     the program's report alone make it process_count.
func Attribute(en Ending) (sandbox.LimitName, string) {
	st := en.Status
	switch {
	case en.WallFired:
		return sandbox.LimitWallSeconds, sandbox.SourceHost
	case en.CPUFired:
		return sandbox.LimitCPUSeconds, sandbox.SourceHost
	case en.ApprovalFired:
		return sandbox.LimitApprovalSeconds, sandbox.SourceHost
	case (en.OOMFired || en.OOMKills > 0) && !en.Reported:
		return sandbox.LimitMemoryBytes, sandbox.SourceKernel
	case st.Signal == sigXCPU && en.xcpuAtLimit(), st.Signal == sigKILL && en.cpuAtLimit():
		return sandbox.LimitCPUSeconds, sandbox.SourceKernel
	case st.Signal == sigBUS && en.TmpFull:
		return sandbox.LimitTmpBytes, sandbox.SourceKernel
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
	case f.Type == "RuntimeError" && strings.Contains(f.Message, "can't start new thread"):
		// pthread_create fails alike when clone is refused and when the
		// new thread's stack cannot be mapped.
		if en.pidsWatched() {
			return sandbox.LimitAddressSpaceBytes, sandbox.SourceProgram
		}
		return sandbox.LimitProcessCount, sandbox.SourceProgram
	case f.Errno == errnoEAGAIN && (f.Type == "BlockingIOError" || f.Type == "OSError"):
		if en.pidsWatched() {
			return "", ""
		}
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
		en.Reported = true
	}
	en.CPULimit = limits.CPUSeconds
	if res.Usage != nil {
		res.Usage.OOMKills = en.OOMKills
	}
	// A SIGKILL after the result, in a run with an OOM kill, is the memory
	// cap acting (the host's kill on the first OOM kill, or the kernel's)
	// on a program that had completed: its end is not a failure.
	completed := result != nil && st.Signal == sigKILL && (en.OOMFired || en.OOMKills > 0)
	if completed {
		en.Status = ExitStatus{}
	}
	res.LimitHit, res.LimitSource = Attribute(en)
	var f *sandbox.Failure
	switch {
	case en.WallFired:
		f = &sandbox.Failure{Type: sandbox.FailureWallTimeout, Message: fmt.Sprintf("the run exceeded its wall limit of %gs", limits.WallSeconds)}
	case en.ApprovalFired:
		f = &sandbox.Failure{Type: sandbox.FailureApprovalTimeout, Message: fmt.Sprintf("the run spent its approval limit of %gs suspended while a person decided", limits.ApprovalSeconds)}
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
	case st.Failed() && !completed:
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
