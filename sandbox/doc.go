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
// This package imports none of its backends.
package sandbox
