package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/psych-runtime/psych/api"
	"github.com/psych-runtime/psych/internal/testutil"
	"github.com/psych-runtime/psych/sandbox"
)

// TestLoad: 600 runs from 48 concurrent clients against MaxRuns 4 and a
// queue of 8: every request ends as a correct 200 or a 429 with
// Retry-After, none hangs, none is lost, the 429s are what
// psych_rejected_total counts, and afterwards no goroutine, fd or process
// of the runs is left.
func TestLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("the load test is not short")
	}
	const runs, clients = 600, 48
	ts := newTestServer(t, serverOpts{cfg: func(c *Config) { c.MaxRuns, c.Queue = 4, 8 }})
	ts.run(t, `{"code":"1"}`) // the first run's one-time costs
	ts.sb.Settle()
	goroutines, fds, kids := runtime.NumGoroutine(), testutil.CountFDs(), len(children())

	tr := &http.Transport{MaxIdleConnsPerHost: clients, DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", ts.sock)
	}}
	c := &http.Client{Transport: tr}
	var next, ok, busy atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, runs)
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= runs {
				switch err := loadRequest(c); {
				case err == errBusy:
					busy.Add(1)
					time.Sleep(200 * time.Millisecond) // a client's pause, shorter than Retry-After
				case err != nil:
					errs <- err
				default:
					ok.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := ok.Load() + busy.Load(); n != runs {
		t.Fatalf("%d of %d requests ended as a 200 or a 429", n, runs)
	}
	rejected := counterValue(t, ts.met.rejected.WithLabelValues(api.CodeCapacityExhausted))
	if int64(rejected) != busy.Load() {
		t.Fatalf("%d 429s, psych_rejected_total{capacity_exhausted} %v", busy.Load(), rejected)
	}
	t.Logf("%d runs: %d ran, %d refused (429)", runs, ok.Load(), busy.Load())
	if ok.Load() < 4 {
		t.Fatalf("only %d runs ran", ok.Load())
	}

	tr.CloseIdleConnections()
	ts.sb.Settle()
	testutil.WaitFor(t, 20*time.Second, "the load's goroutines gone", func() bool { return runtime.NumGoroutine() <= goroutines+2 })
	testutil.WaitFor(t, 20*time.Second, "the load's fds closed", func() bool { return testutil.CountFDs() <= fds+2 })
	if left := children(); len(left) > kids {
		t.Fatalf("processes left: %v (%d before the load)", left, kids)
	}
}

var errBusy = fmt.Errorf("429")

// loadRequest posts one run: nil for a correct 200, errBusy for a correct
// 429, else what was wrong.
func loadRequest(c *http.Client) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", "http://psych/v1/runs", strings.NewReader(`{"code":"6*7"}`))
	resp, err := c.Do(req)
	if err != nil {
		return fmt.Errorf("a request failed (or hung): %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	switch resp.StatusCode {
	case http.StatusOK:
		var res sandbox.Result
		if err := json.Unmarshal(b, &res); err != nil || string(res.Value) != "42" || res.Failure != nil {
			return fmt.Errorf("a 200 with %.300s", b)
		}
		return nil
	case http.StatusTooManyRequests:
		var eb api.ErrorBody
		ra, err := strconv.Atoi(resp.Header.Get("Retry-After"))
		if err != nil || ra < 1 || json.Unmarshal(b, &eb) != nil || eb.Error == nil ||
			eb.Error.Code != api.CodeCapacityExhausted || !eb.Error.Retryable {
			return fmt.Errorf("a 429 with Retry-After %q, body %s", resp.Header.Get("Retry-After"), b)
		}
		return errBusy
	}
	return fmt.Errorf("status %d: %.300s", resp.StatusCode, b)
}

// children lists this process's child processes.
func children() []string {
	var out []string
	ents, _ := os.ReadDir("/proc")
	me := strconv.Itoa(os.Getpid())
	for _, e := range ents {
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) > 1 && f[1] == me {
			out = append(out, e.Name()+" "+s[:i+1])
		}
	}
	return out
}
