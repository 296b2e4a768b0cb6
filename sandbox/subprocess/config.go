package subprocess

import (
	"fmt"
	"log/slog"
	"os"

	"github.com/psych-runtime/psych/cgroups"
	"github.com/psych-runtime/psych/sandbox"
	"github.com/psych-runtime/psych/sandbox/internal/resources"
	"github.com/psych-runtime/psych/sandbox/internal/setup"
)

// IDRange is the outside uid/gid the child runs as: Count consecutive ids
// from UID and GID, each concurrent run taking its own. Count 0 or 1 is a
// single id shared by all runs. It is psych's one outside-id type, the
// container backend's IDs too.
type IDRange = resources.IDs

// DefaultRunAs is RunAs's default for a root host: every run its own uid
// and gid from 100000000-100065535, where this process's user namespace
// maps them all; else (a root inside a container that maps a few ids) one
// id, nobody (65534), for every run, and why.
func DefaultRunAs() (IDRange, error) {
	r := resources.DefaultIDs()
	if err := r.Mapped(); err != nil {
		return *SingleID(nobodyID, nobodyID), err
	}
	return r, nil
}

// SingleID is an IDRange of one id.
func SingleID(uid, gid uint32) *IDRange { return &IDRange{UID: uid, GID: gid, Count: 1} }

// Config configures a Sandbox. The zero value is valid and secure.
type Config struct {
	// PythonBin is the interpreter. Empty: resolved once, at construction,
	// by asking `python3` on PATH for sys.executable, so shims and
	// virtualenvs resolve to the real interpreter.
	PythonBin string
	// DefaultLimits fills the zero fields of a Request's Limits; its own
	// zero fields take sandbox.DefaultLimits.
	DefaultLimits sandbox.Limits
	// EnvAllowlist names the host variables passed to the child, with the
	// host's values at Run time. The variables the sandbox sets itself may
	// not be listed.
	EnvAllowlist []string
	// RunAs is the outside uid/gid of the child. Nil: when the host is
	// root, DefaultRunAs: every run its own uid and gid from
	// 100000000-100065535, so that the kernel's per-uid quotas never cross
	// runs (nobody for all, with a warning, where those ids are not mapped
	// here); else the host's own ids (which needs AllowSameUID). A range
	// (Count > 1) is claimed per run across every psych host on the
	// machine (resources.IDLockPath); New refuses one that /etc/passwd,
	// /etc/group, /etc/subuid or /etc/subgid uses, and a Run that finds
	// every id claimed waits for one, at most resources.IDWait, then fails with
	// sandbox.ErrBusy. uid 0 is refused.
	RunAs *IDRange
	// AllowSameUID permits running the child under the host's own uid.
	AllowSameUID bool
	// RequireNetworkDenial refuses (sandbox.ErrRefused) every Run whose
	// network denial was not verified: where no network namespace can be
	// made, or where the check of the run's own namespace fails. A Request
	// with Network set is refused too.
	RequireNetworkDenial bool
	// AllowFallback permits the fallback where no user namespace can be
	// had (user.max_user_namespaces=0, Ubuntu's AppArmor restriction): no
	// namespaces and no view, but rlimits, the uid drop, seccomp refusing
	// IPv4 and IPv6 sockets unless the request grants the network, and
	// Landlock (ABI 1+) confining files to the interpreter's trees, the
	// run's own directory and the /dev nodes. Without it, New refuses such
	// a host (sandbox.ErrRefused, ErrNoUserNamespace), root or not.
	AllowFallback bool
	// RequireIsolation has no effect: the full isolation is the default,
	// and only AllowFallback takes less. Kept for existing callers.
	RequireIsolation bool
	// RequireCgroup refuses (sandbox.ErrRefused) every Run where no per-run
	// cgroup can be made, rather than run on rlimits alone.
	RequireCgroup bool
	// Cgroups chooses the cgroup parents. Zero: a "psych" child of the host
	// process's own cgroup in each hierarchy (see package cgroups).
	Cgroups cgroups.Config
	// TmpBytes and TmpInodes cap the program's /tmp (HOME, TMPDIR) and
	// /work (the working directory) together: one tmpfs. /dev/shm gets the
	// same inode cap and a quarter of the size. Zero: 64 MiB and 4096
	// inodes.
	TmpBytes  int64
	TmpInodes int64
	// Files caps Request.Files and Result.Files; a zero field is its
	// default (sandbox.DefaultFileCaps). A run takes files in and out on a
	// root host with the run's own view; elsewhere a request with files is
	// refused (sandbox.ErrRefused) and no files come out.
	Files sandbox.FileCaps
	// MaxOutputBytes caps stdout and stderr each. Zero: 1 MiB.
	MaxOutputBytes int
	// MaxFrameBytes caps one protocol frame. Zero: 16 MiB.
	MaxFrameBytes int
	// TmpBase is the directory holding the per-run directories. Zero:
	// /var/lib/psych/tmp when the host is root, else psych under
	// XDG_RUNTIME_DIR where that is the user's own 0700 directory, else
	// psych/runs under the user's cache directory (~/.cache): never a fixed
	// name under /tmp, which another local user could make first.
	TmpBase string
	// Logger receives warnings about weakened protection. Zero: slog.Default().
	Logger *slog.Logger
	// CacheDir holds what New learns about the interpreter (its prefixes,
	// version and the bootstrap compiled by it), so that a later New for
	// the same interpreter file starts no interpreter. It must be
	// absolute. It also holds matplotlib's font list, built once per
	// interpreter for the runs to load (docs/files-and-figures.md).
	// Empty: $XDG_CACHE_HOME/psych when that is absolute, else
	// /var/cache/psych for a root host, else $HOME/.cache/psych. "-": no
	// cache, and no font list. A cache directory that is not trusted or cannot be used is
	// bypassed with a warning, never an error (see the package doc).
	CacheDir string
	// Pool keeps sandboxes started ahead of requests (see
	// sandbox.PoolConfig). Nil: every run starts cold. It needs user
	// namespaces, a run cgroup and a RunAs range: New refuses it elsewhere.
	Pool *sandbox.PoolConfig
}

// Defaults.
const (
	DefaultMaxOutputBytes = setup.DefaultMaxOutputBytes
	DefaultTmpBytes       = setup.DefaultTmpBytes
	DefaultTmpInodes      = setup.DefaultTmpInodes
	rootTmpBase           = "/var/lib/psych/tmp"
	nobodyID              = resources.NobodyID
)

// common is the fields this Config shares with the container backend's.
func (c *Config) common() setup.Common {
	return setup.Common{DefaultLimits: &c.DefaultLimits, EnvAllowlist: c.EnvAllowlist,
		TmpBytes: &c.TmpBytes, TmpInodes: &c.TmpInodes, Files: &c.Files,
		MaxOutputBytes: &c.MaxOutputBytes, MaxFrameBytes: &c.MaxFrameBytes, Logger: &c.Logger}
}

// withDefaults fills the zero fields for a host whose effective uid is
// hostUID: RunAs (copied, so the caller's is never changed) and TmpBase
// as documented, and the fields shared with the container backend.
func (c *Config) withDefaults(hostUID int) error {
	c.common().Defaults()
	if c.RunAs == nil {
		if hostUID == 0 {
			r, err := DefaultRunAs()
			if err != nil {
				c.Logger.Warn("psych: the runs' own outside ids cannot be had here; every run is nobody, and the kernel's per-uid quotas cross runs", "err", err)
			}
			c.RunAs = &r
		} else {
			c.RunAs = SingleID(uint32(hostUID), uint32(os.Getegid()))
		}
	} else {
		r := *c.RunAs
		c.RunAs = &r
	}
	if c.TmpBase == "" {
		c.TmpBase = rootTmpBase
		if hostUID != 0 {
			base, err := resources.UserBase(hostUID)
			if err != nil {
				return fmt.Errorf("%w: %w", sandbox.ErrInvalidConfig, err)
			}
			c.TmpBase = base
		}
	}
	return nil
}

// validate runs the configuration checks, in the style of runc's
// configs/validate: each a small function, the first failure wins.
func (c *Config) validate(hostUID int) error {
	own := []func() error{c.checkRunAs, func() error { return c.checkHostUID(hostUID) }}
	return setup.Validate(append(own, c.common().Checks()...)...)
}

// checkRunAs refuses outside id 0 and a range past the last id.
func (c *Config) checkRunAs() error {
	if c.RunAs.UID == 0 || c.RunAs.GID == 0 {
		return fmt.Errorf("run as %d:%d: outside uid/gid 0 is never used", c.RunAs.UID, c.RunAs.GID)
	}
	if uint64(c.RunAs.UID)+uint64(c.RunAs.Size()) > 1<<32-1 || uint64(c.RunAs.GID)+uint64(c.RunAs.Size()) > 1<<32-1 {
		return fmt.Errorf("run as: range %+v overflows", *c.RunAs)
	}
	return nil
}

// checkHostUID refuses, on a non-root host, any ids but its own, and the
// host's own uid unless AllowSameUID.
func (c *Config) checkHostUID(hostUID int) error {
	if hostUID != 0 && (c.RunAs.Size() != 1 || c.RunAs.UID != uint32(hostUID)) {
		return fmt.Errorf("run as %d: a non-root host can only run as itself (uid %d) in this backend", c.RunAs.UID, hostUID)
	}
	first, last := c.RunAs.UID, c.RunAs.UID+c.RunAs.Size()-1
	if !c.AllowSameUID && uint32(hostUID) >= first && uint32(hostUID) <= last {
		return fmt.Errorf("run as %d: that is the host's own uid; set AllowSameUID to permit it", hostUID)
	}
	return nil
}

// PoolConfig is sandbox.PoolConfig: Config.Pool's type.
type PoolConfig = sandbox.PoolConfig
