package server

import (
	"strings"
	"testing"

	"github.com/psych-runtime/psych/api"
)

// TestStreamBound: a stream nobody reads holds at most its cap: past it
// the queued events are dropped, the terminal event is error{slow_consumer},
// onSlow runs once, and later events (a result included) are dropped.
func TestStreamBound(t *testing.T) {
	slow := 0
	s := newStream(64<<10, func() { slow++ })
	data := strings.Repeat("x", 1000)
	sent := 0
	for i := 0; i < 10000; i++ {
		if s.send(api.Event{Event: api.EventStdout, Data: data}) {
			sent++
		}
		s.mu.Lock()
		held := s.bytes
		s.mu.Unlock()
		if held > 64<<10+1024 { // the cap and the terminal event's line
			t.Fatalf("after %d events the stream holds %d bytes, past its cap", i+1, held)
		}
	}
	if slow != 1 || sent == 0 || sent > 64 {
		t.Fatalf("onSlow ran %d times, %d events queued; want once, fewer than 65", slow, sent)
	}
	if s.end(api.Event{Event: api.EventResult}) {
		t.Fatal("a result after the slow consumer's error became the terminal event")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.queue) != 1 || !strings.Contains(string(s.queue[0]), api.CodeSlowConsumer) {
		t.Fatalf("queue %q, want only error{slow_consumer}", s.queue)
	}
}
