package sandbox

import (
	"encoding/json"
	"fmt"
)

// LimitName names one cap. Its JSON form is the snake_case name, and the
// empty LimitName encodes as null.
type LimitName string

// The limits every backend enforces (see the package doc).
const (
	LimitCPUSeconds        LimitName = "cpu_seconds"
	LimitAddressSpaceBytes LimitName = "address_space_bytes"
	LimitFileSizeBytes     LimitName = "file_size_bytes"
	LimitProcessCount      LimitName = "process_count"
	LimitWallSeconds       LimitName = "wall_seconds"
	LimitMemoryBytes       LimitName = "memory_bytes"
	// LimitTmpBytes is the backend's TmpBytes: the size of the program's
	// /tmp and /dev/shm tmpfs. A write into a full tmpfs through a file
	// is an ordinary ENOSPC; through a shared mapping it is a SIGBUS,
	// which is this limit when the host finds the tmpfs at its cap.
	LimitTmpBytes LimitName = "tmp_bytes"
	// LimitApprovalSeconds is ApprovalSeconds: the run spent its whole
	// budget of suspended time waiting for a person, and the host ended it.
	LimitApprovalSeconds LimitName = "approval_seconds"
)

// MarshalJSON encodes the empty name as null.
func (n LimitName) MarshalJSON() ([]byte, error) {
	if n == "" {
		return []byte("null"), nil
	}
	return json.Marshal(string(n))
}

// UnmarshalJSON accepts null as the empty name.
func (n *LimitName) UnmarshalJSON(b []byte) error {
	var s *string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	*n = ""
	if s != nil {
		*n = LimitName(*s)
	}
	return nil
}

// Limits caps one execution. In a Request, a zero field means "the backend's
// default"; the merged Limits a backend enforces has every field set.
type Limits struct {
	// CPUSeconds is CPU consumed, not wall clock. A program blocked on a
	// binding burns none. Enforced by RLIMIT_CPU per process and, where the
	// run has a cgroup, by the host watching the whole run's CPU usage.
	CPUSeconds float64 `json:"cpu_seconds,omitempty"`
	// AddressSpaceBytes is RLIMIT_AS: an allocation past it is an ordinary
	// MemoryError in the program.
	AddressSpaceBytes int64 `json:"address_space_bytes,omitempty"`
	// FileSizeBytes is RLIMIT_FSIZE with SIGXFSZ ignored, so a write past
	// it fails with EFBIG.
	FileSizeBytes int64 `json:"file_size_bytes,omitempty"`
	// ProcessCount caps processes and threads. Without a pids cgroup it is
	// RLIMIT_NPROC, which Linux counts per user: see the backend's doc.
	ProcessCount int `json:"process_count,omitempty"`
	// WallSeconds is the wall clock; the host kills the whole tree at it.
	WallSeconds float64 `json:"wall_seconds,omitempty"`
	// MemoryBytes caps the resident memory of the whole run, all its
	// processes together (a cgroup's memory.max or memory.limit_in_bytes).
	// Zero in a merged Limits means AddressSpaceBytes, so that a single
	// process still meets MemoryError first.
	MemoryBytes int64 `json:"memory_bytes,omitempty"`
	// StackBytes is RLIMIT_STACK: how far the main thread's stack may
	// grow, and, because glibc takes its default thread stack size from
	// RLIMIT_STACK's soft value, the address space each new thread
	// reserves for its stack. The default, 4 MiB, lets ProcessCount
	// threads fit in the default address space (64 × 4 MiB is half of
	// 512 MiB; at Linux's usual 8 MiB a program runs out of address space
	// near 54 threads), and still lets CPython 3.11 reach its recursion
	// limit with a RecursionError rather than a segfault, also through C
	// code such as sorted(key=...), which 2 MiB does not. Raising it, or
	// ProcessCount, means raising AddressSpaceBytes with it. Never a
	// LimitHit: a stack overflow is a SIGSEGV with no evidence of which
	// limit caused it.
	StackBytes int64 `json:"stack_bytes,omitempty"`
	// OpenFiles is RLIMIT_NOFILE, the open file descriptors of each
	// process. Never a LimitHit: EMFILE is an ordinary error the program
	// sees. No sandbox can raise it past the host's own hard
	// RLIMIT_NOFILE (that takes CAP_SYS_RESOURCE, which the run never
	// has), so Validate refuses a larger value, and the default is 1024 or
	// the host's hard limit where that is lower.
	OpenFiles int `json:"open_files,omitempty"`
	// ApprovalSeconds caps the total time the run may spend suspended
	// (Suspend) while binding calls wait for a person, all its waits
	// together: the wall clock stands still meanwhile, so without it a
	// program that asks in a loop would live on. Past it the host ends
	// the run with LimitHit approval_seconds. Result.Suspended is what the
	// run spent.
	ApprovalSeconds float64 `json:"approval_seconds,omitempty"`
}

// DefaultLimits are the contract's secure defaults, which a zero field of
// Limits takes, with psych's StackBytes.
func DefaultLimits() Limits {
	return Limits{
		CPUSeconds:        10,
		AddressSpaceBytes: 512 << 20,
		FileSizeBytes:     10 << 20,
		ProcessCount:      64,
		WallSeconds:       30,
		StackBytes:        4 << 20,
		OpenFiles:         int(min(1024, hostOpenFilesMax())),
		ApprovalSeconds:   600,
	}
}

// Merge returns l with every zero field taken from defaults.
func (l Limits) Merge(defaults Limits) Limits {
	if l.CPUSeconds == 0 {
		l.CPUSeconds = defaults.CPUSeconds
	}
	if l.AddressSpaceBytes == 0 {
		l.AddressSpaceBytes = defaults.AddressSpaceBytes
	}
	if l.FileSizeBytes == 0 {
		l.FileSizeBytes = defaults.FileSizeBytes
	}
	if l.ProcessCount == 0 {
		l.ProcessCount = defaults.ProcessCount
	}
	if l.WallSeconds == 0 {
		l.WallSeconds = defaults.WallSeconds
	}
	if l.MemoryBytes == 0 {
		l.MemoryBytes = defaults.MemoryBytes
	}
	if l.StackBytes == 0 {
		l.StackBytes = defaults.StackBytes
	}
	if l.OpenFiles == 0 {
		l.OpenFiles = defaults.OpenFiles
	}
	if l.ApprovalSeconds == 0 {
		l.ApprovalSeconds = defaults.ApprovalSeconds
	}
	if l.MemoryBytes == 0 {
		l.MemoryBytes = l.AddressSpaceBytes
	}
	return l
}

// maxLimitSeconds bounds the time limits so that every value converts to a
// time.Duration and an rlimit without overflow.
const maxLimitSeconds = 7 * 24 * 3600

// The smallest stack and file table a run may ask for: a floor against a
// value given in the wrong unit, well below what a program needs (the
// interpreter, its bootstrap and a thread run with 256 KiB and 16 files).
const (
	minStackBytes = 256 << 10
	minOpenFiles  = 16
)

// Validate checks a merged Limits: every field positive and in range, the
// stack no larger than the address space, and OpenFiles no more than the
// host's own hard RLIMIT_NOFILE (hostOpenFilesMax). It returns an error
// wrapping ErrInvalidRequest.
func (l Limits) Validate() error {
	checks := []struct {
		name string
		ok   bool
	}{
		{string(LimitCPUSeconds), l.CPUSeconds > 0 && l.CPUSeconds <= maxLimitSeconds},
		{string(LimitAddressSpaceBytes), l.AddressSpaceBytes >= 16<<20},
		{string(LimitFileSizeBytes), l.FileSizeBytes > 0},
		{string(LimitProcessCount), l.ProcessCount > 0 && l.ProcessCount <= 1<<20},
		{string(LimitWallSeconds), l.WallSeconds > 0 && l.WallSeconds <= maxLimitSeconds},
		{string(LimitMemoryBytes), l.MemoryBytes >= 16<<20},
		{"stack_bytes", l.StackBytes >= minStackBytes && l.StackBytes <= l.AddressSpaceBytes},
		{"open_files", l.OpenFiles >= minOpenFiles},
		{string(LimitApprovalSeconds), l.ApprovalSeconds > 0 && l.ApprovalSeconds <= maxLimitSeconds},
	}
	for _, c := range checks {
		if !c.ok {
			return fmt.Errorf("limit %s out of range in %+v: %w", c.name, l, ErrInvalidRequest)
		}
	}
	if hard := hostOpenFilesMax(); uint64(l.OpenFiles) > hard {
		return fmt.Errorf("limit open_files %d exceeds this host's own hard RLIMIT_NOFILE, %d, which no run can be given more than: %w", l.OpenFiles, hard, ErrInvalidRequest)
	}
	return nil
}
