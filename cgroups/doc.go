// Package cgroups gives each psych execution cgroups of its own: the child
// is in them from its first instruction, its whole tree is limited (memory,
// tasks), accounted (CPU, memory peak, tasks, OOM kills, refused forks),
// killed and frozen as one, setsid'd and double-forked descendants
// included. It is a leaf: it imports no other package of psych.
//
// # Why not opencontainers/cgroups
//
// That library chooses v1 or v2 for everything a process does. psych needs
// both hierarchies at once on a hybrid host (systemd's layout, with the
// resource controllers bound to v1 and a cgroup2 mount beside them): the
// unified hierarchy gives membership at clone time (CLONE_INTO_CGROUP),
// whole-tree kill (cgroup.kill), freezing (cgroup.freeze) and CPU
// accounting (cpu.stat) with no controller enabled at all, while memory and
// pids live on v1. So this package is a small Manager of its own, with a v2
// side and a v1 side used together.
//
// # Layouts and the files each uses
//
// NewManager detects the layout once per process (DetectLayout) from
// /proc/self/mountinfo (read by moby/sys/mountinfo):
//
//   - unified (pure v2), Mode "v2": everything is in the run's directory on
//     cgroup2: memory.max and memory.swap.max=0, pids.max; cpu.stat
//     (usage_usec), memory.current, memory.peak, memory.events (oom_kill),
//     pids.current, pids.peak, pids.events (max); cgroup.kill,
//     cgroup.freeze, cgroup.events (populated, frozen).
//   - hybrid, Mode "v1": membership (CloneFD), kill, freeze and CPU from the
//     unified directory as above; memory from the v1 memory hierarchy
//     (memory.limit_in_bytes, memory.memsw.limit_in_bytes or else
//     memory.swappiness, memory.usage_in_bytes, memory.max_usage_in_bytes,
//     memory.oom_control's oom_kill or else memory.failcnt) and pids from
//     the v1 pids hierarchy (the same files as on v2). A controller that
//     the host leaves on cgroup2 is used there instead.
//   - legacy (v1 only), Mode "v1": memory and pids as on hybrid, and
//     cpuacct.usage for CPU, freezer.state for Freeze, and for Kill: freeze,
//     SIGKILL each pid of cgroup.procs, thaw, until none is left. There is
//     no CloneFD (-1); Attach does all the membership.
//   - none: NewManager fails with ErrUnavailable. A nil *Manager stands for
//     running without cgroups and reports Mode "none".
//
// CLONE_INTO_CGROUP takes only a cgroup2 directory (a v1 one fails with
// EBADF), so the v1 directories are joined by Attach(pid), which the caller
// makes while the child still waits for its go-ahead. A Manager needs both
// memory and pids, from one hierarchy or the other; without either it
// fails with ErrUnavailable rather than hand out runs that are not limited.
//
// # Parents and delegation
//
// Runs are made under a parent in each hierarchy: Config.UnifiedParent and
// Config.V1Parents, or by default a "psych" child of the host process's
// own cgroup there. Parents are shared by every host process that uses
// them and are never removed. A root host can always create them; a
// non-root host needs a delegated subtree: a systemd unit with
// Delegate=yes (a service, or `systemd-run --scope -p Delegate=yes`), which
// hands the unit's cgroup to its user with the controllers available in it,
// or parents prepared for it by an administrator. Where a parent cannot be
// created or written, NewManager fails with ErrUnavailable and the caller
// chooses between refusing to run and running without cgroups, saying so.
//
// On v2, the kernel lets a non-root cgroup enable a domain controller
// (memory) for its children only while it holds no process of its own:
// "no internal processes". When, and only when, the host's own cgroup O
// lacks memory or pids in O/cgroup.subtree_control and the kernel refuses
// to enable them because O holds processes, the Manager moves every process
// of O into the leaf O/host (itself, and the other processes of the same
// unit: parallel test binaries, the shell that started them; a Delegate=yes
// service is expected to do so, and podman does the same), then enables
// memory and pids in O and in O/psych. Accounting and limits above O are
// unchanged. Hosts sharing O converge: each moves what is left and retries.
// A host that finds itself inside O/host serves from O: it knows the leaf
// by its sibling O/psych, which is made before any process moves. The root cgroup is exempt and nothing moves there.
// The Manager never writes above its own cgroup, nor moves processes out of
// a configured parent.
//
// # Runs and owners
//
// A run's directory is named "PID.START-RUNID" in every hierarchy: the
// host's pid, its start time (field 22 of /proc/PID/stat) and the caller's
// run id. NewManager removes, killing what is left in them, the runs whose
// owner is dead (no such pid, or the pid now held by a later process), and
// leaves the others alone: a live host's runs, its own process's, and any
// name of another shape. Host processes sharing a parent must share a pid
// namespace, or each would take the other for dead.
//
// # What it promises and refuses
//
//   - A limit asked for is set, or New fails and leaves nothing behind.
//   - Swap is held to zero where the kernel can: memory.swap.max (v2, with
//     swap accounting), memory.memsw.limit_in_bytes equal to the memory
//     limit (v1, with swap accounting), else memory.swappiness=0 (v1),
//     which discourages swapping the run but does not forbid it.
//     Run.SwapGuard names what holds.
//   - CPU time is not a cgroup limit: the caller polls Run.CPU (one pread
//     of an fd kept open) and kills.
//   - An OOM kill takes one process of the run, chosen by the kernel; the
//     run is not killed as a group (memory.oom.group is left unset), so the
//     run's init can report what happened.
//   - Kill does not wait. Freeze waits until every process is frozen.
//     Remove kills, waits until the run is empty and removes its
//     directories; each of these waits gives up after a few seconds with
//     an error.
//   - Kernel floors: CLONE_INTO_CGROUP needs Linux 5.7; cgroup.freeze 5.2;
//     before 5.14, without cgroup.kill, Kill freezes and signals each
//     process; memory.peak needs 5.19 and pids.peak 6.1, and without them
//     Stats says the peak is unknown.
//
// # Files
//
//   - cgroups.go: the portable API (Config, Limits, Stats, Manager, Run).
//   - errors.go: the sentinel errors.
//   - mount_linux.go: mountinfo, /proc/PID/cgroup, the layout.
//   - manager_linux.go: parents, delegation and the host leaf, stale runs.
//   - run_linux.go: a run's directories, limits, stats, kill, freeze, removal.
//   - owner.go: owners, the one rule for what a dead host left behind;
//     runname_linux.go: run names.
//   - sys_linux.go: the system calls, wrapped once.
//   - cgroups_other.go: elsewhere than Linux, ErrUnavailable.
package cgroups
