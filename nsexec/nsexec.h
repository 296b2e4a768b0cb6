// The contract between the host (internal/reexec, Go) and the init
// (nsexec.c). This header is the one place that defines it; the Go side takes
// every number from here through cgo.
//
// Environment: PSYCH_MARKER, whose value selects the mode:
//   "init"       runs the plan (the subprocess backend);
//   "container"  is pid 1 of a container an engine started: it connects to
//                PSYCH_DIR/sync.sock (SOCK_SEQPACKET) as its sync socket,
//                reads its plan from PSYCH_DIR/plan, and runs it as the init
//                does, with no namespaces and no mounts of its own (the
//                engine made them); the interpreter's stdin is /dev/null and
//                its channel a socket the bootstrap connects itself; the
//                init exits with the interpreter's status, a signal as
//                128+n. PSYCH_DIR is PSYCH_ENV_DIR's value, or
//                PSYCH_CONTAINER_DIR;
//   "forkserver" serves forks of P without an exec: fd 3 is a SOCK_SEQPACKET
//                socket on which each message is a struct psych_fork_req
//                with P's descriptors (SCM_RIGHTS, in the order below, the
//                cgroup directory last if the request names one); the
//                server clones P with CLONE_PARENT (P is the host's child,
//                as when the host starts it) and CLONE_PIDFD, into the
//                cgroup (CLONE_INTO_CGROUP) if given, and answers with a
//                struct psych_fork_reply and P's pidfd. P places the
//                descriptors, starts a session of its own and runs the
//                plan as "init" does. EOF on fd 3 ends the server;
//   "netns"      opens a NETLINK_ROUTE socket in the network namespace of
//                fd 4 (setns) and sends it over fd 3 in a READY message,
//                then exits 0: the host's way into a namespace without
//                moving any thread of its own.
// Any other value exits. In every mode but "container" the environment
// holds nothing else.
//
// File descriptors (the host passes them through ExtraFiles):
//   0      /dev/null          1, 2  stdout and stderr pipes
//   3      sync socket        (SOCK_SEQPACKET, one struct psych_sync per message)
//   4      the program's channel (the interpreter gets it as fd 3,
//          PSYCH_FD_PROGRAM_WIRE)
//   5      the plan           (a memfd)
//   6...   trees              (open_tree clones the host made; mounts name them)
//
// The plan: the 4-byte magic, a u32 version, then records. A record is a
// u16 tag, u16 zero, u32 length and that many bytes of value. Integers are
// native-endian. Strings are not terminated. Tags:
//   OUTER_IDS   u32 uid, u32 gid: the host-side ids; a root-started process
//               switches to them before anything else. Never 0.
//   INNER_IDS   u32 uid, u32 gid: the ids the init drops to before exec.
//   NAMESPACES  u64 clone flags to unshare; CLONE_NEWUSER first, then the
//               rest after P mapped INNER_IDS onto OUTER_IDS in it (one id
//               each, setgroups denied: a process may map its own ids).
//               0: no namespaces. Without CLONE_NEWUSER, a root P makes
//               them as root, and the init stays root through the mounts
//               and drops straight to the outer ids (INNER_IDS must equal
//               them), the bounding set first.
//   HOSTNAME    string
//   ROOT        string: the empty host directory the new root is built on
//   ROOT_DATA   string: tmpfs options for the new root
//   MOUNT       u16 kind, u16 flags, i32 fd (or -1), u64 MOUNT_ATTR_* set,
//               u32 mode, then three u32-length-prefixed strings: source,
//               target (absolute inside the new root), data. In order.
//               While the init carries them out its working directory is
//               the new root: a relative path in a record resolves there.
//   CWD         string, inside the new root
//   RLIMIT      u32 resource, u64 soft, u64 hard (only ever lowered)
//   LANDLOCK    u64 Landlock scope flags (ABI 6): a domain applied after
//               no_new_privs and before seccomp. Absent: none.
//   LANDLOCK_FS u64 the file-system accesses that domain handles (ABI 1+):
//               each is denied but beneath a LANDLOCK_PATH that allows it.
//   LANDLOCK_PATH u64 allowed accesses, then the path (the rest): opened
//               O_PATH by the init after the drop to the run ids; one that
//               does not exist or that they cannot reach is left out
//               (narrower, never wider). Only with LANDLOCK_FS.
//   SECCOMP     struct sock_filter[]: loaded last, after no_new_privs
//   CGROUP_TASKS i32 fd: a v1 cgroup's `tasks` file, opened for writing by
//               the host; P writes "0" to it before anything else, joining
//               that cgroup itself (a single-threaded task moving itself
//               takes no global threadgroup lock, unlike a pid written to
//               cgroup.procs), and closes it. The init inherits the membership.
//   EXE         string: the interpreter; ARG and ENV: one string each, in order
//
// Sync messages, in order:
//   P -> host   PID      a = the init's pid (P exits 0 after this)
//   C -> host   READY    carries the netlink socket (SCM_RIGHTS) when a
//                        network namespace was made; C then builds the view
//                        and drops everything but seccomp while the host
//                        checks the namespace
//   host -> C   GO       C loads seccomp, then forks and execs the interpreter
//   C -> host   EXEC     a = the interpreter's pid inside the namespace
//   host -> C   LOWER    after EXEC, before the start frame (a pooled
//                        sandbox at dispatch): a = n, text = n records of
//                        u32 resource, u64 soft, u64 hard (PSYCH_LOWER_MAX
//                        at most); C lowers the interpreter's rlimits to
//                        them with prlimit (same uid: no privilege; a hard
//                        limit is never raised) and answers
//   C -> host   LOWERED  a = 0, or -errno with b = the resource that failed
//   C -> host   EXIT     a = the interpreter's wait status; the init exits
//   any -> host ERROR    a = step, b = errno, text; then exit PSYCH_EXIT_SETUP
// EOF on the sync socket at any point makes the init exit, which kills the
// whole pid namespace.

#ifndef PSYCH_NSEXEC_H
#define PSYCH_NSEXEC_H

#include <stdint.h>

#define PSYCH_MARKER "_PSYCH_NSEXEC"
#define PSYCH_MARKER_INIT "init"
#define PSYCH_MARKER_CONTAINER "container"
#define PSYCH_MARKER_NETNS "netns"
#define PSYCH_MARKER_FORKSERVER "forkserver"
#define PSYCH_ENV_DIR "_PSYCH_NSEXEC_DIR"
#define PSYCH_CONTAINER_DIR "/.psych/run"
#define PSYCH_CONTAINER_SYNC "sync.sock"
#define PSYCH_CONTAINER_PLAN "plan"

#define PSYCH_FD_SYNC 3
#define PSYCH_FD_WIRE 4
#define PSYCH_FD_PLAN 5
#define PSYCH_FD_TREES 6
/* The program's channel as the interpreter gets it (the bootstrap's
 * arguments name it); outside a container only. */
#define PSYCH_FD_PROGRAM_WIRE 3

#define PSYCH_PLAN_MAGIC 0x50595350u /* "PSYP" read as a little-endian u32 */
#define PSYCH_PLAN_VERSION 1
#define PSYCH_PLAN_MAX (16 << 20)
#define PSYCH_PLAN_MAX_ITEMS 4096

#define PSYCH_TAG_OUTER_IDS 1
#define PSYCH_TAG_INNER_IDS 2
#define PSYCH_TAG_NAMESPACES 3
#define PSYCH_TAG_HOSTNAME 4
#define PSYCH_TAG_ROOT 5
#define PSYCH_TAG_ROOT_DATA 6
#define PSYCH_TAG_MOUNT 7
#define PSYCH_TAG_CWD 8
#define PSYCH_TAG_RLIMIT 9
#define PSYCH_TAG_SECCOMP 10
#define PSYCH_TAG_EXE 11
#define PSYCH_TAG_ARG 12
#define PSYCH_TAG_ENV 13
#define PSYCH_TAG_LANDLOCK 14
#define PSYCH_TAG_CGROUP_TASKS 15
#define PSYCH_TAG_LANDLOCK_FS 16
#define PSYCH_TAG_LANDLOCK_PATH 17
#define PSYCH_PLAN_MAX_CGROUPS 16

#define PSYCH_MNT_MKDIR 1   /* target, mode */
#define PSYCH_MNT_SYMLINK 2 /* source is the link's content */
#define PSYCH_MNT_FILE 3    /* data is the content, mode */
#define PSYCH_MNT_BIND 4    /* fd, or source path cloned by the init; attr */
#define PSYCH_MNT_TMPFS 5   /* data is the tmpfs options; attr NOEXEC honoured */
#define PSYCH_MNT_PROC 6
#define PSYCH_MNT_DEVPTS 7 /* data is the devpts options: a new instance, never the host's */
#define PSYCH_MNT_OVERLAY 8 /* a read-only overlayfs; data is its options (lowerdir=...); attr */
#define PSYCH_MNT_DETACH 9  /* lazily unmounts all that is mounted at target, then removes it */

#define PSYCH_MNT_RECURSIVE 1

#define PSYCH_SYNC_PID 3
#define PSYCH_SYNC_READY 4
#define PSYCH_SYNC_GO 5
#define PSYCH_SYNC_EXEC 6
#define PSYCH_SYNC_EXIT 7
#define PSYCH_SYNC_ERROR 8
#define PSYCH_SYNC_LOWER 9
#define PSYCH_SYNC_LOWERED 10
#define PSYCH_LOWER_RECORD 20
#define PSYCH_LOWER_MAX 8

#define PSYCH_STEP_PLAN 1
#define PSYCH_STEP_IDS 2
#define PSYCH_STEP_USERNS 3
#define PSYCH_STEP_NAMESPACES 4
#define PSYCH_STEP_CLONE 5
#define PSYCH_STEP_INIT 6
#define PSYCH_STEP_MOUNT 7
#define PSYCH_STEP_HOSTNAME 8
#define PSYCH_STEP_RLIMITS 9
#define PSYCH_STEP_FDS 10
#define PSYCH_STEP_CAPS 11
#define PSYCH_STEP_SECCOMP 12
#define PSYCH_STEP_EXEC 13
#define PSYCH_STEP_LANDLOCK 14
#define PSYCH_STEP_PDEATHSIG 15
#define PSYCH_STEP_DUMPABLE 16
#define PSYCH_STEP_CONNECT 17
#define PSYCH_STEP_CGROUP 18

#define PSYCH_EXIT_SETUP 125
#define PSYCH_EXIT_HOST_GONE 124
#define PSYCH_EXIT_NO_USERNS 123

#define PSYCH_SYNC_TEXT 200

// The fork server's request and reply ("forkserver" above). A request
// carries at least PSYCH_FD_TREES descriptors (0 to 5 as P sees them) and
// at most PSYCH_FORK_MAX_FDS; cgroup is the index of a unified cgroup
// directory among them, or PSYCH_FORK_NO_CGROUP. pid is P's pid, or
// -errno with no descriptor.
#define PSYCH_FORK_MAGIC 0x4b524f46u /* "FORK" */
#define PSYCH_FORK_MAX_FDS 64
#define PSYCH_FORK_NO_CGROUP 0xffffffffu

struct psych_fork_req {
	uint32_t magic;
	uint32_t cgroup;
};

struct psych_fork_reply {
	int32_t pid;
};

struct psych_sync {
	uint32_t type;
	int32_t a;
	int32_t b;
	char text[PSYCH_SYNC_TEXT];
};

// psych_probe_userns is the in-process probe (nsexec.c): 1 when a process
// with outer ids uid/gid can make a user namespace that grants
// capabilities, 0 when it cannot, 2 when it cannot take those ids (each
// with *why the errno), -errno when the probe failed.
int psych_probe_userns(uint32_t uid, uint32_t gid, int *why);

#endif
