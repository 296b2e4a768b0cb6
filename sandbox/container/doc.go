// Package container is psych's container backend: each program runs in a
// fresh container of an image, on containerd (through its Go client, one
// connection per Sandbox), podman or docker (through their command lines),
// driven by the same bootstrap as the subprocess backend and served by the
// same host core (sandbox/internal/host), so that switching backends does
// not change behaviour. The engine isolates; psych verifies, and refuses a
// run below its floor.
//
// What every run gets, on every engine:
//
//   - psych's own init as pid 1: this very executable, whose nsexec
//     constructor becomes the init before any Go runtime starts, run from a
//     read-only directory of the host's (/.psych/boot) by its own dynamic
//     loader and with its own shared objects (the files this process was
//     loaded from), so that nothing of the image runs before the
//     interpreter. The init connects back over a socket in the run's
//     directory (/.psych/run, read-only), reads its plan there, is
//     non-dumpable, lowers the rlimits, drops every capability, sets
//     no_new_privs, applies the Landlock scopes, loads psych's own seccomp
//     filter over the engine's, and starts the interpreter with the
//     environment built from nothing (what an engine adds, HOSTNAME or
//     container=podman, never reaches it) and /dev/null as stdin. The init
//     itself starts in psych's environment alone (podman --unsetenv-all,
//     docker each image ENV name unset, containerd psych's spec), and an
//     empty /etc/ld.so.preload of psych's covers the image's: no image
//     variable or preload list reaches its loader. It
//     reaps, reports the interpreter's exact wait status, and exits with it,
//     ending the container; it also exits when the host's end of its socket
//     closes, so a killed host takes its runs with it.
//   - The bootstrap, bootstrap.Source verbatim on argv, which connects to
//     the run's wire socket. The host checks both sockets' peers (uid, and
//     that the wire's is the init's child) before it trusts either.
//   - A network namespace of its own with nothing but lo (--network=none;
//     containerd without CNI), verified before the go-ahead through a
//     NETLINK_ROUTE socket a short-lived helper (this binary again, nsexec's
//     netns mode) opened inside it: no thread of the host enters it.
//     network_denied comes only from that check, and a run whose check
//     fails is refused (sandbox.ErrRefused). Request.Network runs the
//     container in the host's network namespace.
//   - A read-only root: on containerd a view snapshot over psych's base, a
//     committed layer over the image that adds only empty mount points (so
//     any image serves); on podman and docker --read-only. /tmp (HOME,
//     TMPDIR) and /work (the working directory, sandbox.WorkDir): two
//     directories of one tmpfs capped in bytes and inodes (TmpBytes,
//     TmpInodes) that the host mounts in the run's directory and binds in,
//     holding it so that it writes Request.Files before the program and
//     collects Result.Files once the run's pid namespace is gone; /dev/shm a
//     quarter of it, noexec (podman: a tmpfs the host mounted). The sandbox's /etc/passwd, group, hosts and
//     nsswitch.conf and an empty ld.so.preload over the image's. No image
//     VOLUME (podman ignores them; docker, which would make each run a
//     writable one, refuses such an image at New) and no HEALTHCHECK
//     (--no-healthcheck). No /sys (an empty directory covers
//     what an engine mounts there) and no cgroup file system. /.psych/boot
//     and those /etc files come from a read-only overlay of the boot
//     directory that the host mounts for each run (under its scratch
//     directory), never from the directory itself: their inodes are the
//     run's own, so an inotify or fanotify watch on them sees no other
//     run's start (the image's root is the run's own snapshot already).
//   - No capabilities, no_new_privs, runc's masked and read-only /proc
//     paths, the run user and never uid 0 inside. By default every run
//     claims a pair of outside ids of its own from the range the subprocess
//     backend uses (100000000-100065535), so the kernel's per-uid quotas
//     never cross runs; RunAs fixes one id for all runs instead.
//     containerd gives each run a user namespace of its own: inside, the
//     program is uid 1000, mapped to the pair's second id, and uid 0 (which
//     runc needs for the setup) to its first, never to the host's root.
//     podman and docker here run without one: the program's uid is the
//     pair's second id itself.
//   - The seccomp policy of package seccomp twice: rendered as OCI seccomp
//     for the engine (its Deny rules have no OCI form) and, exactly as the
//     subprocess backend loads it, by the init on top; the stricter answer
//     of two stacked filters wins.
//   - cgroup limits from the engine (memory, swap at zero, pids = the
//     process count plus one for the init); the CPU limit over the whole
//     run and the OOM watch from the host, on the container's own cgroups
//     (cgroups.Open, which refuses a cgroup that is the host's or a root).
//     The cgroups' peaks count runc's own setup too: usage.peak_processes
//     comes from the host's samples alone.
//   - An attestation (Result.Isolation) read from the init's and the
//     interpreter's /proc entries before the start frame is sent, with
//     backend "container", the engine, and the image's reference and digest.
//     A run below the floor (an effective capability, no no_new_privs, an
//     id 0, the network denial unverified when it was not granted, an init
//     started with a variable psych did not set, or psych's seccomp filter
//     not the newest, by digest, of the init's and the interpreter's, read
//     through ptrace, with the same count in both) is refused with
//     sandbox.ErrRefused.
//
// Images are never pulled: New checks that the engine holds the image and
// that the image has the interpreter (the label io.psych.python, else
// ContainerPythonBin), and a missing one is ErrImageNotFound, with the
// command that would import or pull it. `make image` builds psych's own,
// localhost/psych-python:3.11, without a registry.
//
// Extra options never lower isolation: ExtraRunArgs may only carry the
// flags in an allowlist (labels, CPU shares and sets, the runtime), each
// with its value, no label or annotation under io.psych., and is placed
// before psych's own flags; containerd's SpecOpts are applied before
// psych's spec, which overwrites the process, the mounts, the namespaces,
// the seccomp profile, the resources and the hooks. The floor is checked on
// every run whatever the options said.
//
// Cleanup: the task, the container and its snapshot (containerd), or the
// container (an attached `run`, then `rm -f`) are removed on every path,
// the cgroup emptied first, and the run's directories with them. After a
// result the removal runs in the background (Close waits for it); after a
// failure or a cancelled context, before Run returns. stdin is /dev/null,
// given by the init, so no engine's stdin needs closing. Everything psych makes is labelled with its host's owner (pid and
// start time, cgroups.Owner); New reaps what a dead host left, and only
// that. If containerd dies during a run, Run ends with sandbox.ErrHostFault
// within moments (unless the result was in) and leaves what is left to the
// next New.
//
// The warm pool (Config.Pool) keeps containers started ahead of requests:
// the task started, the init connected, the network namespace verified,
// the attestation read and the floor checked, the bootstrap connected to
// its wire and blocked on its start frame, at the pool's caps and with only
// the sandbox's own variables. Dispatch is the subprocess backend's, through
// the same core (pool.CheckPooled): the container must still read back
// as it was started, its network namespace is checked again through the
// netlink socket kept for it, the host writes the request's limits into
// the container's cgroup and resets its memory peak, the init (psych's own
// in every engine) lowers the interpreter's rlimits with prlimit and the
// attestation reads them back, and the start frame carries the request's
// environment; CPU and wall count from dispatch. With PoolConfig.Preload
// a container counts as ready only once its bootstrap imported the modules
// and reported what they read from the environment. A request the pool
// cannot serve runs cold and says why (Isolation.ColdReason). Each pooled
// container serves one program and is removed as a cold one is; Close
// removes the unserved ones. A pool needs the runs' own outside ids (RunAs
// nil).
//
// The backend needs a root host (the engines' sockets are root's) and Linux
// with cgo. With user namespaces, containerd's state directory must be
// searchable by the mapped ids, as /run/containerd is.
//
// # Files
//
//   - config.go: Config, the engines, the defaults and checks (those shared
//     with the subprocess backend in sandbox/internal/setup).
//   - container_linux.go: New, Run, a run's start by phase (ids, channels,
//     spec, launch, handshake, watch), serve and unwind.
//   - engine_linux.go: the engine interface; containerd_linux.go and
//     cli_linux.go (podman, docker) implement it; spec_linux.go: the OCI spec.
//   - boot_linux.go: the init's files, mounted into each container.
//   - verify_linux.go: the floor's readers (the init's environment, the
//     seccomp filters).
//   - pool_linux.go: the warm pool's fill and dispatch.
//   - container_other.go: other builds.
package container
