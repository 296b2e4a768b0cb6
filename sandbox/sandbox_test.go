package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestValidateBindings(t *testing.T) {
	ok := []Binding{{Name: "search", Params: []string{"query", "limit"}}, {Name: "_x2"}}
	if err := ValidateBindings(ok); err != nil {
		t.Fatal(err)
	}
	bad := map[string][]Binding{
		"reserved run_code": {{Name: "run_code"}},
		"keyword":           {{Name: "class"}},
		"not identifier":    {{Name: "a-b"}},
		"empty":             {{Name: ""}},
		"twice":             {{Name: "a"}, {Name: "a"}},
		"bad param":         {{Name: "a", Params: []string{"1x"}}},
		"repeated param":    {{Name: "a", Params: []string{"x", "x"}}},
		"keyword param":     {{Name: "a", Params: []string{"lambda"}}},
		"BindingError":      {{Name: "BindingError"}},
		"dunder":            {{Name: "__spec__"}},
		"bare dunder":       {{Name: "__"}},
		"non-ascii":         {{Name: "é"}},
	}
	for name, list := range bad {
		if err := ValidateBindings(list); !errors.Is(err, ErrInvalidRequest) {
			t.Errorf("%s: %v, want ErrInvalidRequest", name, err)
		}
	}
}

func TestReservedNames(t *testing.T) {
	for name, want := range map[string]bool{
		"run_code": true, "BindingError": true, "__spec__": true, "__": true, "___": true,
		"run_code_": false, "__x": false, "x__": false, "_": false, "search": false,
	} {
		if got := IsReservedName(name); got != want {
			t.Errorf("IsReservedName(%q) = %v, want %v", name, got, want)
		}
	}
	if err := CheckName("search"); err != nil {
		t.Errorf("CheckName(search): %v", err)
	}
	for _, name := range []string{"run_code", "__init__", "class", "a.b"} {
		if err := CheckName(name); !errors.Is(err, ErrInvalidRequest) {
			t.Errorf("CheckName(%q) = %v, want ErrInvalidRequest", name, err)
		}
	}
}

func TestLimitsMergeValidate(t *testing.T) {
	d := DefaultLimits()
	if d.CPUSeconds != 10 || d.AddressSpaceBytes != 512<<20 || d.FileSizeBytes != 10<<20 || d.ProcessCount != 64 || d.WallSeconds != 30 {
		t.Fatalf("defaults %+v differ from the contract's defaults", d)
	}
	m := Limits{WallSeconds: 2}.Merge(d)
	if m.WallSeconds != 2 || m.CPUSeconds != 10 || m.MemoryBytes != m.AddressSpaceBytes {
		t.Fatalf("merge %+v", m)
	}
	// memory_bytes follows the run's own address space unless set.
	if m := (Limits{AddressSpaceBytes: 1 << 30}).Merge(d); m.MemoryBytes != 1<<30 {
		t.Fatalf("memory_bytes %d, want the merged address space", m.MemoryBytes)
	}
	if m := (Limits{MemoryBytes: 64 << 20}).Merge(d); m.MemoryBytes != 64<<20 {
		t.Fatalf("memory_bytes %d, want the request's", m.MemoryBytes)
	}
	if err := m.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, l := range []Limits{{CPUSeconds: -1}, {WallSeconds: 1e12}, {ProcessCount: -3}, {AddressSpaceBytes: 1}, {MemoryBytes: 1}} {
		if err := l.Merge(d).Validate(); !errors.Is(err, ErrInvalidRequest) {
			t.Errorf("%+v: %v, want ErrInvalidRequest", l, err)
		}
	}
}

func TestResultJSON(t *testing.T) {
	code := 3
	r := Result{Stdout: "x", Value: json.RawMessage(`[1]`), Duration: 1500 * time.Millisecond,
		Failure: &Failure{Type: "SystemExit", Message: "3", ExitCode: &code}, LimitHit: LimitWallSeconds, LimitSource: SourceHost}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"duration_seconds":1.5`, `"limit_hit":"wall_seconds"`, `"signal":null`, `"exit_code":3`, `"network_denied":false`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("%s lacks %s", b, want)
		}
	}
	var back Result
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back.Duration != r.Duration || back.LimitHit != r.LimitHit || *back.Failure.ExitCode != 3 || string(back.Value) != "[1]" {
		t.Errorf("round trip %+v", back)
	}
	b, _ = json.Marshal(Result{})
	for _, want := range []string{`"limit_hit":null`, `"value":null`, `"failure":null`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("empty result %s lacks %s", b, want)
		}
	}
}

func TestCheckID(t *testing.T) {
	for _, id := range []string{"a", "01J0ABCDEF", "run-1.2_x:y", strings.Repeat("x", 64)} {
		if err := CheckID(id); err != nil {
			t.Errorf("%q: %v", id, err)
		}
	}
	for _, id := range []string{"", "a b", "a/b", "é", strings.Repeat("x", 65), "a\x00"} {
		if err := CheckID(id); !errors.Is(err, ErrInvalidRequest) {
			t.Errorf("%q: %v, want ErrInvalidRequest", id, err)
		}
	}
}

func TestRunContext(t *testing.T) {
	ctx := context.Background()
	if RunID(ctx) != "" {
		t.Fatal("an id outside a run")
	}
	if _, err := Suspend(WithRun(ctx, RunContext{ID: "r"})); !errors.Is(err, ErrCannotSuspend) {
		t.Fatalf("Suspend without a freezer: %v", err)
	}
	resumed := false
	ctx = WithRun(ctx, RunContext{ID: "r", Suspend: func() (func(), error) { return func() { resumed = true }, nil }})
	resume, err := Suspend(ctx)
	if err != nil || RunID(ctx) != "r" {
		t.Fatalf("Suspend: %v, id %q", err, RunID(ctx))
	}
	resume()
	if !resumed {
		t.Fatal("resume did not reach the backend")
	}
}

func TestResultJSONSuspended(t *testing.T) {
	r := Result{ID: "x", Duration: 3 * time.Second, Suspended: 2500 * time.Millisecond}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var back Result
	if err := json.Unmarshal(b, &back); err != nil || back.ID != "x" || back.Suspended != r.Suspended || !strings.Contains(string(b), `"suspended_seconds":2.5`) {
		t.Fatalf("%s -> %+v, %v", b, back, err)
	}
}

// TestStreamString: the streams name themselves as the API's events do.
func TestStreamString(t *testing.T) {
	for s, want := range map[Stream]string{Stdout: "stdout", Stderr: "stderr", 0: "Stream(0)"} {
		if got := s.String(); got != want {
			t.Errorf("Stream(%d).String() = %q, want %q", uint8(s), got, want)
		}
	}
}
