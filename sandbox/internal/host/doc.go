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
package host
