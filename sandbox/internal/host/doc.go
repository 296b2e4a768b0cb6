// Package host is the host side of one execution that every backend shares:
// everything between "the interpreter exists, holding one end of the wire"
// and "here is the Result", none of which depends on how the interpreter was
// started or isolated.
//
//   - Prepare validates a Request (limits merged and in range, the code valid
//     UTF-8, the bindings' names by sandbox.CheckName, the start frame under
//     the frame cap) and Env builds the child's environment from nothing.
//   - Server serves the wire: it sends the start frame, answers the
//     program's binding calls one at a time, takes its one result frame and
//     then its exit frame, and ends the run on any malformed, oversized,
//     unexpected or duplicate frame. Every byte from the program is hostile.
//   - Capture drains stdout and stderr under a cap, reading on past it, and
//     hands what it keeps on as it comes (Request.Output), decoded exactly
//     as the Result's text: a call that panics stops the delivery, never
//     the drain.
//   - Execution runs the supervision loop: the wall clock (pausable, for a
//     run frozen while a person approves a call), the whole-run CPU and OOM
//     watch on the run's cgroup, the context, protocol violations; and then
//     the attribution of limit_hit and the failure description, over a
//     backend-neutral ExitStatus. Where the backend's Kill takes the whole
//     tree (EndAtExitFrame), the run ends at the program's exit frame once
//     the wire and its output have ended, not after the interpreter's own
//     teardown; the frame's status is then the run's, which the program
//     could have given the kernel as well. Output still held open (a child
//     of the program) leaves the end to the kernel's word.
//
// What it refuses: nothing a frame says changes what the host measured; a
// Bindings reply that is not JSON, or over the frame cap, reaches the
// program as a BindingError, never as a corrupt frame.
//
// Beside it: package attest reads the attestation from the kernel, package
// resources holds the run's outside ids, run directories and /etc, and
// package pool the warm pool and its dispatch.
//
// # Files
//
//   - request.go: Prepare, the request's checks and start frame; env.go:
//     the environment built from nothing.
//   - server.go: Server, the wire served frame by frame.
//   - output.go: Capture, stdout and stderr under their caps.
//   - execution.go: Execution, supervision from Begin to the Result;
//     clock.go: the pausable wall clock; tmpfs.go, tmpfs_linux.go: how
//     full the run's tmpfs mounts were.
//   - attribute.go: limit_hit and the failure from the run's ending;
//     status.go: ExitStatus, from a wait or an engine.
//   - workspace_linux.go: the run's tmpfs workspace, the files written in
//     and collected, the figures; png.go: a figure's PNG checked.
package host
