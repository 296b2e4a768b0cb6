package sandbox

import (
	"fmt"
	"strings"
	"time"
)

// PoolConfig asks a backend for a warm pool: Size sandboxes fully started
// ahead of any request (namespaces entered, view mounted, network namespace
// verified, filters loaded, cgroup made, the interpreter started with the
// bootstrap imported and blocked on its start frame), each of which serves
// exactly one program and is then destroyed. What a request sets (limits,
// environment, bindings) is applied at dispatch, before the program's first
// line; its CPU and wall budgets count from dispatch. A pool changes when a
// sandbox starts, never what it is.
//
// A request the pool cannot serve runs cold, as without a pool, and its
// Isolation says why (ColdReason): limits above Caps, the network granted,
// an environment variable the preloaded modules read at import (Preload),
// or no pooled sandbox ready.
type PoolConfig struct {
	// Size is the number of sandboxes kept ready; at least 1.
	Size int
	// MaxAge destroys a pooled sandbox unused once it is this old, and
	// starts another. Zero: DefaultPoolMaxAge.
	MaxAge time.Duration
	// Caps are the limits a pooled sandbox is started at: the most a
	// request it serves may ask for. A zero field is the backend's merged
	// default for that limit. StackBytes is the exception: glibc sizes a
	// thread's stack from RLIMIT_STACK as the interpreter starts, so a
	// request is served warm only with the pool's own StackBytes.
	Caps Limits
	// Preload are modules (dotted names, "numpy", "matplotlib.pyplot")
	// each pooled sandbox imports in its own interpreter before it is
	// dispatched, so that a program's import of them costs nothing. A
	// sandbox still serves one program: nothing is carried between runs.
	// What a program can tell: the modules are in sys.modules, and what
	// they read from the environment at import came from the pool's
	// environment (the sandbox's own variables alone). So a request whose
	// environment holds a variable they read at import runs cold: one
	// they read through os.environ or os.getenv (recorded as they are
	// imported), or one on docs/go-api.md's table of variables C libraries
	// read (OpenBLAS, OpenMP, matplotlib…). A module that cannot be
	// imported fails every fill (the pool's log says why) and the runs go
	// cold. At most MaxPreload names.
	Preload []string
}

// MaxPreload is the most modules PoolConfig.Preload may name.
const MaxPreload = 64

// DefaultPoolMaxAge is PoolConfig.MaxAge's default.
const DefaultPoolMaxAge = 10 * time.Minute

// Validate checks c against the backend's merged defaults and returns the
// pool's merged caps.
func (c PoolConfig) Validate(defaults Limits) (Limits, error) {
	if c.Size < 1 || c.Size > 1024 {
		return Limits{}, fmt.Errorf("pool size %d: want 1 to 1024", c.Size)
	}
	if c.MaxAge < 0 {
		return Limits{}, fmt.Errorf("pool max age %v is negative", c.MaxAge)
	}
	if err := CheckPreload(c.Preload); err != nil {
		return Limits{}, err
	}
	caps := c.Caps.Merge(defaults)
	if err := caps.Validate(); err != nil {
		return Limits{}, fmt.Errorf("pool caps: %w", err)
	}
	return caps, nil
}

// Above names the first limit of l (merged) that a pool started at caps
// cannot serve: one above its cap, or a StackBytes other than the pool's;
// "" when l fits.
func (l Limits) Above(caps Limits) LimitName {
	switch {
	case l.CPUSeconds > caps.CPUSeconds:
		return LimitCPUSeconds
	case l.AddressSpaceBytes > caps.AddressSpaceBytes:
		return LimitAddressSpaceBytes
	case l.FileSizeBytes > caps.FileSizeBytes:
		return LimitFileSizeBytes
	case l.ProcessCount > caps.ProcessCount:
		return LimitProcessCount
	case l.MemoryBytes > caps.MemoryBytes:
		return LimitMemoryBytes
	case l.StackBytes != caps.StackBytes:
		return "stack_bytes"
	case l.OpenFiles > caps.OpenFiles:
		return "open_files"
	}
	return "" // the wall clock runs from dispatch: it has no cap
}

// PoolStatus is a warm pool's state: its Size and how many sandboxes are
// Ready now. Both are zero without a pool.
type PoolStatus struct {
	Size, Ready int
}

// PoolStater is implemented by a Sandbox that can tell its warm pool's
// state (both backends do). A Sandbox that does not implement it has no
// pool as far as its callers can tell.
type PoolStater interface {
	PoolStatus() PoolStatus
}

// PoolStatusOf returns s's pool state, zero when s does not tell.
func PoolStatusOf(s Sandbox) PoolStatus {
	if p, ok := s.(PoolStater); ok {
		return p.PoolStatus()
	}
	return PoolStatus{}
}

// CheckPreload refuses a Preload list longer than MaxPreload, or naming
// anything but a dotted module name of ASCII identifiers (no relative
// import, no keyword, at most 200 bytes), or a name twice.
func CheckPreload(mods []string) error {
	if len(mods) > MaxPreload {
		return fmt.Errorf("pool preload: %d modules, at most %d", len(mods), MaxPreload)
	}
	seen := map[string]bool{}
	for _, m := range mods {
		if !isModuleName(m) {
			return fmt.Errorf("pool preload %q: not a module name (dotted ASCII identifiers, at most 200 bytes)", m)
		}
		if seen[m] {
			return fmt.Errorf("pool preload %q: named twice", m)
		}
		seen[m] = true
	}
	return nil
}

// isModuleName says whether m is an absolute, dotted module name whose
// parts are ASCII identifiers and not keywords.
func isModuleName(m string) bool {
	if m == "" || len(m) > 200 {
		return false
	}
	for _, part := range strings.Split(m, ".") {
		if !IsIdentifier(part) {
			return false
		}
	}
	return true
}
