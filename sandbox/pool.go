package sandbox

import (
	"fmt"
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
}

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
