package server

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/psych-runtime/psych/api"
	tu "github.com/psych-runtime/psych/internal/testutil"
	"github.com/psych-runtime/psych/sandbox/subprocess"
)

// TestAdmission: with MaxRuns 1 and a queue of 1, a second run waits in
// the queue and then runs, a third is refused at once (429 with
// Retry-After); a queued request whose client goes away leaves the queue.
func TestAdmission(t *testing.T) {
	ts := newTestServer(t, serverOpts{cfg: func(c *Config) { c.MaxRuns, c.Queue = 1, 1 }})
	var wg sync.WaitGroup
	results := make(chan int, 2)
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			code, _ := ts.post(t, "/v1/runs", `{"code":"import time\ntime.sleep(1.5)"}`)
			results <- code
		}()
		if i == 0 {
			tu.WaitFor(t, 10*time.Second, "the first run in flight", func() bool { n, _ := ts.adm.counts(); return n == 1 })
		}
	}
	tu.WaitFor(t, 10*time.Second, "the second run queued", func() bool { _, q := ts.adm.counts(); return q == 1 })
	start := time.Now()
	resp, b := ts.do(t, "POST", "/v1/runs", "", `{"code":"1"}`)
	wantError(t, resp, b, http.StatusTooManyRequests, api.CodeCapacityExhausted)
	if ra, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || ra < 1 {
		t.Errorf("Retry-After %q", resp.Header.Get("Retry-After"))
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("the 429 took %v: it must come at once", d)
	}
	wg.Wait()
	close(results)
	for code := range results {
		if code != http.StatusOK {
			t.Errorf("a run in flight or queued got %d", code)
		}
	}
	// A queued client that goes away leaves the queue at once, while the
	// run ahead of it still holds the slot.
	go ts.post(t, "/v1/runs", `{"code":"import time\ntime.sleep(8)"}`)
	tu.WaitFor(t, 10*time.Second, "a run in flight", func() bool { n, _ := ts.adm.counts(); return n == 1 })
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", "http://psych/v1/runs", strings.NewReader(`{"code":"1"}`))
	go ts.c.Do(req)
	tu.WaitFor(t, 10*time.Second, "a request queued", func() bool { _, q := ts.adm.counts(); return q == 1 })
	cancel()
	tu.WaitFor(t, 4*time.Second, "the queue empty", func() bool { _, q := ts.adm.counts(); return q == 0 })
	if n, _ := ts.adm.counts(); n != 1 {
		t.Fatalf("%d in flight after the queued client left, want 1 (it took no slot)", n)
	}
}

// TestDrain: Shutdown with runs in flight: they finish with their
// Results, new runs get 503 draining, /readyz 503, and the socket is
// removed; a run past the drain timeout ends with a retryable draining
// error (a stream's error{draining}, or 503 with Retry-After), which a
// client retries on another server.
func TestDrain(t *testing.T) {
	ts := newTestServer(t, serverOpts{cfg: func(c *Config) { c.DrainTimeout, c.MaxRuns = 3*time.Second, 4 }})
	var wg sync.WaitGroup
	codes := make([]int, 2)
	for i := range codes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes[i], _ = ts.post(t, "/v1/runs", `{"code":"import time\ntime.sleep(1)\n5"}`)
		}()
	}
	var long []timedEvent
	wg.Add(1)
	go func() {
		defer wg.Done()
		long = ts.events(t, "/v1/runs", `{"code":"import time\ntime.sleep(60)"}`, nil)
	}()
	var cut *http.Response
	var cutBody []byte
	wg.Add(1)
	go func() {
		defer wg.Done()
		cut, cutBody = ts.do(t, "POST", "/v1/runs", "", `{"code":"import time\ntime.sleep(60)"}`)
	}()
	tu.WaitFor(t, 10*time.Second, "four runs in flight", func() bool { n, _ := ts.adm.counts(); return n == 4 })
	done := make(chan error, 1)
	go func() { done <- ts.Shutdown(context.Background()) }()
	tu.WaitFor(t, 5*time.Second, "draining", ts.draining.Load)
	resp, b := ts.do(t, "GET", "/readyz", "", "")
	wantError(t, resp, b, http.StatusServiceUnavailable, api.CodeDraining)
	resp, b = ts.do(t, "POST", "/v1/runs", "", `{"code":"1"}`)
	wantError(t, resp, b, http.StatusServiceUnavailable, api.CodeDraining)
	if resp.Header.Get("Retry-After") == "" {
		t.Error("503 draining without Retry-After")
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if codes[0] != 200 || codes[1] != 200 {
		t.Fatalf("runs in flight during the drain: %v, want 200", codes)
	}
	if last := long[len(long)-1]; last.Event.Event != api.EventError || last.Error.Code != api.CodeDraining || !last.Error.Retryable {
		t.Fatalf("the streamed run past the drain timeout ended with %+v, want error{draining, retryable}", last.Event)
	}
	wantError(t, cut, cutBody, http.StatusServiceUnavailable, api.CodeDraining)
	if cut.Header.Get("Retry-After") == "" {
		t.Error("the run past the drain timeout: 503 draining without Retry-After")
	}
	if _, err := os.Lstat(ts.sock); !os.IsNotExist(err) {
		t.Fatalf("the socket is left after Shutdown: %v", err)
	}
}

// TestDisconnect: a client that goes away mid-run cancels its run: every
// process of it is killed, with or without events.
func TestDisconnect(t *testing.T) {
	ts := newTestServer(t, serverOpts{})
	for _, events := range []bool{false, true} {
		marker := tu.NewMarker("psych-server-gone")
		code := "import subprocess, sys, time\nsubprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)', '" + marker + "'])\ntime.sleep(60)"
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, "POST", "http://psych/v1/runs", strings.NewReader(jsonString(api.RunRequest{Code: code})))
		if events {
			req.Header.Set("Accept", api.MediaNDJSON)
		}
		go func() {
			if resp, err := ts.c.Do(req); err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}()
		tu.WaitFor(t, 10*time.Second, "the program's child", func() bool { return len(tu.ProcessesWith(marker)) > 0 })
		cancel()
		tu.WaitFor(t, 10*time.Second, "the run's processes gone", func() bool { return len(tu.ProcessesWith(marker)) == 0 })
		tu.WaitFor(t, 10*time.Second, "the slot back", func() bool { n, _ := ts.adm.counts(); return n == 0 })
	}
	if got := counterValue(t, ts.met.runs.WithLabelValues(outcomeCancelled, "", "false")); got != 2 {
		t.Fatalf("psych_runs_total{outcome=cancelled} = %v, want 2", got)
	}
}

// TestStalledReaderCancels: a client that keeps its connection open but
// stops reading blocks the stream's writes; past WriteTimeout the write
// fails, the client is gone, and so is its run, though the client never
// cancelled its request.
func TestStalledReaderCancels(t *testing.T) {
	ts := newTestServer(t, serverOpts{cfg: func(c *Config) { c.WriteTimeout = 500 * time.Millisecond }})
	marker := tu.NewMarker("psych-server-stalled")
	// 1 MiB (the stdout cap) is more than the socket and the client's
	// transport buffer, and less than the stream's 4 MiB: only the write
	// deadline can end this.
	code := "import subprocess, sys, time\nsubprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)', '" + marker + "'])\n" +
		"for i in range(4096):\n    sys.stdout.write('x' * 255 + '\\n')\nsys.stdout.flush()\ntime.sleep(60)"
	req, _ := http.NewRequest("POST", "http://psych/v1/runs", strings.NewReader(jsonString(api.RunRequest{Code: code})))
	req.Header.Set("Accept", api.MediaNDJSON)
	resp, err := ts.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close() // read nothing until the run is gone
	tu.WaitFor(t, 10*time.Second, "the program's child", func() bool { return len(tu.ProcessesWith(marker)) > 0 })
	tu.WaitFor(t, 20*time.Second, "the run's processes gone", func() bool { return len(tu.ProcessesWith(marker)) == 0 })
	tu.WaitFor(t, 10*time.Second, "the slot back", func() bool { n, _ := ts.adm.counts(); return n == 0 })
	if got := counterValue(t, ts.met.runs.WithLabelValues(outcomeCancelled, "", "false")); got != 1 {
		t.Fatalf("psych_runs_total{outcome=cancelled} = %v, want 1", got)
	}
}

// TestSlowConsumer: a client that reads nothing falls behind by more than
// the stream's buffer: its stream ends with error{slow_consumer} and its
// run is cancelled.
func TestSlowConsumer(t *testing.T) {
	ts := newTestServer(t, serverOpts{cfg: func(c *Config) { c.StreamBufferBytes = 16 << 10 }})
	code := "import sys, time\nfor i in range(4096):\n    sys.stdout.write('x' * 255 + '\\n')\nsys.stdout.flush()\ntime.sleep(60)"
	req, _ := http.NewRequest("POST", "http://psych/v1/runs", strings.NewReader(jsonString(api.RunRequest{Code: code})))
	req.Header.Set("Accept", api.MediaNDJSON)
	resp, err := ts.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	time.Sleep(3 * time.Second) // read nothing while the program writes 1 MiB
	start := time.Now()
	er := api.NewEventReader(bufio.NewReader(resp.Body), 0)
	var last *api.Event
	for {
		ev, err := er.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		last = ev
	}
	if last.Event != api.EventError || last.Error.Code != api.CodeSlowConsumer {
		t.Fatalf("last event %+v, want error{slow_consumer}", last)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Fatalf("the stream ended %v after the client read: the run was not cancelled", d)
	}
}

// TestKeepaliveAndSuspend: a silent run's stream gets keepalive events;
// a client may suspend its run while it works on a call (the wall clock
// stands still: suspended_seconds) and resume it.
func TestKeepaliveAndSuspend(t *testing.T) {
	ts := newTestServer(t, serverOpts{cfg: func(c *Config) { c.Keepalive = 200 * time.Millisecond }})
	// It sleeps after the call too: a suspend after the answer finds the
	// run still in flight (409), not gone (404).
	req := api.RunRequest{ID: "ka-1", Code: "import time\ntime.sleep(1)\ngreet('x')\ntime.sleep(1)", Bindings: []api.Tool{greetTool}}
	keepalives := 0
	evs := ts.events(t, "/v1/runs", jsonString(req), func(ev *api.Event) {
		switch ev.Event {
		case api.EventKeepalive:
			keepalives++
		case api.EventCall:
			if code, b := ts.post(t, "/v1/runs/ka-1/calls/"+ev.CallID+"/suspend", ""); code != http.StatusNoContent {
				t.Errorf("suspend: %d %s", code, b)
			}
			time.Sleep(500 * time.Millisecond)
			if code, b := ts.post(t, "/v1/runs/ka-1/calls/"+ev.CallID+"/resume", ""); code != http.StatusNoContent {
				t.Errorf("resume: %d %s", code, b)
			}
			ts.answer(t, "ka-1", "calls", ev.CallID, api.CallAnswer{Value: json.RawMessage(`1`)})
			if code, _ := ts.post(t, "/v1/runs/ka-1/calls/"+ev.CallID+"/suspend", ""); code != http.StatusConflict {
				t.Errorf("suspend after the answer: %d, want 409", code)
			}
		}
	})
	res := evs[len(evs)-1].Result
	if res == nil || res.Failure != nil {
		t.Fatalf("last event %+v", evs[len(evs)-1].Event)
	}
	if keepalives < 2 {
		t.Errorf("%d keepalive events in a second of silence at 200 ms", keepalives)
	}
	if res.Isolation.Freezable && res.Suspended < 400*time.Millisecond {
		t.Errorf("suspended %v, want the client's 0.5 s", res.Suspended)
	}
}

// TestMetricsAndLogs: a run and a refusal are counted and logged; the
// logs never hold code, output or environment values.
func TestMetricsAndLogs(t *testing.T) {
	ts := newTestServer(t, serverOpts{sandbox: subprocess.Config{EnvAllowlist: []string{"LANG"}},
		cfg: func(c *Config) { c.Info.EnvAllowlist = []string{"LANG"} }})
	secret := tu.NewMarker("psych-secret-")
	ts.run(t, jsonString(api.RunRequest{ID: "logged-1", Code: "print('" + secret + "')\n'" + secret + "'", Env: map[string]string{"LANG": secret}}))
	resp, b := ts.do(t, "POST", "/v1/runs", "", `{"code":"1","bogus":1}`)
	wantError(t, resp, b, http.StatusBadRequest, api.CodeInvalidRequest)
	if got := counterValue(t, ts.met.runs.WithLabelValues(outcomeOK, "", "false")); got != 1 {
		t.Errorf("psych_runs_total{ok} = %v, want 1", got)
	}
	if got := counterValue(t, ts.met.rejected.WithLabelValues(api.CodeInvalidRequest)); got != 1 {
		t.Errorf("psych_rejected_total{invalid_request} = %v, want 1", got)
	}
	ts.logs.mu.Lock()
	logs := ts.logs.w.(interface{ String() string }).String()
	ts.logs.mu.Unlock()
	if strings.Contains(logs, secret) {
		t.Fatalf("the logs hold the code, output or an env value:\n%s", logs)
	}
	var sawRun, sawRefusal bool
	for _, line := range strings.Split(strings.TrimSpace(logs), "\n") {
		var l map[string]any
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Fatalf("a log line is not JSON: %q", line)
		}
		sawRun = sawRun || l["msg"] == "run" && l["id"] == "logged-1" && l["outcome"] == "ok" && l["peer"] != ""
		sawRefusal = sawRefusal || l["msg"] == "refused" && l["code"] == api.CodeInvalidRequest
	}
	if !sawRun || !sawRefusal {
		t.Fatalf("want a line for the run and one for the refusal:\n%s", logs)
	}
}

// counterValue reads a counter.
func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}
