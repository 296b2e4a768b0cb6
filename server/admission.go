package server

import (
	"container/list"
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/psych-runtime/psych/api"
)

// admission bounds the runs and direct calls in flight (max) and the
// requests waiting for a slot (queue, in order, each at most timeout, the
// bytes of their bodies together at most maxBytes). Its decision is made
// from a request's header, before its body is read.
type admission struct {
	max, queue int
	timeout    time.Duration
	maxBytes   int64
	met        *metrics

	mu       sync.Mutex
	inFlight int
	waiting  list.List // of *waiter, oldest first
	bytes    int64     // of the waiting requests' bodies
	draining bool
	drained  chan struct{} // closed when draining starts
	// recent are the last runs' durations, for Retry-After.
	recent        [32]time.Duration
	nRecent, next int
}

type waiter struct {
	bytes   int64
	start   time.Time
	el      *list.Element // in waiting, until granted
	granted chan struct{} // closed when the slot is handed over
	done    bool          // granted (under mu)
}

func newAdmission(max, queue int, timeout time.Duration, maxBytes int64, met *metrics) *admission {
	return &admission{max: max, queue: queue, timeout: timeout, maxBytes: maxBytes, met: met, drained: make(chan struct{})}
}

// enter decides at once, from a request's header, whether it may wait for
// a slot: it takes a free slot, or a place at the end of the queue for a
// body of bodyBytes, or is refused (429 when the queue or its bytes are
// full, 503 while draining). The caller reads the body, then calls wait.
func (a *admission) enter(bodyBytes int64) (*waiter, *api.Error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	w := &waiter{bytes: bodyBytes, granted: make(chan struct{}), start: time.Now()}
	switch {
	case a.draining:
		return nil, &api.Error{Code: api.CodeDraining, Message: "the server is draining", RetryAfter: 1}
	case a.inFlight < a.max && a.waiting.Len() == 0:
		a.inFlight++
		a.met.inFlight.Set(float64(a.inFlight))
		w.done = true
		close(w.granted)
		return w, nil
	case a.waiting.Len() >= a.queue || a.bytes+bodyBytes > a.maxBytes:
		return nil, a.busyLocked(fmt.Sprintf("%d runs in flight and %d waiting: the queue is full", a.inFlight, a.waiting.Len()))
	}
	w.el = a.waiting.PushBack(w)
	a.bytes += bodyBytes
	a.met.queueDepth.Set(float64(a.waiting.Len()))
	return w, nil
}

// wait waits for w's slot: refused after the queue timeout (429), when
// the server starts draining (503), and when ctx ends (the client went
// away: cancelled); a refused w has left the queue. release gives the
// slot back; dur is the run's duration, counted in Retry-After's estimate
// (zero: not counted).
func (a *admission) wait(ctx context.Context, w *waiter) (release func(dur time.Duration), wait time.Duration, e *api.Error) {
	t := time.NewTimer(a.timeout - time.Since(w.start))
	defer t.Stop()
	var why *api.Error
	select {
	case <-w.granted:
	case <-t.C:
		why = &api.Error{Code: api.CodeCapacityExhausted, Message: fmt.Sprintf("no slot within the queue timeout (%v)", a.timeout)}
	case <-a.drained:
		why = &api.Error{Code: api.CodeDraining, Message: "the server is draining", RetryAfter: 1}
	case <-ctx.Done():
		why = &api.Error{Code: api.CodeCancelled, Message: "the client went away while queued"}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if w.done { // granted, maybe meanwhile: the slot is ours
		wait = time.Since(w.start)
		a.met.queueWait.Observe(wait.Seconds())
		return a.releaser(), wait, nil
	}
	a.leaveLocked(w)
	if why.Code == api.CodeCapacityExhausted {
		why.RetryAfter = a.retryAfterLocked()
	}
	return nil, 0, why
}

// leave gives up w, queued or granted (its body could not be read).
func (a *admission) leave(w *waiter) {
	a.mu.Lock()
	if !w.done {
		a.leaveLocked(w)
		a.mu.Unlock()
		return
	}
	a.mu.Unlock()
	a.releaser()(0)
}

func (a *admission) leaveLocked(w *waiter) {
	a.waiting.Remove(w.el)
	a.bytes -= w.bytes
	a.met.queueDepth.Set(float64(a.waiting.Len()))
}

// releaser gives the slot back once: to the oldest waiter, else free.
func (a *admission) releaser() func(time.Duration) {
	var once sync.Once
	return func(dur time.Duration) {
		once.Do(func() {
			a.mu.Lock()
			defer a.mu.Unlock()
			if dur > 0 {
				a.recent[a.next] = dur
				a.next = (a.next + 1) % len(a.recent)
				a.nRecent = min(a.nRecent+1, len(a.recent))
			}
			if el := a.waiting.Front(); el != nil {
				w := a.waiting.Remove(el).(*waiter)
				a.bytes -= w.bytes
				w.done = true
				close(w.granted)
				a.met.queueDepth.Set(float64(a.waiting.Len()))
				return // the slot passes on: in flight stays the same
			}
			a.inFlight--
			a.met.inFlight.Set(float64(a.inFlight))
		})
	}
}

// busyLocked is a 429 with its Retry-After.
func (a *admission) busyLocked(msg string) *api.Error {
	return &api.Error{Code: api.CodeCapacityExhausted, Message: msg, RetryAfter: a.retryAfterLocked()}
}

// retryAfterLocked estimates, in whole seconds (1 to 3600), when a slot
// may be free for one more request: the recent runs' mean duration times
// the rounds the queue ahead of it needs.
func (a *admission) retryAfterLocked() int {
	mean := time.Second
	if a.nRecent > 0 {
		var sum time.Duration
		for _, d := range a.recent[:a.nRecent] {
			sum += d
		}
		mean = sum / time.Duration(a.nRecent)
	}
	rounds := float64(a.waiting.Len()+1) / float64(a.max)
	s := math.Ceil(mean.Seconds() * math.Max(rounds, 1))
	return int(min(max(s, 1), 3600))
}

// drain refuses every request from now on, those waiting included (503).
func (a *admission) drain() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.draining {
		a.draining = true
		close(a.drained)
	}
}

// counts returns the slots taken and the requests waiting.
func (a *admission) counts() (inFlight, waiting int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.inFlight, a.waiting.Len()
}
