// Package reexec is the host side of the subprocess backend's re-exec: it
// encodes the plan, starts the first process P and runs the typed sync
// protocol that nsexec.h defines.
//
// P is cloned by a fork server: /proc/self/exe started once per host
// process with the nsexec marker (its constructor serves it; the Go
// runtime never starts there), which clones P with CLONE_PARENT for each
// Start, so that a run pays a clone rather than a fork, an exec and a
// dynamic link of the host binary. The server holds a request's
// descriptors only until P is cloned, dies with the host, and is started
// again if it died; where none can be had, P is started as
// /proc/self/exe through Go's vfork path (no namespace flags, so Go never
// forks the whole host). Either way P is the host's child with the same
// descriptors, ids and session of its own.
//
// The fd layout is fixed (nsexec.h): sync socket, the program's channel,
// the plan memfd (sealed), then the open_tree clones of the host trees. The
// first process drops to the outer run ids at once, unshares its user
// namespace and waits for the maps this package writes (setgroups denied;
// the caller chooses the mappings), unshares the rest, and clones the init
// with CLONE_PARENT, so the init is this process's child: it is reaped
// through a pidfd here, and killing it ends its whole pid namespace.
//
// The init reports its own setup failure (step, errno, message), which
// Start returns as an *InitError: the sandbox could not run, never a
// program failure. Setup is bounded by Options.Timeout; on any error Start
// kills and reaps what it started. The init exits when the host's end of
// the sync socket closes, so a host that dies takes its runs with it.
package reexec
