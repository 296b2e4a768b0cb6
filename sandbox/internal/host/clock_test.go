package host

import (
	"sync"
	"testing"
	"time"
)

// fakeNow is a clock the test moves by hand; the real timers only wake the
// WallClock up to look at it.
type fakeNow struct {
	mu sync.Mutex
	t  time.Time
}

func (f *fakeNow) now() time.Time { f.mu.Lock(); defer f.mu.Unlock(); return f.t }
func (f *fakeNow) add(d time.Duration) {
	f.mu.Lock()
	f.t = f.t.Add(d)
	f.mu.Unlock()
}

func fired(w *WallClock, within time.Duration) bool {
	select {
	case <-w.C():
		return true
	case <-time.After(within):
		return false
	}
}

func TestWallClockFires(t *testing.T) {
	w := NewWallClock(20 * time.Millisecond)
	if !fired(w, 10*time.Second) {
		t.Fatal("a running clock never fired")
	}
	if e := w.Elapsed(); e < 20*time.Millisecond {
		t.Errorf("fired after %v of a 20ms limit", e)
	}
}

// TestWallClockPause: paused time is not spent; the clock fires only once
// the running time, pauses left out, reaches the limit.
func TestWallClockPause(t *testing.T) {
	f := &fakeNow{t: time.Unix(1000, 0)}
	w := newWallClock(100*time.Millisecond, f.now)
	defer w.Stop()
	f.add(60 * time.Millisecond)
	w.Pause()
	w.Pause() // nested
	f.add(time.Hour)
	if fired(w, 150*time.Millisecond) {
		t.Fatal("a paused clock fired")
	}
	if e := w.Elapsed(); e != 60*time.Millisecond {
		t.Fatalf("elapsed %v while paused, want 60ms", e)
	}
	w.Resume()
	if !w.Paused() {
		t.Fatal("one Resume of two Pauses let the clock run")
	}
	f.add(time.Hour)
	if e := w.Elapsed(); e != 60*time.Millisecond {
		t.Fatalf("elapsed %v, want 60ms: the clock ran while still paused", e)
	}
	w.Resume()
	f.add(30 * time.Millisecond)
	if fired(w, 100*time.Millisecond) {
		t.Fatalf("fired at %v of running time, limit 100ms", w.Elapsed())
	}
	f.add(10 * time.Millisecond)
	if !fired(w, 10*time.Second) {
		t.Fatalf("did not fire at %v of running time", w.Elapsed())
	}
}

func TestWallClockStop(t *testing.T) {
	w := NewWallClock(10 * time.Millisecond)
	w.Stop()
	if fired(w, 100*time.Millisecond) {
		t.Fatal("a stopped clock fired")
	}
	w.Pause()
	w.Resume() // no effect on a stopped clock
	if fired(w, 50*time.Millisecond) {
		t.Fatal("a stopped clock fired after Resume")
	}
}

// TestWallClockConcurrent is for the race detector.
func TestWallClockConcurrent(t *testing.T) {
	w := NewWallClock(5 * time.Millisecond)
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 200; j++ {
				w.Pause()
				w.Elapsed()
				w.Resume()
			}
		}()
	}
	wg.Wait()
	if !fired(w, 10*time.Second) {
		t.Fatal("never fired after the pauses ended")
	}
}
