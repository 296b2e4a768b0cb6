// Package subprocess is psych's subprocess backend: each program runs in a
// fresh interpreter process on this host, inside fresh namespaces, driven by
// the shared bootstrap over an inherited socket (fd 3).
//
// Go plans, a C init executes (see package sandbox). For every Run the host
// computes a plan (internal/reexec) and hands it to its own binary with the
// nsexec marker: a fork server, this binary started once per host process
// (New starts it), clones the run's first process, so that a run pays no
// exec of the host binary; the nsexec constructor carries the plan out
// before any Go runtime starts in the child. What every run gets where user
// namespaces can be had, and what it refuses:
//
//   - Namespaces: user, mount, pid, ipc, uts, cgroup and (unless the request
//     grants the network) net. The init is pid 1 of the run's pid namespace;
//     it handles only SIGCHLD, reports the interpreter's exit, and exits with
//     it, which kills everything left in the namespace, daemonised
//     grandchildren included. It also exits when its sync socket reaches EOF,
//     so a host that dies takes its runs with it.
//   - Identity: the whole tree runs as an outside id of its own (for a
//     root host, each run claims one from DefaultRunAs, 100000000-100065535,
//     across every psych host on the machine, so the kernel's per-uid quotas
//     never cross runs; the host's own uid, with AllowSameUID, for a
//     non-root one) and as uid/gid 1000 ("sandbox") inside. The map has that
//     single line, so neither the init nor the program is uid 0 inside or
//     out. setgroups is denied. A Run that finds every id of its range
//     claimed waits, at most resources.IDWait (5 s), then fails with
//     sandbox.ErrBusy.
//   - A filesystem built from nothing: a tmpfs root, read-only once built;
//     the interpreter's trees (its prefixes and the library roots /usr, /lib*,
//     /bin, /sbin that exist, with merged-/usr symlinks recreated) bound
//     read-only, nosuid, nodev; an /etc with passwd, group, hosts and
//     nsswitch.conf of its own plus the host's ld.so.cache; a /dev of null,
//     zero, full, random, urandom, the fd links and a capped tmpfs /dev/shm;
//     a fresh /proc with kcore, sysrq-trigger, keys, timer_list,
//     latency_stats and sched_debug masked and /proc/sys read-only; and /tmp
//     (HOME, TMPDIR) and /work (the working directory, where files come in
//     and out: sandbox.WorkDir), two directories of one tmpfs capped in
//     bytes and inodes (Config.TmpBytes, TmpInodes) that the host mounts and
//     holds, so that it writes Request.Files before the program and collects
//     Result.Files after its last process, from its own side (a non-root
//     host: the init's tmpfs /tmp, also the working directory, and no
//     files). Nothing else of the host:
//     no /home, /root, /var, /run or /sys, so no container or docker socket
//     and no dbus. A root host hands every tree over as an open_tree clone
//     (the init, already unprivileged, could not traverse a 0700 path such as
//     pyenv's under /root, and a swapped symlink cannot redirect an fd); a
//     non-root host's init clones them itself, as the host user. An
//     interpreter under /tmp, /dev, /proc or /etc is refused at New.
//     No run sees the host's own inodes of those trees and files: a bind
//     would share them, and an inotify or fanotify watch is on an inode, so
//     a run watching /usr would see every file another run reads. Each run
//     mounts read-only overlays of its own instead (overlayfs, mountable in
//     its user namespace since Linux 5.11): the host tree, bound at a
//     staging point, above an empty layer (overlayfs without an upper layer
//     wants two lower ones), each host mount point below a tree an overlay
//     of its own, and ld.so.cache, the network databases and the trust store
//     bound out of an overlay of their directory; the staging points are
//     detached before the program starts. Only the /dev nodes (and a host
//     file that is itself a mount point) are bound as they are.
//   - Network: off by default, and verified per run. The init opens a
//     NETLINK_ROUTE socket inside its new namespace and hands it over; the
//     host brings lo up and checks through it (package netns) that lo is the
//     only link, with loopback's addresses and routes only, and that a route
//     lookup outwards fails. NetworkDenied is true only when that check
//     passed for this run. Request.Network keeps the host's namespace: the
//     program then reaches host loopback services, the cloud metadata
//     address and everything the host reaches.
//   - Privileges, in the init's fixed order: rlimits; close_range; the drop
//     to the run ids; Pdeathsig and non-dumpable re-armed (the uid change
//     reset both); every capability dropped, the bounding and ambient sets
//     included, and no_new_privs; Landlock scoping of abstract Unix sockets
//     and signals where the kernel has Landlock ABI 6; then the seccomp
//     filter (package seccomp), which the init and the program both run
//     under.
//   - An attestation in every Result (Isolation), read by the host from the
//     init's and the interpreter's /proc status, namespace links and maps
//     before the start frame is sent. It never comes from a frame.
//
// Where no user namespace can be had (user.max_user_namespaces=0, Ubuntu's
// AppArmor restriction), probed once at New, whatever errno the kernel
// gives, New refuses (sandbox.ErrRefused, ErrNoUserNamespace), root host or
// not, unless Config.AllowFallback asks for the fallback. A root host that
// can make them without a user namespace still gets the network, pid, ipc,
// uts, mount and cgroup namespaces and the view: the init builds it as
// root, drops the bounding set and takes the run's outside ids (unmapped),
// and the network denial is verified. Elsewhere the fallback is the same
// init with no namespaces and no view (the working directory, HOME and TMPDIR
// are a per-run directory under TmpBase, which also holds the compiled
// bootstrap, read-only), but with the rlimits, the uid drop, no
// capabilities, no_new_privs, Landlock and seccomp. Where the kernel has
// Landlock (ABI 1+) the program reaches only the interpreter's trees, the
// host files a view also hands in or makes its own of (the loader's cache,
// the network databases, the trust store, passwd, group, hosts,
// nsswitch.conf; resolv.conf when the request grants the network), its own
// directory (read and write, no execute) and the /dev nodes a view has: not
// the host's home directories, /tmp, /dev/shm, /dev/pts or /proc.
// Unless the request grants the network, the filter refuses AF_INET and
// AF_INET6 sockets (EPERM). It says so in Isolation (Mode "fallback",
// LandlockFS, InetRefused); NetworkDenied is false, as nothing was
// verified, and a warning is logged. RequireNetworkDenial refuses to run
// there (sandbox.ErrRefused), as it refuses a request that grants the
// network, and any run whose own namespace fails the check.
// RequireIsolation has no effect.
//
// The interpreter cache. New needs the interpreter's prefixes (for the
// view) and the bootstrap compiled by it; one start of the interpreter
// learns both (sandbox/internal/pyfacts), and the answer is cached in
// Config.CacheDir: by default $XDG_CACHE_HOME/psych, else /var/cache/psych
// for a root host, else $HOME/.cache/psych; "-" turns it off. A later New
// for the same interpreter file starts no interpreter at all. An entry is
// keyed on the interpreter's path as given, its real file's device, inode,
// size, mode, mtime and ctime, the pyvenv.cfg beside it (if any) and the
// bootstrap's SHA-256, so a changed interpreter, virtualenv or bootstrap is
// never served a stale entry, and it carries a SHA-256 of its contents. The
// cache is trusted only as a directory of the host's euid with mode 0700
// holding regular single-link 0600 files of that euid, opened without
// following symlinks and checked with fstat on the open fd. A corrupt,
// mismatched or untrusted entry is recomputed and replaced atomically
// (temporary file, fsync, rename); a directory that is not trusted or
// cannot be used is bypassed with a warning, never a failed New. Never
// cached: the resolution of python3 on PATH for an empty PythonBin (a
// shim's answer depends on the directory and the environment), and the
// fallback's bootstrap, which is compiled at each New. The compiled seccomp
// filter is kept there too, under the same rules: one entry per executable
// that embeds psych, keyed on that file's identity (device, inode, size,
// mode, mtime, ctime) and libseccomp's version, and taken back as that
// executable compiled it (the kernel's own checks of a program, not the
// policy's again: the policy is the executable's code).
//
// The environment is built from nothing: the allowlisted variables (a
// Request's value, else the host's) plus HOME, TMPDIR, PATH, PYTHONDONTWRITEBYTECODE=1 and two variables the
// sandbox needs: MALLOC_ARENA_MAX=2, so that threads that allocate do not
// each get a malloc arena of their own (up to eight per core, 64 MiB of
// address space each) and exhaust RLIMIT_AS long before process_count (a
// thread's other reservation, its stack, is stack_bytes), and LC_ALL=C.UTF-8, so the interpreter's encoding is UTF-8
// and CPython's locale coercion adds no variable of its own.
//
// rlimits are set by the init, not by prlimit(2) (a root host without
// CAP_SYS_RESOURCE cannot prlimit a process of another uid; lowering one's
// own needs no privilege): CPU (soft = ceil(cpu_seconds), hard one second
// more), AS, FSIZE (SIGXFSZ ignored by the bootstrap, so writes fail with
// EFBIG), NPROC (process_count plus one for the init), NOFILE
// (open_files, 1024), STACK (stack_bytes, 4 MiB) and CORE 0. Since Linux 5.14 RLIMIT_NPROC counts per user namespace
// and uid, so each run's fresh user namespace makes it per run.
//
// The whole tree is killed through the init (its pid namespace dies with
// it) and, where one can be made, a per-run cgroup on the unified hierarchy:
// the first process is spawned straight into it (CLONE_INTO_CGROUP), killed
// with cgroup.kill, and its cpu.stat makes cpu_seconds a whole-run limit.
// Without one, the backend logs that cpu_seconds holds per process only.
//
// What does not depend on how the interpreter was started is the host core
// both backends share (sandbox/internal/host): request validation, the
// environment, serving the wire, the output caps, the wall and CPU
// supervision and the attribution below. This package keeps the processes,
// the namespaces and the view.
//
// The warm pool (Config.Pool, off by default) keeps sandboxes fully
// started ahead of requests: everything above, up to the interpreter with
// the bootstrap imported and blocked on its start frame, at the pool's caps
// and with only the sandbox's own variables. A Run takes the oldest that is
// still fresh (MaxAge) and dispatches its request before the start frame:
// the interpreter must still read back as it was started (its attestation,
// its network namespace checked again through the netlink socket kept for
// it, no OOM kill or refused fork in its cgroup), else it is destroyed and
// the request runs cold; then the host writes the request's cgroup limits,
// resets the memory peak, the init lowers the interpreter's rlimits to the
// request's with prlimit (the same uid: no privilege; RLIMIT_CPU counted
// from dispatch, a second above the budget for the start-up's fraction, the
// cgroup watch being the exact limit) and the attestation reads them back;
// the start frame carries the request's environment, which the bootstrap
// sets before the program's first line (on cold runs too; a warm run's
// /proc/self/environ still shows what the interpreter was started with,
// the sandbox's own variables, the same in every pooled sandbox). The CPU budget
// counts from the cgroup's usage at dispatch, the wall clock from dispatch,
// and the peak processes from the host's samples after it (no kernel resets
// pids.peak). A request the pool cannot serve runs cold and says why in
// Isolation.ColdReason: the network granted, a limit above the pool's caps,
// a stack_bytes other than the pool's (glibc sizes thread stacks from
// RLIMIT_STACK as the interpreter starts), a variable of the program's
// environment that the modules of PoolConfig.Preload read at import (a
// pooled sandbox counts as ready only once its bootstrap imported them and
// reported what they read), or no sandbox ready (a Run that
// finds none takes one being started, one request per fill, waiting at
// most five seconds, rather than start another beside it). Each pooled sandbox serves one request and is
// destroyed; the pool refills in the background. A served run's cgroup and
// directory, warm or cold, are removed after its result is returned
// (Settle waits for those); Close waits for them, destroys the sandboxes never served, and leaves nothing. A pool
// needs a user namespace, a run cgroup and a RunAs range with more ids than
// sandboxes (each holds one while it waits): New refuses it elsewhere.
//
// Limit attribution follows the contract (kernel evidence over the program's
// report; the cap that acted first wins): the wall timer and the CPU watch
// are the host's own evidence; SIGXCPU, or SIGKILL with the CPU at its limit,
// the kernel's; an uncaught MemoryError, EFBIG or a failed thread or process
// start rests on the program's own report, and Result.LimitSource says so.
//
// # Files
//
//   - config.go: Config, IDRange, the defaults and checks (those shared with
//     the container backend in sandbox/internal/setup).
//   - subprocess_linux.go: New by phase (defaults, probes, interpreter, run
//     ids, mode, reach, cgroups, pool), Run, a run's start, serve and
//     cleanup.
//   - plan_linux.go: a run's plan for the init (namespaces, seccomp, view),
//     its environment, rlimits and attestation.
//   - view_linux.go: the view, resolved once, and a run's mount plan, one
//     method per part of the root.
//   - python_linux.go: the interpreter, resolved and learnt;
//     reach_linux.go: CheckInterpreter, whether the run user reaches it.
//   - fallback_linux.go: the fallback without user namespaces.
//   - pool_linux.go: the warm pool's fill and dispatch.
//   - subprocess_other.go, reach_other.go, cgo_*.go: other builds.
package subprocess
