package runs

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"strings"
	"testing"
	"time"

	"github.com/psych-runtime/psych"
	"github.com/psych-runtime/psych/cmd/internal/full"
	"github.com/psych-runtime/psych/internal/cli"
	"github.com/psych-runtime/psych/sandbox"
)

// hostile is what a program can put in a ledger for a terminal to show.
const hostile = "\x1b]0;owned\x07\x1b[2J\u202eevil\u009b31m\r"

// ledgerStore opens st whatever the path.
func ledgerStore(st *psych.MemoryStore) func(string) (full.Store, error) {
	return func(string) (full.Store, error) { return nopClose{st}, nil }
}

type nopClose struct{ *psych.MemoryStore }

func (nopClose) Close() error { return nil }

func recordHostile(t *testing.T) (*psych.MemoryStore, string) {
	t.Helper()
	st := psych.NewMemoryStore()
	ctx := context.Background()
	e := &psych.Execution{ID: "run1", Started: time.Now(), Code: "print('x')\n# " + hostile + "\n", Network: true,
		Limits: sandbox.Limits{CPUSeconds: 86400, WallSeconds: 86400 * 7, MemoryBytes: 1 << 40, AddressSpaceBytes: 1 << 40}}
	if err := st.BeginExecution(ctx, e); err != nil {
		t.Fatal(err)
	}
	val, _ := json.Marshal(hostile)
	if err := st.RecordCall(ctx, &psych.CallRecord{ID: "c1", Parent: "run1", Tool: "echo", Args: json.RawMessage(`{"a":"` + "\u202e\u009b" + `"}`), Value: val, Outcome: psych.OutcomeOK}); err != nil {
		t.Fatal(err)
	}
	res := &sandbox.Result{ID: "run1", Value: val, Failure: &sandbox.Failure{Type: "ValueError", Message: hostile, Traceback: "Traceback (most recent call last):\n  File \"<program>\", line 2\nValueError: " + hostile + "\n"}}
	if err := st.FinishExecution(ctx, "run1", res); err != nil {
		t.Fatal(err)
	}
	return st, "run1"
}

// TestRunsShowEscapes: runs show prints what a program wrote (its code,
// call arguments and values, its value and traceback) escaped: no control
// or bidi character reaches the terminal.
func TestRunsShowEscapes(t *testing.T) {
	st, id := recordHostile(t)
	var out, errb bytes.Buffer
	if code := command([]string{"show", "--store", t.TempDir(), id}, &out, &errb, ledgerStore(st), nil); code != cli.ExitOK {
		t.Fatalf("runs show: exit %d: %s", code, errb.String())
	}
	s := out.String()
	for _, bad := range []string{"\x1b", "\x07", "\r", "\u202e", "\u009b"} {
		if strings.Contains(s, bad) {
			t.Errorf("runs show printed %q raw:\n%s", bad, s)
		}
	}
	for _, want := range []string{`\x1b]0;owned\x07`, `\u202eevil`, "ValueError: ", "--- calls (1)"} {
		if !strings.Contains(s, want) {
			t.Errorf("runs show does not print %q:\n%s", want, s)
		}
	}
}

// TestRunsShowJSONEscapes: runs show --json escapes them as \u escapes:
// the same JSON, nothing a terminal acts on.
func TestRunsShowJSONEscapes(t *testing.T) {
	st, id := recordHostile(t)
	var out, errb bytes.Buffer
	if code := command([]string{"show", "--json", "--store", t.TempDir(), id}, &out, &errb, ledgerStore(st), nil); code != cli.ExitOK {
		t.Fatalf("runs show --json: exit %d: %s", code, errb.String())
	}
	for _, bad := range []string{"\x1b", "\x07", "\r", "\u202e", "\u009b"} {
		if strings.Contains(out.String(), bad) {
			t.Errorf("runs show --json printed %q raw", bad)
		}
	}
	var v struct {
		Execution struct {
			Result struct{ Failure struct{ Message string } }
		}
	}
	if err := json.Unmarshal(out.Bytes(), &v); err != nil || v.Execution.Result.Failure.Message != hostile {
		t.Errorf("runs show --json: %v; message %q, want %q", err, v.Execution.Result.Failure.Message, hostile)
	}
}

// spySandbox records the request it is given and runs nothing.
type spySandbox struct{ req sandbox.Request }

func (s *spySandbox) Run(_ context.Context, req sandbox.Request) (*sandbox.Result, error) {
	s.req = req
	return &sandbox.Result{ID: "replayed"}, nil
}
func (s *spySandbox) Close() error { return nil }

// TestRunsReplayOperatorLimits: runs replay runs under the defaults and
// without the network, whatever the ledger says; --network and
// --recorded-limits (each recorded limit at most the default) change that.
func TestRunsReplayOperatorLimits(t *testing.T) {
	st, id := recordHostile(t)
	def := sandbox.DefaultLimits().Merge(sandbox.Limits{})
	for _, c := range []struct {
		flags   []string
		network bool
		limits  sandbox.Limits // after the backend's defaults
	}{
		{nil, false, def},
		{[]string{"--network"}, true, def},
		{[]string{"--recorded-limits"}, false, def}, // every recorded one was above
	} {
		spy := &spySandbox{}
		flags := func(*flag.FlagSet) func() (sandbox.Sandbox, func(), error) {
			return func() (sandbox.Sandbox, func(), error) { return spy, func() {}, nil }
		}
		var out, errb bytes.Buffer
		args := append(append([]string{"replay", "--store", t.TempDir()}, c.flags...), id)
		command(args, &out, &errb, ledgerStore(st), flags)
		if got := spy.req.Limits.Merge(sandbox.DefaultLimits()); spy.req.Network != c.network || got != c.limits {
			t.Errorf("runs replay %v ran with network %v, limits %+v; want %v, %+v (stderr %s)", c.flags, spy.req.Network, got, c.network, c.limits, errb.String())
		}
		if strings.ContainsAny(errb.String(), "\x1b\x07") {
			t.Errorf("runs replay printed a control character: %q", errb.String())
		}
	}
}

// TestRunsListStatus: runs list tells a run that raised, one that is
// incomplete, one cancelled and one the Sandbox failed, with the reason
// (escaped) in --json and in runs show.
func TestRunsListStatus(t *testing.T) {
	st := psych.NewMemoryStore()
	ctx := context.Background()
	for _, id := range []string{"ok", "raised", "running", "cancelled", "broken"} {
		if err := st.BeginExecution(ctx, &psych.Execution{ID: id, Started: time.Now(), Code: "1"}); err != nil {
			t.Fatal(err)
		}
	}
	st.FinishExecution(ctx, "ok", &sandbox.Result{})
	st.FinishExecution(ctx, "raised", &sandbox.Result{Failure: &sandbox.Failure{Type: "ValueError"}})
	if err := st.AbortExecution(ctx, "cancelled", psych.ExecutionCancelled, "run code: context canceled"); err != nil {
		t.Fatal(err)
	}
	if err := st.AbortExecution(ctx, "broken", psych.ExecutionFailed, "run code: "+hostile); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"ok": "ok", "raised": "failed: ValueError", "running": "incomplete", "cancelled": "cancelled", "broken": "sandbox failed"}

	var out, errb bytes.Buffer
	if code := command([]string{"list", "--json", "--store", t.TempDir()}, &out, &errb, ledgerStore(st), nil); code != cli.ExitOK {
		t.Fatalf("runs list --json: exit %d: %s", code, errb.String())
	}
	var rows []struct{ ID, Status, Reason string }
	if err := json.Unmarshal(out.Bytes(), &rows); err != nil || len(rows) != len(want) {
		t.Fatalf("runs list --json: %v\n%s", err, out.String())
	}
	for _, r := range rows {
		wantReason := map[string]string{"cancelled": "run code: context canceled", "broken": "run code: " + hostile}[r.ID]
		if r.Status != want[r.ID] || r.Reason != wantReason {
			t.Errorf("runs list --json: %s is %q (%q); want %q (%q)", r.ID, r.Status, r.Reason, want[r.ID], wantReason)
		}
	}

	out.Reset()
	if code := command([]string{"list", "--store", t.TempDir()}, &out, &errb, ledgerStore(st), nil); code != cli.ExitOK {
		t.Fatalf("runs list: exit %d: %s", code, errb.String())
	}
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n")[1:] {
		if id := strings.Fields(line)[0]; !strings.Contains(line, "  "+want[id]+"  ") {
			t.Errorf("runs list: %q; want %s %q", line, id, want[id])
		}
	}

	out.Reset()
	if code := command([]string{"show", "--store", t.TempDir(), "broken"}, &out, &errb, ledgerStore(st), nil); code != cli.ExitOK {
		t.Fatalf("runs show: exit %d: %s", code, errb.String())
	}
	if s := out.String(); !strings.Contains(s, "sandbox failed\nreason run code: ") || strings.ContainsAny(s, "\x1b\x07\r") {
		t.Errorf("runs show of a failed run:\n%q", s)
	}
}
