// Package reexec is the host side of the subprocess backend's re-exec: it
// encodes the plan, starts /proc/self/exe with the nsexec marker through Go's
// cheap vfork path (no namespace flags, so Go never forks the whole host),
// and runs the typed sync protocol that nsexec.h defines.
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
