// Package sandbox is psych's contract: what running one model-written Python
// program promises, independent of the backend that runs it.
//
// The clauses every backend keeps:
//
//   - No in-process execution. A Sandbox runs the program in a process of its
//     own; no option lowers that floor.
//   - One program per execution. Each Run gets a fresh process tree and a fresh
//     TMPDIR; nothing is carried from one Run to the next.
//   - Failures are data. stdout, stderr and the full traceback come back in the
//     Result. A program failure (an exception, a non-zero exit, a signal, a hit
//     limit, a protocol violation by the program) is never a Go error. A Go
//     error from Run means the sandbox itself could not run: bad configuration,
//     a refused requirement, a host fault, or the caller's context ending.
//   - The environment is built from nothing: an allowlist plus the few
//     variables the backend sets and documents. A credential nobody allowed
//     never reaches the child.
//   - Network is off by default, and NetworkDenied is true only when the
//     backend verified the denial for that very execution.
//   - Host bindings are ordinary Python calls that reach the host through the
//     Bindings the caller passes. This package has no import path to any tool
//     registry; the caller decides what a binding does.
//   - Every byte from the program is hostile. Nothing it sends can change what
//     the host measured (limits, usage, attestation).
//
// Limits and their attribution:
//
//   - A zero field of Limits takes DefaultLimits' value; Validate refuses what
//     no run can have.
//   - Result.LimitHit names the cap that ended the run, decided from kernel
//     evidence where there is any: the wall timer fired, SIGXCPU or SIGKILL
//     with the CPU at its limit, a cgroup's OOM or pids event. Where it rests
//     on the program's own report (an uncaught MemoryError, EFBIG), the Result
//     says so (LimitSource). When several caps fired, the one that acted first
//     wins. A MemoryError the program caught and survived ended nothing.
//
// The wire protocol (package wire): one channel per execution, each frame a
// 4-byte big-endian length and one UTF-8 JSON object, capped (16 MiB by
// default): start (host to child), call, reply (host to child), result. A
// malformed, oversized, unexpected or duplicate frame (a call after the
// result, an id that repeats or goes back, an undeclared binding, a second
// result) ends that execution with a failure, never a panic, hang or leak on
// the host.
//
// How the module is built (test/importrules and test/portable enforce it):
//
//   - Nothing under sandbox/, bootstrap/, nsexec/, cgroups/, seccomp/, netns/
//     or internal/reexec/ imports the root package psych or anything that
//     knows the tool registry; the root package imports sandbox, never the
//     reverse.
//   - This package imports none of its backends: a user who never touches
//     containers never links containerd. cgroups, seccomp and netns are
//     leaves that import no other package of the module.
//   - Every package builds on any GOOS and without cgo; a Linux-only
//     backend's stub constructor returns an error saying so.
//   - Go plans, a C init executes: the host computes each run's plan (mounts,
//     rlimits, ids, the seccomp filter, argv, environment), and nsexec's C
//     constructor carries it out before any Go runtime starts in the child.
package sandbox
