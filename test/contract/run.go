package contract

import (
	"context"
	"encoding/json"
	"errors"

	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/psych-runtime/psych/sandbox"
)

// runIDs: a Request's id comes back on the Result and on the context of
// each binding call; without one the backend makes a distinct id per run; a
// malformed id is ErrInvalidRequest.
func (s *suite) runIDs(t *testing.T) {
	sb := s.b.New(t, Options{})
	b := &idBindings{}
	res, err := sb.Run(context.Background(), sandbox.Request{ID: "caller-id.1", Code: "ping()\nping()", Bindings: b})
	if err != nil {
		t.Fatal(err)
	}
	wantSuccess(t, res)
	if res.ID != "caller-id.1" || !slices.Equal(b.seen, []string{"caller-id.1", "caller-id.1"}) {
		t.Fatalf("result id %q, ids on the binding contexts %v; want caller-id.1 everywhere", res.ID, b.seen)
	}
	ids := map[string]bool{}
	for range 3 {
		b.seen = nil
		res, err := sb.Run(context.Background(), sandbox.Request{Code: "ping()", Bindings: b})
		if err != nil {
			t.Fatal(err)
		}
		if sandbox.CheckID(res.ID) != nil || ids[res.ID] || !slices.Equal(b.seen, []string{res.ID}) {
			t.Fatalf("made id %q (seen %v, earlier %v): want a fresh valid id, on the binding context too", res.ID, b.seen, ids)
		}
		ids[res.ID] = true
	}
	for _, bad := range []string{"has space", "x/y", string(make([]byte, 65))} {
		if _, err := sb.Run(context.Background(), sandbox.Request{ID: bad, Code: "None"}); !errors.Is(err, sandbox.ErrInvalidRequest) {
			t.Errorf("id %q: %v, want ErrInvalidRequest", bad, err)
		}
	}
}

type idBindings struct {
	mu   sync.Mutex
	seen []string
}

func (b *idBindings) List() []sandbox.Binding { return []sandbox.Binding{{Name: "ping"}} }
func (b *idBindings) Call(ctx context.Context, _ string, _ json.RawMessage) (json.RawMessage, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.seen = append(b.seen, sandbox.RunID(ctx))
	return json.RawMessage("true"), nil
}

// suspendBindings is approve(), whose host side suspends the run for wait,
// as a Runtime does while a person decides.
type suspendBindings struct {
	wait    time.Duration
	err     error // what Suspend returned
	entered chan struct{}
}

func (b *suspendBindings) List() []sandbox.Binding { return []sandbox.Binding{{Name: "approve"}} }
func (b *suspendBindings) Call(ctx context.Context, _ string, _ json.RawMessage) (json.RawMessage, error) {
	resume, err := sandbox.Suspend(ctx)
	b.err = err
	if b.entered != nil {
		close(b.entered)
	}
	if err != nil {
		return nil, err
	}
	defer resume()
	select {
	case <-time.After(b.wait):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return json.RawMessage(`"approved"`), nil
}

// SuspendProgram runs a second thread that notes the longest gap between
// two of its iterations while the main thread evaluates call (a binding
// call that suspends the run). Its value is {"answer", "gap", "before",
// "n"}: call's value, the gap in seconds, and the thread's count before
// and after.
func SuspendProgram(call string) string {
	return `
import threading, time
st = {"gap": 0.0, "n": 0, "stop": False}
def count():
    last = time.monotonic()
    while not st["stop"]:
        time.sleep(0.001)
        now = time.monotonic()
        st["gap"] = max(st["gap"], now - last)
        last = now
        st["n"] += 1
t = threading.Thread(target=count)
t.start()
time.sleep(0.2)
before = st["n"]
try:
    answer = ` + call + `
    time.sleep(0.2)
finally:
    st["stop"] = True
    t.join()
{"answer": answer, "gap": st["gap"], "before": before, "n": st["n"]}
`
}

// suspend: a binding call that suspends its run for 3 s under a 2 s wall
// limit and a 1 s CPU limit (both stretched by the time scale) completes with no limit hit; meanwhile no other
// thread of the program progressed, and the wall clock stood still. A
// backend that cannot freeze says so up front, in the error and in the
// attestation.
func (s *suite) suspend(t *testing.T) {
	sb := s.b.New(t, Options{})
	wait := 3 * time.Second
	b := &suspendBindings{wait: wait}
	// The CPU budget stretches with the time scale as the wall one does:
	// under emulation on a loaded host the counting thread's wake-ups cost
	// the guest more CPU seconds (a VM lane run hit 1 s once).
	res := s.runWith(t, sb, SuspendProgram("approve()"), sandbox.Limits{WallSeconds: 2 * s.b.TimeScale, CPUSeconds: s.b.TimeScale}, b)
	if !sandbox.CanFreeze(sb) {
		if !errors.Is(b.err, sandbox.ErrCannotSuspend) || res.Isolation == nil || res.Isolation.Freezable {
			t.Fatalf("a backend that cannot freeze: Suspend %v, attestation %+v; want ErrCannotSuspend and freezable false", b.err, res.Isolation)
		}
		wantFailure(t, res, "BindingError")
		return
	}
	if b.err != nil {
		t.Fatalf("Suspend: %v", b.err)
	}
	wantSuccess(t, res)
	var v struct {
		Answer    string
		Gap       float64
		Before, N int
	}
	if err := json.Unmarshal(res.Value, &v); err != nil {
		t.Fatalf("value %s: %v", res.Value, err)
	}
	if v.Answer != "approved" || v.Before == 0 || v.N <= v.Before {
		t.Fatalf("value %+v: want the answer and a thread that counted before and after", v)
	}
	if v.Gap < (wait - 200*time.Millisecond).Seconds() {
		t.Errorf("the counting thread's longest gap was %.3fs: it ran while the run was suspended for %v", v.Gap, wait)
	}
	if res.Suspended < wait-200*time.Millisecond || res.Suspended > wait+s.scaled(2*time.Second) {
		t.Errorf("suspended %v, want about %v", res.Suspended, wait)
	}
	// The wall clock's standing still is the success above (3 s suspended
	// under a 2 s limit). Here the duration must hold the suspension and
	// the program's own 0.4 s of sleep beside it, and the rest be at most
	// the wall limit plus the end's latency (an engine copying the output
	// back, which under load takes a good part of a second).
	if run := res.Duration - res.Suspended; run < 400*time.Millisecond || run >= s.scaled(4*time.Second) {
		t.Errorf("duration %v minus suspended %v is %v, want 0.4-4s", res.Duration, res.Suspended, run)
	}
	if res.Usage != nil && res.Usage.CPUSeconds >= s.b.TimeScale {
		t.Errorf("usage cpu %.3fs, want < %gs (1 s, by the time scale)", res.Usage.CPUSeconds, s.b.TimeScale)
	}
	if res.Isolation == nil || !res.Isolation.Freezable {
		t.Errorf("attestation %+v: want freezable", res.Isolation)
	}
}

// suspendCancel: a context cancelled while the run is suspended ends it
// cleanly: Run returns the context's error, and nothing of the run is left.
func (s *suite) suspendCancel(t *testing.T) {
	sb := s.b.New(t, Options{})
	if !sandbox.CanFreeze(sb) {
		t.Skip("the backend declares it cannot freeze (Suspend covers that case)")
	}
	m := Marker()
	b := &suspendBindings{wait: time.Minute, entered: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := sb.Run(ctx, sandbox.Request{Code: detachCode(m) + "approve()", Bindings: b})
		done <- err
	}()
	select {
	case <-b.entered:
	case err := <-done:
		t.Fatalf("Run ended before the suspension: %v", err)
	case <-time.After(s.scaled(time.Minute)):
		t.Fatal("the program never called approve()")
	}
	if b.err != nil {
		t.Fatalf("Suspend: %v", b.err)
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Run after cancel: %v, want context.Canceled", err)
		}
	case <-time.After(s.scaled(15 * time.Second)):
		t.Fatal("Run did not return after its context was cancelled while suspended")
	}
	s.wantGone(t, m, "processes survived a run cancelled while frozen")
}

// approvalLimit: the wall clock stands still while a run is suspended, so
// approval_seconds caps the suspended time of all its calls together: a
// program that asks again and again, each wait well under the cap, is
// ended by the host once the waits add up to it, with limit_hit
// approval_seconds, long before its wall limit.
func (s *suite) approvalLimit(t *testing.T) {
	sb := s.b.New(t, Options{})
	if !sandbox.CanFreeze(sb) {
		t.Skip("the backend declares it cannot freeze: no run of it is ever suspended (Suspend covers that case)")
	}
	const limit = 1.5
	b := &suspendBindings{wait: 400 * time.Millisecond}
	code := "n = 0\nwhile True:\n    approve()\n    n += 1\n    print(n, flush=True)\n"
	res := s.runWith(t, sb, code, sandbox.Limits{ApprovalSeconds: limit, WallSeconds: 60 * s.b.TimeScale}, b)
	if b.err != nil {
		t.Fatalf("Suspend: %v", b.err)
	}
	wantFailure(t, res, sandbox.FailureApprovalTimeout)
	wantLimit(t, res, sandbox.LimitApprovalSeconds, sandbox.SourceHost)
	if calls := strings.Count(res.Stdout, "\n"); calls < 2 {
		t.Errorf("%d calls completed (stdout %q): want the cap to end a run whose waits add up to it, each shorter", calls, res.Stdout)
	}
	// Suspended counts until the frozen run is gone: the kill's latency
	// (docker's, under a loaded machine, above a second) is in it.
	want := time.Duration(limit * float64(time.Second))
	if res.Suspended < want-50*time.Millisecond || res.Suspended > want+s.scaled(3*time.Second) {
		t.Errorf("suspended %v, want about the limit, %v", res.Suspended, want)
	}
	if res.Duration > s.scaled(15*time.Second) {
		t.Errorf("duration %v: the run outlived its approval limit by far", res.Duration)
	}
}
