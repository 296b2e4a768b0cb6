package eventstream

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/psych-runtime/psych/api"
)

// TestStreamBound: a stream nobody reads holds at most its cap: past it
// the queued events are dropped, the terminal event is error{slow_consumer},
// onSlow runs once, and later events (a result included) are dropped.
func TestStreamBound(t *testing.T) {
	slow := 0
	s := New(64<<10, func() { slow++ })
	data := strings.Repeat("x", 1000)
	sent := 0
	for i := 0; i < 10000; i++ {
		if s.Send(api.Event{Event: api.EventStdout, Data: data}) {
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
	if s.End(api.Event{Event: api.EventResult}) {
		t.Fatal("a result after the slow consumer's error became the terminal event")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.queue) != 1 || !strings.Contains(string(s.queue[0]), api.CodeSlowConsumer) {
		t.Fatalf("queue %q, want only error{slow_consumer}", s.queue)
	}
}

// TestServeOrder: Serve writes the events in order, ends after the
// terminal event (the first End wins), and a failing write ends it with
// ErrGone and drops what comes later.
func TestServeOrder(t *testing.T) {
	s := New(1<<20, func() {})
	s.Send(api.Event{Event: api.EventStdout, Data: "a"})
	s.Send(api.Event{Event: api.EventStderr, Data: "b"})
	if !s.End(api.Event{Event: api.EventError, Error: &api.Error{Code: api.CodeCancelled}}) {
		t.Fatal("the first End was not the terminal event")
	}
	if s.End(api.Event{Event: api.EventError, Error: &api.Error{Code: api.CodeHostFault}}) || s.Send(api.Event{Event: api.EventStdout, Data: "c"}) {
		t.Fatal("an event after the terminal one was taken")
	}
	var got []string
	if err := s.Serve(func(b []byte) error { got = append(got, string(b)); return nil }, time.Hour); err != nil {
		t.Fatal(err)
	}
	want := []string{`{"event":"stdout","data":"a"}` + "\n", `{"event":"stderr","data":"b"}` + "\n", `{"event":"error","error":{"code":"cancelled","message":"","retryable":false}}` + "\n"}
	if strings.Join(got, "") != strings.Join(want, "") {
		t.Fatalf("wrote %q, want %q", got, want)
	}

	s = New(1<<20, func() {})
	s.Send(api.Event{Event: api.EventStdout, Data: "a"})
	if err := s.Serve(func([]byte) error { return errors.New("broken pipe") }, time.Hour); !errors.Is(err, ErrGone) {
		t.Fatalf("Serve with a failing write: %v, want ErrGone", err)
	}
	if s.Send(api.Event{Event: api.EventStdout, Data: "b"}) || s.End(api.Event{Event: api.EventResult}) {
		t.Fatal("an event after the reader was gone was taken")
	}
}
