// Package nsexec is the in-namespace init of the subprocess backend: a cgo C
// constructor that runs before the Go runtime starts.
//
// Importing the package is all an embedding program does. In any process
// whose environment lacks the marker variable the constructor returns at
// once and the program runs normally. With the marker (set only by
// internal/reexec when it re-executes /proc/self/exe) the process becomes
// the init and executes the host's plan, so neither the Go runtime nor the
// embedding program's package initialisers ever run inside the sandbox.
//
// The C is small on purpose: it decodes a plan the host computed and carries
// it out in a fixed order (namespaces, the netlink handover, mounts,
// hostname, rlimits, close_range, the uid drop, re-arming pdeathsig and
// non-dumpable, capabilities and no_new_privs, Landlock scoping, seccomp, then the
// interpreter). Policy stays in Go. nsexec.h defines the plan, the fd layout
// and the sync messages; this package exports its numbers for the host side.
//
// The init refuses an unknown marker value, a plan with outer uid or gid 0,
// and any record it cannot decode; it reports the failed step to the host
// and exits, and it never runs the interpreter with less than the plan asked.
// Every call a security property rests on is checked, and read back where
// the kernel can tell (the parent-death signal, non-dumpable, no_new_privs),
// so that even a call made to return success without effect (by a seccomp
// filter the init inherited) is caught.
//
// The init exists only in a Linux build with cgo. Elsewhere the package is
// empty, and the backends that need it refuse to construct.
package nsexec
