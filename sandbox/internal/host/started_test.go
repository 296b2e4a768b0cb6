package host

import (
	"context"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/psych-runtime/psych/sandbox"
	"github.com/psych-runtime/psych/sandbox/wire"
)

// TestStartedFirst: Begin tells Request.Started once, with Setup.Warm,
// before the start frame is sent and before any output (already waiting in
// the pipe) is handed to Output; a Started that panics is recovered, and
// the run's start frame and output go on.
func TestStartedFirst(t *testing.T) {
	for _, c := range []struct {
		name        string
		warm, panic bool
	}{{"cold", false, false}, {"warm", true, false}, {"panics", true, true}} {
		t.Run(c.name, func(t *testing.T) {
			var calls, warmCalls, outputBefore, framesBefore atomic.Int32
			var frameSeen atomic.Bool
			started := func(warm bool) {
				calls.Add(1)
				if warm {
					warmCalls.Add(1)
				}
				if frameSeen.Load() {
					framesBefore.Add(1)
				}
				if c.panic {
					panic("started")
				}
			}
			var streamed strings.Builder
			done := make(chan struct{})
			output := func(s sandbox.Stream, data string) {
				if calls.Load() == 0 {
					outputBefore.Add(1)
				}
				streamed.WriteString(data) // stdout's calls alone: one at a time
			}
			req, err := Prepare(sandbox.Request{Code: "x", Started: started, Output: output}, sandbox.DefaultLimits(), wire.DefaultMaxFrame, nil)
			if err != nil {
				t.Fatal(err)
			}
			hostEnd, child := net.Pipe()
			f := &fakeRun{exited: make(chan struct{}), child: child}
			go func() {
				defer close(done)
				if _, err := wire.NewDecoder(child, 0).Next(); err == nil {
					frameSeen.Store(true)
				}
			}()
			e := Begin(context.Background(), Setup{Request: req, Wire: hostEnd, MaxFrame: wire.DefaultMaxFrame, MaxOutput: 1 << 20,
				Stdout: strings.NewReader("early output"), Stderr: strings.NewReader(""),
				Exited: f.exited, Kill: f.kill, Started: time.Now(), Warm: c.warm})
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("no start frame was sent")
			}
			f.kill()
			if err := e.Supervise(context.Background()); err != nil {
				t.Fatal(err)
			}
			e.Finish()
			res := e.Result(Outcome{})
			if n := calls.Load(); n != 1 {
				t.Fatalf("Started called %d times; want once", n)
			}
			if got := warmCalls.Load() == 1; got != c.warm {
				t.Errorf("Started(warm %v); want %v", got, c.warm)
			}
			if !frameSeen.Load() {
				t.Error("the start frame never reached the program")
			}
			if framesBefore.Load() != 0 {
				t.Error("Started was called after the program had its start frame")
			}
			if outputBefore.Load() != 0 {
				t.Error("Output was called before Started")
			}
			if streamed.String() != "early output" || res.Stdout != "early output" {
				t.Errorf("streamed %q, Result stdout %q; want both %q", streamed.String(), res.Stdout, "early output")
			}
		})
	}
}
