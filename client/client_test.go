package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/psych-runtime/psych/api"
	"github.com/psych-runtime/psych/sandbox"
)

// fake is a server that speaks the API as a test scripts it, on a Unix
// socket, and records what the client sent.
type fake struct {
	mu       sync.Mutex
	requests []string          // METHOD PATH, in order
	bodies   map[string]string // PATH → body of the last request to it
	auth     string
	answers  chan string // the paths of the answers, as they arrive
}

func (f *fake) record(r *http.Request) string {
	b, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requests = append(f.requests, r.Method+" "+r.URL.EscapedPath())
	if f.bodies == nil {
		f.bodies = map[string]string{}
	}
	f.bodies[r.URL.EscapedPath()] = string(b)
	f.auth = r.Header.Get("Authorization")
	return string(b)
}

func (f *fake) saw(req string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, r := range f.requests {
		if r == req {
			return true
		}
	}
	return false
}

func (f *fake) body(path string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.bodies[path]
}

// serve starts h on a Unix socket and returns a Client of it.
func serve(t *testing.T, h http.Handler, opts Options) *Client {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "api.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(h)
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	c, err := New("unix://"+sock, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// events writes a stream's head and returns a function that writes one
// event line and flushes it.
func events(w http.ResponseWriter) func(line string) {
	w.Header().Set("Content-Type", api.MediaNDJSON)
	w.WriteHeader(http.StatusOK)
	fl := w.(http.Flusher)
	fl.Flush()
	return func(line string) {
		io.WriteString(w, line+"\n")
		fl.Flush()
	}
}

func TestNewAddress(t *testing.T) {
	for _, tc := range []struct {
		addr string
		ok   bool
	}{
		{"unix:///run/psych.sock", true},
		{"tcp://127.0.0.1:8080", true},
		{"tls://example.com:443", true},
		{"unix://run/psych.sock", false},
		{"unix:///run/../psych.sock", false},
		{"tcp://127.0.0.1", false},
		{"tcp://127.0.0.1:80/path", false},
		{"tcp://user@127.0.0.1:80", false},
		{"http://127.0.0.1:80", false},
		{"/run/psych.sock", false},
		{"", false},
	} {
		_, err := New(tc.addr, Options{})
		if (err == nil) != tc.ok || err != nil && !errors.Is(err, ErrAddress) {
			t.Errorf("New(%q) = %v, want ok=%v", tc.addr, err, tc.ok)
		}
	}
	if _, err := New("tcp://127.0.0.1:1", Options{Token: "a\r\nX-Evil: 1"}); !errors.Is(err, ErrAddress) {
		t.Errorf("a token with CRLF: %v", err)
	}
}

// TestStream: a run's events reach the handler in order, a call is
// answered by the handler's value at the run's call path, the token is
// sent, and the result is the result event's.
func TestStream(t *testing.T) {
	f := &fake{answers: make(chan string, 1)}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/runs", func(w http.ResponseWriter, r *http.Request) {
		body := f.record(r)
		if r.Header.Get("Accept") != api.MediaNDJSON || !strings.Contains(body, `"code":"print(1)"`) || !strings.Contains(body, `"name":"lookup"`) {
			http.Error(w, "bad request "+body, http.StatusBadRequest)
			return
		}
		send := events(w)
		send(`{"event":"started","id":"r/1","warm":true}`)
		send(`{"event":"stdout","data":"hel"}`)
		send(`{"event":"keepalive"}`)
		send(`{"event":"stderr","data":"oops"}`)
		send(`{"event":"novel","whatever":[1]}`)
		send(`{"event":"call","call_id":"c1","tool":"lookup","args":{"q":"x"}}`)
		var answer string
		select {
		case answer = <-f.answers:
		case <-time.After(10 * time.Second):
		}
		send(`{"event":"stdout","data":"lo"}`)
		send(`{"event":"result","result":{"id":"r/1","stdout":"hello","value":` + answer + `}}`)
	})
	mux.HandleFunc("POST /v1/runs/{id}/calls/{call}", func(w http.ResponseWriter, r *http.Request) {
		body := f.record(r)
		var a api.CallAnswer
		if json.Unmarshal([]byte(body), &a) != nil || r.PathValue("id") != "r/1" || r.PathValue("call") != "c1" {
			http.Error(w, "bad answer", http.StatusBadRequest)
			return
		}
		f.answers <- string(a.Value)
	})
	c := serve(t, mux, Options{Token: "s3cret"})

	var got []string
	h := Handler{
		Started: func(id string, warm bool) { got = append(got, fmt.Sprintf("started %s %v", id, warm)) },
		Output:  func(stream, data string) { got = append(got, stream+" "+data) },
		Call: func(ctx context.Context, ce CallEvent) (json.RawMessage, error) {
			if ce.RunID != "r/1" || ce.Tool != "lookup" || string(ce.Args) != `{"q":"x"}` {
				return nil, fmt.Errorf("call %+v", ce)
			}
			return json.RawMessage(`{"found":42}`), nil
		},
	}
	res, err := c.Stream(context.Background(), api.RunRequest{Code: "print(1)", Bindings: []api.Tool{{Name: "lookup"}}}, h)
	if err != nil {
		t.Fatal(err)
	}
	if res.ID != "r/1" || res.Stdout != "hello" || string(res.Value) != `{"found":42}` {
		t.Errorf("result %+v, value %s", res, res.Value)
	}
	if want := "started r/1 true|stdout hel|stderr oops|stdout lo"; strings.Join(got, "|") != want {
		t.Errorf("handler got %q, want %q", strings.Join(got, "|"), want)
	}
	if !f.saw("POST /v1/runs/r%2F1/calls/c1") {
		t.Errorf("the answer went elsewhere: %v", f.requests)
	}
	if f.auth != "Bearer s3cret" {
		t.Errorf("Authorization %q", f.auth)
	}
}

// TestRefusals: a refusal is an *api.Error with the response's status and
// Retry-After, and through the Sandbox it wraps the sentinel that fits.
func TestRefusals(t *testing.T) {
	for _, tc := range []struct {
		status     int
		retryAfter string
		body       string
		code       string
		sentinel   error
		retry      int
	}{
		{400, "", `{"error":{"code":"invalid_request","message":"bad limits"}}`, api.CodeInvalidRequest, sandbox.ErrInvalidRequest, 0},
		{413, "", `{"error":{"code":"too_large","message":"body"}}`, api.CodeTooLarge, sandbox.ErrInvalidRequest, 0},
		{429, "7", `{"error":{"code":"capacity_exhausted","message":"full","retryable":true}}`, api.CodeCapacityExhausted, sandbox.ErrBusy, 7},
		{503, "3", `{"error":{"code":"draining","message":"stopping","retryable":true}}`, api.CodeDraining, sandbox.ErrBusy, 3},
		{500, "", `{"error":{"code":"host_fault","message":"boom"}}`, api.CodeHostFault, sandbox.ErrHostFault, 0},
		{502, "", `<html>proxy</html>`, api.CodeHostFault, sandbox.ErrHostFault, 0},
		{429, "soon", `not json`, api.CodeCapacityExhausted, sandbox.ErrBusy, 0},
		{401, "", `{"error":{"code":"unauthorized","message":"token"}}`, api.CodeUnauthorized, nil, 0},
		{404, "", `{"error":{"code":"not_found","message":"` + strings.Repeat("x", 5000) + `"}}`, api.CodeNotFound, nil, 0},
	} {
		t.Run(fmt.Sprint(tc.status), func(t *testing.T) {
			c := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if tc.retryAfter != "" {
					w.Header().Set("Retry-After", tc.retryAfter)
				}
				w.WriteHeader(tc.status)
				io.WriteString(w, tc.body)
			}), Options{})
			_, err := c.Sandbox().Run(context.Background(), sandbox.Request{Code: "1"})
			var ae *api.Error
			if !errors.As(err, &ae) {
				t.Fatalf("%v is no *api.Error", err)
			}
			if ae.Status != tc.status || ae.Code != tc.code || ae.RetryAfter != tc.retry || ae.Retryable != (tc.status == 429 || tc.status == 503) || len(ae.Message) > 1100 {
				t.Errorf("%+v", ae)
			}
			if tc.sentinel != nil && !errors.Is(err, tc.sentinel) {
				t.Errorf("%v does not wrap %v", err, tc.sentinel)
			}
			for _, s := range []error{sandbox.ErrInvalidRequest, sandbox.ErrBusy, sandbox.ErrHostFault} {
				if s != tc.sentinel && errors.Is(err, s) {
					t.Errorf("%v wraps %v too", err, s)
				}
			}
		})
	}
}

// TestStreamFaults: a stream that ends without a terminal event, a
// malformed line, a silent server, a non-stream answer and an error event
// are all errors, never a Result.
func TestStreamFaults(t *testing.T) {
	for _, tc := range []struct {
		name  string
		serve func(w http.ResponseWriter, r *http.Request)
		want  []error
	}{
		{"no terminal", func(w http.ResponseWriter, r *http.Request) {
			send := events(w)
			send(`{"event":"started","id":"a"}`)
			send(`{"event":"stdout","data":"x"}`)
		}, []error{ErrProtocol, api.ErrNoTerminal, sandbox.ErrHostFault}},
		{"bad line", func(w http.ResponseWriter, r *http.Request) {
			events(w)(`{"event":"result","result":`)
		}, []error{ErrProtocol, api.ErrBadEvent, sandbox.ErrHostFault}},
		{"silent", func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body)
			events(w)(`{"event":"started","id":"a"}`)
			<-r.Context().Done()
		}, []error{ErrProtocol, sandbox.ErrHostFault}},
		{"silent before the head", func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body) // then the server sees the client go
			<-r.Context().Done()
		}, []error{ErrProtocol, sandbox.ErrHostFault}},
		{"not a stream", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"id":"a","stdout":""}`)
		}, []error{ErrProtocol, sandbox.ErrHostFault}},
		{"outcome for a run", func(w http.ResponseWriter, r *http.Request) {
			events(w)(`{"event":"outcome","outcome":{"call_id":"x","outcome":"ok"}}`)
		}, []error{ErrProtocol, sandbox.ErrHostFault}},
		{"host fault event", func(w http.ResponseWriter, r *http.Request) {
			events(w)(`{"event":"error","error":{"code":"host_fault","message":"cgroup"}}`)
		}, []error{sandbox.ErrHostFault}},
		{"slow consumer", func(w http.ResponseWriter, r *http.Request) {
			events(w)(`{"event":"error","error":{"code":"slow_consumer","message":"behind"}}`)
		}, []error{sandbox.ErrHostFault}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := serve(t, http.HandlerFunc(tc.serve), Options{IdleTimeout: 300 * time.Millisecond})
			res, err := c.Sandbox().Run(context.Background(), sandbox.Request{Code: "1"})
			if res != nil || err == nil {
				t.Fatalf("Run = %+v, %v; want an error", res, err)
			}
			for _, w := range tc.want {
				if !errors.Is(err, w) {
					t.Errorf("%v does not wrap %v", err, w)
				}
			}
		})
	}
}

// TestCancel: when Run's context ends, the client asks the server to
// cancel the run (DELETE) and closes the connection, and returns the
// context's error.
func TestCancel(t *testing.T) {
	f := &fake{}
	closed := make(chan struct{})
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/runs", func(w http.ResponseWriter, r *http.Request) {
		f.record(r)
		events(w)(`{"event":"started","id":"r1"}`)
		<-r.Context().Done()
		close(closed)
	})
	mux.HandleFunc("DELETE /v1/runs/{id}", func(w http.ResponseWriter, r *http.Request) { f.record(r) })
	c := serve(t, mux, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)
	_, err := c.Sandbox().Run(ctx, sandbox.Request{Code: "1"})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v, want context.Canceled", err)
	}
	if !f.saw("DELETE /v1/runs/r1") {
		t.Errorf("no DELETE: %v", f.requests)
	}
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Error("the stream's connection stayed open")
	}
}

// TestSandboxBindings: a Request's Bindings are declared as tools, each
// call reaches Bindings.Call with the run's id and a Suspend that asks the
// server to suspend and resume the run at the call's path.
func TestSandboxBindings(t *testing.T) {
	f := &fake{answers: make(chan string, 1)}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/runs", func(w http.ResponseWriter, r *http.Request) {
		body := f.record(r)
		var req api.RunRequest
		if err := api.DecodeStrict([]byte(body), &req); err != nil || len(req.Bindings) != 1 || req.Bindings[0].Name != "ask" || req.Bindings[0].Description != "asks a person" || strings.Join(req.Bindings[0].Params, ",") != "question" || req.Limits.WallSeconds != 5 || req.Env["A"] != "b" || req.ID != "run-7" {
			http.Error(w, fmt.Sprintf("%v %+v", err, req), http.StatusBadRequest)
			return
		}
		send := events(w)
		send(`{"event":"started","id":"run-7"}`)
		send(`{"event":"call","call_id":"9","tool":"ask","args":{"question":"ok?"}}`)
		answer := <-f.answers
		send(`{"event":"result","result":{"id":"run-7","value":` + answer + `}}`)
	})
	mux.HandleFunc("POST /v1/runs/{id}/calls/{call}/{verb}", func(w http.ResponseWriter, r *http.Request) { f.record(r) })
	mux.HandleFunc("POST /v1/runs/{id}/calls/{call}", func(w http.ResponseWriter, r *http.Request) {
		var a api.CallAnswer
		json.Unmarshal([]byte(f.record(r)), &a)
		f.answers <- string(a.Value)
	})
	c := serve(t, mux, Options{})
	b := bindings{call: func(ctx context.Context, name string, args json.RawMessage) (json.RawMessage, error) {
		if sandbox.RunID(ctx) != "run-7" {
			return nil, fmt.Errorf("run id %q", sandbox.RunID(ctx))
		}
		if !f.saw("POST /v1/runs") || f.saw("POST /v1/runs/run-7/calls/9/suspend") {
			return nil, errors.New("suspended before asked")
		}
		resume, err := sandbox.Suspend(ctx)
		if err != nil {
			return nil, err
		}
		if !f.saw("POST /v1/runs/run-7/calls/9/suspend") || f.saw("POST /v1/runs/run-7/calls/9/resume") {
			return nil, fmt.Errorf("after Suspend: %v", f.requests)
		}
		resume()
		resume() // once only
		return json.RawMessage(`"yes to ` + name + `"`), nil
	}}
	res, err := c.Sandbox().Run(context.Background(), sandbox.Request{ID: "run-7", Code: "ask('ok?')", Bindings: b, Limits: sandbox.Limits{WallSeconds: 5}, Env: map[string]string{"A": "b"}})
	if err != nil {
		t.Fatal(err)
	}
	if string(res.Value) != `"yes to ask"` {
		t.Errorf("value %s", res.Value)
	}
	n := 0
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, r := range f.requests {
		if r == "POST /v1/runs/run-7/calls/9/resume" {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d resumes: %v", n, f.requests)
	}
}

type bindings struct {
	call func(ctx context.Context, name string, args json.RawMessage) (json.RawMessage, error)
}

func (bindings) List() []sandbox.Binding {
	return []sandbox.Binding{{Name: "ask", Params: []string{"question"}, Doc: "asks a person"}}
}

func (b bindings) Call(ctx context.Context, name string, args json.RawMessage) (json.RawMessage, error) {
	return b.call(ctx, name, args)
}

// TestAnswers: a handler's error, invalid JSON and panic become an error
// answer; approvals are answered at the approval path, denied without an
// Approve; an answer the server refuses (not 404 or 409) cancels the run
// and is the stream's error.
func TestAnswers(t *testing.T) {
	f := &fake{}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/calls", func(w http.ResponseWriter, r *http.Request) {
		f.record(r)
		send := events(w)
		send(`{"event":"started","id":"d1"}`)
		for i, tool := range []string{"err", "badjson", "panics", "null"} {
			send(fmt.Sprintf(`{"event":"call","call_id":"c%d","tool":%q}`, i, tool))
		}
		send(`{"event":"approval","call_id":"a1","tool":"rm","args":{}}`)
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) && !(f.saw("POST /v1/runs/d1/approvals/a1") && f.saw("POST /v1/runs/d1/calls/c3")) {
			time.Sleep(10 * time.Millisecond)
		}
		send(`{"event":"outcome","outcome":{"call_id":"d1","outcome":"ok","value":1,"decision":{"verdict":"allow"}}}`)
	})
	mux.HandleFunc("POST /v1/runs/d1/", func(w http.ResponseWriter, r *http.Request) { f.record(r) })
	c := serve(t, mux, Options{})
	h := Handler{Call: func(ctx context.Context, ce CallEvent) (json.RawMessage, error) {
		switch ce.Tool {
		case "err":
			return nil, errors.New("no such thing")
		case "badjson":
			return json.RawMessage(`{`), nil
		case "panics":
			panic("boom")
		}
		return nil, nil
	}}
	out, err := c.Call(context.Background(), api.CallRequest{Tool: "t"}, h)
	if err != nil {
		t.Fatal(err)
	}
	if out.Kind != "ok" || string(out.Value) != "1" {
		t.Errorf("outcome %+v", out)
	}
	for path, want := range map[string]string{
		"/v1/runs/d1/calls/c0":     `{"error":"no such thing"}`,
		"/v1/runs/d1/calls/c1":     `{"error":"the client's handler returned invalid JSON"}`,
		"/v1/runs/d1/calls/c2":     `{"error":"the client's handler panicked: boom"}`,
		"/v1/runs/d1/calls/c3":     `{"value":null}`,
		"/v1/runs/d1/approvals/a1": `{"approve":false,"reason":"this client approves nothing"}`,
	} {
		if got := f.body(path); got != want {
			t.Errorf("%s: %s, want %s", path, got, want)
		}
	}

	// An answer refused with a 500: the run is cancelled and the stream
	// ends with that error.
	g := &fake{}
	mux = http.NewServeMux()
	mux.HandleFunc("POST /v1/runs", func(w http.ResponseWriter, r *http.Request) {
		send := events(w)
		send(`{"event":"started","id":"r2"}`)
		send(`{"event":"call","call_id":"c","tool":"t"}`)
		<-r.Context().Done()
	})
	mux.HandleFunc("POST /v1/runs/r2/calls/c", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no", http.StatusInternalServerError)
	})
	mux.HandleFunc("DELETE /v1/runs/r2", func(w http.ResponseWriter, r *http.Request) { g.record(r) })
	c = serve(t, mux, Options{})
	_, err = c.Stream(context.Background(), api.RunRequest{Code: "t()"}, Handler{})
	var ae *api.Error
	if !errors.As(err, &ae) || ae.Status != 500 || !strings.Contains(err.Error(), "answer call") {
		t.Errorf("Stream = %v, want the answer's 500", err)
	}
	if !g.saw("DELETE /v1/runs/r2") {
		t.Errorf("the run was not cancelled: %v", g.requests)
	}
}

// TestInfo: the info is read, a server of another API version refused,
// and CanFreeze follows the self-check's attestation.
func TestInfo(t *testing.T) {
	version := api.Version
	freezable := true
	c := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/info" {
			http.NotFound(w, r)
			return
		}
		json.NewEncoder(w).Encode(api.Info{APIVersion: version, Backend: "subprocess", SelfCheck: &sandbox.Isolation{Freezable: freezable}})
	}), Options{})
	info, err := c.Info(context.Background())
	if err != nil || info.Backend != "subprocess" {
		t.Fatalf("Info = %+v, %v", info, err)
	}
	if !c.Sandbox().CanFreeze() {
		t.Error("CanFreeze false with a freezable self-check")
	}
	freezable = false
	if c.Sandbox().CanFreeze() {
		t.Error("CanFreeze true without a freezable self-check")
	}
	version = "v2"
	if _, err := c.Info(context.Background()); !errors.Is(err, ErrVersion) {
		t.Errorf("Info from a v2 server: %v", err)
	}
	if _, err := NewSandbox(context.Background(), "unix:///nonexistent/psych.sock", Options{}); !errors.Is(err, ErrUnreachable) || !errors.Is(err, sandbox.ErrHostFault) {
		t.Errorf("NewSandbox of nothing: %v", err)
	}
}

// TestClosed: a Run after Close is ErrClosed.
func TestClosed(t *testing.T) {
	c, err := New("unix:///nonexistent/psych.sock", Options{})
	if err != nil {
		t.Fatal(err)
	}
	s := c.Sandbox()
	s.Close()
	s.Close()
	if _, err := s.Run(context.Background(), sandbox.Request{Code: "1"}); !errors.Is(err, sandbox.ErrClosed) {
		t.Errorf("Run after Close: %v", err)
	}
}

// TestKeepalive: a stream longer than the idle timeout whose server is
// never silent that long (keepalives) ends in its result.
func TestKeepalive(t *testing.T) {
	c := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		send := events(w)
		for i := 0; i < 8; i++ {
			send(`{"event":"keepalive"}`)
			time.Sleep(100 * time.Millisecond)
		}
		send(`{"event":"result","result":{"id":"k","value":null}}`)
	}), Options{IdleTimeout: 400 * time.Millisecond})
	res, err := c.Sandbox().Run(context.Background(), sandbox.Request{Code: "1"})
	if err != nil || res.ID != "k" || res.Value != nil {
		t.Fatalf("Run = %+v, %v; want no Value for null", res, err)
	}
}

// TestCallFlood: a server that sends more calls than a program can have
// unanswered at once is not speaking the API: the run is cancelled and the
// stream is an ErrProtocol, with no goroutine per call left behind.
func TestCallFlood(t *testing.T) {
	f := &fake{}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/runs", func(w http.ResponseWriter, r *http.Request) {
		send := events(w)
		send(`{"event":"started","id":"f"}`)
		for i := range 10000 {
			send(fmt.Sprintf(`{"event":"call","call_id":"%d","tool":"t"}`, i))
		}
		<-r.Context().Done()
	})
	mux.HandleFunc("DELETE /v1/runs/f", func(w http.ResponseWriter, r *http.Request) { f.record(r) })
	c := serve(t, mux, Options{})
	calls := 0
	var mu sync.Mutex
	h := Handler{Call: func(ctx context.Context, ce CallEvent) (json.RawMessage, error) {
		mu.Lock()
		calls++
		mu.Unlock()
		<-ctx.Done()
		return nil, ctx.Err()
	}}
	_, err := c.Stream(context.Background(), api.RunRequest{Code: "t()"}, h)
	if !errors.Is(err, ErrProtocol) || !strings.Contains(err.Error(), "unanswered") {
		t.Fatalf("Stream = %v, want ErrProtocol", err)
	}
	if calls > maxPending || !f.saw("DELETE /v1/runs/f") {
		t.Errorf("%d calls handled; DELETE seen %v", calls, f.saw("DELETE /v1/runs/f"))
	}
}

// TestLedgerRoutes: Runs and Run read the peer's runs, an id is escaped
// into the path, and another peer's run is a 404 *api.Error.
func TestLedgerRoutes(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/runs", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"runs":[{"id":"a","status":"finished","started":"2026-12-07T00:00:00Z","limits":{},"network":false,"bindings":[]}]}`)
	})
	mux.HandleFunc("GET /v1/runs/{id}", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.EscapedPath() != "/v1/runs/a%2Fb" {
			w.WriteHeader(http.StatusNotFound)
			io.WriteString(w, `{"error":{"code":"not_found","message":"no run `+r.URL.EscapedPath()+`"}}`)
			return
		}
		io.WriteString(w, `{"id":"a/b","status":"cancelled","started":"2026-12-07T00:00:00Z","code":"1","limits":{},"network":false,"bindings":[]}`)
	})
	c := serve(t, mux, Options{})
	runs, err := c.Runs(context.Background())
	if err != nil || len(runs) != 1 || runs[0].ID != "a" || runs[0].Status != api.StatusFinished {
		t.Errorf("Runs = %+v, %v", runs, err)
	}
	run, err := c.Run(context.Background(), "a/b")
	if err != nil || run.Status != api.StatusCancelled || run.Code != "1" {
		t.Errorf("Run = %+v, %v", run, err)
	}
	var ae *api.Error
	if _, err := c.Run(context.Background(), "other"); !errors.As(err, &ae) || ae.Status != 404 {
		t.Errorf("another peer's run: %v", err)
	}
}

// TestTLS: a tls:// address speaks TLS with the given configuration and
// sends the token; a server whose certificate is not trusted is
// unreachable, and no token goes to it.
func TestTLS(t *testing.T) {
	var auth string
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth = r.Header.Get("Authorization")
		json.NewEncoder(w).Encode(api.Info{APIVersion: api.Version, Backend: "subprocess"})
	}))
	defer srv.Close()
	addr := "tls://" + srv.Listener.Addr().String()
	c, err := New(addr, Options{Token: "t0ken-t0ken-t0ken", TLS: srv.Client().Transport.(*http.Transport).TLSClientConfig})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if info, err := c.Info(context.Background()); err != nil || info.Backend != "subprocess" || auth != "Bearer t0ken-t0ken-t0ken" {
		t.Fatalf("Info over TLS = %+v, %v; Authorization %q", info, err, auth)
	}
	auth = ""
	untrusted, _ := New(addr, Options{Token: "t0ken-t0ken-t0ken"})
	defer untrusted.Close()
	if _, err := untrusted.Info(context.Background()); !errors.Is(err, ErrUnreachable) || auth != "" {
		t.Errorf("an untrusted certificate: %v; Authorization %q", err, auth)
	}
}

// TestSlowUpload: a body the server takes longer than the idle timeout to
// read is not the server's silence: the upload's progress keeps the
// stream alive (a 32 MiB request's upload and decode once ran past it).
func TestSlowUpload(t *testing.T) {
	c := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		buf := make([]byte, 128<<10)
		for {
			if _, err := io.ReadFull(r.Body, buf); err != nil {
				break
			}
			time.Sleep(25 * time.Millisecond)
		}
		events(w)(`{"event":"result","result":{"id":"u","value":null}}`)
	}), Options{IdleTimeout: 300 * time.Millisecond})
	res, err := c.Sandbox().Run(context.Background(), sandbox.Request{Code: strings.Repeat("#", 4<<20)})
	if err != nil || res.ID != "u" {
		t.Fatalf("Run = %+v, %v; want the result after a slow upload", res, err)
	}
}
