// Package storetest is the conformance suite every psych.Store must pass,
// run by each implementation with a factory (as containerd's
// snapshots/testsuite is).
//
// What it holds a Store to, beyond the interface's own words:
//   - Every exported field of Execution, sandbox.Result and CallRecord,
//     found by reflection, round-trips; the fixtures must set every one, so
//     a field added to a record fails the suite until they cover it. Times
//     compare with time.Equal after Truncate(time.Millisecond), and a zero
//     time must come back zero. CallRecord durations are exact; durations
//     inside a sandbox.Result, which its JSON carries as float seconds,
//     compare after Round(time.Microsecond). RawMessages compare as
//     compacted JSON, nil and JSON null alike; a nil slice and an empty one
//     are alike. Approved keeps nil, false and true apart.
//   - FinishExecution sets Finished and attests the execution with its
//     result as Execution.Attest does (Status finished, no Reason), and
//     refuses a nil result.
//   - Status follows what was recorded: incomplete without a result,
//     finished with one. AbortExecution records cancelled or failed with
//     its reason and Finished, refuses any other status, an unknown id
//     (ErrNotFound) and an execution with a result (ErrFinished), which it
//     leaves as it was; a later FinishExecution still finishes it.
//   - Records are copies: mutating what was passed in or handed out never
//     changes what the store holds.
//   - Seq is at least 1 and strictly increasing in the order RecordCall
//     returned, with none lost or repeated under concurrent writers.
//   - BeginExecution refuses a nil record and an empty id; Calls of an id
//     with no calls is empty, not an error; Executions lists in begin order.
//   - After Close every method but Close returns an error.
//
// The suite cannot reopen a store; a persistent Store tests that itself.
package storetest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/psych-runtime/psych"
	"github.com/psych-runtime/psych/sandbox"
)

// Run runs the suite. open returns a new, empty store for each subtest;
// the suite closes it.
func Run(t *testing.T, open func(t *testing.T) psych.Store) {
	tests := []struct {
		name   string
		fn     func(t *testing.T, s psych.Store)
		closes bool // the test closes the store itself
	}{
		{"BeginFinishList", testBeginFinishList, false},
		{"Incomplete", testIncomplete, false},
		{"Abort", testAbort, false},
		{"DuplicateID", testDuplicateID, false},
		{"NotFound", testNotFound, false},
		{"BadRecords", testBadRecords, false},
		{"CallsPerParent", testCallsPerParent, false},
		{"ReadOwnWrites", testReadOwnWrites, false},
		{"RoundTrip", testRoundTrip, false},
		{"ZeroValues", testZeroValues, false},
		{"CopyIn", testCopyIn, false},
		{"CopyOut", testCopyOut, false},
		{"ConcurrentCalls", testConcurrentCalls, false},
		{"Closed", testClosed, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := open(t)
			if s == nil {
				t.Fatal("open returned a nil Store")
			}
			if !tt.closes {
				t.Cleanup(func() {
					if err := s.Close(); err != nil {
						t.Errorf("Close: %v", err)
					}
				})
			}
			tt.fn(t, s)
		})
	}
}

var ctx = context.Background()

// base is a fixed instant with sub-millisecond digits, so truncation is
// exercised.
var base = time.Date(2026, 3, 14, 15, 9, 26, 535897932, time.UTC)

func begin(t *testing.T, s psych.Store, id string, started time.Time) *psych.Execution {
	t.Helper()
	e := &psych.Execution{ID: id, CallID: "call-" + id, Started: started, Code: "print(" + id + ")", Backend: "subprocess"}
	if err := s.BeginExecution(ctx, e); err != nil {
		t.Fatalf("BeginExecution(%q): %v", id, err)
	}
	return e
}

func record(t *testing.T, s psych.Store, parent, id string) psych.CallRecord {
	t.Helper()
	c := psych.CallRecord{Seq: -7, ID: id, Parent: parent, Tool: "search", Args: json.RawMessage(`{"q":"` + id + `"}`),
		Via: psych.ViaRunCode, Decision: psych.Allow, Outcome: psych.OutcomeOK}
	if parent == "" {
		c.Via = psych.ViaModel
	}
	if err := s.RecordCall(ctx, &c); err != nil {
		t.Fatalf("RecordCall(%q): %v", id, err)
	}
	if c.Seq < 1 {
		t.Fatalf("RecordCall(%q) set Seq %d, want ≥ 1", id, c.Seq)
	}
	return c
}

func get(t *testing.T, s psych.Store, id string) *psych.Execution {
	t.Helper()
	e, err := s.Execution(ctx, id)
	if err != nil {
		t.Fatalf("Execution(%q): %v", id, err)
	}
	if e == nil {
		t.Fatalf("Execution(%q) returned nil and no error", id)
	}
	return e
}

func list(t *testing.T, s psych.Store) []psych.Execution {
	t.Helper()
	es, err := s.Executions(ctx)
	if err != nil {
		t.Fatalf("Executions: %v", err)
	}
	return es
}

func calls(t *testing.T, s psych.Store, parent string) []psych.CallRecord {
	t.Helper()
	cs, err := s.Calls(ctx, parent)
	if err != nil {
		t.Fatalf("Calls(%q): %v", parent, err)
	}
	return cs
}

func ids[T any](xs []T, id func(T) string) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = id(x)
	}
	return out
}

func execID(e psych.Execution) string  { return e.ID }
func callID(c psych.CallRecord) string { return c.ID }

func testBeginFinishList(t *testing.T, s psych.Store) {
	for i, id := range []string{"a", "b", "c"} {
		begin(t, s, id, base.Add(time.Duration(i)*time.Second))
	}
	if got := ids(list(t, s), execID); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Fatalf("Executions = %q, want [a b c]", got)
	}
	before := time.Now().Truncate(time.Millisecond)
	res := &sandbox.Result{Stdout: "ok\n", Value: json.RawMessage(`42`), Duration: 1500 * time.Millisecond}
	if err := s.FinishExecution(ctx, "b", res); err != nil {
		t.Fatalf("FinishExecution: %v", err)
	}
	after := time.Now().Add(time.Millisecond)
	e := get(t, s, "b")
	if e.Incomplete() || e.Status != psych.ExecutionFinished || e.Result.Stdout != "ok\n" || string(e.Result.Value) != "42" {
		t.Fatalf("finished execution's Result = %+v, want %+v", e.Result, res)
	}
	if e.Finished.Before(before) || e.Finished.After(after) {
		t.Errorf("Finished = %v, want between %v and %v", e.Finished, before, after)
	}
	es := list(t, s)
	if got := ids(es, execID); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Fatalf("Executions after finishing b = %q, want [a b c]", got)
	}
	for _, e := range es {
		if want := e.ID != "b"; e.Incomplete() != want || (e.Status == psych.ExecutionIncomplete) != want {
			t.Errorf("Executions: %s Incomplete() = %v, Status %q; want incomplete %v", e.ID, e.Incomplete(), e.Status, want)
		}
	}
}

func testIncomplete(t *testing.T, s psych.Store) {
	begin(t, s, "run", base)
	record(t, s, "run", "c1")
	e := get(t, s, "run")
	if !e.Incomplete() || e.Result != nil || e.Status != psych.ExecutionIncomplete {
		t.Errorf("unfinished execution has Result %+v, Status %q; want nil, incomplete", e.Result, e.Status)
	}
	if !e.Finished.IsZero() {
		t.Errorf("unfinished execution has Finished %v, want zero", e.Finished)
	}
	if es := list(t, s); len(es) != 1 || !es[0].Incomplete() || es[0].Status != psych.ExecutionIncomplete {
		t.Errorf("Executions = %+v, want one incomplete", es)
	}
}

func testAbort(t *testing.T, s psych.Store) {
	for i, id := range []string{"cancelled", "failed", "running", "done"} {
		begin(t, s, id, base.Add(time.Duration(i)*time.Second))
	}
	res := &sandbox.Result{Stdout: "ok\n"}
	if err := s.FinishExecution(ctx, "done", res); err != nil {
		t.Fatal(err)
	}
	before := time.Now().Truncate(time.Millisecond)
	for id, st := range map[string]psych.ExecutionStatus{"cancelled": psych.ExecutionCancelled, "failed": psych.ExecutionFailed} {
		if err := s.AbortExecution(ctx, id, st, "why: "+id); err != nil {
			t.Fatalf("AbortExecution(%s): %v", id, err)
		}
	}
	after := time.Now().Add(time.Millisecond)
	want := map[string]psych.ExecutionStatus{"cancelled": psych.ExecutionCancelled, "failed": psych.ExecutionFailed, "running": psych.ExecutionIncomplete, "done": psych.ExecutionFinished}
	check := func(what string) {
		t.Helper()
		es := list(t, s)
		if got := ids(es, execID); !slices.Equal(got, []string{"cancelled", "failed", "running", "done"}) {
			t.Fatalf("%s: Executions = %q", what, got)
		}
		for _, e := range append(es, *get(t, s, "cancelled"), *get(t, s, "failed")) {
			if e.Status != want[e.ID] {
				t.Errorf("%s: %s has Status %q, want %q", what, e.ID, e.Status, want[e.ID])
			}
			switch aborted := want[e.ID].Aborted(); {
			case aborted && (e.Reason != "why: "+e.ID || e.Result != nil || !e.Incomplete() || e.Finished.Before(before) || e.Finished.After(after)):
				t.Errorf("%s: aborted %s: Reason %q, Result %+v, Finished %v; want %q, none, between %v and %v", what, e.ID, e.Reason, e.Result, e.Finished, "why: "+e.ID, before, after)
			case !aborted && e.Reason != "":
				t.Errorf("%s: %s has Reason %q", what, e.ID, e.Reason)
			}
		}
		if e := get(t, s, "done"); e.Result == nil || e.Result.Stdout != "ok\n" {
			t.Errorf("%s: the finished execution's Result is %+v", what, e.Result)
		}
	}
	check("after abort")

	if err := s.AbortExecution(ctx, "missing", psych.ExecutionCancelled, "x"); !errors.Is(err, psych.ErrNotFound) {
		t.Errorf("AbortExecution(missing) = %v, want ErrNotFound", err)
	}
	if err := s.AbortExecution(ctx, "done", psych.ExecutionCancelled, "late"); !errors.Is(err, psych.ErrFinished) {
		t.Errorf("AbortExecution of a finished execution = %v, want ErrFinished", err)
	}
	for _, st := range []psych.ExecutionStatus{psych.ExecutionFinished, psych.ExecutionIncomplete, "", "weird"} {
		if err := s.AbortExecution(ctx, "running", st, "x"); err == nil {
			t.Errorf("AbortExecution with status %q succeeded", st)
		}
	}
	check("after refused aborts")

	// A result recorded after all finishes it.
	if err := s.FinishExecution(ctx, "failed", res); err != nil {
		t.Fatal(err)
	}
	if e := get(t, s, "failed"); e.Status != psych.ExecutionFinished || e.Reason != "" || e.Incomplete() {
		t.Errorf("finished after failing: Status %q, Reason %q, Result %+v; want finished, no reason", e.Status, e.Reason, e.Result)
	}
}

func testDuplicateID(t *testing.T, s psych.Store) {
	begin(t, s, "dup", base)
	err := s.BeginExecution(ctx, &psych.Execution{ID: "dup", Code: "other"})
	if !errors.Is(err, psych.ErrDuplicateID) {
		t.Fatalf("second BeginExecution(dup) = %v, want ErrDuplicateID", err)
	}
	if e := get(t, s, "dup"); e.Code != "print(dup)" {
		t.Errorf("duplicate replaced the execution: Code = %q", e.Code)
	}
	if n := len(list(t, s)); n != 1 {
		t.Errorf("Executions lists %d, want 1", n)
	}
	begin(t, s, "next", base) // the store still works
}

func testNotFound(t *testing.T, s psych.Store) {
	begin(t, s, "there", base)
	if e, err := s.Execution(ctx, "missing"); !errors.Is(err, psych.ErrNotFound) {
		t.Errorf("Execution(missing) = %+v, %v; want ErrNotFound", e, err)
	}
	if err := s.FinishExecution(ctx, "missing", &sandbox.Result{}); !errors.Is(err, psych.ErrNotFound) {
		t.Errorf("FinishExecution(missing) = %v, want ErrNotFound", err)
	}
	if cs := calls(t, s, "missing"); len(cs) != 0 {
		t.Errorf("Calls(missing) = %+v, want none", cs)
	}
	if n := len(list(t, s)); n != 1 {
		t.Errorf("Executions lists %d, want 1", n)
	}
}

func testBadRecords(t *testing.T, s psych.Store) {
	if err := s.BeginExecution(ctx, nil); err == nil {
		t.Error("BeginExecution(nil) succeeded")
	}
	if err := s.BeginExecution(ctx, &psych.Execution{Code: "x"}); err == nil {
		t.Error("BeginExecution without an id succeeded")
	}
	if err := s.RecordCall(ctx, nil); err == nil {
		t.Error("RecordCall(nil) succeeded")
	}
	begin(t, s, "b", base)
	if err := s.FinishExecution(ctx, "b", nil); err == nil {
		t.Error("FinishExecution with a nil result succeeded")
	}
	if e := get(t, s, "b"); !e.Incomplete() {
		t.Errorf("a refused result was recorded: %+v", e.Result)
	}
	if es := list(t, s); len(es) != 1 {
		t.Errorf("Executions = %+v, want only b", es)
	}
}

func testCallsPerParent(t *testing.T, s psych.Store) {
	begin(t, s, "x", base)
	begin(t, s, "y", base)
	var last int64
	want := map[string][]string{}
	for i, parent := range []string{"x", "y", "", "x", "", "x", "y"} {
		id := fmt.Sprintf("%s%d", parent, i)
		c := record(t, s, parent, id)
		if c.Seq <= last {
			t.Fatalf("call %d got Seq %d after %d, want strictly increasing", i, c.Seq, last)
		}
		last = c.Seq
		want[parent] = append(want[parent], id)
	}
	for _, parent := range []string{"x", "y", ""} {
		cs := calls(t, s, parent)
		if got := ids(cs, callID); !slices.Equal(got, want[parent]) {
			t.Errorf("Calls(%q) = %q, want %q", parent, got, want[parent])
		}
		for i, c := range cs {
			if c.Parent != parent {
				t.Errorf("Calls(%q) lists %s with parent %q", parent, c.ID, c.Parent)
			}
			if i > 0 && c.Seq <= cs[i-1].Seq {
				t.Errorf("Calls(%q) not in Seq order: %d after %d", parent, c.Seq, cs[i-1].Seq)
			}
		}
	}
}

func testReadOwnWrites(t *testing.T, s psych.Store) {
	begin(t, s, "r", base)
	for i := range 50 {
		c := record(t, s, "r", fmt.Sprint(i))
		cs := calls(t, s, "r")
		if len(cs) != i+1 || cs[i].Seq != c.Seq {
			t.Fatalf("after call %d (Seq %d), Calls lists %d, want %d ending with it", i, c.Seq, len(cs), i+1)
		}
	}
	if err := s.FinishExecution(ctx, "r", &sandbox.Result{Stdout: "done"}); err != nil {
		t.Fatal(err)
	}
	if e := get(t, s, "r"); e.Incomplete() {
		t.Fatal("finished execution read back incomplete")
	}
}

// fullExecution and fullCalls set every field, which nonZero checks, so a
// field added to a record fails the suite until it is covered here.
func fullExecution() (*psych.Execution, *sandbox.Result) {
	e := &psych.Execution{
		ID: "full", CallID: "call_1", Owner: "uid:1000", Started: base, Code: "import math\nmath.pi\n",
		Limits:   sandbox.Limits{CPUSeconds: 1.5, AddressSpaceBytes: 1 << 29, FileSizeBytes: 1 << 20, ProcessCount: 8, WallSeconds: 2.25, MemoryBytes: 1 << 28, StackBytes: 1 << 21, OpenFiles: 512, ApprovalSeconds: 42.5},
		Network:  true,
		Bindings: []sandbox.Binding{{Name: "search", Params: []string{"query", "limit"}, Doc: "Search the web."}, {Name: "fetch", Params: []string{"url"}, Doc: "Fetch a page."}},
		// What the result's attestation replaces (Execution.Attest).
		Backend: "subprocess", Engine: "none", Interpreter: "/usr/bin/python", Image: "none",
		EnvKeys: []string{"LANG"},
		Files:   []psych.FileRecord{{Path: "in/a.csv", Size: 3, SHA256: strings.Repeat("ef", 32)}},
		// As begun (BeginExecution records them as given); a result
		// makes it finished, with no reason.
		Status: psych.ExecutionCancelled, Reason: "context canceled",
	}
	exit, ps := 3, sandbox.ProcessStatus{UID: []int{1000, 1000, 1000, 1000}, GID: []int{100, 100, 100, 100},
		Seccomp: 2, SeccompFilters: 1, NoNewPrivs: 1, CapEff: "0000000000000000", CapBnd: "000001ffffffffff"}
	r := &sandbox.Result{
		ID: "full", Stdout: "héllo\n", Stderr: "warn\n", StdoutTruncated: true, StderrTruncated: true,
		Value:    json.RawMessage(`{"a": [1, 2.5, "x"], "b": null}`),
		Failure:  &sandbox.Failure{Type: "MemoryError", Message: "boom", Traceback: "Traceback (most recent call last):\n  File \"prog.py\", line 2\n", ExitCode: &exit, Signal: "SIGKILL"},
		Duration: 1234567891 * time.Nanosecond, Suspended: 333333333 * time.Nanosecond,
		LimitHit:    sandbox.LimitMemoryBytes,
		LimitSource: sandbox.SourceKernel, NetworkDenied: true,
		Usage: &sandbox.Usage{CPUSeconds: 0.75, PeakMemoryBytes: 1 << 27, PeakProcesses: 3, OOMKills: 2, HostCallSeconds: 1.25},
		Isolation: &sandbox.Isolation{Backend: "container", Engine: "podman", Image: &sandbox.Image{Ref: "python:3.13", Digest: "sha256:def"},
			Mode: "namespaces", Namespaces: []string{"user", "mnt", "net"}, UIDMap: "0 100000 65536", GIDMap: "0 100000 65536",
			LandlockScoped: []string{"signal"}, LandlockFS: []string{"/usr:read", "$HOME:write"}, InetRefused: true, SeccompDigest: "sha256:0123", Init: ps, Interpreter: ps,
			Network: &sandbox.NetworkCheck{Verified: true, Links: []string{"lo"}, Reason: "n/a"}, Cgroup: "v2",
			Freezable: true, PythonPath: "/usr/bin/python3", EnvKeys: []string{"HOME", "LANG", "PATH"},
			Limits: map[string]string{"cpu": "10 11"}, RootMount: "own:tmpfs", FilesOut: true, Host: "node-a", Warm: true, AgeSeconds: 1.5, ColdReason: "no pooled sandbox was ready"},
		Files:            []sandbox.OutFile{{Path: "out.png", Size: 4, SHA256: strings.Repeat("01", 32), Mode: 0o640, Data: []byte("\x89PNG")}},
		FilesOmitted:     []sandbox.Omitted{{Path: "big", Size: 1 << 40, Reason: sandbox.OmitTooLarge}},
		FilesTruncated:   true,
		Artifacts:        []sandbox.Artifact{{Name: "figure-1.png", MIME: sandbox.MIMEPNG, Width: 640, Height: 480, Size: 4, SHA256: strings.Repeat("23", 32), Data: []byte("\x89PNG")}},
		ArtifactsOmitted: []sandbox.Omitted{{Path: "figure-2.png", Size: 9 << 20, Reason: sandbox.OmitTooLarge}},
	}
	return e, r
}

func fullCalls() []psych.CallRecord {
	c := psych.CallRecord{
		Seq: 99, ID: "c-true", Parent: "full", Tool: "delete_file", Args: json.RawMessage(`{"path": "/tmp/x"}`), Via: psych.ViaRunCode,
		Decision: psych.Ask, Reason: "destructive tool", Approver: "tty", Approved: new(true),
		DecisionTime: 2*time.Second + 345, Started: base.Add(time.Second), Duration: 17*time.Millisecond + 3,
		Outcome: psych.OutcomeError, Value: json.RawMessage(`[1, {"k": "v"}]`), Error: "permission denied", BytesIn: 19, BytesOut: 42,
		ArgsTruncated: true, ArgsSHA256: strings.Repeat("ab", 32), ValueTruncated: true, ValueSHA256: strings.Repeat("cd", 32),
	}
	denied := c
	denied.ID, denied.Approved, denied.Outcome = "c-false", new(false), psych.OutcomeDenied
	direct := c
	direct.ID, direct.Parent, direct.Via, direct.Approved = "c-direct", "", psych.ViaModel, nil
	return []psych.CallRecord{c, denied, direct}
}

func testRoundTrip(t *testing.T, s psych.Store) {
	e, r := fullExecution()
	in := *e
	if err := s.BeginExecution(ctx, e); err != nil {
		t.Fatal(err)
	}
	checkExecution(t, "after begin", get(t, s, "full"), &in)
	if err := s.FinishExecution(ctx, "full", r); err != nil {
		t.Fatal(err)
	}
	got := get(t, s, "full")
	reason := in.Reason
	in.Attest(r)
	in.Finished = got.Finished
	// Between begin and finish, every field was set once: Reason before
	// the result, the rest after.
	both := in
	both.Reason = reason
	nonZero(t, "Execution", reflect.ValueOf(both))
	checkExecution(t, "after finish", got, &in)
	if es := list(t, s); len(es) != 1 {
		t.Fatalf("Executions lists %d, want 1", len(es))
	} else {
		checkExecution(t, "listed", &es[0], &in)
	}

	want := fullCalls()
	nonZero(t, "CallRecord", reflect.ValueOf(want[0]))
	for i := range want {
		c := want[i]
		if err := s.RecordCall(ctx, &c); err != nil {
			t.Fatal(err)
		}
		want[i].Seq = c.Seq
	}
	cs := slices.Concat(calls(t, s, "full"), calls(t, s, ""))
	if len(cs) != len(want) {
		t.Fatalf("Calls list %d, want %d", len(cs), len(want))
	}
	for i := range want {
		checkCall(t, &cs[i], &want[i])
	}
	if a := cs[1].Approved; a == nil || *a {
		t.Errorf("Approved false came back as %v", a)
	}
}

func testZeroValues(t *testing.T, s psych.Store) {
	if err := s.BeginExecution(ctx, &psych.Execution{ID: "z"}); err != nil {
		t.Fatal(err)
	}
	checkExecution(t, "zero", get(t, s, "z"), &psych.Execution{ID: "z", Status: psych.ExecutionIncomplete})
	if err := s.FinishExecution(ctx, "z", &sandbox.Result{}); err != nil {
		t.Fatal(err)
	}
	got := get(t, s, "z")
	checkExecution(t, "zero result", got, &psych.Execution{ID: "z", Result: &sandbox.Result{}, Finished: got.Finished, Status: psych.ExecutionFinished})

	// A result without an attestation keeps what BeginExecution recorded.
	e := &psych.Execution{ID: "kept", Backend: "subprocess", Interpreter: "/usr/bin/python3", EnvKeys: []string{"LANG"}}
	want := *e
	if err := s.BeginExecution(ctx, e); err != nil {
		t.Fatal(err)
	}
	r := &sandbox.Result{Stdout: "x"}
	if err := s.FinishExecution(ctx, "kept", r); err != nil {
		t.Fatal(err)
	}
	got = get(t, s, "kept")
	want.Attest(r)
	want.Finished = got.Finished
	checkExecution(t, "unattested result", got, &want)

	c := psych.CallRecord{ID: "zc"}
	if err := s.RecordCall(ctx, &c); err != nil {
		t.Fatal(err)
	}
	checkOnlyCall(t, s, "", &c)
}

func testCopyIn(t *testing.T, s psych.Store) {
	e, r := fullExecution()
	if err := s.BeginExecution(ctx, e); err != nil {
		t.Fatal(err)
	}
	e.ID, e.Code, e.Bindings[0].Name, e.Bindings[1].Params[0], e.EnvKeys[0] = "changed", "changed", "changed", "changed", "changed"
	want, wantRes := fullExecution()
	checkExecution(t, "begin's record mutated", get(t, s, "full"), want)

	if err := s.FinishExecution(ctx, "full", r); err != nil {
		t.Fatal(err)
	}
	r.Value[2], r.Failure.Message, *r.Failure.ExitCode = 'X', "changed", 99
	r.Isolation.Namespaces[0], r.Isolation.Init.UID[0], r.Isolation.Network.Links[0], r.Usage.CPUSeconds = "x", 7, "eth0", 99
	r.Isolation.EnvKeys[0], r.Isolation.Image.Digest = "changed", "changed"
	got := get(t, s, "full")
	want.Attest(wantRes)
	want.Finished = got.Finished
	checkExecution(t, "finish's result mutated", got, want)

	c := fullCalls()[0]
	wantCall := fullCalls()[0]
	if err := s.RecordCall(ctx, &c); err != nil {
		t.Fatal(err)
	}
	wantCall.Seq = c.Seq
	c.Args[2], c.Value[1], *c.Approved, c.Tool = 'X', 'X', false, "changed"
	checkOnlyCall(t, s, "full", &wantCall)
}

func testCopyOut(t *testing.T, s psych.Store) {
	e, r := fullExecution()
	if err := s.BeginExecution(ctx, e); err != nil {
		t.Fatal(err)
	}
	if err := s.FinishExecution(ctx, "full", r); err != nil {
		t.Fatal(err)
	}
	c := fullCalls()[0]
	if err := s.RecordCall(ctx, &c); err != nil {
		t.Fatal(err)
	}
	finished := get(t, s, "full").Finished
	mutate := func(e *psych.Execution) {
		e.Bindings[0].Name, e.Bindings[0].Params[0], e.EnvKeys[0] = "changed", "changed", "changed"
		e.Result.Value[2], e.Result.Failure.Message, *e.Result.Failure.ExitCode = 'X', "changed", 99
		e.Result.Isolation.Namespaces[0], e.Result.Isolation.Image.Ref, e.Result.Usage.PeakProcesses = "x", "changed", 99
	}
	mutate(get(t, s, "full"))
	mutate(&list(t, s)[0])
	out := calls(t, s, "full")[0]
	out.Args[2], out.Value[1], *out.Approved = 'X', 'X', false

	want, res := fullExecution()
	want.Attest(res)
	want.Finished = finished
	checkExecution(t, "handed-out execution mutated", get(t, s, "full"), want)
	wantCall := fullCalls()[0]
	wantCall.Seq = c.Seq
	checkCall(t, &calls(t, s, "full")[0], &wantCall)
}

func testConcurrentCalls(t *testing.T, s psych.Store) {
	const writers, each = 8, 100
	begin(t, s, "par", base)
	var wg sync.WaitGroup
	seqs := make([][]int64, writers)
	errs := make(chan error, writers*each+writers)
	for w := range writers {
		wg.Go(func() {
			parent := "par"
			if w%2 == 1 {
				parent = ""
			}
			for i := range each {
				c := psych.CallRecord{ID: fmt.Sprintf("w%d-%d", w, i), Parent: parent, Tool: "t", Args: json.RawMessage(`{}`)}
				if err := s.RecordCall(ctx, &c); err != nil {
					errs <- err
					return
				}
				if n := len(seqs[w]); n > 0 && c.Seq <= seqs[w][n-1] {
					errs <- fmt.Errorf("writer %d: Seq %d after %d", w, c.Seq, seqs[w][n-1])
				}
				seqs[w] = append(seqs[w], c.Seq)
			}
		})
	}
	wg.Go(func() { // a reader alongside
		for range 20 {
			if _, err := s.Calls(ctx, "par"); err != nil {
				errs <- err
				return
			}
		}
	})
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	got := map[int64]string{}
	for _, parent := range []string{"par", ""} {
		cs := calls(t, s, parent)
		for i, c := range cs {
			if i > 0 && c.Seq <= cs[i-1].Seq {
				t.Errorf("Calls(%q) not in Seq order: %d after %d", parent, c.Seq, cs[i-1].Seq)
			}
			if prev, ok := got[c.Seq]; ok {
				t.Errorf("Seq %d listed for %s and %s", c.Seq, prev, c.ID)
			}
			got[c.Seq] = c.ID
		}
	}
	for w, ss := range seqs {
		for i, seq := range ss {
			if id := fmt.Sprintf("w%d-%d", w, i); got[seq] != id {
				t.Errorf("Seq %d given to %s lists %q", seq, id, got[seq])
			}
		}
	}
	if len(got) != writers*each {
		t.Errorf("listed %d calls, want %d", len(got), writers*each)
	}
}

func testClosed(t *testing.T, s psych.Store) {
	begin(t, s, "open", base)
	record(t, s, "open", "c")
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	c := psych.CallRecord{ID: "late"}
	for name, err := range map[string]error{
		"BeginExecution":  s.BeginExecution(ctx, &psych.Execution{ID: "late"}),
		"FinishExecution": s.FinishExecution(ctx, "open", &sandbox.Result{}),
		"AbortExecution":  s.AbortExecution(ctx, "open", psych.ExecutionCancelled, "late"),
		"RecordCall":      s.RecordCall(ctx, &c),
		"Execution":       second(s.Execution(ctx, "open")),
		"Executions":      second(s.Executions(ctx)),
		"Calls":           second(s.Calls(ctx, "open")),
	} {
		if err == nil {
			t.Errorf("%s after Close succeeded", name)
		}
	}
}

func second[T any](_ T, err error) error { return err }

func checkExecution(t *testing.T, what string, got, want *psych.Execution) {
	t.Helper()
	if g, w := norm(got), norm(want); !reflect.DeepEqual(g, w) {
		t.Errorf("%s: execution\n got %s\nwant %s", what, dump(g, g.Result), dump(w, w.Result))
	}
}

// checkOnlyCall checks that Calls(parent) lists one call, want.
func checkOnlyCall(t *testing.T, s psych.Store, parent string, want *psych.CallRecord) {
	t.Helper()
	cs := calls(t, s, parent)
	if len(cs) != 1 {
		t.Fatalf("Calls(%q) lists %d, want 1", parent, len(cs))
	}
	checkCall(t, &cs[0], want)
}

func checkCall(t *testing.T, got, want *psych.CallRecord) {
	t.Helper()
	if g, w := norm(got), norm(want); !reflect.DeepEqual(g, w) {
		t.Errorf("call %s\n got %s\nwant %s", want.ID, dump(g, nil), dump(w, nil))
	}
}

// dump shows a record; a Result's durations, which its JSON rounds, are
// added exactly.
func dump(v any, r *sandbox.Result) string {
	b, _ := json.Marshal(v)
	if r != nil {
		return fmt.Sprintf("%s (result duration %v, suspended %v)", b, r.Duration, r.Suspended)
	}
	return string(b)
}

// normal returns a copy of v in the form the suite compares: see the
// package doc. lossy marks the inside of a sandbox.Result.
func normal(v reflect.Value, lossy bool) reflect.Value {
	out := reflect.New(v.Type()).Elem()
	switch t := v.Type(); {
	case t == reflect.TypeFor[time.Time]():
		if tm := v.Interface().(time.Time); !tm.IsZero() {
			out.Set(reflect.ValueOf(tm.Truncate(time.Millisecond).UTC()))
		}
	case t == reflect.TypeFor[time.Duration]() && lossy:
		out.SetInt(int64(time.Duration(v.Int()).Round(time.Microsecond)))
	case t == reflect.TypeFor[json.RawMessage]():
		var b bytes.Buffer
		switch {
		case v.Len() == 0:
		case json.Compact(&b, v.Bytes()) != nil:
			out.Set(v) // not JSON: compared as it is
		case b.String() != "null":
			out.SetBytes(b.Bytes())
		}
	case t.Kind() == reflect.Pointer && !v.IsNil():
		p := reflect.New(t.Elem())
		p.Elem().Set(normal(v.Elem(), lossy || t.Elem() == reflect.TypeFor[sandbox.Result]()))
		out.Set(p)
	case t.Kind() == reflect.Slice && v.Len() > 0:
		out.Set(reflect.MakeSlice(t, v.Len(), v.Len()))
		for i := range v.Len() {
			out.Index(i).Set(normal(v.Index(i), lossy))
		}
	case t.Kind() == reflect.Struct:
		out.Set(v)
		for i := range v.NumField() {
			if t.Field(i).IsExported() {
				out.Field(i).Set(normal(v.Field(i), lossy))
			}
		}
	case t.Kind() != reflect.Pointer && t.Kind() != reflect.Slice:
		out.Set(v)
	}
	return out
}

func norm[T any](v *T) *T { return normal(reflect.ValueOf(v), false).Interface().(*T) }

// nonZero fails when a field of v, recursively, is zero: the fixtures
// must exercise every field.
func nonZero(t *testing.T, path string, v reflect.Value) {
	t.Helper()
	switch {
	case v.Type() == reflect.TypeFor[time.Time]():
		if v.Interface().(time.Time).IsZero() {
			t.Errorf("fixture leaves %s zero", path)
		}
	case v.Kind() == reflect.Struct:
		for i := range v.NumField() {
			if f := v.Type().Field(i); f.IsExported() {
				nonZero(t, path+"."+f.Name, v.Field(i))
			}
		}
	case v.Kind() == reflect.Pointer && !v.IsNil() && v.Elem().Kind() == reflect.Struct:
		nonZero(t, path, v.Elem())
	case v.Kind() == reflect.Slice && v.Len() == 0, v.IsZero():
		t.Errorf("fixture leaves %s zero", path)
	}
}
