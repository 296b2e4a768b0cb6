//go:build linux && cgo

package container

import (
	"context"
	"io"
	"slices"

	"github.com/opencontainers/runtime-spec/specs-go"

	"github.com/psych-runtime/psych/sandbox"
)

// engine is one container engine: it checks the image, starts and removes
// containers, and reaps what a dead host left. Everything else (the init,
// the wire, the network check, the attestation, the limits) is the
// Sandbox's, the same for every engine.
type engine interface {
	name() Engine
	// image is the configured image as the engine holds it: its reference
	// and digest, and the interpreter it names (io.psych.python), "" if
	// none.
	image() (sandbox.Image, string)
	// userNS reports whether the engine gives each container a user
	// namespace of its own (runSpec.UIDMap is then honoured).
	userNS() bool
	// start creates and starts one container. It returns once the engine
	// started it; the init then connects back on its own.
	start(ctx context.Context, rs *runSpec) (task, error)
	// reap removes psych's containers whose owner (label ownerLabel) dead
	// reports dead, and returns how many.
	reap(ctx context.Context, dead func(owner string) bool) (int, error)
	close() error
}

// task is one started container.
type task interface {
	// done is closed when the engine reports the container's end, or that
	// it lost track of it (lost then reports true).
	done() <-chan struct{}
	// exitCode is the container's exit code, valid once done is closed and
	// ok is true.
	exitCode() (code uint32, ok bool)
	lost() bool
	// why is what the engine said when it failed to start the container.
	why() string
	// kill kills everything in the container.
	kill(ctx context.Context) error
	// pause freezes every process of the container (frozen true) or thaws
	// it (false), through the engine, and returns once it did.
	pause(ctx context.Context, frozen bool) error
	// waitOutput returns once the engine has copied all of the dead
	// container's stdout and stderr (or ctx ended).
	waitOutput(ctx context.Context)
	// remove deletes the container and all the engine made for it.
	// Idempotent.
	remove(ctx context.Context) error
}

// Labels psych puts on what it makes, so that a later host reaps a dead
// host's leftovers and only those.
const (
	ownerLabel = "io.psych.owner" // the host's cgroups.Owner
	runLabel   = "io.psych.run"   // the run's id
)

// runSpec is one container as psych wants it, engine-neutral.
type runSpec struct {
	id     string
	labels map[string]string
	args   []string
	env    []string
	uid    uint32 // the init's and the program's ids, inside
	gid    uint32
	// uidMap and gidMap map ids inside to outside where the engine gives a
	// user namespace.
	uidMap, gidMap []specs.LinuxIDMapping
	network        bool // granted: the host's network namespace
	binds          []bind
	tmpBytes       int64
	tmpInodes      int64
	// tmpDir and workDir are the host paths of the run's workspace
	// (host.Workspace), bound read-write at /tmp and /work.
	tmpDir, workDir string
	memoryBytes     int64
	pids            int64
	rlimits         []specs.POSIXRlimit
	seccomp         *specs.LinuxSeccomp
	seccompFile     string // the same, as JSON, for the CLI engines
	stdout, stderr  io.Writer
	// empty is an empty read-only directory of the host's, to cover /sys
	// where the engine mounts a sysfs psych cannot leave out.
	empty string
	// scratch is a host directory of the run's own where an engine may
	// mount what it needs (removed with the run, mounts and all).
	scratch string
}

// bind is a read-only bind mount of a host path.
type bind struct{ source, target string }

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
