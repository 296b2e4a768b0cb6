package pool

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// patience bounds every wait for an outcome; it is not a speed assertion.
const patience = 10 * time.Second

// tracker makes numbered items and counts what happens to each.
type tracker struct {
	mu        sync.Mutex
	made      int
	taken     map[int]int
	destroyed map[int]int
	onDestroy chan int // if set, told of each destroyed id (never blocks)
}

func newTracker() *tracker {
	return &tracker{taken: map[int]int{}, destroyed: map[int]int{}}
}

func (tr *tracker) make() int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.made++
	return tr.made
}

func (tr *tracker) fill(context.Context) (int, error) { return tr.make(), nil }

func (tr *tracker) destroy(id int) {
	tr.mu.Lock()
	tr.destroyed[id]++
	tr.mu.Unlock()
	if tr.onDestroy != nil {
		select {
		case tr.onDestroy <- id:
		default:
		}
	}
}

func (tr *tracker) take(id int) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.taken[id]++
}

func (tr *tracker) counts(id int) (taken, destroyed int) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return tr.taken[id], tr.destroyed[id]
}

// check, after Close, that every item made was either taken once or
// destroyed once, never both, and nothing unknown was seen.
func (tr *tracker) check(t *testing.T) {
	t.Helper()
	tr.mu.Lock()
	defer tr.mu.Unlock()
	for id := 1; id <= tr.made; id++ {
		tk, d := tr.taken[id], tr.destroyed[id]
		if tk+d != 1 {
			t.Errorf("item %d: taken %d times, destroyed %d times; want exactly one of them once", id, tk, d)
		}
	}
	for _, m := range []map[int]int{tr.taken, tr.destroyed} {
		for id := range m {
			if id < 1 || id > tr.made {
				t.Errorf("item %d was never made", id)
			}
		}
	}
}

func (tr *tracker) config(size int) Config[int] {
	return Config[int]{Size: size, Fill: tr.fill, Destroy: tr.destroy}
}

func mustNew(t *testing.T, cfg Config[int]) *Pool[int] {
	t.Helper()
	p, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return p
}

func waitReady(t *testing.T, p *Pool[int], n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	if err := p.WaitReady(ctx, n); err != nil {
		t.Fatalf("WaitReady(%d): %v (ready %d, Err %v)", n, err, p.Ready(), p.Err())
	}
}

// recv waits for one value from ch, or fails the test.
func recv[V any](t *testing.T, ch <-chan V, what string) V {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(patience):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

// fakeClock is a clock the test moves by hand.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func TestNewRejectsBadConfigs(t *testing.T) {
	fill := func(context.Context) (int, error) { return 0, nil }
	destroy := func(int) {}
	for name, cfg := range map[string]Config[int]{
		"zero size":        {Size: 0, Fill: fill, Destroy: destroy},
		"negative size":    {Size: -1, Fill: fill, Destroy: destroy},
		"negative max age": {Size: 1, MaxAge: -time.Second, Fill: fill, Destroy: destroy},
		"negative fillers": {Size: 1, Fillers: -1, Fill: fill, Destroy: destroy},
		"no fill":          {Size: 1, Destroy: destroy},
		"no destroy":       {Size: 1, Fill: fill},
	} {
		t.Run(name, func(t *testing.T) {
			p, err := New(cfg)
			if !errors.Is(err, ErrInvalidConfig) {
				t.Errorf("New: err %v, want ErrInvalidConfig", err)
			}
			if p != nil {
				p.Close()
				t.Errorf("New returned a pool with an error")
			}
		})
	}
	p, err := New(Config[int]{Size: 1, Fill: fill, Destroy: destroy})
	if err != nil {
		t.Fatalf("New with a minimal config: %v", err)
	}
	p.Close()
}

func TestTakeExactlyOnceConcurrent(t *testing.T) {
	tr := newTracker()
	cfg := tr.config(8)
	cfg.Fillers = 4
	p := mustNew(t, cfg)
	const want = 400
	var takes atomic.Int64
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), patience)
			defer cancel()
			for takes.Load() < want {
				id, _, ok := p.Take()
				if !ok {
					if err := p.WaitReady(ctx, 1); err != nil {
						t.Errorf("WaitReady: %v", err)
						return
					}
					continue
				}
				tr.take(id)
				takes.Add(1)
			}
		})
	}
	wg.Wait()
	p.Close()
	tr.check(t)
	if n := takes.Load(); n < want {
		t.Errorf("took %d items, want at least %d", n, want)
	}
}

func TestRefillAfterTake(t *testing.T) {
	tr := newTracker()
	p := mustNew(t, tr.config(3))
	defer p.Close()
	waitReady(t, p, 3)
	for range 2 {
		id, _, ok := p.Take()
		if !ok {
			t.Fatal("Take: nothing ready in a full pool")
		}
		tr.take(id)
	}
	waitReady(t, p, 3)
	if n := p.Ready(); n != 3 {
		t.Errorf("Ready() = %d after refill, want 3", n)
	}
	// A pool never fills past Size.
	waitReady(t, p, 100)
	if n := p.Ready(); n != 3 {
		t.Errorf("Ready() = %d, want Size 3", n)
	}
	p.Close()
	tr.check(t)
	if tr.made != 5 {
		t.Errorf("made %d items, want 5 (3, then 2 refills)", tr.made)
	}
}

func TestMaxAgeReplacesIdleItem(t *testing.T) {
	tr := newTracker()
	tr.onDestroy = make(chan int, 100)
	cfg := tr.config(1)
	cfg.MaxAge = 50 * time.Millisecond
	p := mustNew(t, cfg)
	defer p.Close()
	// Nobody takes: the first item must still be destroyed, by the timer.
	if id := recv(t, tr.onDestroy, "the idle item's expiry"); id != 1 {
		t.Fatalf("destroyed item %d first, want 1", id)
	}
	// And replaced: a fresh item is handed out. It may expire again before
	// we take it on a slow machine, so try until one is taken.
	deadline := time.Now().Add(patience)
	for {
		waitReady(t, p, 1)
		if id, _, ok := p.Take(); ok {
			tr.take(id)
			if id == 1 {
				t.Errorf("Take handed out the expired item")
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no fresh item was taken")
		}
	}
	p.Close()
	tr.check(t)
}

func TestTakeSkipsAndDestroysExpired(t *testing.T) {
	tr := newTracker()
	clock := &fakeClock{t: time.Unix(1_000_000, 0)}
	gate := make(chan struct{})
	cfg := Config[int]{
		Size:    2,
		MaxAge:  time.Hour,
		Fillers: 1,
		Fill: func(ctx context.Context) (int, error) {
			select {
			case <-gate:
				return tr.make(), nil
			case <-ctx.Done():
				return 0, ctx.Err()
			}
		},
		Destroy: tr.destroy,
	}
	// No expiry timer: this test is about Take's own check.
	p, err := newPool(cfg, options{now: clock.now, bmin: time.Millisecond, bmax: time.Millisecond, noExpirer: true})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()

	gate <- struct{}{} // item 1, born at 0
	waitReady(t, p, 1)
	clock.advance(40 * time.Minute)
	gate <- struct{}{} // item 2, born at 40m
	waitReady(t, p, 2)
	clock.advance(30 * time.Minute) // item 1 is 70m old, item 2 30m

	id, age, ok := p.Take()
	if !ok || id != 2 {
		t.Fatalf("Take() = %d, %v, %v; want item 2 (item 1 expired)", id, age, ok)
	}
	tr.take(id)
	if age != 30*time.Minute {
		t.Errorf("age %v, want 30m", age)
	}

	gate <- struct{}{} // item 3, born at 70m
	waitReady(t, p, 1)
	clock.advance(2 * time.Hour)
	if id, _, ok := p.Take(); ok {
		tr.take(id)
		t.Fatalf("Take handed out item %d, which had expired", id)
	}
	p.Close()
	tr.check(t)
	for _, id := range []int{1, 3} {
		if _, d := tr.counts(id); d != 1 {
			t.Errorf("expired item %d destroyed %d times, want 1", id, d)
		}
	}
}

// TestTakeIsOldestFirst: Take hands out the oldest ready item (first in,
// first out), so that none ages out unused while younger ones serve.
func TestTakeIsOldestFirst(t *testing.T) {
	tr := newTracker()
	clock := &fakeClock{t: time.Unix(1_000_000, 0)}
	cfg := tr.config(3)
	cfg.Fillers = 1
	// Three items, then the refills wait until Close.
	made := 0
	cfg.Fill = func(ctx context.Context) (int, error) {
		if made == 3 {
			<-ctx.Done()
			return 0, ctx.Err()
		}
		made++
		return tr.make(), nil
	}
	p, err := newPool(cfg, options{now: clock.now, bmin: time.Millisecond, bmax: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	waitReady(t, p, 3)
	for want := 1; want <= 3; want++ {
		id, _, ok := p.Take()
		if !ok {
			t.Fatal("Take: nothing ready")
		}
		tr.take(id)
		if id != want {
			t.Errorf("Take() = item %d, want the oldest, %d", id, want)
		}
		clock.advance(time.Minute)
	}
	p.Close()
	tr.check(t)
}

func TestCloseDestroysUntaken(t *testing.T) {
	tr := newTracker()
	var calls atomic.Int64
	blocked, cancelled, release := make(chan struct{}), make(chan struct{}), make(chan struct{})
	cfg := Config[int]{
		Size:    3,
		Fillers: 3,
		Fill: func(ctx context.Context) (int, error) {
			if calls.Add(1) == 3 {
				close(blocked)
				<-ctx.Done()
				close(cancelled)
				<-release // returns an item after Close began
			}
			return tr.make(), nil
		},
		Destroy: tr.destroy,
	}
	p := mustNew(t, cfg)
	waitReady(t, p, 2)
	id, _, ok := p.Take()
	if !ok {
		t.Fatal("Take: nothing ready")
	}
	tr.take(id)
	waitReady(t, p, 2) // the refill after the Take
	recv(t, blocked, "the blocked fill to start")

	closed := make(chan struct{})
	go func() {
		p.Close()
		close(closed)
	}()
	recv(t, cancelled, "Close to cancel the fills' ctx")
	select {
	case <-closed:
		t.Fatal("Close returned while a fill was still in flight")
	default:
	}
	close(release)
	recv(t, closed, "Close to return")

	tr.check(t)
	if tr.made != 4 {
		t.Errorf("made %d items, want 4", tr.made)
	}
	if tk, _ := tr.counts(id); tk != 1 {
		t.Errorf("taken item %d: taken %d times", id, tk)
	}
	if _, d := tr.counts(id); d != 0 {
		t.Errorf("Close destroyed the taken item %d", id)
	}
	p.Close() // idempotent
	tr.check(t)
}

func TestFillErrorsRetried(t *testing.T) {
	errBoom := errors.New("boom")
	heal := make(chan struct{})
	tr := newTracker()
	reported := make(chan error, 100)
	cfg := Config[int]{
		Size:    1,
		Fillers: 1,
		Fill: func(context.Context) (int, error) {
			select {
			case <-heal:
				return tr.make(), nil
			default:
				return 0, errBoom
			}
		},
		Destroy: tr.destroy,
		OnError: func(err error) {
			select {
			case reported <- err:
			default:
			}
		},
	}
	p := mustNew(t, cfg)
	defer p.Close()
	for i := range 3 { // retried, not given up
		if err := recv(t, reported, "a reported fill error"); !errors.Is(err, errBoom) {
			t.Fatalf("OnError #%d got %v, want boom", i, err)
		}
	}
	if err := p.Err(); !errors.Is(err, errBoom) {
		t.Errorf("Err() = %v while fills fail, want boom", err)
	}
	if p.Ready() != 0 {
		t.Errorf("Ready() = %d while every fill fails", p.Ready())
	}
	close(heal)
	waitReady(t, p, 1)
	if err := p.Err(); err != nil {
		t.Errorf("Err() = %v after a success, want nil", err)
	}
	p.Close()
	tr.check(t)
}

func TestCloseCancelsBackoff(t *testing.T) {
	reported := make(chan error, 1)
	cfg := Config[int]{
		Size:    1,
		Fill:    func(context.Context) (int, error) { return 0, errors.New("boom") },
		Destroy: func(int) {},
		OnError: func(err error) {
			select {
			case reported <- err:
			default:
			}
		},
	}
	// A backoff far longer than patience: Close must cut it short.
	p, err := newPool(cfg, options{now: time.Now, bmin: time.Hour, bmax: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	recv(t, reported, "a failed fill")
	closed := make(chan struct{})
	go func() {
		p.Close()
		close(closed)
	}()
	recv(t, closed, "Close to return during a backoff")
}

func TestBackoff(t *testing.T) {
	p := &Pool[int]{bmin: backoffMin, bmax: backoffMax}
	for n, want := range map[int]time.Duration{
		1:   10 * time.Millisecond,
		2:   20 * time.Millisecond,
		3:   40 * time.Millisecond,
		7:   640 * time.Millisecond,
		8:   time.Second,
		100: time.Second,
	} {
		if got := p.backoff(n); got != want {
			t.Errorf("backoff(%d) = %v, want %v", n, got, want)
		}
	}
}

func TestAfterClose(t *testing.T) {
	tr := newTracker()
	p := mustNew(t, tr.config(2))
	waitReady(t, p, 2)
	p.Close()
	if id, _, ok := p.Take(); ok {
		tr.take(id)
		t.Errorf("Take after Close handed out item %d", id)
	}
	if n := p.Ready(); n != 0 {
		t.Errorf("Ready() = %d after Close", n)
	}
	if err := p.WaitReady(context.Background(), 1); !errors.Is(err, ErrClosed) {
		t.Errorf("WaitReady after Close: %v, want ErrClosed", err)
	}
	p.Close()
	tr.check(t)
}

func TestWaitReadyHonoursContext(t *testing.T) {
	cfg := Config[int]{
		Size: 1,
		Fill: func(ctx context.Context) (int, error) {
			<-ctx.Done()
			return 0, ctx.Err()
		},
		Destroy: func(int) {},
	}
	p := mustNew(t, cfg)
	defer p.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := p.WaitReady(ctx, 1); !errors.Is(err, context.Canceled) {
		t.Errorf("WaitReady with a cancelled ctx: %v, want context.Canceled", err)
	}
}

func TestTakeNeverWaitsForFill(t *testing.T) {
	started := make(chan struct{}, 1)
	cfg := Config[int]{
		Size: 1,
		Fill: func(ctx context.Context) (int, error) {
			started <- struct{}{}
			<-ctx.Done()
			return 0, ctx.Err()
		},
		Destroy: func(int) {},
	}
	p := mustNew(t, cfg)
	defer p.Close()
	recv(t, started, "a fill to start")
	if _, _, ok := p.Take(); ok {
		t.Error("Take handed out an item no fill made")
	}
}

func TestCloseConcurrentWithTake(t *testing.T) {
	tr := newTracker()
	cfg := tr.config(4)
	cfg.MaxAge = 5 * time.Millisecond // expiries race with Take and Close too
	p := mustNew(t, cfg)
	var takes atomic.Int64
	var closedDone atomic.Bool
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			after := 0
			for after < 100 {
				wasClosed := closedDone.Load()
				id, _, ok := p.Take()
				if ok {
					tr.take(id)
					takes.Add(1)
					if wasClosed {
						t.Errorf("Take handed out item %d after Close returned", id)
					}
				} else {
					runtime.Gosched()
				}
				if wasClosed {
					after++
				}
			}
		})
	}
	deadline := time.Now().Add(patience)
	for takes.Load() < 20 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	var cwg sync.WaitGroup
	for range 3 { // concurrent Closes too
		cwg.Go(p.Close)
	}
	cwg.Wait()
	closedDone.Store(true)
	wg.Wait()
	tr.check(t)
}

func TestNoGoroutineLeft(t *testing.T) {
	before := runtime.NumGoroutine()
	tr := newTracker()
	var fails atomic.Int64
	cfg := Config[int]{
		Size:    4,
		Fillers: 4,
		MaxAge:  10 * time.Millisecond,
		Fill: func(ctx context.Context) (int, error) {
			if fails.Add(1)%3 == 0 {
				return 0, errors.New("boom")
			}
			return tr.make(), nil
		},
		Destroy: tr.destroy,
	}
	p := mustNew(t, cfg)
	for range 20 {
		waitReady(t, p, 1)
		if id, _, ok := p.Take(); ok {
			tr.take(id)
		}
	}
	p.Close()
	tr.check(t)
	// Goroutines the pool ended may take a moment to vanish from the count.
	deadline := time.Now().Add(patience)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines after Close, %d before:\n%s", runtime.NumGoroutine(), before, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(time.Millisecond)
	}
}

// TestTakeWait: with a fill running, TakeWait waits for its item; with
// none running, or past max, it returns at once without one.
func TestTakeWait(t *testing.T) {
	release := make(chan struct{})
	started := make(chan struct{}, 4)
	n := 0
	cfg := Config[int]{
		Size:    1,
		Fillers: 1,
		Fill: func(ctx context.Context) (int, error) {
			started <- struct{}{}
			select {
			case <-release:
			case <-ctx.Done():
				return 0, ctx.Err()
			}
			n++
			return n, nil
		},
		Destroy: func(int) {},
	}
	p := mustNew(t, cfg)
	defer p.Close()
	recv(t, started, "a fill to start")
	if _, _, ok := p.TakeWait(context.Background(), 50*time.Millisecond); ok {
		t.Fatal("TakeWait past max handed out an item no fill finished")
	}
	got := make(chan int, 1)
	go func() {
		id, _, ok := p.TakeWait(context.Background(), 10*time.Second)
		if !ok {
			id = -1
		}
		got <- id
	}()
	// One fill runs and one caller waits for it: a second does not wait.
	for {
		p.mu.Lock()
		w := p.waiters
		p.mu.Unlock()
		if w == 1 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	start := time.Now()
	if _, _, ok := p.TakeWait(context.Background(), 10*time.Second); ok || time.Since(start) > 5*time.Second {
		t.Fatal("a second waiter for one running fill waited, or got an item")
	}
	release <- struct{}{}
	if id := recv(t, got, "the waiter's item"); id != 1 {
		t.Fatalf("TakeWait: %d, want the running fill's item 1", id)
	}
	p.Close()
	if _, _, ok := p.TakeWait(context.Background(), time.Second); ok {
		t.Fatal("TakeWait after Close handed out an item")
	}
}
