package psych_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/psych-runtime/psych"
	"github.com/psych-runtime/psych/sandbox"
)

// scriptSandbox runs no program: its Run calls script with the request's
// bindings, on a ctx carrying the run's id and a Suspend that marks the run
// frozen until resumed, as a backend's does.
type scriptSandbox struct {
	script func(ctx context.Context, b sandbox.Bindings) (json.RawMessage, error)
	frozen atomic.Int64 // suspensions not yet resumed
}

func (s *scriptSandbox) Run(ctx context.Context, req sandbox.Request) (*sandbox.Result, error) {
	ctx = sandbox.WithRun(ctx, sandbox.RunContext{ID: req.ID, Suspend: func() (func(), error) {
		s.frozen.Add(1)
		var once sync.Once
		return func() { once.Do(func() { s.frozen.Add(-1) }) }, nil
	}})
	v, err := s.script(ctx, req.Bindings)
	if err != nil {
		return nil, err
	}
	return &sandbox.Result{ID: req.ID, Value: v}, nil
}

func (s *scriptSandbox) Close() error    { return nil }
func (s *scriptSandbox) CanFreeze() bool { return true }

// clientSpec is a client's tool: it answers with its name and arguments.
func clientSpec(name string, destructive bool) psych.Spec {
	return psych.Spec{
		Name: name, Description: "A client's " + name + ".", Destructive: destructive,
		Parameters: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}},"required":["q"]}`),
		Handler: func(_ context.Context, c psych.Call) (any, error) {
			return map[string]any{"tool": name, "args": c.Args}, nil
		},
	}
}

func names(specs []psych.Spec) []string {
	var out []string
	for _, s := range specs {
		out = append(out, s.Name)
	}
	return out
}

// TestWithToolsNames: a client's tool is compiled as Register compiles a
// Go tool, and never takes a name its Runtime offers: a registered tool,
// run_code, a client tool it has, or a name given twice is ErrDuplicate.
// A tool registered later keeps its name against the client's.
func TestWithToolsNames(t *testing.T) {
	ts := newTools(t)
	r := newRuntime(t, psych.Config{Registry: ts.reg, Sandbox: &scriptSandbox{}})
	for _, c := range []struct {
		tools []psych.Spec
		want  error
	}{
		{[]psych.Spec{clientSpec("echo", false)}, psych.ErrDuplicate},
		{[]psych.Spec{clientSpec(psych.RunCode, false)}, psych.ErrDuplicate},
		{[]psych.Spec{clientSpec("look", false), clientSpec("look", true)}, psych.ErrDuplicate},
		{[]psych.Spec{clientSpec("BindingError", false)}, psych.ErrReservedName},
		{[]psych.Spec{clientSpec("not a name", false)}, psych.ErrBadName},
		{[]psych.Spec{clientSpec("class", false)}, psych.ErrBadName},
		{[]psych.Spec{{Name: "look", Parameters: json.RawMessage(`{"type":"array"}`), Handler: clientSpec("x", false).Handler}}, psych.ErrBadSchema},
		{[]psych.Spec{{Name: "look"}}, psych.ErrBadSchema},
	} {
		d, err := r.WithTools(c.tools, nil)
		if !errors.Is(err, c.want) || d != nil {
			t.Errorf("WithTools(%q): %v, %v; want %v", names(c.tools), d, err, c.want)
		}
	}
	// Without a Sandbox, run_code is not offered: it is merely reserved.
	if _, err := newRuntime(t, psych.Config{}).WithTools([]psych.Spec{clientSpec(psych.RunCode, false)}, nil); !errors.Is(err, psych.ErrReservedName) || errors.Is(err, psych.ErrDuplicate) {
		t.Errorf("run_code without a Sandbox: %v; want ErrReservedName alone", err)
	}

	d, err := r.WithTools([]psych.Spec{clientSpec("look", false)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.WithTools([]psych.Spec{clientSpec("look", false)}, nil); !errors.Is(err, psych.ErrDuplicate) {
		t.Errorf("a client tool declared again on the derived Runtime: %v; want ErrDuplicate", err)
	}
	if err := ts.reg.Register(psych.Spec{Name: "look", Handler: func(context.Context, psych.Call) (any, error) { return "operator's", nil }}); err != nil {
		t.Fatal(err)
	}
	out, err := d.Call(context.Background(), psych.Call{Tool: "look", Args: json.RawMessage(`{"q":"x"}`)})
	if err != nil || string(out.Value) != `"operator's"` {
		t.Errorf("look registered after the client declared it: %+v, %v; want the operator's", out, err)
	}
	if got := names(d.Tools()); len(slices.Compact(slices.Sorted(slices.Values(got)))) != len(got) {
		t.Errorf("Tools lists look twice: %q", got)
	}
}

// TestRegisterRefusesClient: only WithTools makes a client's tool.
func TestRegisterRefusesClient(t *testing.T) {
	spec := clientSpec("look", false)
	spec.Client = true
	reg := psych.NewRegistry()
	if err := reg.Register(spec); !errors.Is(err, psych.ErrBadSchema) {
		t.Fatalf("Register with Client set: %v; want ErrBadSchema", err)
	}
	if _, ok := reg.Lookup("look"); ok {
		t.Fatal("the refused Spec was registered")
	}
	spec.Client = false
	if err := reg.Register(spec); err != nil {
		t.Fatalf("the same Spec without Client: %v", err)
	}
}

// TestClientToolVia: a program's call of a client's tool is recorded, and
// seen by the Policy, Via client with the run as its parent; a call of an
// operator's tool from the same run stays Via run_code, and a direct call
// of the client's tool Via model. The Policy sees Spec.Client.
func TestClientToolVia(t *testing.T) {
	ts := newTools(t)
	st := psych.NewMemoryStore()
	defer st.Close()
	type decided struct {
		tool   string
		via    psych.Via
		client bool
		exec   string
	}
	var mu sync.Mutex
	var seen []decided
	pol := psych.PolicyFunc(func(ctx context.Context, s psych.Spec, c psych.Call) psych.Decision {
		mu.Lock()
		seen = append(seen, decided{s.Name, c.Via, s.Client, c.Execution})
		mu.Unlock()
		return psych.Decision{Verdict: psych.Allow}
	})
	sb := &scriptSandbox{script: func(ctx context.Context, b sandbox.Bindings) (json.RawMessage, error) {
		v, err := b.Call(ctx, "look", json.RawMessage(`{"q":"from the run"}`))
		if err != nil {
			return nil, err
		}
		if _, err := b.Call(ctx, "echo", json.RawMessage(`{}`)); err != nil {
			return nil, err
		}
		return v, nil
	}}
	r := newRuntime(t, psych.Config{Registry: ts.reg, Sandbox: sb, Store: st, Policy: pol})
	d, err := r.WithTools([]psych.Spec{clientSpec("look", false)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	res, err := d.Execute(ctx, sandbox.Request{ID: "run-1"})
	if err != nil || !strings.Contains(string(res.Value), "from the run") {
		t.Fatalf("Execute: %+v, %v", res, err)
	}
	if _, err := d.Call(ctx, psych.Call{Tool: "look", Args: json.RawMessage(`{"q":"direct"}`)}); err != nil {
		t.Fatal(err)
	}
	calls, _ := st.Calls(ctx, "run-1")
	if len(calls) != 2 || calls[0].Tool != "look" || calls[0].Via != psych.ViaClient || calls[1].Tool != "echo" || calls[1].Via != psych.ViaRunCode {
		t.Errorf("the run's calls: %+v; want look Via client, then echo Via run_code", calls)
	}
	direct, _ := st.Calls(ctx, "")
	if len(direct) != 1 || direct[0].Via != psych.ViaModel {
		t.Errorf("the direct calls: %+v; want look Via model", direct)
	}
	want := []decided{{"look", psych.ViaClient, true, "run-1"}, {"echo", psych.ViaRunCode, false, "run-1"}, {"look", psych.ViaModel, true, ""}}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(seen, want) {
		t.Errorf("the Policy saw %+v; want %+v", seen, want)
	}
}

// TestClientToolFromProgram: a real program calls a client's tool as a
// plain function; the call is recorded Via client.
func TestClientToolFromProgram(t *testing.T) {
	st := psych.NewMemoryStore()
	defer st.Close()
	r := newRuntime(t, psych.Config{Sandbox: newSandbox(t), Store: st})
	d, err := r.WithTools([]psych.Spec{clientSpec("look", false)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := d.Execute(context.Background(), sandbox.Request{Code: "look('here')['args']['q']"})
	if err != nil || res.Failure != nil || string(res.Value) != `"here"` {
		t.Fatalf("Execute: %+v, %v", res, err)
	}
	calls, _ := st.Calls(context.Background(), res.ID)
	if len(calls) != 1 || calls[0].Via != psych.ViaClient || calls[0].Parent != res.ID {
		t.Fatalf("recorded %+v; want one call Via client of run %s", calls, res.ID)
	}
}

// asked records which tools an Approver was asked about, whether the run
// was frozen then, and approves.
type asked struct {
	mu     sync.Mutex
	tools  []string
	frozen []bool
	sb     *scriptSandbox
}

func (a *asked) Approve(_ context.Context, req psych.ApprovalRequest) (psych.Approval, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.tools = append(a.tools, req.Spec.Name+"/"+string(req.Call.Via))
	a.frozen = append(a.frozen, a.sb.frozen.Load() > 0)
	return psych.Approval{Approved: true, By: "test"}, nil
}

// TestClientApprover: an ask about a client's tool goes to the client's
// Approver and one about the operator's tool to Config.Approver, never the
// other way round, directly and from a run; a binding call's run is frozen
// while either decides.
func TestClientApprover(t *testing.T) {
	ts := newTools(t)
	sb := &scriptSandbox{script: func(ctx context.Context, b sandbox.Bindings) (json.RawMessage, error) {
		for _, c := range []struct{ name, args string }{{"remove", `{"path":"p"}`}, {"wipe", `{"q":"w"}`}} {
			if _, err := b.Call(ctx, c.name, json.RawMessage(c.args)); err != nil {
				return nil, err
			}
		}
		return nil, nil
	}}
	operator, client := &asked{sb: sb}, &asked{sb: sb}
	r := newRuntime(t, psych.Config{Registry: ts.reg, Sandbox: sb, Approver: operator})
	d, err := r.WithTools([]psych.Spec{clientSpec("wipe", true)}, client)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := d.Execute(ctx, sandbox.Request{}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ name, args string }{{"remove", `{"path":"p"}`}, {"wipe", `{"q":"w"}`}} {
		out, err := d.Call(ctx, psych.Call{Tool: c.name, Args: json.RawMessage(c.args)})
		if err != nil || out.Kind != psych.OutcomeOK {
			t.Fatalf("direct %s: %+v, %v", c.name, out, err)
		}
	}
	if want := []string{"remove/run_code", "remove/model"}; !slices.Equal(operator.tools, want) || !slices.Equal(operator.frozen, []bool{true, false}) {
		t.Errorf("the operator's Approver was asked %q (frozen %v); want %q (frozen, then not)", operator.tools, operator.frozen, want)
	}
	if want := []string{"wipe/client", "wipe/model"}; !slices.Equal(client.tools, want) || !slices.Equal(client.frozen, []bool{true, false}) {
		t.Errorf("the client's Approver was asked %q (frozen %v); want %q (frozen, then not)", client.tools, client.frozen, want)
	}
	if n := sb.frozen.Load(); n != 0 {
		t.Errorf("%d suspensions left unresumed", n)
	}
}

// TestClientApproverNil: without a client's Approver an ask about a
// client's tool is denied, even when the operator's would approve.
func TestClientApproverNil(t *testing.T) {
	ts := newTools(t)
	operator := &asked{sb: &scriptSandbox{}}
	r := newRuntime(t, psych.Config{Registry: ts.reg, Approver: operator})
	var ran atomic.Bool
	spec := clientSpec("wipe", true)
	spec.Handler = func(context.Context, psych.Call) (any, error) { ran.Store(true); return nil, nil }
	d, err := r.WithTools([]psych.Spec{spec}, nil)
	if err != nil {
		t.Fatal(err)
	}
	out, err := d.Call(context.Background(), psych.Call{Tool: "wipe", Args: json.RawMessage(`{"q":"w"}`)})
	if err != nil || out.Kind != psych.OutcomeDenied || !strings.Contains(out.Error, "no approver is configured") {
		t.Errorf("wipe without a client's Approver: %+v, %v; want denied, no approver", out, err)
	}
	if ran.Load() || len(operator.tools) != 0 {
		t.Errorf("the handler ran (%v), the operator's Approver was asked %q; want neither", ran.Load(), operator.tools)
	}
}

// TestWithToolsLeavesBase: the derived Runtime offers the client's tools
// after the operator's (in Tools, run_code's description and a run's
// bindings); the Runtime it came from offers none of them.
func TestWithToolsLeavesBase(t *testing.T) {
	ts := newTools(t)
	st := psych.NewMemoryStore()
	defer st.Close()
	sb := &scriptSandbox{script: func(context.Context, sandbox.Bindings) (json.RawMessage, error) { return nil, nil }}
	r := newRuntime(t, psych.Config{Registry: ts.reg, Sandbox: sb, Store: st})
	d, err := r.WithTools([]psych.Spec{clientSpec("look", false), clientSpec("wipe", true)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	base := names(ts.reg.Specs())
	if got, want := names(d.Tools()), append(slices.Clone(base), "look", "wipe", psych.RunCode); !slices.Equal(got, want) {
		t.Errorf("derived Tools: %q; want %q", got, want)
	}
	if got, want := names(r.Tools()), append(slices.Clone(base), psych.RunCode); !slices.Equal(got, want) {
		t.Errorf("base Tools: %q; want %q", got, want)
	}
	for _, s := range d.Tools() {
		if s.Client != slices.Contains([]string{"look", "wipe"}, s.Name) {
			t.Errorf("%s: Client %v", s.Name, s.Client)
		}
	}
	runCode := func(r *psych.Runtime) string { s := r.Tools(); return s[len(s)-1].Description }
	if desc := runCode(d); !strings.Contains(desc, "- look(q)") || !strings.Contains(desc, "- wipe(q): A client's wipe. (needs approval)") || strings.Index(desc, "- look") < strings.Index(desc, "- fetch") {
		t.Errorf("the derived run_code's description lacks the client's tools after the operator's:\n%s", desc)
	}
	if desc := runCode(r); strings.Contains(desc, "look") {
		t.Errorf("the base run_code's description names a client's tool:\n%s", desc)
	}
	ctx := context.Background()
	if out, err := r.Call(ctx, psych.Call{Tool: "look", Args: json.RawMessage(`{"q":"x"}`)}); err != nil || out.Kind != psych.OutcomeInvalid {
		t.Errorf("the base Runtime called a client's tool: %+v, %v", out, err)
	}
	for rt, want := range map[*psych.Runtime][]string{r: base, d: append(slices.Clone(base), "look", "wipe")} {
		res, err := rt.Execute(ctx, sandbox.Request{})
		if err != nil {
			t.Fatal(err)
		}
		rec, _ := st.Execution(ctx, res.ID)
		var got []string
		for _, b := range rec.Bindings {
			got = append(got, b.Name)
		}
		if !slices.Equal(got, want) {
			t.Errorf("a run's bindings: %q; want %q", got, want)
		}
	}
}

// TestWithToolsConcurrent: Runtimes derived concurrently, each calling its
// own client's tool and the operator's, directly and from runs, under -race;
// each client's Approver hears only of its own tool.
func TestWithToolsConcurrent(t *testing.T) {
	ts := newTools(t)
	st := psych.NewMemoryStore()
	defer st.Close()
	sb := &scriptSandbox{script: func(ctx context.Context, b sandbox.Bindings) (json.RawMessage, error) {
		var last json.RawMessage
		for _, bd := range b.List() {
			if strings.HasPrefix(bd.Name, "c") {
				v, err := b.Call(ctx, bd.Name, json.RawMessage(`{"q":"run"}`))
				if err != nil {
					return nil, err
				}
				last = v
			}
		}
		return last, nil
	}}
	r := newRuntime(t, psych.Config{Registry: ts.reg, Sandbox: sb, Store: st, Approver: &asked{sb: sb}})
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := fmt.Sprintf("c%d", i)
			appr := &asked{sb: sb}
			d, err := r.WithTools([]psych.Spec{clientSpec(name, true)}, appr)
			if err != nil {
				errs <- err
				return
			}
			ctx := context.Background()
			res, err := d.Execute(ctx, sandbox.Request{})
			if err != nil || !strings.Contains(string(res.Value), name) {
				errs <- fmt.Errorf("%s: run %+v, %v", name, res, err)
				return
			}
			for tool, args := range map[string]string{name: `{"q":"x"}`, "add": `{"a":1,"b":2}`} {
				out, err := d.Call(ctx, psych.Call{Tool: tool, Args: json.RawMessage(args)})
				if err != nil || out.Kind != psych.OutcomeOK {
					errs <- fmt.Errorf("%s: %+v, %v", tool, out, err)
				}
			}
			appr.mu.Lock()
			defer appr.mu.Unlock()
			if want := []string{name + "/client", name + "/model"}; !slices.Equal(appr.tools, want) {
				errs <- fmt.Errorf("%s's Approver was asked %q; want %q", name, appr.tools, want)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if got := names(r.Tools()); slices.ContainsFunc(got, func(n string) bool { return strings.HasPrefix(n, "c") }) {
		t.Errorf("the base Runtime offers %q", got)
	}
}

// TestExecutionStatus: a run the Sandbox could not finish is recorded as
// failed, with the error's text (its first KiB) as the reason, and one
// whose ctx ended as cancelled; the caller gets the Sandbox's error.
func TestExecutionStatus(t *testing.T) {
	st := psych.NewMemoryStore()
	defer st.Close()
	errBroken := errors.New("the engine is gone: " + strings.Repeat("x", 4096))
	ctx, cancel := context.WithCancel(context.Background())
	sb := &scriptSandbox{script: func(ctx context.Context, _ sandbox.Bindings) (json.RawMessage, error) {
		if sandbox.RunID(ctx) == "cancelled" {
			cancel()
			<-ctx.Done()
			return nil, ctx.Err()
		}
		return nil, errBroken
	}}
	r := newRuntime(t, psych.Config{Sandbox: sb, Store: st})
	if _, err := r.Execute(context.Background(), sandbox.Request{ID: "failed"}); !errors.Is(err, errBroken) {
		t.Errorf("Execute: %v; want the Sandbox's error", err)
	}
	if _, err := r.Execute(ctx, sandbox.Request{ID: "cancelled"}); !errors.Is(err, context.Canceled) {
		t.Errorf("Execute: %v; want context.Canceled", err)
	}
	for id, want := range map[string]psych.ExecutionStatus{"failed": psych.ExecutionFailed, "cancelled": psych.ExecutionCancelled} {
		e, err := st.Execution(context.Background(), id)
		if err != nil || e.Status != want || e.Result != nil || e.Finished.IsZero() {
			t.Errorf("%s recorded as %+v, %v; want Status %q", id, e, err, want)
			continue
		}
		if len(e.Reason) > 1024 || !strings.Contains(e.Reason, map[string]string{"failed": "the engine is gone", "cancelled": "context canceled"}[id]) {
			t.Errorf("%s recorded with Reason %.100q… (%d bytes)", id, e.Reason, len(e.Reason))
		}
	}
	// A replay of an execution that ended without a result says so.
	sb.script = func(context.Context, sandbox.Bindings) (json.RawMessage, error) { return nil, nil }
	rep, err := r.Replay(context.Background(), "cancelled", psych.ReplayOptions{})
	if err != nil || rep.Reproduced || !strings.Contains(strings.Join(rep.Notes, "\n"), "without a result (cancelled)") {
		t.Errorf("replay of a cancelled execution: %+v, %v", rep, err)
	}
}

// TestCancelledRunRecorded: a real run whose ctx ends mid-program (its own
// binding call cancels it) is killed and recorded as cancelled.
func TestCancelledRunRecorded(t *testing.T) {
	st := psych.NewMemoryStore()
	defer st.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	reg := psych.NewRegistry()
	if err := reg.Register(psych.Spec{Name: "hang_up", Handler: func(context.Context, psych.Call) (any, error) { cancel(); return nil, nil }}); err != nil {
		t.Fatal(err)
	}
	r := newRuntime(t, psych.Config{Registry: reg, Sandbox: newSandbox(t), Store: st})
	_, err := r.Execute(ctx, sandbox.Request{ID: "hung-up", Code: "import time\nhang_up()\ntime.sleep(60)"})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Execute: %v; want context.Canceled", err)
	}
	e, err := st.Execution(context.Background(), "hung-up")
	if err != nil || e.Status != psych.ExecutionCancelled || e.Result != nil {
		t.Fatalf("recorded as %+v, %v; want cancelled", e, err)
	}
}

// TestApproverPanics: an Approver that panics denies the call, saying so;
// the host goes on.
func TestApproverPanics(t *testing.T) {
	ts := newTools(t)
	r := newRuntime(t, psych.Config{Registry: ts.reg})
	var ran atomic.Bool
	spec := clientSpec("wipe", true)
	spec.Handler = func(context.Context, psych.Call) (any, error) { ran.Store(true); return nil, nil }
	d, err := r.WithTools([]psych.Spec{spec}, psych.ApproverFunc(func(context.Context, psych.ApprovalRequest) (psych.Approval, error) {
		panic("approver bug")
	}))
	if err != nil {
		t.Fatal(err)
	}
	out, err := d.Call(context.Background(), psych.Call{Tool: "wipe", Args: json.RawMessage(`{"q":"w"}`)})
	if err != nil || out.Kind != psych.OutcomeDenied || !strings.Contains(out.Error, "approver panicked: approver bug") {
		t.Errorf("a panicking Approver: %+v, %v; want denied, saying it panicked", out, err)
	}
	if ran.Load() {
		t.Error("the handler ran")
	}
}

// TestWithObserver: a derived Runtime tells its observer of every call's
// end, the operator's tools' and a client's alike, direct and from a run,
// with how it came and how it ended; the Runtime it came from tells none.
func TestWithObserver(t *testing.T) {
	ts := newTools(t)
	sb := &scriptSandbox{script: func(ctx context.Context, b sandbox.Bindings) (json.RawMessage, error) {
		b.Call(ctx, "echo", json.RawMessage(`{"q":"x"}`))
		b.Call(ctx, "ask", json.RawMessage(`{"q":"y"}`))
		return nil, nil
	}}
	r := newRuntime(t, psych.Config{Registry: ts.reg, Sandbox: sb})
	var mu sync.Mutex
	var seen []string
	o := r.WithObserver(func(rec psych.CallRecord) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, fmt.Sprintf("%s/%s/%s", rec.Tool, rec.Via, rec.Outcome))
	})
	d, err := o.WithTools([]psych.Spec{clientSpec("ask", false)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Call(context.Background(), psych.Call{Tool: "echo", Args: json.RawMessage(`{"q":"z"}`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Execute(context.Background(), sandbox.Request{Code: "x"}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Call(context.Background(), psych.Call{Tool: "echo", Args: json.RawMessage(`{"q":"z"}`)}); err != nil {
		t.Fatal(err)
	}
	want := "echo/model/ok,echo/run_code/ok,ask/client/ok"
	if got := strings.Join(seen, ","); got != want {
		t.Errorf("observed %s, want %s", got, want)
	}
}

// TestWithOwner: an execution run through a Runtime WithOwner derives (or
// a Runtime derived from that one) is recorded with its owner; the
// Runtime it came from records none.
func TestWithOwner(t *testing.T) {
	st := psych.NewMemoryStore()
	defer st.Close()
	sb := &scriptSandbox{script: func(context.Context, sandbox.Bindings) (json.RawMessage, error) { return nil, nil }}
	r := newRuntime(t, psych.Config{Sandbox: sb, Store: st})
	d, err := r.WithOwner("uid:1000").WithTools([]psych.Spec{clientSpec("ask", false)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for id, rt := range map[string]*psych.Runtime{"owned": d, "plain": r} {
		if _, err := rt.Execute(context.Background(), sandbox.Request{ID: id, Code: "x"}); err != nil {
			t.Fatal(err)
		}
	}
	for id, want := range map[string]string{"owned": "uid:1000", "plain": ""} {
		if e, err := st.Execution(context.Background(), id); err != nil || e.Owner != want {
			t.Errorf("execution %s: owner %q, %v; want %q", id, e.Owner, err, want)
		}
	}
}
