package psych_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/psych-runtime/psych"
	"github.com/psych-runtime/psych/sandbox"
)

// seen collects the arguments each consumer of a call saw.
type seen struct {
	mu                                sync.Mutex
	policy, approver, handler, record []string
}

func (s *seen) add(to *[]string, b json.RawMessage) {
	s.mu.Lock()
	defer s.mu.Unlock()
	*to = append(*to, string(b))
}

// readNoteRuntime has read_note(path), whose schema does not forbid other
// properties, with a Policy that asks, an Approver that says yes, and a
// MemoryStore; every consumer's view of the arguments lands in s.
func readNoteRuntime(t *testing.T, s *seen, spec psych.Spec) (*psych.Runtime, *psych.MemoryStore) {
	t.Helper()
	reg := psych.NewRegistry()
	spec.Handler = func(_ context.Context, c psych.Call) (any, error) {
		s.add(&s.handler, c.Args)
		var a struct{ Path string }
		if err := json.Unmarshal(c.Args, &a); err != nil {
			return nil, err
		}
		return a.Path, nil
	}
	if err := reg.Register(spec); err != nil {
		t.Fatal(err)
	}
	st := psych.NewMemoryStore()
	t.Cleanup(func() { st.Close() })
	return newRuntime(t, psych.Config{
		Registry: reg, Store: st,
		Policy: psych.PolicyFunc(func(_ context.Context, _ psych.Spec, c psych.Call) psych.Decision {
			s.add(&s.policy, c.Args)
			return psych.Decision{Verdict: psych.Ask, Reason: "test"}
		}),
		Approver: psych.ApproverFunc(func(_ context.Context, req psych.ApprovalRequest) (psych.Approval, error) {
			s.add(&s.approver, req.Call.Args)
			return psych.Approval{Approved: true, By: "test"}, nil
		}),
	}), st
}

var readNote = psych.Spec{Name: "read_note", Parameters: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string","enum":["ok.txt"]}},"required":["path"]}`)}

// TestCanonicalArgs: keys that encoding/json would merge (a duplicate, keys
// equal but for case, at any depth) are refused before the Policy; the
// Policy, the Approver, the handler and the record see one canonical form.
func TestCanonicalArgs(t *testing.T) {
	for _, args := range []string{
		`{"path":"ok.txt","PATH":"../../x"}`,
		`{"path":"ok.txt","Path":"../../x"}`,
		`{"path":"ok.txt","paTH":"../../x"}`,
		`{"path":"ok.txt","\u017fecret":1,"secret":2}`, // ſ folds to s
		`{"path":"../../x","path":"ok.txt"}`,
		`{"path":"ok.txt","deep":{"a":1,"A":2}}`,
		`{"path":"ok.txt","deep":[{"k":1,"k":2}]}`,
	} {
		var s seen
		r, st := readNoteRuntime(t, &s, readNote)
		out, err := r.Call(context.Background(), psych.Call{Tool: "read_note", Args: json.RawMessage(args)})
		if err != nil {
			t.Fatal(err)
		}
		if out.Kind != psych.OutcomeInvalid || len(s.policy)+len(s.approver)+len(s.handler) != 0 {
			t.Errorf("%s: %+v; policy %q, approver %q, handler %q; want invalid, seen by none", args, out, s.policy, s.approver, s.handler)
		}
		if calls, _ := st.Calls(context.Background(), ""); len(calls) != 1 || calls[0].Outcome != psych.OutcomeInvalid {
			t.Errorf("%s: recorded %+v; want one invalid call", args, calls)
		}
	}

	var s seen
	r, st := readNoteRuntime(t, &s, readNote)
	out, err := r.Call(context.Background(), psych.Call{Tool: "read_note", Args: json.RawMessage(" {\"z\": [1.50, 1e2, \"\\u0041<\"], \"path\" : \"ok.txt\"}\n")})
	if err != nil || out.Kind != psych.OutcomeOK || string(out.Value) != `"ok.txt"` {
		t.Fatalf("a good call: %+v, %v", out, err)
	}
	calls, _ := st.Calls(context.Background(), "")
	const want = `{"path":"ok.txt","z":[1.50,1e2,"A<"]}`
	for what, got := range map[string][]string{"policy": s.policy, "approver": s.approver, "handler": s.handler, "record": {string(calls[0].Args)}} {
		if len(got) != 1 || got[0] != want {
			t.Errorf("%s saw %q; want %s", what, got, want)
		}
	}
}

// TestArgsBounds: arguments past the tool's MaxArgsBytes (1 MiB by
// default), nested past MaxArgsDepth or holding more than MaxArgsElements
// are refused as invalid; the handler never sees them.
func TestArgsBounds(t *testing.T) {
	small := readNote
	small.Parameters, small.MaxArgsBytes = nil, 64
	var s seen
	r, _ := readNoteRuntime(t, &s, small)
	big := readNote
	big.Name, big.Parameters = "big", nil
	bigReg := psych.NewRegistry()
	var handled int
	big.Handler = func(context.Context, psych.Call) (any, error) { handled++; return nil, nil }
	if err := bigReg.Register(big); err != nil {
		t.Fatal(err)
	}
	rb := newRuntime(t, psych.Config{Registry: bigReg})
	for _, c := range []struct {
		r    *psych.Runtime
		tool string
		args string
		want string
	}{
		{r, "read_note", `{"path":"` + strings.Repeat("x", 64) + `"}`, "more than the tool takes"},
		{rb, "big", `{"a":"` + strings.Repeat("x", psych.DefaultMaxArgsBytes) + `"}`, "more than the tool takes"},
		{rb, "big", `{"a":` + strings.Repeat("[", psych.MaxArgsDepth) + strings.Repeat("]", psych.MaxArgsDepth) + `}`, "nest deeper"},
		{rb, "big", `{"a":[` + strings.Repeat("[],", psych.MaxArgsElements/2) + `[]]}`, "elements"},
	} {
		out, err := c.r.Call(context.Background(), psych.Call{Tool: c.tool, Args: json.RawMessage(c.args)})
		if err != nil || out.Kind != psych.OutcomeInvalid || !strings.Contains(out.Error, c.want) {
			t.Errorf("%s(%.40s…): %.200v, %v; want invalid, %q", c.tool, c.args, out, err, c.want)
		}
	}
	if handled != 0 || len(s.handler) != 0 {
		t.Errorf("handlers ran %d, %d times; want never", handled, len(s.handler))
	}
	// Within the bounds, the same shapes pass.
	out, err := rb.Call(context.Background(), psych.Call{Tool: "big", Args: json.RawMessage(`{"a":` + strings.Repeat("[", psych.MaxArgsDepth-1) + strings.Repeat("]", psych.MaxArgsDepth-1) + `}`)})
	if err != nil || out.Kind != psych.OutcomeOK {
		t.Errorf("nested to the bound: %+v, %v", out, err)
	}
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// TestRecordCaps: a call's arguments and value past RecordArgsBytes and
// RecordValueBytes are recorded as their head, full size and sha256; a
// run's calls together stay within RecordRunBytes.
func TestRecordCaps(t *testing.T) {
	st := psych.NewMemoryStore()
	defer st.Close()
	ts := newTools(t)
	r := newRuntime(t, psych.Config{Registry: ts.reg, Store: st, RecordArgsBytes: 100, RecordValueBytes: 200, Sandbox: newSandbox(t), RecordRunBytes: 64 << 10})
	args := json.RawMessage(`{"s":"` + strings.Repeat("é", 300) + `"}`)
	out, err := r.Call(context.Background(), psych.Call{Tool: "echo", Args: args})
	if err != nil || out.Kind != psych.OutcomeOK {
		t.Fatal(out, err)
	}
	calls, _ := st.Calls(context.Background(), "")
	c := calls[0]
	var headArgs, headValue string
	if err := json.Unmarshal(c.Args, &headArgs); err != nil || !c.ArgsTruncated || len(headArgs) > 100 || !strings.HasPrefix(string(args), headArgs) || c.ArgsSHA256 != sha(args) || c.BytesIn != len(args) {
		t.Errorf("args recorded as %s (truncated %v, sha %s, %d bytes); want a head ≤ 100 bytes of %d, its sha %s", c.Args, c.ArgsTruncated, c.ArgsSHA256, c.BytesIn, len(args), sha(args))
	}
	if err := json.Unmarshal(c.Value, &headValue); err != nil || !c.ValueTruncated || len(headValue) > 200 || len(headValue) < 190 || c.ValueSHA256 != sha(out.Value) || c.BytesOut != len(out.Value) {
		t.Errorf("value recorded as %s (truncated %v, sha %s, %d bytes); want a head of 200 bytes", c.Value, c.ValueTruncated, c.ValueSHA256, c.BytesOut)
	}
	// Within the caps, nothing is cut.
	out, _ = r.Call(context.Background(), psych.Call{Tool: "echo", Args: json.RawMessage(`{"a":1}`)})
	calls, _ = st.Calls(context.Background(), "")
	if c := calls[1]; c.ArgsTruncated || c.ValueTruncated || string(c.Args) != `{"a":1}` || string(c.Value) != `{"a":1}` {
		t.Errorf("a small call recorded as %+v", c)
	}

	// One run: 200 calls of 80 bytes each way record at most 64 KiB of
	// arguments and values; past that, only sizes and digests.
	res, err := r.Execute(context.Background(), sandbox.Request{Code: "for i in range(200):\n    echo(s='x' * 70)\n'done'"})
	if err != nil || res.Failure != nil {
		t.Fatalf("%v %+v", err, res.Failure)
	}
	calls, _ = st.Calls(context.Background(), res.ID)
	total, cut := 0, 0
	for _, c := range calls {
		total += len(c.Args) + len(c.Value) + len(c.Error)
		if c.ArgsTruncated {
			cut++
			if c.ArgsSHA256 == "" || c.BytesIn < 70 {
				t.Errorf("a cut record %+v", c)
			}
		}
	}
	if len(calls) != 200 || total > 64<<10 || cut == 0 {
		t.Errorf("%d calls recorded, %d bytes, %d cut; want 200 within %d bytes, some cut", len(calls), total, cut, 64<<10)
	}
	if _, err := psych.New(psych.Config{RecordRunBytes: -1}); err == nil {
		t.Error("a negative RecordRunBytes was taken")
	}
}

// TestReplayOperatorLimits: a replay runs under the operator's limits and
// without the network, whatever the ledger says; RecordedLimits takes the
// recorded ones only below the operator's.
func TestReplayOperatorLimits(t *testing.T) {
	st := psych.NewMemoryStore()
	defer st.Close()
	r := newRuntime(t, psych.Config{Sandbox: newSandbox(t), Store: st, Limits: sandbox.Limits{CPUSeconds: 7}})
	// What the program sees: its CPU rlimit, its address-space rlimit, and
	// whether it has an interface other than lo.
	code := "import resource, socket\n[resource.getrlimit(resource.RLIMIT_CPU)[0], resource.getrlimit(resource.RLIMIT_AS)[0], [n for _, n in socket.if_nameindex() if n != 'lo']]"
	ctx := context.Background()
	for _, id := range []string{"greedy", "modest"} {
		lim := sandbox.Limits{CPUSeconds: 86400 * 7, WallSeconds: 86400 * 7, AddressSpaceBytes: 1 << 40, MemoryBytes: 1 << 40}
		if id == "modest" {
			lim = sandbox.Limits{CPUSeconds: 3, AddressSpaceBytes: 256 << 20}
		}
		if err := st.BeginExecution(ctx, &psych.Execution{ID: id, Code: code, Limits: lim, Network: true}); err != nil {
			t.Fatal(err)
		}
	}
	seen := func(rep *psych.Replay) (cpu, as float64) {
		t.Helper()
		var v []any
		if err := json.Unmarshal(rep.Result.Value, &v); err != nil || len(v) != 3 {
			t.Fatalf("replay value %s (%+v): %v", rep.Result.Value, rep.Result.Failure, err)
		}
		if ifs := v[2].([]any); len(ifs) != 0 || !rep.Result.NetworkDenied {
			t.Errorf("the replay had interfaces %v, network_denied %v; want none, true", ifs, rep.Result.NetworkDenied)
		}
		return v[0].(float64), v[1].(float64)
	}
	def := sandbox.DefaultLimits()
	for _, c := range []struct {
		id      string
		opts    psych.ReplayOptions
		cpu, as float64
	}{
		{"greedy", psych.ReplayOptions{}, 7, float64(def.AddressSpaceBytes)},
		{"greedy", psych.ReplayOptions{RecordedLimits: true}, 7, float64(def.AddressSpaceBytes)},
		{"modest", psych.ReplayOptions{}, 7, float64(def.AddressSpaceBytes)},
		{"modest", psych.ReplayOptions{RecordedLimits: true}, 3, 256 << 20},
		{"modest", psych.ReplayOptions{Limits: sandbox.Limits{CPUSeconds: 2}, RecordedLimits: true}, 2, 256 << 20},
	} {
		rep, err := r.Replay(ctx, c.id, c.opts)
		if err != nil {
			t.Fatal(err)
		}
		// RLIMIT_CPU may be set a second past the limit, for SIGXCPU.
		if cpu, as := seen(rep); cpu < c.cpu || cpu > c.cpu+1 || as != c.as {
			t.Errorf("replay of %s with %+v: RLIMIT_CPU %v, RLIMIT_AS %v; want %v, %v", c.id, c.opts, cpu, as, c.cpu, c.as)
		}
		if !strings.Contains(strings.Join(rep.Notes, "\n"), "network") {
			t.Errorf("replay of %s: notes %q say nothing of the recorded network", c.id, rep.Notes)
		}
	}
}

// TestReplayCutRecord: a call whose arguments were recorded cut is matched
// by their sha256: the same program reproduces, a changed one diverges.
func TestReplayCutRecord(t *testing.T) {
	st := psych.NewMemoryStore()
	defer st.Close()
	ts := newTools(t)
	r := newRuntime(t, psych.Config{Registry: ts.reg, Sandbox: newSandbox(t), Store: st, RecordArgsBytes: 100})
	ctx := context.Background()
	res, err := r.Execute(ctx, sandbox.Request{Code: "len(echo(s='x' * 1000)['s'])"})
	if err != nil || res.Failure != nil {
		t.Fatal(err, res.Failure)
	}
	calls, _ := st.Calls(ctx, res.ID)
	if len(calls) != 1 || !calls[0].ArgsTruncated {
		t.Fatalf("recorded %+v; want one call with its arguments cut", calls)
	}
	rep, err := r.Replay(ctx, res.ID, psych.ReplayOptions{})
	if err != nil || !rep.Reproduced {
		t.Fatalf("replay: %+v, %v; want reproduced", rep, err)
	}
	rec, _ := st.Execution(ctx, res.ID)
	rec.ID, rec.Code = "changed", strings.Replace(rec.Code, "'x'", "'y'", 1)
	st.BeginExecution(ctx, rec)
	calls[0].Parent = "changed"
	st.RecordCall(ctx, &calls[0])
	if rep, err := r.Replay(ctx, "changed", psych.ReplayOptions{}); err != nil || rep.Reproduced || rep.Divergence == nil || rep.Divergence.Index != 1 {
		t.Fatalf("replay of a changed program: %+v, %v; want a divergence at call 1", rep, err)
	}
}
