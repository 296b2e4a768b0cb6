package pool

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Backoff between failed fills: it starts at backoffMin, doubles per
// failure up to backoffMax, and a success resets it.
const (
	backoffMin = 10 * time.Millisecond
	backoffMax = time.Second
)

// Config configures a Pool.
type Config[T any] struct {
	// Size is the number of ready items to keep; at least 1.
	Size int
	// MaxAge: a ready item older than this is destroyed unused and
	// replaced. 0 means no limit.
	MaxAge time.Duration
	// Fillers is how many fills may run at once; 0 means Size.
	Fillers int
	// Fill makes one ready item; it may be called concurrently. ctx ends
	// when the pool closes. A fill that fails is retried after a backoff
	// (10ms doubling to 1s, reset by a success); whatever it returned with
	// the error is dropped, so it must clean up after itself.
	Fill func(ctx context.Context) (T, error)
	// Destroy destroys an item the pool never handed out (expired, or left
	// at Close); it may be called concurrently. Never called for an item
	// Take returned.
	Destroy func(T)
	// OnError, if set, is told of each failed fill (for a log), except
	// those that end after Close began. May be nil.
	OnError func(error)
}

// validate runs the configuration checks: each a small function, the first
// failure wins.
func (c *Config[T]) validate() error {
	checks := []func() error{
		func() error {
			if c.Size < 1 {
				return fmt.Errorf("size %d: must be at least 1", c.Size)
			}
			return nil
		},
		func() error {
			if c.MaxAge < 0 {
				return fmt.Errorf("max age %v: must not be negative", c.MaxAge)
			}
			return nil
		},
		func() error {
			if c.Fillers < 0 {
				return fmt.Errorf("fillers %d: must not be negative", c.Fillers)
			}
			return nil
		},
		func() error {
			if c.Fill == nil || c.Destroy == nil {
				return errors.New("fill and destroy are both required")
			}
			return nil
		},
	}
	for _, check := range checks {
		if err := check(); err != nil {
			return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
		}
	}
	return nil
}

// entry is one ready item and when its Fill returned.
type entry[T any] struct {
	item T
	born time.Time
}

// Pool keeps Size ready items. Its methods are safe for concurrent use.
type Pool[T any] struct {
	cfg    Config[T]
	now    func() time.Time
	bmin   time.Duration
	bmax   time.Duration
	expire bool            // the expirer runs
	ctx    context.Context // ends at Close; the fills' ctx
	cancel context.CancelFunc
	// wg counts every goroutine of the pool: the fillers, the expirer and
	// the destroyers Take starts. Add happens only under mu while !closed.
	wg    sync.WaitGroup
	rearm chan struct{} // tells the expirer the queue's head changed
	once  sync.Once

	mu       sync.Mutex
	need     *sync.Cond    // on mu: a slot to fill may have opened, or closed
	ready    []entry[T]    // FIFO: oldest first, so births ascend
	inflight int           // fills running now
	waiters  int           // TakeWait callers waiting for one of them
	failures int           // consecutive failed fills
	err      error         // last fill error; nil after a success
	changed  chan struct{} // closed (and replaced) when ready grows, or at Close
	closed   bool
}

// New validates cfg, starts filling in the background and returns at once.
func New[T any](cfg Config[T]) (*Pool[T], error) {
	return newPool(cfg, options{now: time.Now, bmin: backoffMin, bmax: backoffMax})
}

// options are what tests inject: the clock, the backoff bounds, and
// whether to leave out the expiry timer (to exercise Take's own check).
type options struct {
	now        func() time.Time
	bmin, bmax time.Duration
	noExpirer  bool
}

func newPool[T any](cfg Config[T], o options) (*Pool[T], error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.Fillers == 0 {
		cfg.Fillers = cfg.Size
	}
	p := &Pool[T]{
		cfg:     cfg,
		now:     o.now,
		bmin:    o.bmin,
		bmax:    o.bmax,
		expire:  cfg.MaxAge > 0 && !o.noExpirer,
		rearm:   make(chan struct{}, 1),
		changed: make(chan struct{}),
	}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	p.need = sync.NewCond(&p.mu)
	p.wg.Add(cfg.Fillers)
	for range cfg.Fillers {
		go p.filler()
	}
	if p.expire {
		p.wg.Add(1)
		go p.expirer()
	}
	return p, nil
}

// Take hands out the oldest ready item that has not expired (first in,
// first out), with its age (the time since its Fill returned), and starts a
// refill for every item it removed. Expired items it meets are destroyed,
// off the caller's goroutine. It never waits for a fill: ok is false when nothing fresh is
// ready or the pool is closed.
func (p *Pool[T]) Take() (item T, age time.Duration, ok bool) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return item, 0, false
	}
	now := p.now()
	var expired []T
	removed := 0
	for len(p.ready) > 0 {
		e := p.popLocked()
		removed++
		a := now.Sub(e.born)
		if p.expiredAt(a) {
			expired = append(expired, e.item)
			continue
		}
		item, age, ok = e.item, a, true
		break
	}
	if removed > 0 {
		p.need.Broadcast()
	}
	if len(expired) > 0 {
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.destroyAll(expired)
		}()
	}
	p.mu.Unlock()
	return item, age, ok
}

// TakeWait is Take, but when nothing is ready while more fills are running
// than callers wait in TakeWait, it waits for one of them, at most max or
// until ctx ends: under load a request then takes a sandbox already being
// started rather than start one more beside it, one waiter per fill. With
// no such fill it returns at once.
func (p *Pool[T]) TakeWait(ctx context.Context, max time.Duration) (item T, age time.Duration, ok bool) {
	var deadline <-chan time.Time
	waiting := false
	defer func() {
		if waiting {
			p.mu.Lock()
			p.waiters--
			p.mu.Unlock()
		}
	}()
	for {
		if item, age, ok = p.Take(); ok {
			return item, age, true
		}
		p.mu.Lock()
		closed, changed := p.closed, p.changed
		if !waiting && p.waiters < p.inflight {
			waiting = true
			p.waiters++
		}
		p.mu.Unlock()
		if closed || !waiting {
			return item, 0, false
		}
		if deadline == nil {
			t := time.NewTimer(max)
			defer t.Stop()
			deadline = t.C
		}
		select {
		case <-changed:
		case <-deadline:
			return item, 0, false
		case <-ctx.Done():
			return item, 0, false
		}
	}
}

// Ready reports how many items are ready now (expired ones not yet
// destroyed included).
func (p *Pool[T]) Ready() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.ready)
}

// WaitReady blocks until at least min(n, Size) items are ready. It returns
// ctx's error if ctx ends first, and ErrClosed once the pool is closed.
func (p *Pool[T]) WaitReady(ctx context.Context, n int) error {
	n = min(n, p.cfg.Size)
	for {
		p.mu.Lock()
		closed, have, changed := p.closed, len(p.ready), p.changed
		p.mu.Unlock()
		switch {
		case closed:
			return fmt.Errorf("wait for ready items: %w", ErrClosed)
		case have >= n:
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for ready items: %w", ctx.Err())
		case <-changed:
		}
	}
}

// Err returns the last fill's error, or nil if no fill has failed since the
// last success.
func (p *Pool[T]) Err() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// Close stops refilling, ends the fills' ctx, waits for every fill in
// flight and every pending Destroy, and destroys every ready item and any
// item a fill returns after Close began. When it returns, no goroutine of
// the pool is left and every item made and not taken has been destroyed.
// It is idempotent and safe concurrently with every other method; a
// concurrent second Close returns when the first is done.
func (p *Pool[T]) Close() {
	p.once.Do(func() {
		p.mu.Lock()
		p.closed = true
		left := make([]T, 0, len(p.ready))
		for len(p.ready) > 0 {
			left = append(left, p.popLocked().item)
		}
		close(p.changed)
		p.need.Broadcast()
		p.mu.Unlock()
		p.cancel()
		p.destroyAll(left)
		p.wg.Wait()
	})
}

// filler runs fills, one at a time, while the pool is short of Size.
func (p *Pool[T]) filler() {
	defer p.wg.Done()
	for {
		p.mu.Lock()
		for !p.closed && len(p.ready)+p.inflight >= p.cfg.Size {
			p.need.Wait()
		}
		if p.closed {
			p.mu.Unlock()
			return
		}
		p.inflight++
		p.mu.Unlock()

		item, err := p.cfg.Fill(p.ctx)

		p.mu.Lock()
		p.inflight--
		if p.closed {
			p.mu.Unlock()
			if err == nil {
				p.cfg.Destroy(item)
			}
			return
		}
		if err != nil {
			err = fmt.Errorf("fill pool item: %w", err)
			p.err = err
			p.failures++
			delay := p.backoff(p.failures)
			p.mu.Unlock()
			if p.cfg.OnError != nil {
				p.cfg.OnError(err)
			}
			t := time.NewTimer(delay)
			select {
			case <-t.C:
			case <-p.ctx.Done():
				t.Stop()
			}
			continue
		}
		p.err, p.failures = nil, 0
		wasEmpty := len(p.ready) == 0
		p.ready = append(p.ready, entry[T]{item: item, born: p.now()})
		close(p.changed)
		p.changed = make(chan struct{})
		p.mu.Unlock()
		if wasEmpty && p.expire {
			select {
			case p.rearm <- struct{}{}:
			default:
			}
		}
	}
}

// expirer destroys ready items once they outlive MaxAge, sleeping until
// the oldest one's deadline; removing them lets the fillers replace them.
func (p *Pool[T]) expirer() {
	defer p.wg.Done()
	t := time.NewTimer(0)
	t.Stop()
	for {
		select {
		case <-p.ctx.Done():
			t.Stop()
			return
		case <-p.rearm:
		case <-t.C:
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			continue // Close destroys what is left; wait for ctx
		}
		now := p.now()
		var expired []T
		for len(p.ready) > 0 && p.expiredAt(now.Sub(p.ready[0].born)) {
			expired = append(expired, p.popLocked().item)
		}
		if len(expired) > 0 {
			p.need.Broadcast()
		}
		next, more := time.Duration(0), len(p.ready) > 0
		if more {
			next = p.ready[0].born.Add(p.cfg.MaxAge).Sub(now)
		}
		p.mu.Unlock()
		p.destroyAll(expired)
		if more {
			t.Reset(max(next, 0))
		} else {
			t.Stop()
		}
	}
}

// expiredAt says whether an item of age a has outlived MaxAge.
func (p *Pool[T]) expiredAt(a time.Duration) bool {
	return p.cfg.MaxAge > 0 && a > p.cfg.MaxAge
}

// popLocked removes the oldest ready item; mu is held and ready non-empty.
func (p *Pool[T]) popLocked() entry[T] {
	e := p.ready[0]
	p.ready[0] = entry[T]{} // drop the reference
	p.ready = p.ready[1:]
	return e
}

// backoff is the delay after the n-th consecutive failure (n >= 1).
func (p *Pool[T]) backoff(n int) time.Duration {
	d := p.bmin
	for i := 1; i < n && d < p.bmax; i++ {
		d *= 2
	}
	return min(d, p.bmax)
}

func (p *Pool[T]) destroyAll(items []T) {
	for _, it := range items {
		p.cfg.Destroy(it)
	}
}
