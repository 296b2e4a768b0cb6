package sandbox

import (
	"strconv"
	"strings"
	"testing"
)

// TestPoolCaps: Validate merges the caps with the defaults and refuses bad
// sizes; Above names the first limit a pool cannot serve.
func TestPoolCaps(t *testing.T) {
	d := DefaultLimits()
	caps, err := PoolConfig{Size: 2, Caps: Limits{CPUSeconds: 30}}.Validate(d)
	if err != nil || caps.CPUSeconds != 30 || caps.AddressSpaceBytes != d.AddressSpaceBytes {
		t.Fatalf("caps %+v, %v", caps, err)
	}
	for _, bad := range []PoolConfig{{Size: 0}, {Size: 2000}, {Size: 1, MaxAge: -1}, {Size: 1, Caps: Limits{StackBytes: 1}}} {
		if _, err := bad.Validate(d); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
	for _, tc := range []struct {
		l    Limits
		want LimitName
	}{
		{Limits{}, ""},
		{Limits{CPUSeconds: 31}, LimitCPUSeconds},
		{Limits{ProcessCount: 65}, LimitProcessCount},
		{Limits{AddressSpaceBytes: 64 << 20, MemoryBytes: 64 << 20}, ""},
		{Limits{StackBytes: 8 << 20}, "stack_bytes"},
		{Limits{StackBytes: 1 << 20}, "stack_bytes"},
		{Limits{WallSeconds: 3600}, ""},
	} {
		if got := tc.l.Merge(d).Above(caps); got != tc.want {
			t.Errorf("%+v: Above %q, want %q", tc.l, got, tc.want)
		}
	}
}

type statedSandbox struct {
	Sandbox
	st PoolStatus
}

func (s statedSandbox) PoolStatus() PoolStatus { return s.st }

// TestPoolStatusOf: a Sandbox's own PoolStatus, zero for one that does not
// tell.
func TestPoolStatusOf(t *testing.T) {
	if got := PoolStatusOf(statedSandbox{st: PoolStatus{Size: 3, Ready: 1}}); got != (PoolStatus{Size: 3, Ready: 1}) {
		t.Errorf("PoolStatusOf a stater: %+v", got)
	}
	var plain struct{ Sandbox }
	if got := PoolStatusOf(plain); got != (PoolStatus{}) {
		t.Errorf("PoolStatusOf a Sandbox that does not tell: %+v", got)
	}
}

// TestPoolPreloadNames: Validate refuses a Preload that is not a list of
// distinct absolute module names, saying which, and takes one that is.
func TestPoolPreloadNames(t *testing.T) {
	defaults := DefaultLimits()
	if _, err := (PoolConfig{Size: 1, Preload: []string{"numpy", "matplotlib.pyplot", "_x1"}}).Validate(defaults); err != nil {
		t.Errorf("good names: %v", err)
	}
	many := make([]string, MaxPreload+1)
	for i := range many {
		many[i] = "m" + strconv.Itoa(i)
	}
	for _, bad := range [][]string{{""}, {".numpy"}, {"numpy."}, {"a..b"}, {"os; import x"}, {"import"}, {"a.class"}, {"ñumpy"}, {"9a"}, {"a/b"}, {strings.Repeat("a", 201)}, {"a", "a"}, many} {
		_, err := (PoolConfig{Size: 1, Preload: bad}).Validate(defaults)
		if err == nil || !strings.Contains(err.Error(), "preload") {
			t.Errorf("Preload %.40q: %v, want an error about the preload", bad, err)
		}
	}
}
