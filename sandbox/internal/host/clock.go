package host

import (
	"sync"
	"time"
)

// WallClock counts a run's wall time against its limit, and can be paused:
// a run frozen while a person approves one of its calls does not spend its
// wall budget. C is closed once the running time reaches the limit. Pause
// and Resume nest; the clock runs when every Pause was resumed. It is safe
// for concurrent use.
type WallClock struct {
	mu      sync.Mutex
	limit   time.Duration
	spent   time.Duration // before since
	since   time.Time     // when it last started running; zero while paused
	pauses  int
	timer   *time.Timer
	gen     uint64 // the timer's generation: a stale one's callback does nothing
	fired   chan struct{}
	stopped bool
	now     func() time.Time
}

// NewWallClock starts a clock that fires after limit of running time.
func NewWallClock(limit time.Duration) *WallClock {
	return newWallClock(limit, time.Now)
}

func newWallClock(limit time.Duration, now func() time.Time) *WallClock {
	w := &WallClock{limit: limit, fired: make(chan struct{}), now: now}
	w.mu.Lock()
	w.since = now()
	w.arm()
	w.mu.Unlock()
	return w
}

// C is closed when the clock has run for its limit.
func (w *WallClock) C() <-chan struct{} { return w.fired }

// arm starts a timer for what is left; w.mu is held.
func (w *WallClock) arm() {
	w.gen++
	gen := w.gen
	left := w.limit - w.spent
	w.timer = time.AfterFunc(max(left, 0), func() { w.expire(gen) })
}

func (w *WallClock) expire(gen uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if gen != w.gen || w.stopped || w.pauses > 0 {
		return
	}
	if left := w.limit - w.spent - w.now().Sub(w.since); left > 0 {
		w.arm() // woke early (a coarse timer): wait out the rest
		return
	}
	w.stopped = true
	close(w.fired)
}

// Pause stops the clock until the matching Resume.
func (w *WallClock) Pause() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.pauses++
	if w.pauses > 1 || w.stopped {
		return
	}
	w.spent += w.now().Sub(w.since)
	w.since = time.Time{}
	w.gen++ // the running timer, if it fires now, is stale
	w.timer.Stop()
}

// Resume undoes one Pause.
func (w *WallClock) Resume() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.pauses == 0 {
		return
	}
	w.pauses--
	if w.pauses > 0 || w.stopped {
		return
	}
	w.since = w.now()
	w.arm()
}

// Elapsed is the running time so far, paused time not counted.
func (w *WallClock) Elapsed() time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.since.IsZero() {
		return w.spent
	}
	return w.spent + w.now().Sub(w.since)
}

// Paused reports whether the clock is paused.
func (w *WallClock) Paused() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.pauses > 0
}

// Stop stops the clock for good; C is then never closed.
func (w *WallClock) Stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.stopped {
		w.stopped = true
		w.gen++
		w.timer.Stop()
	}
}
