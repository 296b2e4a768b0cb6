package psych_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/psych-runtime/psych"
	"github.com/psych-runtime/psych/egress"
	"github.com/psych-runtime/psych/internal/testutil"
	"github.com/psych-runtime/psych/sandbox"
	"github.com/psych-runtime/psych/sandbox/subprocess"
	"github.com/psych-runtime/psych/test/contract"
)

// newSandbox is a fully isolated subprocess sandbox.
func newSandbox(t testing.TB) sandbox.Sandbox {
	t.Helper()
	sb, err := subprocess.New(subprocess.Config{PythonBin: testutil.Python(), AllowSameUID: os.Geteuid() != 0})
	if err != nil {
		t.Fatalf("subprocess.New: %v", err)
	}
	return sb
}

// tools is a registry of test tools whose handlers count their calls.
type tools struct {
	reg     *psych.Registry
	handled atomic.Int64
	removed []string
	mu      sync.Mutex
}

func newTools(t *testing.T) *tools {
	t.Helper()
	ts := &tools{reg: psych.NewRegistry()}
	must := func(s psych.Spec) {
		if err := ts.reg.Register(s); err != nil {
			t.Fatal(err)
		}
	}
	must(psych.Spec{Name: "echo", Description: "Return the arguments.", Handler: func(_ context.Context, c psych.Call) (any, error) {
		ts.handled.Add(1)
		return c.Args, nil
	}})
	must(psych.Spec{
		Name: "add", Description: "Add two integers.",
		Parameters: json.RawMessage(`{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"}},"required":["a","b"],"additionalProperties":false}`),
		Params:     []string{"a", "b"},
		Handler: func(_ context.Context, c psych.Call) (any, error) {
			ts.handled.Add(1)
			var a struct{ A, B int }
			if err := json.Unmarshal(c.Args, &a); err != nil {
				return nil, err
			}
			return a.A + a.B, nil
		},
	})
	must(psych.Spec{
		Name: "remove", Description: "Remove a file.", Destructive: true,
		Parameters: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`),
		Handler: func(_ context.Context, c psych.Call) (any, error) {
			ts.handled.Add(1)
			var a struct{ Path string }
			json.Unmarshal(c.Args, &a)
			ts.mu.Lock()
			ts.removed = append(ts.removed, a.Path)
			ts.mu.Unlock()
			return "removed " + a.Path, nil
		},
	})
	must(psych.Spec{
		Name: "fetch", Description: "GET a URL through the egress seam.",
		Parameters: json.RawMessage(`{"type":"object","properties":{"url":{"type":"string"}},"required":["url"]}`),
		Handler: func(ctx context.Context, c psych.Call) (any, error) {
			ts.handled.Add(1)
			var a struct{ URL string }
			json.Unmarshal(c.Args, &a)
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.URL, nil)
			if err != nil {
				return nil, err
			}
			resp, err := psych.EgressFrom(ctx).Do(req)
			if err != nil {
				return nil, err
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			return string(b), err
		},
	})
	return ts
}

func newRuntime(t *testing.T, cfg psych.Config) *psych.Runtime {
	t.Helper()
	r, err := psych.New(cfg)
	if err != nil {
		t.Fatalf("psych.New: %v", err)
	}
	return r
}

func runCode(t *testing.T, r *psych.Runtime, code string) (*psych.Outcome, *sandbox.Result) {
	t.Helper()
	args, _ := json.Marshal(map[string]string{"code": code})
	out, err := r.Call(context.Background(), psych.Call{Tool: psych.RunCode, Args: args})
	if err != nil {
		t.Fatalf("run_code: %v", err)
	}
	if out.Kind != psych.OutcomeOK {
		t.Fatalf("run_code: %+v", out)
	}
	var res sandbox.Result
	if err := json.Unmarshal(out.Value, &res); err != nil {
		t.Fatalf("run_code value %s: %v", out.Value, err)
	}
	return out, &res
}

func TestRunCodeOnlyWithSandbox(t *testing.T) {
	ts := newTools(t)
	has := func(r *psych.Runtime) (psych.Spec, bool) {
		for _, s := range r.Tools() {
			if s.Name == psych.RunCode {
				return s, true
			}
		}
		return psych.Spec{}, false
	}
	if _, ok := has(newRuntime(t, psych.Config{Registry: ts.reg})); ok {
		t.Fatal("a Runtime without a Sandbox offers run_code")
	}
	r := newRuntime(t, psych.Config{Registry: ts.reg, Sandbox: newSandbox(t)})
	s, ok := has(r)
	if !ok {
		t.Fatal("a Runtime with a Sandbox does not offer run_code")
	}
	for _, want := range []string{"add(a, b)", "remove(path)", "needs approval", "fetch(url)", "echo()"} {
		if !strings.Contains(s.Description, want) {
			t.Errorf("run_code's description lacks %q:\n%s", want, s.Description)
		}
	}
	out, err := newRuntime(t, psych.Config{Registry: ts.reg}).Call(context.Background(), psych.Call{Tool: psych.RunCode, Args: json.RawMessage(`{"code":"1"}`)})
	if err != nil || out.Kind != psych.OutcomeInvalid {
		t.Fatalf("run_code without a Sandbox: %+v, %v; want an invalid call", out, err)
	}
}

// TestSamePathBothWays: a binding call and a direct call of the same tool
// get the same Policy decision and the same recorded shape; only Via and
// the parent differ. The arguments are made at run time.
func TestSamePathBothWays(t *testing.T) {
	ts := newTools(t)
	store := psych.NewMemoryStore()
	var decided []psych.Call
	var mu sync.Mutex
	pol := psych.PolicyFunc(func(ctx context.Context, s psych.Spec, c psych.Call) psych.Decision {
		mu.Lock()
		decided = append(decided, c)
		mu.Unlock()
		return psych.DefaultPolicy.Decide(ctx, s, c)
	})
	r := newRuntime(t, psych.Config{Registry: ts.reg, Sandbox: newSandbox(t), Store: store, Policy: pol})
	a, b := time.Now().Nanosecond()%1000, time.Now().Second()
	direct, err := r.Call(context.Background(), psych.Call{Tool: "add", Args: json.RawMessage(fmt.Sprintf(`{"a":%d,"b":%d}`, a, b))})
	if err != nil || direct.Kind != psych.OutcomeOK || string(direct.Value) != fmt.Sprint(a+b) {
		t.Fatalf("direct add: %+v, %v", direct, err)
	}
	_, res := runCode(t, r, fmt.Sprintf("add(%d, b=%d)", a, b))
	if res.Failure != nil || string(res.Value) != fmt.Sprint(a+b) {
		t.Fatalf("binding add: %s %+v", res.Value, res.Failure)
	}
	direct0, _ := store.Calls(context.Background(), "")
	viaProgram, _ := store.Calls(context.Background(), res.ID)
	if len(viaProgram) != 1 {
		t.Fatalf("calls of execution %s: %+v", res.ID, viaProgram)
	}
	var d psych.CallRecord
	for _, c := range direct0 {
		if c.Tool == "add" {
			d = c
		}
	}
	p := viaProgram[0]
	if d.Via != psych.ViaModel || p.Via != psych.ViaRunCode || d.Parent != "" || p.Parent != res.ID {
		t.Fatalf("via/parent: direct %s %q, binding %s %q", d.Via, d.Parent, p.Via, p.Parent)
	}
	if d.Decision != p.Decision || d.Decision != psych.Allow || d.Outcome != p.Outcome || !jsonEq(d.Args, p.Args) || string(d.Value) != string(p.Value) {
		t.Fatalf("records differ beyond via and parent:\ndirect  %+v\nbinding %+v", d, p)
	}
	mu.Lock()
	defer mu.Unlock()
	var adds []psych.Call
	for _, c := range decided {
		if c.Tool == "add" {
			adds = append(adds, c)
		}
	}
	if len(adds) != 2 || adds[1].Execution != res.ID || adds[0].Execution != "" {
		t.Fatalf("the Policy saw %+v", adds)
	}
}

func jsonEq(a, b json.RawMessage) bool {
	var x, y any
	json.Unmarshal(a, &x)
	json.Unmarshal(b, &y)
	return fmt.Sprint(x) == fmt.Sprint(y)
}

// TestDecisions: deny, allow and ask (approved and refused), each directly
// and through a binding.
func TestDecisions(t *testing.T) {
	ts := newTools(t)
	pol := psych.PolicyFunc(func(ctx context.Context, s psych.Spec, c psych.Call) psych.Decision {
		if s.Name == "echo" {
			return psych.Decision{Verdict: psych.Deny, Reason: "echo is off today"}
		}
		return psych.DefaultPolicy.Decide(ctx, s, c)
	})
	var approve atomic.Bool
	appr := psych.ApproverFunc(func(_ context.Context, req psych.ApprovalRequest) (psych.Approval, error) {
		return psych.Approval{Approved: approve.Load(), By: "test", Reason: "not that file"}, nil
	})
	store := psych.NewMemoryStore()
	r := newRuntime(t, psych.Config{Registry: ts.reg, Sandbox: newSandbox(t), Policy: pol, Approver: appr, Store: store})
	for _, tc := range []struct {
		name, tool, args, code string
		approve                bool
		kind, msg              string
	}{
		{"deny", "echo", `{"x":1}`, "echo(x=1)", false, psych.OutcomeDenied, "denied by policy: echo is off today"},
		{"allow", "add", `{"a":1,"b":2}`, "add(1, 2)", false, psych.OutcomeOK, ""},
		{"ask-yes", "remove", `{"path":"a"}`, "remove('a')", true, psych.OutcomeOK, ""},
		{"ask-no", "remove", `{"path":"b"}`, "remove('b')", false, psych.OutcomeDenied, "denied by policy: not that file"},
		{"bad-args", "add", `{"a":"x","b":2}`, "add('x', 2)", false, psych.OutcomeInvalid, "arguments do not match the schema"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			approve.Store(tc.approve)
			before := ts.handled.Load()
			out, err := r.Call(context.Background(), psych.Call{Tool: tc.tool, Args: json.RawMessage(tc.args)})
			if err != nil || out.Kind != tc.kind || !strings.Contains(out.Error, tc.msg) {
				t.Fatalf("direct: %+v, %v; want %s %q", out, err, tc.kind, tc.msg)
			}
			_, res := runCode(t, r, "r = None\ntry:\n    r = "+tc.code+"\nexcept BindingError as e:\n    r = 'BindingError: ' + str(e)\nr")
			var v any
			json.Unmarshal(res.Value, &v)
			got := fmt.Sprint(v)
			if tc.kind == psych.OutcomeOK {
				if strings.HasPrefix(got, "BindingError") || got != fmt.Sprint(mustValue(out)) {
					t.Fatalf("binding: %q, direct %s", got, out.Value)
				}
			} else if !strings.HasPrefix(got, "BindingError: ") || !strings.Contains(got, tc.msg) {
				t.Fatalf("binding: %q, want BindingError with %q", got, tc.msg)
			}
			ran := ts.handled.Load() - before
			if (tc.kind == psych.OutcomeOK) != (ran == 2) || tc.kind != psych.OutcomeOK && ran != 0 {
				t.Fatalf("the handler ran %d times", ran)
			}
			calls, _ := store.Calls(context.Background(), res.ID)
			if len(calls) != 1 || calls[0].Outcome != tc.kind {
				t.Fatalf("recorded %+v", calls)
			}
			if tc.tool == "remove" && (calls[0].Decision != psych.Ask || calls[0].Approver != "test" || calls[0].Approved == nil || *calls[0].Approved != tc.approve) {
				t.Fatalf("approval not recorded: %+v", calls[0])
			}
		})
	}
}

func mustValue(out *psych.Outcome) any {
	var v any
	json.Unmarshal(out.Value, &v)
	return v
}

// TestApprovalSuspends: a destructive binding waits 3 s for a slow
// Approver under wall_seconds=2 and cpu_seconds=1 and completes with no
// limit hit; a second thread made no progress meanwhile.
func TestApprovalSuspends(t *testing.T) {
	ts := newTools(t)
	wait := 3 * time.Second
	appr := psych.ApproverFunc(func(ctx context.Context, _ psych.ApprovalRequest) (psych.Approval, error) {
		select {
		case <-time.After(wait):
			return psych.Approval{Approved: true, By: "slow"}, nil
		case <-ctx.Done():
			return psych.Approval{}, ctx.Err()
		}
	})
	r := newRuntime(t, psych.Config{Registry: ts.reg, Sandbox: newSandbox(t), Approver: appr, RequireFreeze: true,
		Limits: sandbox.Limits{WallSeconds: 2, CPUSeconds: 1}})
	_, res := runCode(t, r, contract.SuspendProgram(`remove(path="x")`))
	if res.Failure != nil || res.LimitHit != "" {
		t.Fatalf("failure %+v, limit %q\n%s", res.Failure, res.LimitHit, res.Stderr)
	}
	var v struct {
		Answer string
		Gap    float64
	}
	json.Unmarshal(res.Value, &v)
	if v.Answer != "removed x" || v.Gap < (wait-200*time.Millisecond).Seconds() {
		t.Fatalf("value %s: want the removal and a counting gap of about %v", res.Value, wait)
	}
	if res.Usage == nil || res.Usage.CPUSeconds >= 1 || res.Duration-res.Suspended >= 2*time.Second || res.Suspended < wait-200*time.Millisecond {
		t.Fatalf("usage %+v, duration %v, suspended %v", res.Usage, res.Duration, res.Suspended)
	}
}

// TestApprovalCancelled: a context cancelled while the Approver waits ends
// the run cleanly.
func TestApprovalCancelled(t *testing.T) {
	ts := newTools(t)
	asked := make(chan struct{})
	appr := psych.ApproverFunc(func(ctx context.Context, _ psych.ApprovalRequest) (psych.Approval, error) {
		close(asked)
		<-ctx.Done()
		return psych.Approval{}, ctx.Err()
	})
	r := newRuntime(t, psych.Config{Registry: ts.reg, Sandbox: newSandbox(t), Approver: appr})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := r.Call(ctx, psych.Call{Tool: psych.RunCode, Args: json.RawMessage(`{"code":"remove(path='y')"}`)})
		done <- err
	}()
	select {
	case <-asked:
	case <-time.After(time.Minute):
		t.Fatal("never asked")
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("run_code after cancel: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("run_code did not return after cancel")
	}
	if len(ts.removed) != 0 {
		t.Fatalf("removed %v", ts.removed)
	}
}

func TestApprovalTimeout(t *testing.T) {
	ts := newTools(t)
	appr := psych.ApproverFunc(func(ctx context.Context, _ psych.ApprovalRequest) (psych.Approval, error) {
		<-ctx.Done()
		return psych.Approval{}, ctx.Err()
	})
	r := newRuntime(t, psych.Config{Registry: ts.reg, Approver: appr, ApprovalTimeout: 50 * time.Millisecond})
	out, err := r.Call(context.Background(), psych.Call{Tool: "remove", Args: json.RawMessage(`{"path":"z"}`)})
	if err != nil || out.Kind != psych.OutcomeDenied || !strings.Contains(out.Error, "timed out") {
		t.Fatalf("%+v, %v; want a denial that timed out", out, err)
	}
	out, err = newRuntime(t, psych.Config{Registry: ts.reg}).Call(context.Background(), psych.Call{Tool: "remove", Args: json.RawMessage(`{"path":"z"}`)})
	if err != nil || out.Kind != psych.OutcomeDenied {
		t.Fatalf("nil Approver: %+v, %v; want a denial", out, err)
	}
}

// TestEgressFromProgram: a tool called from a program reaches only what the
// egress allowlist admits, checked on the resolved address.
func TestEgressFromProgram(t *testing.T) {
	hits := atomic.Int64{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		io.WriteString(w, "hello from the allowlist")
	}))
	defer srv.Close()
	port := srv.Listener.Addr().(interface{ String() string }).String()
	port = port[strings.LastIndex(port, ":")+1:]
	ts := newTools(t)
	sb := newSandbox(t)
	var r *psych.Runtime
	allow := func(list ...string) {
		eg, err := egress.New(egress.Config{Allow: list})
		if err != nil {
			t.Fatal(err)
		}
		r = newRuntime(t, psych.Config{Registry: ts.reg, Sandbox: sb, Egress: eg})
	}
	fetch := func(url string) string {
		_, res := runCode(t, r, fmt.Sprintf("try:\n    r = fetch(%q)\nexcept BindingError as e:\n    r = 'BindingError: ' + str(e)\nr", url))
		var s string
		json.Unmarshal(res.Value, &s)
		return s
	}
	allow("127.0.0.1:" + port)
	if got := fetch(srv.URL); got != "hello from the allowlist" {
		t.Fatalf("allowlisted fetch: %q", got)
	}
	allow("localhost:" + port)
	if got := fetch("http://localhost:" + port + "/"); !strings.HasPrefix(got, "BindingError: ") || !strings.Contains(got, "loopback") {
		t.Fatalf("a listed name that resolves to loopback: %q, want refused", got)
	}
	if got := fetch("http://not-listed.invalid/"); !strings.HasPrefix(got, "BindingError: ") || !strings.Contains(got, "allowlist") {
		t.Fatalf("a host not on the list: %q, want refused", got)
	}
	if hits.Load() != 1 {
		t.Fatalf("the server saw %d requests, want 1", hits.Load())
	}
	// Without an Egress, nothing is reachable.
	r = newRuntime(t, psych.Config{Registry: ts.reg, Sandbox: sb})
	_, res := runCode(t, r, fmt.Sprintf("fetch(%q)", srv.URL))
	if res.Failure == nil || res.Failure.Type != "BindingError" || hits.Load() != 1 {
		t.Fatalf("default egress: %+v, %d hits", res.Failure, hits.Load())
	}
}
