package cli

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/psych-runtime/psych/sandbox"
	"github.com/psych-runtime/psych/sandbox/subprocess"
)

// The container backend's defaults, named in the flags' help; a test in
// test/cli keeps them equal to sandbox/container's.
const (
	DefaultImage           = "python:3.12-slim"
	DefaultContainerPython = "/usr/local/bin/python3"
)

// ContainerOptions are the sandbox flags the container backend takes.
type ContainerOptions struct {
	Engine, Image, ContainerPython string
	EnvAllowlist                   []string
	RequireNetworkDenial           bool
	MaxOutputBytes                 int
	Pool                           *sandbox.PoolConfig
	// RunAs is --run-as UID:GID (nil: the backend's default); ExtraRunArgs
	// --extra-run-arg (podman and docker only).
	RunAs        *[2]uint32
	ExtraRunArgs []string
}

// ContainerBackend makes the container backend and its close; psych-full
// has one (cmd/internal/full), the lean psych none.
type ContainerBackend func(ContainerOptions) (sandbox.Sandbox, func(), error)

// SandboxFlags are the flags that choose and configure the backend, shared
// by psych run and psych runs replay. The zero value is ready for Register.
type SandboxFlags struct {
	requireDenial, requireIsolation, requireCgroup bool
	allowFallback                                  bool
	python                                         string
	backend, engine, image, containerPython        string
	env                                            envList
	maxOutput                                      ByteSize
	runAs                                          runAs
	extraRunArgs                                   stringList

	// Pool, when set before New, asks the backend for a warm pool (psych
	// serve --pool).
	Pool *sandbox.PoolConfig
}

// Register registers the flags on fs.
func (f *SandboxFlags) Register(fs *flag.FlagSet) {
	fs.Var(&f.maxOutput, "max-output", "cap on stdout and on stderr, each (default 1MiB)")
	fs.Var(&f.env, "env", "NAME passes this variable from psych's own environment, NAME=VALUE sets it for the run (repeatable)")
	fs.StringVar(&f.python, "python", "", "interpreter (default: python3 on PATH, resolved to sys.executable)")
	fs.BoolVar(&f.requireDenial, "require-network-denial", false, "refuse to run unless network denial is verified")
	fs.BoolVar(&f.requireIsolation, "require-isolation", false, "no effect: runs without user namespaces are refused unless --allow-fallback")
	fs.BoolVar(&f.allowFallback, "allow-fallback", false, "where no user namespace can be had, run in the fallback (no namespaces, no view; Landlock and seccomp confine files and sockets) instead of refusing")
	fs.BoolVar(&f.requireCgroup, "require-cgroup", false, "refuse to run without a per-run cgroup")
	fs.StringVar(&f.backend, "backend", "subprocess", "subprocess or container")
	fs.StringVar(&f.engine, "engine", "", "container engine: containerd, podman or docker (default: the first reachable)")
	fs.StringVar(&f.image, "image", "", "container image (default "+DefaultImage+"; make image builds localhost/psych-python:3.11)")
	fs.StringVar(&f.containerPython, "container-python", "", "interpreter inside the image where it has no io.psych.python label (default "+DefaultContainerPython+")")
	fs.Var(&f.runAs, "run-as", "UID:GID[:COUNT] the program runs as outside the sandbox: COUNT ids from UID and GID, one per concurrent run (subprocess; the container backend takes UID:GID only); default: each run its own id from 100000000 as root, else your own")
	fs.Var(&f.extraRunArgs, "extra-run-arg", "an argument for `podman run` or `docker run` (container backend; only the allowlisted flags, repeatable)")
}

// Container says whether the flags ask for the container backend.
func (f *SandboxFlags) Container() bool { return f.backend == "container" }

// Env is the variables --env sets (NAME=VALUE), for the request; nil
// without any.
func (f *SandboxFlags) Env() map[string]string { return f.env.values() }

// New makes the backend the parsed flags ask for, and its close; container
// makes the container backend (nil: this build has none, an
// ErrInvalidConfig).
func (f *SandboxFlags) New(container ContainerBackend) (sandbox.Sandbox, func(), error) {
	switch f.backend {
	case "subprocess":
		if f.engine != "" || f.image != "" || f.containerPython != "" || len(f.extraRunArgs) > 0 {
			return nil, nil, fmt.Errorf("--engine, --image, --container-python and --extra-run-arg are for --backend container: %w", sandbox.ErrInvalidConfig)
		}
		var ids *subprocess.IDRange
		if f.runAs.set {
			ids = &subprocess.IDRange{UID: f.runAs.uid, GID: f.runAs.gid, Count: f.runAs.count}
		}
		sb, err := subprocess.New(subprocess.Config{
			RunAs: ids,
			// A non-root user has no other id to run as: its own uid,
			// mapped inside the run's user namespace as always.
			AllowSameUID:         os.Geteuid() != 0,
			PythonBin:            f.python,
			EnvAllowlist:         f.env.names(),
			RequireNetworkDenial: f.requireDenial,
			AllowFallback:        f.allowFallback,
			RequireCgroup:        f.requireCgroup,
			MaxOutputBytes:       int(f.maxOutput),
			Pool:                 f.Pool,
		})
		if errors.Is(err, subprocess.ErrNoUserNamespace) {
			return nil, nil, fmt.Errorf("%w; pass --allow-fallback to run with weaker isolation (no namespaces and no filesystem view: files confined by Landlock where the kernel has it, IPv4 and IPv6 sockets refused without --network); `psych doctor` says what this host gives", err)
		}
		if err != nil {
			return nil, nil, err
		}
		// Close waits for the run's removal, which ends after its result.
		return sb, func() { sb.Close() }, nil
	case "container":
		if f.python != "" {
			return nil, nil, fmt.Errorf("--python is for --backend subprocess (use --container-python): %w", sandbox.ErrInvalidConfig)
		}
		if container == nil {
			return nil, nil, fmt.Errorf("--backend container: this build has no container backend (it is in %s): %w", FullBinary, sandbox.ErrInvalidConfig)
		}
		o := ContainerOptions{
			Engine:               f.engine,
			Image:                f.image,
			ContainerPython:      f.containerPython,
			EnvAllowlist:         f.env.names(),
			RequireNetworkDenial: f.requireDenial,
			MaxOutputBytes:       int(f.maxOutput),
			Pool:                 f.Pool,
			ExtraRunArgs:         f.extraRunArgs,
		}
		if f.runAs.set {
			if f.runAs.count > 1 {
				return nil, nil, fmt.Errorf("--run-as with a COUNT is for --backend subprocess (the container backend runs every run as one UID:GID): %w", sandbox.ErrInvalidConfig)
			}
			o.RunAs = &[2]uint32{f.runAs.uid, f.runAs.gid}
		}
		return container(o)
	}
	return nil, nil, fmt.Errorf("--backend %q: want subprocess or container: %w", f.backend, sandbox.ErrInvalidConfig)
}

// Describe names the backend, engine and interpreter the flags ask for
// (empty where the backend's default applies), for psych serve's
// /v1/info.
func (f *SandboxFlags) Describe() (backend, engine, python string) {
	if f.Container() {
		return f.backend, f.engine, f.containerPython
	}
	return f.backend, "", f.python
}

// EnvNames are the variables --env names, which a run may set: psych
// serve's allowlist.
func (f *SandboxFlags) EnvNames() []string { return f.env.names() }

// Requirements are the Require… flags, which a run through a server checks
// against the server's self-check and the Result, and --allow-fallback.
type Requirements struct {
	NetworkDenial, Cgroup, AllowFallback bool
}

// Requirements returns what the flags require of a run.
func (f *SandboxFlags) Requirements() Requirements {
	return Requirements{NetworkDenial: f.requireDenial, Cgroup: f.requireCgroup, AllowFallback: f.allowFallback}
}

// EnvValues are the variables --env names with their values, for a run
// through a server: NAME=VALUE's value, and for a bare NAME psych's own
// (left out where psych has none, as a local run leaves it out); nil
// without any.
func (f *SandboxFlags) EnvValues() map[string]string {
	var out map[string]string
	for _, v := range f.env.stringList {
		name, value, ok := strings.Cut(v, "=")
		if !ok {
			if value, ok = os.LookupEnv(name); !ok {
				continue
			}
		}
		if out == nil {
			out = map[string]string{}
		}
		out[name] = value
	}
	return out
}

// runAs is --run-as UID:GID[:COUNT].
type runAs struct {
	set             bool
	uid, gid, count uint32
}

func (r *runAs) String() string {
	if !r.set {
		return ""
	}
	return fmt.Sprintf("%d:%d:%d", r.uid, r.gid, r.count)
}

// Set refuses anything but two or three decimal ids, and uid or gid 0.
func (r *runAs) Set(v string) error {
	parts := strings.Split(v, ":")
	if len(parts) != 2 && len(parts) != 3 {
		return errors.New("want UID:GID or UID:GID:COUNT")
	}
	var n [3]uint32
	for i, p := range parts {
		x, err := strconv.ParseUint(p, 10, 32)
		if err != nil {
			return fmt.Errorf("%q: not a decimal id", p)
		}
		n[i] = uint32(x)
	}
	if n[0] == 0 || n[1] == 0 {
		return errors.New("never uid or gid 0")
	}
	*r = runAs{set: true, uid: n[0], gid: n[1], count: n[2]}
	return nil
}

// stringList is a repeatable string flag.
type stringList []string

// envList is --env: NAME (the host's value) or NAME=VALUE (the run's).
type envList struct{ stringList }

// names are the variables named, for the allowlist.
func (l envList) names() []string {
	var out []string
	for _, v := range l.stringList {
		name, _, _ := strings.Cut(v, "=")
		out = append(out, name)
	}
	return out
}

// values are the NAME=VALUE ones, for the request; nil without any.
func (l envList) values() map[string]string {
	var out map[string]string
	for _, v := range l.stringList {
		if name, value, ok := strings.Cut(v, "="); ok {
			if out == nil {
				out = map[string]string{}
			}
			out[name] = value
		}
	}
	return out
}

// Set refuses a variable whose name is empty or holds NUL, which no
// environment can carry.
func (l *envList) Set(v string) error {
	name, _, _ := strings.Cut(v, "=")
	switch {
	case name == "":
		return errors.New("the variable's name is empty")
	case strings.ContainsRune(name, 0):
		return fmt.Errorf("the variable's name %q is invalid", name)
	}
	return l.stringList.Set(v)
}

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }
