package container

import (
	"fmt"
	"log/slog"
	"strings"

	"github.com/containerd/containerd/v2/pkg/oci"

	"github.com/psych-runtime/psych/sandbox"
	"github.com/psych-runtime/psych/sandbox/internal/resources"
	"github.com/psych-runtime/psych/sandbox/internal/setup"
)

// Engine names a container engine.
type Engine string

// The engines, in the order New tries them when Config.Engine is empty.
const (
	Containerd Engine = "containerd"
	Podman     Engine = "podman"
	Docker     Engine = "docker"
)

// Engines lists the engines in the order New tries them.
var engines = []Engine{Containerd, Podman, Docker}

// Defaults.
const (
	DefaultImage             = "python:3.12-slim"
	DefaultContainerPython   = "/usr/local/bin/python3"
	DefaultNamespace         = "psych"
	DefaultContainerdAddress = "/run/containerd/containerd.sock"
	DefaultPodmanRoot        = "/var/lib/psych/podman/root"
	DefaultPodmanRunroot     = "/run/psych/podman"
	DefaultDockerHost        = "unix:///var/run/docker.sock"
	DefaultRunBase           = "/var/lib/psych/container"
	DefaultMaxOutputBytes    = setup.DefaultMaxOutputBytes
	DefaultTmpBytes          = setup.DefaultTmpBytes
	DefaultTmpInodes         = setup.DefaultTmpInodes
	// ImageLabelPython names the interpreter inside an image.
	ImageLabelPython = "io.psych.python"
)

// IDs is an outside uid/gid pair (Count is not used here: RunAs is one
// pair for every run). It is psych's one outside-id type, the subprocess
// backend's IDRange too.
type IDs = resources.IDs

// Config configures a Sandbox. The zero value is valid and secure.
type Config struct {
	// Engine is containerd, podman or docker. Empty: the first that is
	// reachable, in that order. An engine named here that cannot be reached
	// is ErrEngineUnreachable at New.
	Engine Engine
	// Image is the image reference. Empty: DefaultImage. It must be in the
	// engine's store already (make image prepares psych's own): New never
	// pulls, and a missing image is ErrImageNotFound.
	Image string
	// ContainerPythonBin is the interpreter inside the image where the
	// image has no io.psych.python label. Empty: DefaultContainerPython,
	// or, on containerd where the image lacks it, python3 on the image
	// config's PATH.
	ContainerPythonBin string
	// DefaultLimits fills the zero fields of a Request's Limits; its own
	// zero fields take sandbox.DefaultLimits.
	DefaultLimits sandbox.Limits
	// EnvAllowlist names the host variables passed to the program, with the
	// host's values at Run time. The sandbox's own may not be listed.
	EnvAllowlist []string
	// RunAs is the uid/gid the program runs as outside the container, the
	// same for every run (its Count 0 or 1: New refuses more). Nil: every run its own, from the range the
	// subprocess backend uses (resources.DefaultIDFirst, DefaultIDCount),
	// claimed two at a time across every psych host on the machine, so
	// that the kernel's per-uid quotas never cross runs; a Run that finds
	// every pair claimed waits, at most resources.IDWait, then fails with
	// sandbox.ErrBusy. Never 0 or 1: where the engine gives a user
	// namespace (containerd), the container's uid 0, which runc's setup
	// needs, is mapped to the id just below RunAs (the pair's first), which
	// must then be an id no one on the host uses.
	RunAs *IDs
	// ExtraRunArgs go to `podman run` or `docker run` before psych's own
	// flags, which win. Only allowlisted flags, each with its one value
	// (--flag=value or --flag value); a label or annotation under io.psych.
	// (psych's own, which reaping trusts) is refused at New.
	ExtraRunArgs []string
	// SpecOpts are applied to a containerd container's spec before psych's
	// hardening, which wins.
	SpecOpts []oci.SpecOpts
	// Namespace is containerd's namespace. Empty: DefaultNamespace.
	Namespace string
	// ContainerdAddress is containerd's socket. Empty: DefaultContainerdAddress.
	ContainerdAddress string
	// PodmanRoot and PodmanRunroot are podman's storage (--root, --runroot),
	// psych's own so that it never touches a user's podman images. Empty:
	// DefaultPodmanRoot, DefaultPodmanRunroot.
	PodmanRoot, PodmanRunroot string
	// DockerHost is the docker daemon (docker -H). Empty: DefaultDockerHost.
	DockerHost string
	// RequireNetworkDenial refuses (sandbox.ErrRefused) a Request that
	// grants the network. Every other run's denial is verified anyway, and
	// a run whose check fails is refused.
	RequireNetworkDenial bool
	// TmpBytes and TmpInodes cap /tmp (HOME, TMPDIR) and /work (the
	// working directory) together: one tmpfs the host mounts and binds in.
	// /dev/shm gets the same inode cap and a quarter of the size. Zero:
	// DefaultTmpBytes, DefaultTmpInodes.
	TmpBytes, TmpInodes int64
	// Files caps Request.Files and Result.Files; a zero field is its
	// default (sandbox.DefaultFileCaps).
	Files sandbox.FileCaps
	// MaxOutputBytes caps stdout and stderr each. Zero: 1 MiB.
	MaxOutputBytes int
	// MaxFrameBytes caps one protocol frame. Zero: 16 MiB.
	MaxFrameBytes int
	// RunBase holds the per-run directories (the wire and sync sockets, the
	// plan) and the init's files. Zero: DefaultRunBase.
	RunBase string
	// Logger receives notes on what New reaped. Zero: slog.Default().
	Logger *slog.Logger
	// Pool keeps containers started ahead of requests (see
	// sandbox.PoolConfig), each blocked on its start frame. Nil: every run
	// starts cold. It needs each run's own outside ids (RunAs nil).
	Pool *sandbox.PoolConfig

	// pythonFromPath: ContainerPythonBin was not set, so python3 may be
	// looked up on the image's PATH where the default is missing.
	pythonFromPath bool
}

// common is the fields this Config shares with the subprocess backend's,
// with the least tmpfs a container gets.
func (c *Config) common() setup.Common {
	return setup.Common{DefaultLimits: &c.DefaultLimits, EnvAllowlist: c.EnvAllowlist,
		TmpBytes: &c.TmpBytes, TmpInodes: &c.TmpInodes, Files: &c.Files,
		MaxOutputBytes: &c.MaxOutputBytes, MaxFrameBytes: &c.MaxFrameBytes, Logger: &c.Logger,
		MinTmpBytes: 1 << 20, MinTmpInodes: 64}
}

// defaults fills the zero fields.
func (c *Config) defaults() {
	c.common().Defaults()
	set := func(p *string, v string) {
		if *p == "" {
			*p = v
		}
	}
	set(&c.Image, DefaultImage)
	c.pythonFromPath = c.ContainerPythonBin == ""
	set(&c.ContainerPythonBin, DefaultContainerPython)
	set(&c.Namespace, DefaultNamespace)
	set(&c.ContainerdAddress, DefaultContainerdAddress)
	set(&c.PodmanRoot, DefaultPodmanRoot)
	set(&c.PodmanRunroot, DefaultPodmanRunroot)
	set(&c.DockerHost, DefaultDockerHost)
	set(&c.RunBase, DefaultRunBase)
	if c.RunAs != nil {
		ids := *c.RunAs
		c.RunAs = &ids
	}
}

// validate runs the configuration checks, in the style of runc's
// configs/validate: each a small function, the first failure wins.
func (c *Config) validate() error {
	return setup.Validate(append([]func() error{c.checkEngine, c.checkRunAs, c.checkImage}, c.common().Checks()...)...)
}

// checkEngine refuses an engine psych does not know.
func (c *Config) checkEngine() error {
	switch c.Engine {
	case "", Containerd, Podman, Docker:
		return nil
	}
	return fmt.Errorf("engine %q: want containerd, podman or docker", c.Engine)
}

// checkRunAs refuses ids 0 and 1 (the id below RunAs is the container
// root's) and a Count over 1 (RunAs is one pair for every run).
func (c *Config) checkRunAs() error {
	if c.RunAs != nil && (c.RunAs.UID < 2 || c.RunAs.GID < 2) {
		return fmt.Errorf("run as %d:%d: uid/gid 0 is never used, nor 1 (the id below is the container root's)", c.RunAs.UID, c.RunAs.GID)
	}
	if c.RunAs != nil && c.RunAs.Count > 1 {
		return fmt.Errorf("run as %d:%d with Count %d: RunAs is one pair for every run here (leave it nil for each run's own)", c.RunAs.UID, c.RunAs.GID, c.RunAs.Count)
	}
	return nil
}

// checkImage refuses a relative interpreter and an image that is not a
// reference.
func (c *Config) checkImage() error {
	if !strings.HasPrefix(c.ContainerPythonBin, "/") {
		return fmt.Errorf("container python %q: want an absolute path", c.ContainerPythonBin)
	}
	if strings.ContainsAny(c.Image, " \t\n") {
		return fmt.Errorf("image %q: not a reference", c.Image)
	}
	return nil
}

// PoolConfig is sandbox.PoolConfig: Config.Pool's type.
type PoolConfig = sandbox.PoolConfig
