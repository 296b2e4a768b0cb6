package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/psych-runtime/psych"
	"github.com/psych-runtime/psych/api"
	"github.com/psych-runtime/psych/internal/testutil"
	"github.com/psych-runtime/psych/sandbox"
	"github.com/psych-runtime/psych/sandbox/subprocess"
)

// testServer is a Server over the subprocess backend, started and served
// on a Unix socket of its own.
type testServer struct {
	*Server
	sock  string
	c     *http.Client
	store *psych.MemoryStore
	reg   *prometheus.Registry
	sb    *subprocess.Sandbox
	logs  *lockedWriter
}

// serverOpts configure newTestServer.
type serverOpts struct {
	sandbox  subprocess.Config
	registry *psych.Registry
	rt       psych.Config
	cfg      func(*Config)
	noStart  bool
	// wrap, when set, is the Sandbox the server is given over the real one.
	wrap func(sandbox.Sandbox) sandbox.Sandbox
}

func newTestServer(t testing.TB, o serverOpts) *testServer {
	t.Helper()
	testutil.RequirePython(t)
	sc := o.sandbox
	sc.PythonBin = testutil.Python()
	sc.AllowSameUID = os.Geteuid() != 0
	sb, err := subprocess.New(sc)
	if err != nil {
		t.Fatal(err)
	}
	store := psych.NewMemoryStore()
	rc := o.rt
	rc.Sandbox, rc.Store, rc.Registry = sb, store, o.registry
	rt, err := psych.New(rc)
	if err != nil {
		sb.Close()
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	logs := &lockedWriter{w: &bytes.Buffer{}}
	cfg := Config{Runtime: rt, Sandbox: sb, Store: store, Registerer: reg, Gatherer: reg,
		Logger: slog.New(slog.NewJSONHandler(logs, nil))}
	if o.wrap != nil {
		cfg.Sandbox = o.wrap(sb)
	}
	if o.cfg != nil {
		o.cfg(&cfg)
	}
	s, err := New(cfg)
	if err != nil {
		sb.Close()
		t.Fatal(err)
	}
	s.api = recordStatuses(s.api)
	ts := &testServer{Server: s, store: store, reg: reg, sb: sb, logs: logs}
	ts.sock = filepath.Join(t.TempDir(), "psych.sock")
	l, err := Listen("unix://"+ts.sock, ListenOptions{Group: "no-such-group-psych-test"})
	if err != nil {
		sb.Close()
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- s.Serve(l) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	if !o.noStart {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := s.Start(ctx); err != nil {
			t.Fatal(err)
		}
	}
	ts.c = unixClient(ts.sock)
	t.Cleanup(ts.c.CloseIdleConnections)
	// Wait until Serve serves: a test that shuts down at once would
	// otherwise race the goroutine and see Serve refuse with ErrClosed.
	if resp, err := ts.c.Get("http://psych/healthz"); err != nil {
		t.Fatalf("the test server does not answer: %v", err)
	} else {
		resp.Body.Close()
	}
	return ts
}

// lockedWriter lets the logger's goroutines share a buffer.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// do sends a request and returns the response with its body read.
func (ts *testServer) do(t *testing.T, method, path, accept string, body string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, "http://psych"+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := ts.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

// wantError checks an error response's status, code and shape.
func wantError(t *testing.T, resp *http.Response, body []byte, status int, code string) *api.Error {
	t.Helper()
	var eb api.ErrorBody
	if err := json.Unmarshal(body, &eb); err != nil || eb.Error == nil {
		t.Fatalf("status %d, body %q: not the API's error shape (%v)", resp.StatusCode, body, err)
	}
	if resp.StatusCode != status || eb.Error.Code != code {
		t.Fatalf("got %d %s (%s), want %d %s", resp.StatusCode, eb.Error.Code, eb.Error.Message, status, code)
	}
	return eb.Error
}

// run posts a run and decodes its Result.
func (ts *testServer) run(t *testing.T, body string) *sandbox.Result {
	t.Helper()
	resp, b := ts.do(t, "POST", "/v1/runs", "", body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /v1/runs: %d %s", resp.StatusCode, b)
	}
	var res sandbox.Result
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatal(err)
	}
	return &res
}

// timedEvent is an event and when it was read.
type timedEvent struct {
	*api.Event
	at time.Time
}

// events posts to path with Accept: application/x-ndjson and reads the
// whole stream; each event may be answered by answer (on the test's
// goroutine, as a client would).
func (ts *testServer) events(t *testing.T, path, body string, answer func(ev *api.Event)) []timedEvent {
	t.Helper()
	req, _ := http.NewRequest("POST", "http://psych"+path, strings.NewReader(body))
	req.Header.Set("Accept", api.MediaNDJSON)
	resp, err := ts.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != api.MediaNDJSON {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("POST %s: %d %s %s", path, resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	er := api.NewEventReader(resp.Body, 0)
	var evs []timedEvent
	for {
		ev, err := er.Next()
		if errors.Is(err, io.EOF) {
			return evs
		}
		if err != nil {
			t.Fatalf("after %d events: %v", len(evs), err)
		}
		evs = append(evs, timedEvent{ev, time.Now()})
		if answer != nil {
			answer(ev)
		}
	}
}

// firstEvent is the first event as JSON, for a failure's message.
func firstEvent(evs []timedEvent) string {
	if len(evs) == 0 {
		return "(none)"
	}
	b, _ := json.Marshal(evs[0].Event)
	return string(b)
}

// post sends a JSON body and returns the status and body.
func (ts *testServer) post(t *testing.T, path, body string) (int, []byte) {
	t.Helper()
	resp, b := ts.do(t, "POST", path, "", body)
	return resp.StatusCode, b
}

func jsonString(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// TestRunJSON: a run through the API answers the Result as the library
// gives it, attested, recorded in the ledger and readable by its peer.
func TestRunJSON(t *testing.T) {
	ts := newTestServer(t, serverOpts{})
	res := ts.run(t, `{"id":"run-json-1","code":"print('hi')\n6*7"}`)
	if string(res.Value) != "42" || res.Stdout != "hi\n" || res.Failure != nil || res.ID != "run-json-1" {
		t.Fatalf("result %+v", res)
	}
	if res.Isolation == nil || res.Isolation.Backend != "subprocess" || !res.NetworkDenied {
		t.Fatalf("isolation %+v, network denied %v", res.Isolation, res.NetworkDenied)
	}
	e, err := ts.store.Execution(context.Background(), "run-json-1")
	if err != nil || e.Result == nil || string(e.Result.Value) != "42" {
		t.Fatalf("ledger: %+v, %v", e, err)
	}
	resp, b := ts.do(t, "GET", "/v1/runs/run-json-1", "", "")
	var run api.Run
	if resp.StatusCode != 200 || json.Unmarshal(b, &run) != nil || run.Status != api.StatusFinished || run.Result == nil || run.Code == "" {
		t.Fatalf("GET /v1/runs/run-json-1: %d %s", resp.StatusCode, b)
	}
	resp, b = ts.do(t, "GET", "/v1/runs", "", "")
	var list api.RunList
	if resp.StatusCode != 200 || json.Unmarshal(b, &list) != nil || len(list.Runs) != 1 || list.Runs[0].ID != "run-json-1" || list.Runs[0].Code != "" {
		t.Fatalf("GET /v1/runs: %d %s", resp.StatusCode, b)
	}
	// The same id again is 409: it is in the ledger.
	resp, b = ts.do(t, "POST", "/v1/runs", "", `{"id":"run-json-1","code":"1"}`)
	wantError(t, resp, b, http.StatusConflict, api.CodeConflict)
}

// TestRunEvents: a program that prints and then sleeps: its stdout event
// comes at least 1.5 s before its result, the data concatenate to the
// Result's stdout and stderr, started comes first (its warm the result's
// isolation.warm) and exactly one terminal event ends the stream.
func TestRunEvents(t *testing.T) {
	ts := newTestServer(t, serverOpts{})
	code := "import sys, time\nprint('first', flush=True)\nsys.stderr.write('err\\n'); sys.stderr.flush()\ntime.sleep(2)\nprint('second')\n7"
	evs := ts.events(t, "/v1/runs", jsonString(api.RunRequest{Code: code}), nil)
	if len(evs) < 3 || evs[0].Event.Event != api.EventStarted || evs[0].ID == "" || evs[0].Warm == nil {
		t.Fatalf("%d events, the first %s: want started {id, warm} first", len(evs), firstEvent(evs))
	}
	last := evs[len(evs)-1]
	if last.Event.Event != api.EventResult {
		t.Fatalf("last event %+v, want result", last.Event)
	}
	if *evs[0].Warm != last.Result.Isolation.Warm {
		t.Fatalf("started says warm %v, the result's isolation.warm %v", *evs[0].Warm, last.Result.Isolation.Warm)
	}
	var stdout, stderr strings.Builder
	var firstOut time.Time
	for _, ev := range evs[1 : len(evs)-1] {
		switch ev.Event.Event {
		case api.EventStdout:
			if firstOut.IsZero() {
				firstOut = ev.at
			}
			stdout.WriteString(ev.Data)
		case api.EventStderr:
			stderr.WriteString(ev.Data)
		case api.EventKeepalive:
		default:
			t.Fatalf("unexpected event %+v", ev.Event)
		}
	}
	res := last.Result
	if string(res.Value) != "7" || stdout.String() != res.Stdout || stderr.String() != res.Stderr || res.Stdout != "first\nsecond\n" {
		t.Fatalf("stdout events %q, stderr events %q; result %+v", stdout.String(), stderr.String(), res)
	}
	if gap := last.at.Sub(firstOut); firstOut.IsZero() || gap < 1500*time.Millisecond {
		t.Fatalf("the first stdout event came %v before the result; want ≥ 1.5 s (output as it is written)", gap)
	}
}

// TestHealthReadyInfo: /readyz is 503 until Start and 200 after; /v1/info
// tells the API version, the caps, the pool and the self-check's
// attestation; an unknown route is 404 and a wrong method 405, in the
// API's error shape; runs before Start are 503 not_ready.
func TestHealthReadyInfo(t *testing.T) {
	ts := newTestServer(t, serverOpts{noStart: true, cfg: func(c *Config) {
		c.Caps = sandbox.Limits{WallSeconds: 60}
		c.Info.EnvAllowlist = []string{"LANG"}
	}})
	resp, b := ts.do(t, "GET", "/healthz", "", "")
	if resp.StatusCode != 200 {
		t.Fatalf("healthz before Start: %d %s", resp.StatusCode, b)
	}
	resp, b = ts.do(t, "GET", "/readyz", "", "")
	wantError(t, resp, b, http.StatusServiceUnavailable, api.CodeNotReady)
	if resp.Header.Get("Retry-After") == "" {
		t.Error("503 not_ready without Retry-After")
	}
	resp, b = ts.do(t, "POST", "/v1/runs", "", `{"code":"1"}`)
	wantError(t, resp, b, http.StatusServiceUnavailable, api.CodeNotReady)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := ts.Start(ctx); err != nil {
		t.Fatal(err)
	}
	resp, b = ts.do(t, "GET", "/readyz", "", "")
	if resp.StatusCode != 200 {
		t.Fatalf("readyz after Start: %d %s", resp.StatusCode, b)
	}
	resp, b = ts.do(t, "GET", "/v1/info", "", "")
	var info api.Info
	if resp.StatusCode != 200 || json.Unmarshal(b, &info) != nil {
		t.Fatalf("info: %d %s", resp.StatusCode, b)
	}
	if info.APIVersion != api.Version || info.Caps.WallSeconds != 60 || info.Defaults.WallSeconds != 30 ||
		info.SelfCheck == nil || info.SelfCheck.Network == nil || info.Backend != "subprocess" ||
		info.MaxRuns != 2 || info.Queue != DefaultQueue || len(info.EnvAllowlist) != 1 || info.Draining {
		t.Fatalf("info %s", b)
	}
	resp, b = ts.do(t, "GET", "/v1/nothing", "", "")
	wantError(t, resp, b, http.StatusNotFound, api.CodeNotFound)
	resp, b = ts.do(t, "PUT", "/v1/runs", "", "")
	wantError(t, resp, b, http.StatusMethodNotAllowed, api.CodeInvalidRequest)
	if resp.Header.Get("Allow") != "POST, GET" {
		t.Errorf("405 Allow %q", resp.Header.Get("Allow"))
	}
	resp, b = ts.do(t, "GET", "/metrics", "", "")
	if resp.StatusCode != 200 || !bytes.Contains(b, []byte("psych_build_info")) {
		t.Fatalf("metrics: %d %.200s", resp.StatusCode, b)
	}
}

// TestServeRefusals: Serve refuses a TCP listener without a token (no
// exception for loopback), and any listener after Shutdown; New refuses a
// Config without its Runtime or with a default above its cap.
func TestServeRefusals(t *testing.T) {
	ts := newTestServer(t, serverOpts{noStart: true})
	l, err := Listen("tcp://127.0.0.1:0", ListenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := ts.Serve(l); !errors.Is(err, errNoToken) {
		t.Fatalf("Serve of TCP without a token: %v, want errNoToken", err)
	}
	if c, err := net.Dial("tcp", l.Addr().String()); err == nil {
		c.Close()
		t.Fatal("the refused listener still accepts")
	}
	for _, cfg := range []Config{
		{Sandbox: ts.sb},
		{Runtime: ts.cfg.Runtime, Sandbox: ts.sb, Info: api.Info{Defaults: sandbox.Limits{WallSeconds: 90}}, Caps: sandbox.Limits{WallSeconds: 60}},
		{Runtime: ts.cfg.Runtime, Sandbox: ts.sb, Token: "short"},
		{Runtime: ts.cfg.Runtime, Sandbox: ts.sb, MaxRuns: -1},
	} {
		if _, err := New(cfg); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("New(%+v): %v, want ErrInvalidConfig", cfg, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := ts.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	l2, err := Listen("unix://"+filepath.Join(t.TempDir(), "late.sock"), ListenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := ts.Serve(l2); !errors.Is(err, ErrClosed) {
		t.Fatalf("Serve after Shutdown: %v, want ErrClosed", err)
	}
}

// TestServeMetrics: the metrics listener serves /healthz, /readyz and
// /metrics without auth, and nothing else.
func TestServeMetrics(t *testing.T) {
	ts := newTestServer(t, serverOpts{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go ts.ServeMetrics(ln)
	base := "http://" + ln.Addr().String()
	for path, want := range map[string]int{"/healthz": 200, "/readyz": 200, "/metrics": 200, "/v1/info": 404, "/v1/runs": 404} {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET %s on the metrics listener: %d %s, want %d", path, resp.StatusCode, b, want)
		}
		if path == "/metrics" && !bytes.Contains(b, []byte("psych_runs_in_flight")) {
			t.Errorf("/metrics without psych_runs_in_flight: %.300s", b)
		}
	}
}

// TestPool: over a pooled Sandbox, Start waits for the pool to fill,
// /v1/info tells its size and ready count, MaxRuns defaults to its size
// (at least 2), psych_pool_ready follows it, and a run is served warm (a
// streamed one's started event says warm).
func TestPool(t *testing.T) {
	testutil.RequireRoot(t, "a pool needs a run cgroup and a range of outside ids")
	ts := newTestServer(t, serverOpts{noStart: true, sandbox: subprocess.Config{Pool: &sandbox.PoolConfig{Size: 3}}})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := ts.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if st := sandbox.PoolStatusOf(ts.sb); st.Ready != 3 { // Start waited for the pool
		t.Fatalf("pool %+v when Start returned, want 3 ready", st)
	}
	resp, b := ts.do(t, "GET", "/v1/info", "", "")
	var info api.Info
	if resp.StatusCode != 200 || json.Unmarshal(b, &info) != nil {
		t.Fatalf("info: %d %s", resp.StatusCode, b)
	}
	if info.Pool.Size != 3 || info.Pool.Ready != 3 || info.MaxRuns != 3 {
		t.Fatalf("info pool %+v, max_runs %d; want a full pool of 3 and max_runs 3", info.Pool, info.MaxRuns)
	}
	_, m := ts.do(t, "GET", "/metrics", "", "")
	if !bytes.Contains(m, []byte("psych_pool_ready 3")) {
		t.Fatalf("metrics without psych_pool_ready 3:\n%s", m)
	}
	res := ts.run(t, `{"code":"1"}`)
	if res.Isolation == nil || !res.Isolation.Warm {
		t.Fatalf("a run through a server with a pool: isolation %+v, want warm", res.Isolation)
	}
	if got := counterValue(t, ts.met.runs.WithLabelValues(outcomeOK, "", "true")); got != 1 {
		t.Fatalf("psych_runs_total{warm=true} = %v, want 1", got)
	}
	// A stream's started event says so before the program runs.
	evs := ts.events(t, "/v1/runs", `{"code":"print('x')"}`, nil)
	if len(evs) < 2 || evs[0].Event.Event != api.EventStarted || evs[0].Warm == nil || !*evs[0].Warm {
		t.Fatalf("a streamed run over a pool: %d events, the first %s; want started {warm: true} first", len(evs), firstEvent(evs))
	}
	if last := evs[len(evs)-1]; last.Event.Event != api.EventResult || !last.Result.Isolation.Warm {
		t.Fatalf("a streamed run over a pool ended with %+v; want a warm result", last.Event)
	}
}

// slowPool is a Sandbox whose pool fills when fill is closed.
type slowPool struct {
	sandbox.Sandbox
	fill chan struct{}
}

func (p slowPool) WaitWarm(ctx context.Context) error {
	select {
	case <-p.fill:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// TestStartWaitsForPool: the server is not ready (/readyz 503, runs 503
// not_ready) until its pool filled once.
func TestStartWaitsForPool(t *testing.T) {
	fill := make(chan struct{})
	ts := newTestServer(t, serverOpts{noStart: true, wrap: func(sb sandbox.Sandbox) sandbox.Sandbox { return slowPool{sb, fill} }})
	started := make(chan error, 1)
	go func() { started <- ts.Start(context.Background()) }()
	testutil.WaitFor(t, 30*time.Second, "the self-check", func() bool { return ts.self.Load() != nil })
	resp, b := ts.do(t, "GET", "/readyz", "", "")
	wantError(t, resp, b, http.StatusServiceUnavailable, api.CodeNotReady)
	resp, b = ts.do(t, "POST", "/v1/runs", "", `{"code":"1"}`)
	wantError(t, resp, b, http.StatusServiceUnavailable, api.CodeNotReady)
	close(fill)
	if err := <-started; err != nil {
		t.Fatal(err)
	}
	if resp, b := ts.do(t, "GET", "/readyz", "", ""); resp.StatusCode != 200 {
		t.Fatalf("readyz once the pool filled: %d %s", resp.StatusCode, b)
	}
}
