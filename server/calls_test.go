package server

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/psych-runtime/psych"
	"github.com/psych-runtime/psych/api"
	"github.com/psych-runtime/psych/internal/testutil"
	"github.com/psych-runtime/psych/sandbox"
)

const testToken = "0123456789abcdef-test-token"

// serveTCP serves ts's API on a loopback TCP listener too (its Config
// must have testToken) and returns a client that sends the token.
func (ts *testServer) serveTCP(t *testing.T) (base string, c *http.Client) {
	t.Helper()
	l, err := Listen("tcp://127.0.0.1:0", ListenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	go ts.Serve(l)
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return "http://" + l.Addr().String(), &http.Client{Transport: bearer{tr}}
}

type bearer struct{ rt http.RoundTripper }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+testToken)
	return b.rt.RoundTrip(r)
}

// answer posts an answer and returns its status.
func (ts *testServer) answer(t *testing.T, runID, kind, callID string, body any) int {
	t.Helper()
	code, b := ts.post(t, "/v1/runs/"+runID+"/"+kind+"/"+callID, jsonString(body))
	if code != http.StatusNoContent && !json.Valid(b) {
		t.Fatalf("answer: %d %q", code, b)
	}
	return code
}

func strp(s string) *string { return &s }

// greetTool is a client tool with a schema.
var greetTool = api.Tool{Name: "greet", Description: "greets",
	Parameters: json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"}},"required":["name"],"additionalProperties":false}`),
	Params:     []string{"name"}}

// TestClientToolCall: a client tool's call goes through the tool path
// (recorded via client), reaches the client as a call event, and its
// answer (a value or an error) reaches the program; a second answer is
// 409, an unknown call 404; arguments the schema refuses never reach the
// client.
func TestClientToolCall(t *testing.T) {
	ts := newTestServer(t, serverOpts{})
	code := "print(greet('ada'))\ntry:\n    greet('bob')\nexcept BindingError as e:\n    print('err', e)\ntry:\n    greet(name=3)\nexcept BindingError as e:\n    print('schema', 'name' in str(e))\n'done'"
	req := api.RunRequest{ID: "tools-1", Code: code, Bindings: []api.Tool{greetTool}}
	var calls []*api.Event
	evs := ts.events(t, "/v1/runs", jsonString(req), func(ev *api.Event) {
		if ev.Event != api.EventCall {
			return
		}
		calls = append(calls, ev)
		var args struct{ Name string }
		json.Unmarshal(ev.Args, &args)
		if args.Name == "ada" {
			if c := ts.answer(t, "tools-1", "calls", ev.CallID, api.CallAnswer{Value: json.RawMessage(`"hello ada"`)}); c != http.StatusNoContent {
				t.Errorf("answer: %d", c)
			}
			if c := ts.answer(t, "tools-1", "calls", ev.CallID, api.CallAnswer{Value: json.RawMessage(`"again"`)}); c != http.StatusConflict {
				t.Errorf("a second answer: %d, want 409", c)
			}
			return
		}
		if c := ts.answer(t, "tools-1", "calls", "no-such-call", api.CallAnswer{Value: json.RawMessage(`1`)}); c != http.StatusNotFound {
			t.Errorf("an answer to an unknown call: %d, want 404", c)
		}
		if status := headerOnly(t, ts.sock, "/v1/runs/tools-1/calls/no-such-call"); status != "404" {
			t.Errorf("an answer to an unknown call announcing 8 MiB (under the cap): %q, want 404 before its body is read", status)
		}
		if c := ts.answer(t, "tools-1", "calls", ev.CallID, map[string]any{"value": 1, "error": "both"}); c != http.StatusBadRequest {
			t.Errorf("an answer with value and error: %d, want 400", c)
		}
		ts.answer(t, "tools-1", "calls", ev.CallID, api.CallAnswer{Error: strp("no bob here")})
	})
	res := evs[len(evs)-1].Result
	if res == nil || res.Stdout != "hello ada\nerr no bob here\nschema True\n" || string(res.Value) != `"done"` {
		t.Fatalf("result %+v", evs[len(evs)-1])
	}
	if len(calls) != 2 || calls[0].Tool != "greet" {
		t.Fatalf("call events %v: want 2 (the schema's refusal never reaches the client)", calls)
	}
	recs, err := ts.store.Calls(context.Background(), "tools-1")
	if err != nil || len(recs) != 3 {
		t.Fatalf("recorded calls %+v, %v", recs, err)
	}
	for i, want := range []string{psych.OutcomeOK, psych.OutcomeError, psych.OutcomeInvalid} {
		if recs[i].Via != psych.ViaClient || recs[i].Outcome != want {
			t.Errorf("call %d recorded via %s, %s; want via client, %s", i, recs[i].Via, recs[i].Outcome, want)
		}
	}
}

// TestClientToolPolicyAndApproval: the server's Policy decides a client
// tool's call (a denial never reaches the client); a destructive client
// tool asks its client (an approval event) with the run frozen meanwhile
// (suspended_seconds), granted then denied.
func TestClientToolPolicyAndApproval(t *testing.T) {
	pol := psych.PolicyFunc(func(ctx context.Context, spec psych.Spec, c psych.Call) psych.Decision {
		if spec.Name == "forbidden" {
			return psych.Decision{Verdict: psych.Deny, Reason: "not here"}
		}
		return psych.DefaultPolicy.Decide(ctx, spec, c)
	})
	ts := newTestServer(t, serverOpts{rt: psych.Config{Policy: pol}})
	if !sandbox.CanFreeze(ts.sb) {
		testutil.Unavailable(t, "this host cannot freeze a run")
	}
	code := "try:\n    forbidden()\nexcept BindingError as e:\n    print('denied:', e)\nprint(rm(path='a'))\ntry:\n    rm(path='b')\nexcept BindingError as e:\n    print('refused:', 'no b' in str(e))"
	req := api.RunRequest{ID: "tools-2", Code: code, Bindings: []api.Tool{{Name: "forbidden"},
		{Name: "rm", Params: []string{"path"}, Destructive: true}}}
	var approvals, calls int
	evs := ts.events(t, "/v1/runs", jsonString(req), func(ev *api.Event) {
		switch ev.Event {
		case api.EventApproval:
			approvals++
			time.Sleep(300 * time.Millisecond) // the run is frozen meanwhile
			var args struct{ Path string }
			json.Unmarshal(ev.Args, &args)
			ts.answer(t, "tools-2", "approvals", ev.CallID, api.ApprovalAnswer{Approve: args.Path == "a", Reason: "no b"})
		case api.EventCall:
			calls++
			if ev.Tool != "rm" {
				t.Errorf("call event for %s: the Policy denied it", ev.Tool)
			}
			ts.answer(t, "tools-2", "calls", ev.CallID, api.CallAnswer{Value: json.RawMessage(`"removed"`)})
		}
	})
	res := evs[len(evs)-1].Result
	if res == nil || !strings.HasPrefix(res.Stdout, "denied: ") || !strings.Contains(res.Stdout, "removed\nrefused: True\n") {
		t.Fatalf("result %+v", evs[len(evs)-1])
	}
	if approvals != 2 || calls != 1 {
		t.Fatalf("%d approval and %d call events, want 2 and 1", approvals, calls)
	}
	if res.Suspended < 500*time.Millisecond {
		t.Fatalf("suspended %v, want the two approvals' waits (≥ 0.5 s)", res.Suspended)
	}
}

// TestClientToolRefusals: a client tool named as one of the server's is
// 400 (never shadowing it), and the refused run or call leaves its id free;
// a request without events cannot answer, so its client tools' calls fail
// saying so and its asks are denied.
func TestClientToolRefusals(t *testing.T) {
	reg := psych.NewRegistry()
	if err := reg.Register(psych.Spec{Name: "echo", Handler: func(ctx context.Context, c psych.Call) (any, error) { return c.Args, nil }}); err != nil {
		t.Fatal(err)
	}
	ts := newTestServer(t, serverOpts{registry: reg})
	resp, b := ts.do(t, "POST", "/v1/runs", "", jsonString(api.RunRequest{ID: "clash-1", Code: "1", Bindings: []api.Tool{{Name: "echo"}}}))
	wantError(t, resp, b, http.StatusBadRequest, api.CodeInvalidRequest)
	ts.run(t, jsonString(api.RunRequest{ID: "clash-1", Code: "1"}))
	resp, b = ts.do(t, "POST", "/v1/calls", "", jsonString(api.CallRequest{ID: "clash-2", Tool: "echo", Bindings: []api.Tool{{Name: "echo"}}}))
	wantError(t, resp, b, http.StatusBadRequest, api.CodeInvalidRequest)
	if resp, b = ts.do(t, "POST", "/v1/calls", "", jsonString(api.CallRequest{ID: "clash-2", Tool: "echo", Args: json.RawMessage(`{}`)})); resp.StatusCode != http.StatusOK {
		t.Fatalf("the refused call's id again: %d %s", resp.StatusCode, b)
	}
	code := "try:\n    greet('x')\nexcept BindingError as e:\n    print(e)\ntry:\n    rm()\nexcept BindingError as e:\n    print(e)\necho(a=1)"
	res := ts.run(t, jsonString(api.RunRequest{Code: code, Bindings: []api.Tool{greetTool, {Name: "rm", Destructive: true}}}))
	lines := strings.Split(res.Stdout, "\n")
	if len(lines) < 2 || !strings.Contains(lines[0], "did not ask for events") || !strings.Contains(lines[1], "did not ask for events") ||
		string(res.Value) != `{"a":1}` {
		t.Fatalf("result %+v", res)
	}
}

// TestRunOwnership: another peer (a token on TCP) gets 404 for everything
// about a run in flight; an answer for another run's call is 404; the
// owner's DELETE cancels it (error{cancelled}, every process killed).
func TestRunOwnership(t *testing.T) {
	ts := newTestServer(t, serverOpts{cfg: func(c *Config) { c.Token = testToken }})
	base, other := ts.serveTCP(t)
	marker := testutil.NewMarker("psych-server-own")
	code := "greet('x')\nimport subprocess, sys, time\nsubprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)', '" + marker + "'])\ntime.sleep(60)"
	req := api.RunRequest{ID: "own-1", Code: code, Bindings: []api.Tool{greetTool}}
	evs := ts.events(t, "/v1/runs", jsonString(req), func(ev *api.Event) {
		if ev.Event != api.EventCall {
			return
		}
		for _, tc := range []struct{ method, path, body string }{
			{"GET", "/v1/runs/own-1", ""},
			{"DELETE", "/v1/runs/own-1", ""},
			{"POST", "/v1/runs/own-1/calls/" + ev.CallID, `{"value":1}`},
			{"POST", "/v1/runs/own-1/calls/" + ev.CallID + "/suspend", ``},
		} {
			r, _ := http.NewRequest(tc.method, base+tc.path, strings.NewReader(tc.body))
			resp, err := other.Do(r)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusNotFound {
				t.Errorf("another peer's %s %s: %d, want 404", tc.method, tc.path, resp.StatusCode)
			}
		}
		// Its id is in flight: another run may not take it.
		resp, b := ts.do(t, "POST", "/v1/runs", "", `{"id":"own-1","code":"1"}`)
		wantError(t, resp, b, http.StatusConflict, api.CodeConflict)
		// Another run of the same peer cannot answer this one's call.
		if c := ts.answer(t, "not-this-run", "calls", ev.CallID, api.CallAnswer{Value: json.RawMessage(`1`)}); c != http.StatusNotFound {
			t.Errorf("an answer through another run: %d, want 404", c)
		}
		ts.answer(t, "own-1", "calls", ev.CallID, api.CallAnswer{Value: json.RawMessage(`1`)})
		testutil.WaitFor(t, 10*time.Second, "the program sleeping", func() bool { return len(testutil.ProcessesWith(marker)) > 0 })
		go func() {
			resp, b := ts.do(t, "DELETE", "/v1/runs/own-1", "", "")
			if resp.StatusCode != http.StatusNoContent {
				t.Errorf("DELETE: %d %s", resp.StatusCode, b)
			}
		}()
	})
	last := evs[len(evs)-1]
	if last.Event.Event != api.EventError || last.Error.Code != api.CodeCancelled {
		t.Fatalf("last event %+v, want error{cancelled}", last.Event)
	}
	if left := testutil.ProcessesWith(marker); len(left) > 0 {
		t.Fatalf("processes left after DELETE: %v", left)
	}
	resp, b := ts.do(t, "GET", "/v1/runs/own-1", "", "")
	var run api.Run
	if resp.StatusCode != 200 || json.Unmarshal(b, &run) != nil || run.Status != api.StatusCancelled {
		t.Fatalf("GET /v1/runs/own-1 after DELETE: %d %s, want status cancelled", resp.StatusCode, b)
	}
}

// TestClientNeverAnswers: a client that never answers its call: the wall
// limit ends the run, and the call is recorded unanswered (an error).
func TestClientNeverAnswers(t *testing.T) {
	ts := newTestServer(t, serverOpts{})
	req := api.RunRequest{ID: "silent-1", Code: "greet('x')", Limits: sandbox.Limits{WallSeconds: 2}, Bindings: []api.Tool{greetTool}}
	evs := ts.events(t, "/v1/runs", jsonString(req), nil)
	res := evs[len(evs)-1].Result
	if res == nil || res.LimitHit != sandbox.LimitWallSeconds {
		t.Fatalf("last event %+v, want a result ended by wall_seconds", evs[len(evs)-1].Event)
	}
	testutil.WaitFor(t, 5*time.Second, "the call's record", func() bool {
		recs, _ := ts.store.Calls(context.Background(), "silent-1")
		return len(recs) == 1
	})
	recs, _ := ts.store.Calls(context.Background(), "silent-1")
	if recs[0].Outcome != psych.OutcomeError || !strings.Contains(recs[0].Error, "no answer") {
		t.Fatalf("recorded %+v, want an error: no answer", recs[0])
	}
}

// TestDirectCall: POST /v1/calls goes through the same tool path (via
// model): a server tool's Outcome as JSON, a client tool answered over
// its events, ending in outcome.
func TestDirectCall(t *testing.T) {
	reg := psych.NewRegistry()
	if err := reg.Register(psych.Spec{Name: "echo", Handler: func(ctx context.Context, c psych.Call) (any, error) { return c.Args, nil }}); err != nil {
		t.Fatal(err)
	}
	ts := newTestServer(t, serverOpts{registry: reg})
	code, b := ts.post(t, "/v1/calls", `{"tool":"echo","args":{"x":1}}`)
	var out api.Outcome
	if code != 200 || json.Unmarshal(b, &out) != nil || out.Kind != "ok" || string(out.Value) != `{"x":1}` || out.Decision.Verdict != "allow" {
		t.Fatalf("direct call: %d %s", code, b)
	}
	req := api.CallRequest{ID: "direct-1", Tool: "greet", Args: json.RawMessage(`{"name":"ada"}`), Bindings: []api.Tool{greetTool}}
	evs := ts.events(t, "/v1/calls", jsonString(req), func(ev *api.Event) {
		if ev.Event == api.EventCall {
			ts.answer(t, "direct-1", "calls", ev.CallID, api.CallAnswer{Value: json.RawMessage(`"hi ada"`)})
		}
	})
	last := evs[len(evs)-1]
	if last.Event.Event != api.EventOutcome || last.Outcome.Kind != "ok" || string(last.Outcome.Value) != `"hi ada"` {
		t.Fatalf("last event %+v", last.Event)
	}
	recs, err := ts.store.Calls(context.Background(), "")
	if err != nil || len(recs) != 2 || recs[1].Via != psych.ViaModel || recs[1].ID != "direct-1" {
		t.Fatalf("recorded direct calls %+v, %v", recs, err)
	}
	// A program's call of the server's own tool is counted too.
	ts.run(t, jsonString(api.RunRequest{ID: "calls-echo", Code: "echo(x=2)"}))
	for _, c := range []struct {
		via  psych.Via
		want float64
	}{{psych.ViaModel, 2}, {psych.ViaRunCode, 1}} {
		if got := counterValue(t, ts.met.toolCalls.WithLabelValues(string(c.via), "ok")); got != c.want {
			t.Errorf("psych_tool_calls_total{via=%s,decision=ok} = %v, want %v", c.via, got, c.want)
		}
	}
}

// TestTCPToken: over TCP a run with the token goes through; without it or
// with a wrong one the request is 401, runs nothing, and is counted and
// logged as a refusal.
func TestTCPToken(t *testing.T) {
	ts := newTestServer(t, serverOpts{cfg: func(c *Config) { c.Token = testToken }})
	base, c := ts.serveTCP(t)
	resp, err := c.Post(base+"/v1/runs", "application/json", strings.NewReader(`{"id":"tcp-1","code":"6*7"}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var res sandbox.Result
	if resp.StatusCode != 200 || json.Unmarshal(b, &res) != nil || string(res.Value) != "42" {
		t.Fatalf("a run over TCP with the token: %d %s", resp.StatusCode, b)
	}
	for _, auth := range []string{"", "Bearer wrong-token-0123456789"} {
		req, _ := http.NewRequest("POST", base+"/v1/runs", strings.NewReader(`{"code":"1"}`))
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		wantError(t, resp, b, http.StatusUnauthorized, api.CodeUnauthorized)
	}
	if execs, _ := ts.store.Executions(context.Background()); len(execs) != 1 {
		t.Fatalf("%d runs in the ledger, want only the authenticated one", len(execs))
	}
	if got := counterValue(t, ts.met.rejected.WithLabelValues(api.CodeUnauthorized)); got != 2 {
		t.Fatalf("psych_rejected_total{unauthorized} = %v, want 2", got)
	}
	ts.logs.mu.Lock()
	logs := ts.logs.w.(interface{ String() string }).String()
	ts.logs.mu.Unlock()
	if strings.Count(logs, `"code":"unauthorized"`) != 2 {
		t.Fatalf("want two refusal lines for the 401s:\n%s", logs)
	}
}

// headerOnly posts a header announcing an 8 MiB body (under the cap), sends none of it,
// and returns the status the server answers within 10 s ("" for none).
func headerOnly(t *testing.T, sock, path string) string {
	t.Helper()
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: psych\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", path, 8<<20)
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return ""
	}
	f := strings.Fields(line)
	if len(f) < 2 {
		return ""
	}
	return f[1]
}

// TestLedgerOwnership: runs in the ledger that this server never started
// (a server before a restart) are read by the peer that owns them, and by
// no other; a run's owner is recorded.
func TestLedgerOwnership(t *testing.T) {
	ts := newTestServer(t, serverOpts{})
	ts.run(t, jsonString(api.RunRequest{ID: "mine-now", Code: "1"}))
	mine, err := ts.store.Execution(context.Background(), "mine-now")
	if err != nil || !strings.HasPrefix(mine.Owner, "uid:") {
		t.Fatalf("the run's record: %+v, %v; want the peer as its owner", mine, err)
	}
	for id, owner := range map[string]string{"mine-before": mine.Owner, "theirs": "uid:4242", "nobodys": ""} {
		if err := ts.store.BeginExecution(context.Background(), &psych.Execution{ID: id, Owner: owner, Started: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	for id, want := range map[string]int{"mine-before": 200, "theirs": 404, "nobodys": 404} {
		if resp, b := ts.do(t, "GET", "/v1/runs/"+id, "", ""); resp.StatusCode != want {
			t.Errorf("GET /v1/runs/%s: %d %s, want %d", id, resp.StatusCode, b, want)
		}
	}
	resp, b := ts.do(t, "GET", "/v1/runs", "", "")
	var list api.RunList
	if resp.StatusCode != 200 || json.Unmarshal(b, &list) != nil {
		t.Fatalf("GET /v1/runs: %d %s", resp.StatusCode, b)
	}
	var ids []string
	for _, r := range list.Runs {
		ids = append(ids, r.ID)
	}
	if got := strings.Join(ids, ","); got != "mine-now,mine-before" {
		t.Errorf("GET /v1/runs lists %s, want mine-now,mine-before", got)
	}
}
