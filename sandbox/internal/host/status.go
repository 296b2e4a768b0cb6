package host

import (
	"fmt"
	"syscall"
)

// ExitStatus is how the interpreter ended, whatever reported it: a wait
// status from the init, or the exit code an engine reports for a container
// (where a signal shows as 128+n).
type ExitStatus struct {
	// Code is the exit code when Signal is zero.
	Code int
	// Signal is the signal that ended the interpreter; zero when it exited.
	Signal syscall.Signal
}

// WaitStatus converts a wait status.
func WaitStatus(ws syscall.WaitStatus) ExitStatus {
	if ws.Signaled() {
		return ExitStatus{Signal: ws.Signal()}
	}
	return ExitStatus{Code: ws.ExitStatus()}
}

// EngineStatus converts a container engine's exit code: 128+n for n in 1..64
// is signal n, as engines and shells report it. A program that exits with
// such a code itself is taken for the signal; a backend whose init reports
// the wait status does not need this.
func EngineStatus(code uint32) ExitStatus {
	if code > 128 && code <= 128+64 {
		return ExitStatus{Signal: syscall.Signal(code - 128)}
	}
	return ExitStatus{Code: int(code)}
}

// Signaled reports whether a signal ended the interpreter.
func (s ExitStatus) Signaled() bool { return s.Signal != 0 }

// Failed reports whether the interpreter ended badly on its own account.
func (s ExitStatus) Failed() bool { return s.Signal != 0 || s.Code != 0 }

func (s ExitStatus) String() string {
	if s.Signaled() {
		return "killed by " + SignalName(s.Signal)
	}
	return fmt.Sprintf("exit status %d", s.Code)
}

// linuxSignals are the names of Linux's signals, by number: the child is
// always a Linux process, whatever the host builds for.
var linuxSignals = [...]string{
	1: "SIGHUP", 2: "SIGINT", 3: "SIGQUIT", 4: "SIGILL", 5: "SIGTRAP", 6: "SIGABRT", 7: "SIGBUS",
	8: "SIGFPE", 9: "SIGKILL", 10: "SIGUSR1", 11: "SIGSEGV", 12: "SIGUSR2", 13: "SIGPIPE",
	14: "SIGALRM", 15: "SIGTERM", 16: "SIGSTKFLT", 17: "SIGCHLD", 18: "SIGCONT", 19: "SIGSTOP",
	20: "SIGTSTP", 21: "SIGTTIN", 22: "SIGTTOU", 23: "SIGURG", 24: "SIGXCPU", 25: "SIGXFSZ",
	26: "SIGVTALRM", 27: "SIGPROF", 28: "SIGWINCH", 29: "SIGIO", 30: "SIGPWR", 31: "SIGSYS",
}

// Linux signal numbers the attribution reads.
const (
	sigKILL syscall.Signal = 9
	sigBUS  syscall.Signal = 7
	sigXCPU syscall.Signal = 24
)

// SignalName is the Linux name of sig ("SIGSEGV"), or "SIGRTMIN+n" and
// "signal n" past the classic ones.
func SignalName(sig syscall.Signal) string {
	n := int(sig)
	switch {
	case n > 0 && n < len(linuxSignals):
		return linuxSignals[n]
	case n >= 34 && n <= 64:
		return fmt.Sprintf("SIGRTMIN+%d", n-34)
	}
	return fmt.Sprintf("signal %d", n)
}
