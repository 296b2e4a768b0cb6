//go:build linux && cgo

package pool

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/psych-runtime/psych/sandbox"
)

// TestStatusAndWaitWarm: a nil pool (a backend without one) is zero and
// warm at once; a started pool is warm once its Size items are ready, and
// says so.
func TestStatusAndWaitWarm(t *testing.T) {
	var none *Pool[int]
	if st, err := none.Status(), none.WaitWarm(context.Background()); st != (sandbox.PoolStatus{}) || err != nil {
		t.Fatalf("a nil pool: %+v, %v; want zero and nil", st, err)
	}
	p, err := Start(sandbox.PoolConfig{Size: 2}, func(context.Context) (int, error) { return 1, nil }, func(int) {}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.WaitWarm(ctx); err != nil {
		t.Fatal(err)
	}
	if st := p.Status(); st != (sandbox.PoolStatus{Size: 2, Ready: 2}) {
		t.Fatalf("a warm pool of 2: %+v", st)
	}
}
