//go:build linux && cgo

package nsexec

// #cgo CFLAGS: -Wall -Wextra -Wno-unused-parameter -O2
// #include "nsexec.h"
import "C"

import (
	"fmt"
	"syscall"
)

// The contract with the C side, from nsexec.h.
const (
	Marker     = C.PSYCH_MARKER
	MarkerInit = C.PSYCH_MARKER_INIT

	MarkerContainer  = C.PSYCH_MARKER_CONTAINER
	MarkerNetns      = C.PSYCH_MARKER_NETNS
	MarkerForkServer = C.PSYCH_MARKER_FORKSERVER

	ForkMagic     = C.PSYCH_FORK_MAGIC
	ForkMaxFDs    = C.PSYCH_FORK_MAX_FDS
	ForkNoCgroup  = C.PSYCH_FORK_NO_CGROUP
	ForkReqSize   = C.sizeof_struct_psych_fork_req
	ForkRepSize   = C.sizeof_struct_psych_fork_reply
	EnvDir        = C.PSYCH_ENV_DIR
	ContainerDir  = C.PSYCH_CONTAINER_DIR
	ContainerSync = C.PSYCH_CONTAINER_SYNC
	ContainerPlan = C.PSYCH_CONTAINER_PLAN

	FDSync  = C.PSYCH_FD_SYNC
	FDWire  = C.PSYCH_FD_WIRE
	FDPlan  = C.PSYCH_FD_PLAN
	FDTrees = C.PSYCH_FD_TREES
	// FDProgramWire is the program's channel as the interpreter gets it.
	FDProgramWire = C.PSYCH_FD_PROGRAM_WIRE

	PlanMagic    = C.PSYCH_PLAN_MAGIC
	PlanVersion  = C.PSYCH_PLAN_VERSION
	PlanMax      = C.PSYCH_PLAN_MAX
	PlanMaxItems = C.PSYCH_PLAN_MAX_ITEMS

	TagOuterIDs     = C.PSYCH_TAG_OUTER_IDS
	TagInnerIDs     = C.PSYCH_TAG_INNER_IDS
	TagNamespaces   = C.PSYCH_TAG_NAMESPACES
	TagHostname     = C.PSYCH_TAG_HOSTNAME
	TagRoot         = C.PSYCH_TAG_ROOT
	TagRootData     = C.PSYCH_TAG_ROOT_DATA
	TagMount        = C.PSYCH_TAG_MOUNT
	TagCwd          = C.PSYCH_TAG_CWD
	TagRlimit       = C.PSYCH_TAG_RLIMIT
	TagSeccomp      = C.PSYCH_TAG_SECCOMP
	TagExe          = C.PSYCH_TAG_EXE
	TagArg          = C.PSYCH_TAG_ARG
	TagEnv          = C.PSYCH_TAG_ENV
	TagLandlock     = C.PSYCH_TAG_LANDLOCK
	TagCgroupTasks  = C.PSYCH_TAG_CGROUP_TASKS
	TagLandlockFS   = C.PSYCH_TAG_LANDLOCK_FS
	TagLandlockPath = C.PSYCH_TAG_LANDLOCK_PATH
	// PlanMaxCgroups bounds the CGROUP_TASKS records of a plan.
	PlanMaxCgroups = C.PSYCH_PLAN_MAX_CGROUPS

	MountMkdir     = C.PSYCH_MNT_MKDIR
	MountSymlink   = C.PSYCH_MNT_SYMLINK
	MountFile      = C.PSYCH_MNT_FILE
	MountBind      = C.PSYCH_MNT_BIND
	MountTmpfs     = C.PSYCH_MNT_TMPFS
	MountProc      = C.PSYCH_MNT_PROC
	MountDevpts    = C.PSYCH_MNT_DEVPTS
	MountOverlay   = C.PSYCH_MNT_OVERLAY
	MountDetach    = C.PSYCH_MNT_DETACH
	MountRecursive = C.PSYCH_MNT_RECURSIVE

	SyncPID   = C.PSYCH_SYNC_PID
	SyncReady = C.PSYCH_SYNC_READY
	SyncGo    = C.PSYCH_SYNC_GO
	SyncExec  = C.PSYCH_SYNC_EXEC
	SyncExit  = C.PSYCH_SYNC_EXIT
	SyncError = C.PSYCH_SYNC_ERROR
	SyncLower = C.PSYCH_SYNC_LOWER
	// SyncLowered answers SyncLower.
	SyncLowered = C.PSYCH_SYNC_LOWERED
	LowerRecord = C.PSYCH_LOWER_RECORD
	LowerMax    = C.PSYCH_LOWER_MAX
	SyncSize    = C.sizeof_struct_psych_sync
	SyncText    = C.PSYCH_SYNC_TEXT

	ExitSetup    = C.PSYCH_EXIT_SETUP
	ExitHostGone = C.PSYCH_EXIT_HOST_GONE
	ExitNoUserns = C.PSYCH_EXIT_NO_USERNS
)

// Steps name where the init failed, for its error report.
var Steps = map[int]string{
	C.PSYCH_STEP_PLAN:       "plan",
	C.PSYCH_STEP_IDS:        "ids",
	C.PSYCH_STEP_USERNS:     "user namespace",
	C.PSYCH_STEP_NAMESPACES: "namespaces",
	C.PSYCH_STEP_CLONE:      "clone",
	C.PSYCH_STEP_INIT:       "init",
	C.PSYCH_STEP_MOUNT:      "mounts",
	C.PSYCH_STEP_HOSTNAME:   "hostname",
	C.PSYCH_STEP_RLIMITS:    "rlimits",
	C.PSYCH_STEP_FDS:        "close_range",
	C.PSYCH_STEP_CAPS:       "capabilities",
	C.PSYCH_STEP_SECCOMP:    "seccomp",
	C.PSYCH_STEP_EXEC:       "exec",
	C.PSYCH_STEP_LANDLOCK:   "landlock",
	C.PSYCH_STEP_PDEATHSIG:  "pdeathsig",
	C.PSYCH_STEP_DUMPABLE:   "dumpable",
	C.PSYCH_STEP_CONNECT:    "connect",
	C.PSYCH_STEP_CGROUP:     "cgroup",
}

// ProbeUserns reports whether a process with the outer ids uid/gid can make
// a user namespace here that grants capabilities in it (it makes a mount
// namespace there): the child is forked from this process and never execs,
// so the probe costs a fork, not a start of the host binary. Ids 0 are
// refused. Where the kernel refuses the namespace, whatever its errno,
// ProbeUserns returns false and why (an Errno); a child that cannot take
// the ids returns an *IDsError; any other error is the probe's own.
func ProbeUserns(uid, gid uint32) (ok bool, why error, err error) {
	var w C.int
	switch r := C.psych_probe_userns(C.uint32_t(uid), C.uint32_t(gid), &w); {
	case r == 1:
		return true, nil, nil
	case r == 0:
		return false, syscall.Errno(w), nil
	case r == 2:
		return false, nil, &IDsError{UID: uid, GID: gid, Errno: syscall.Errno(w)}
	default:
		return false, nil, syscall.Errno(-r)
	}
}

// IDsError: the probe's child could not take the outer ids (not mapped in
// this user namespace, or not the host's own for a non-root host).
type IDsError struct {
	UID, GID uint32
	Errno    syscall.Errno
}

func (e *IDsError) Error() string {
	return fmt.Sprintf("take ids %d:%d: %v", e.UID, e.GID, e.Errno)
}

func (e *IDsError) Unwrap() error { return e.Errno }
