package sandbox

import (
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
)

// TestLimitsStackOpenFiles: the stack and the file table default to what
// lets 64 threads and 1024 files fit, and are refused out of range, an
// open_files past the host's own hard limit included.
func TestLimitsStackOpenFiles(t *testing.T) {
	d := DefaultLimits()
	if d.StackBytes != 4<<20 || uint64(d.OpenFiles) != min(1024, hostOpenFilesMax()) {
		t.Fatalf("defaults: stack %d, open files %d", d.StackBytes, d.OpenFiles)
	}
	if int64(d.ProcessCount)*d.StackBytes > d.AddressSpaceBytes/2 {
		t.Errorf("%d threads of %d-byte stacks take more than half of the %d-byte address space", d.ProcessCount, d.StackBytes, d.AddressSpaceBytes)
	}
	if m := (Limits{StackBytes: 1 << 20, OpenFiles: 64}).Merge(d); m.StackBytes != 1<<20 || m.OpenFiles != 64 || m.Validate() != nil {
		t.Fatalf("merged %+v: %v", m, m.Validate())
	}
	hard := hostOpenFilesMax()
	bad := []Limits{{StackBytes: 4 << 10}, {StackBytes: 1 << 40}, {OpenFiles: 3}, {OpenFiles: -1}, {OpenFiles: math.MaxInt32}}
	if hard < math.MaxInt32 {
		bad = append(bad, Limits{OpenFiles: int(hard) + 1})
	}
	for _, l := range bad {
		if err := l.Merge(d).Validate(); !errors.Is(err, ErrInvalidRequest) {
			t.Errorf("%+v: %v, want ErrInvalidRequest", l, err)
		}
	}
}

// TestApprovalSecondsDefault: a request that names no approval limit gets
// DESIGN's 600 s, and Validate names the limit it refuses.
func TestApprovalSecondsDefault(t *testing.T) {
	l := Limits{}.Merge(DefaultLimits())
	if l.ApprovalSeconds != 600 {
		t.Fatalf("merged approval_seconds %v, want 600", l.ApprovalSeconds)
	}
	if err := l.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []float64{-1, math.NaN(), math.Inf(1), maxLimitSeconds + 1} {
		l := Limits{ApprovalSeconds: bad}.Merge(DefaultLimits())
		if err := l.Validate(); !errors.Is(err, ErrInvalidRequest) || !strings.Contains(err.Error(), "approval_seconds") {
			t.Errorf("approval_seconds %v: %v, want an invalid request naming approval_seconds", bad, err)
		}
	}
	b, _ := json.Marshal(Limits{ApprovalSeconds: 2})
	if string(b) != `{"approval_seconds":2}` {
		t.Errorf("JSON %s", b)
	}
}
