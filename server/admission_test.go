package server

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/psych-runtime/psych/api"
	"github.com/psych-runtime/psych/sandbox"
)

func newTestAdmission(t *testing.T, max, queue int, timeout time.Duration, maxBytes int64) *admission {
	t.Helper()
	met, err := newMetrics(prometheus.NewRegistry(), func() sandbox.PoolStatus { return sandbox.PoolStatus{} })
	if err != nil {
		t.Fatal(err)
	}
	return newAdmission(max, queue, timeout, maxBytes, met)
}

// TestAdmissionQueue: slots go to the waiting requests in order; the bytes
// of the queued bodies together are capped (429 past it); a request
// leaving the queue gives its bytes back; Retry-After grows with the
// recent runs' durations.
func TestAdmissionQueue(t *testing.T) {
	a := newTestAdmission(t, 1, 10, time.Minute, 100)
	first, e := a.enter(0)
	if e != nil {
		t.Fatal(e)
	}
	release, _, e := a.wait(context.Background(), first)
	if e != nil {
		t.Fatal(e)
	}
	w1, e := a.enter(60)
	if e != nil {
		t.Fatal(e)
	}
	if _, e := a.enter(60); e == nil || e.Code != api.CodeCapacityExhausted || e.RetryAfter < 1 {
		t.Fatalf("a body past the queued bytes' cap: %+v, want 429 with Retry-After", e)
	}
	w2, e := a.enter(40)
	if e != nil {
		t.Fatalf("a body within the queued bytes' cap: %+v", e)
	}
	order := make(chan int, 2)
	var wg sync.WaitGroup
	for i, w := range []*waiter{w1, w2} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rel, _, e := a.wait(context.Background(), w)
			if e != nil {
				t.Error(e)
				return
			}
			order <- i
			time.Sleep(10 * time.Millisecond)
			rel(30 * time.Second)
		}()
	}
	release(30 * time.Second)
	if a, b := <-order, <-order; a != 0 || b != 1 {
		t.Fatalf("slots went to %d then %d, want the queue's order", a, b)
	}
	wg.Wait()
	a.mu.Lock()
	n, q, bytes := a.inFlight, a.waiting.Len(), a.bytes
	a.mu.Unlock()
	if n != 0 || q != 0 || bytes != 0 {
		t.Fatalf("after all: %d in flight, %d waiting, %d bytes", n, q, bytes)
	}
	// The recent runs took 30 s: a refusal now says to come back later.
	a.mu.Lock()
	ra := a.retryAfterLocked()
	a.mu.Unlock()
	if ra < 30 {
		t.Fatalf("Retry-After %d after runs of 30 s, want at least 30", ra)
	}
}
