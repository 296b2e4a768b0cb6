// Package subprocess is psych's subprocess backend: it runs each program as
// a fresh interpreter process on this host, driven by the shared bootstrap
// over an inherited socket (fd 3).
//
// What this backend gives today, and what it refuses:
//
//   - Resource limits, not isolation. The child shares the host's filesystem
//     view, network and (with a single RunAs id) uid with every other run.
//     Network is therefore never verified as denied: NetworkDenied is always
//     false, Request.Network changes nothing, and RequireNetworkDenial makes
//     every Run fail with sandbox.ErrRefused rather than run unverified.
//   - The child is a plain process in its own session with Pdeathsig
//     SIGKILL, started as `PYTHON -I -B -c BOOTSTRAP --fd 3`, with stdin at
//     EOF, its working directory, HOME and TMPDIR a fresh per-run directory
//     under a root-owned base (never the world-writable /tmp), removed only
//     after every process of the run is dead.
//   - The environment is built from nothing: the allowlisted host variables
//     plus HOME, TMPDIR, PATH, PYTHONDONTWRITEBYTECODE=1 and two variables the
//     sandbox needs: MALLOC_ARENA_MAX=2, so a threaded program is not ended
//     by RLIMIT_AS through glibc's 64 MiB per-thread arenas before it reaches
//     process_count, and LC_ALL=C.UTF-8, so the interpreter's encoding is
//     UTF-8 and CPython's locale coercion adds no variable of its own.
//   - rlimits, planned by the host and applied by the bootstrap to itself
//     before it reads the start frame, so no line of the program runs
//     without them (a root host without CAP_SYS_RESOURCE cannot prlimit(2) a
//     process of another uid; lowering one's own needs no privilege): CPU
//     (soft = ceil(cpu_seconds), hard one second more), AS, FSIZE (SIGXFSZ
//     ignored, so writes fail with EFBIG), NPROC, NOFILE 256, STACK 8 MiB and
//     CORE 0. RLIMIT_NPROC is counted per user
//     across the whole host: runs sharing one RunAs id share it, so give
//     concurrent runs an IDRange.
//   - The whole tree is killed, setsid'd descendants included, through a
//     per-run cgroup on the unified hierarchy: the child is spawned straight
//     into it (CLONE_INTO_CGROUP) and killed with cgroup.kill; the run's CPU
//     across all its processes is read from its cpu.stat, so cpu_seconds is a
//     whole-run limit. Where no such cgroup can be made, the backend logs a
//     warning and falls back to killing the process group, which a program
//     that calls setsid can escape.
//
// Pdeathsig fires when the OS thread that started the child exits
// (golang/go#27505). The Go runtime keeps its threads unless a goroutine
// ends while locked to one with runtime.LockOSThread; an embedder that does
// that should not call Run from such a goroutine. The planned C init also
// ends everything when its sync socket reaches EOF.
//
// Limit attribution follows DESIGN.md §2: the wall timer and the CPU watch
// are the host's own evidence; SIGXCPU, or SIGKILL with the CPU at its limit,
// the kernel's; an uncaught MemoryError, EFBIG or a failed thread or process
// start rests on the program's own report, and Result.LimitSource says so.
package subprocess
