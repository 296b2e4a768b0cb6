package sandbox

import (
	"encoding/json"
	"fmt"
)

// LimitName names one cap. Its JSON form is the snake_case name, and the
// empty LimitName encodes as null.
type LimitName string

// The limits of DESIGN.md §2.
const (
	LimitCPUSeconds        LimitName = "cpu_seconds"
	LimitAddressSpaceBytes LimitName = "address_space_bytes"
	LimitFileSizeBytes     LimitName = "file_size_bytes"
	LimitProcessCount      LimitName = "process_count"
	LimitWallSeconds       LimitName = "wall_seconds"
	LimitMemoryBytes       LimitName = "memory_bytes"
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
}

// DefaultLimits are the defaults of DESIGN.md §2.
func DefaultLimits() Limits {
	return Limits{
		CPUSeconds:        10,
		AddressSpaceBytes: 512 << 20,
		FileSizeBytes:     10 << 20,
		ProcessCount:      64,
		WallSeconds:       30,
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
	if l.MemoryBytes == 0 {
		l.MemoryBytes = l.AddressSpaceBytes
	}
	return l
}

// maxLimitSeconds bounds the time limits so that every value converts to a
// time.Duration and an rlimit without overflow.
const maxLimitSeconds = 7 * 24 * 3600

// Validate checks a merged Limits: every field positive and in range. It
// returns an error wrapping ErrInvalidRequest.
func (l Limits) Validate() error {
	checks := []struct {
		name LimitName
		ok   bool
	}{
		{LimitCPUSeconds, l.CPUSeconds > 0 && l.CPUSeconds <= maxLimitSeconds},
		{LimitAddressSpaceBytes, l.AddressSpaceBytes >= 16<<20},
		{LimitFileSizeBytes, l.FileSizeBytes > 0},
		{LimitProcessCount, l.ProcessCount > 0 && l.ProcessCount <= 1<<20},
		{LimitWallSeconds, l.WallSeconds > 0 && l.WallSeconds <= maxLimitSeconds},
		{LimitMemoryBytes, l.MemoryBytes >= 16<<20},
	}
	for _, c := range checks {
		if !c.ok {
			return fmt.Errorf("limit %s out of range in %+v: %w", c.name, l, ErrInvalidRequest)
		}
	}
	return nil
}
