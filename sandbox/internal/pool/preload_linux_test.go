//go:build linux && cgo

package pool

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestPreloadFDBounded: a pooled interpreter that never sends its
// preloaded frame holds its fill no longer than the timeout, nor past the
// pool's close (ctx); one that sends it is read, and one that hangs up is
// an error at once.
func TestPreloadFDBounded(t *testing.T) {
	pair := func() (int, int) {
		fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { unix.Close(fds[0]); unix.Close(fds[1]) })
		return fds[0], fds[1]
	}
	host, _ := pair()
	start := time.Now()
	if _, err := PreloadFD(context.Background(), host, 200*time.Millisecond); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("silent child: %v, want a deadline error", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("silent child held the fill %v", d)
	}

	host, _ = pair()
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	if _, err := PreloadFD(ctx, host, time.Hour); !errors.Is(err, context.Canceled) {
		t.Errorf("pool closed: %v, want context.Canceled", err)
	}

	host, child := pair()
	unix.Write(child, frame(`{"type":"preloaded","env":["A"],"all":false,"modules":[]}`))
	if p, err := PreloadFD(context.Background(), host, time.Minute); err != nil || len(p.Env) != 1 {
		t.Errorf("a frame: %+v, %v", p, err)
	}

	host, child = pair()
	unix.Shutdown(child, unix.SHUT_WR)
	if _, err := PreloadFD(context.Background(), host, time.Minute); err == nil {
		t.Error("a child that hung up: no error")
	}
}
