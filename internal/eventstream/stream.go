// Package eventstream writes the API's NDJSON event stream (api.Event, one
// JSON object a line) for the two places that serve it: psych serve's HTTP
// responses (server) and psych run --events and psych call --events on
// stdout (the embedded transport).
//
// A Stream never blocks its producers (a run's output, its calls): events
// are queued, and one writer goroutine (Serve) writes them. The queue holds
// at most the Stream's cap: a reader that falls further behind gets
// error{slow_consumer} as the terminal event and the Stream's onSlow runs
// (its run is cancelled). Exactly one terminal event is written; nothing
// after it.
package eventstream

import (
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/psych-runtime/psych/api"
)

// ErrGone: a write to the reader failed; the stream is over and later
// events are dropped.
var ErrGone = errors.New("the client stopped reading")

// Stream is one event stream. Make one with New.
type Stream struct {
	max    int
	onSlow func()

	mu    sync.Mutex
	queue [][]byte
	// bytes are the events queued or being written: the reader's lag.
	bytes int
	ended bool // a terminal event is queued (or the stream is over)
	gone  bool // the reader is gone: nothing more is written
	wake  chan struct{}
}

// New makes a Stream that queues at most max bytes; onSlow runs once when
// a reader falls further behind.
func New(max int, onSlow func()) *Stream {
	return &Stream{max: max, onSlow: onSlow, wake: make(chan struct{}, 1)}
}

// Encode is one event as its stream's line: its JSON and a newline.
func Encode(ev api.Event) ([]byte, error) {
	line, err := json.Marshal(ev)
	if err != nil {
		return nil, err
	}
	return append(line, '\n'), nil
}

// Send queues a non-terminal event. It never blocks; it reports false once
// the stream ended or the reader is gone, when the event is dropped.
func (s *Stream) Send(ev api.Event) bool {
	line, err := Encode(ev)
	if err != nil {
		return false
	}
	s.mu.Lock()
	if s.ended || s.gone {
		s.mu.Unlock()
		return false
	}
	if s.bytes+len(line) > s.max {
		// The reader fell behind by more than the cap: what is queued is
		// dropped, and the stream ends here.
		for _, b := range s.queue {
			s.bytes -= len(b)
		}
		s.queue = nil
		s.queueTerminalLocked(api.Event{Event: api.EventError, Error: &api.Error{
			Code: api.CodeSlowConsumer, Message: "the client fell behind the run's output by more than the cap; the run is cancelled"}})
		s.mu.Unlock()
		s.onSlow()
		return false
	}
	s.queue = append(s.queue, line)
	s.bytes += len(line)
	s.mu.Unlock()
	s.signal()
	return true
}

// End queues the terminal event, unless one is queued already (the first
// wins). It reports whether ev is the stream's terminal event.
func (s *Stream) End(ev api.Event) bool {
	s.mu.Lock()
	if s.ended {
		s.mu.Unlock()
		return false
	}
	s.queueTerminalLocked(ev)
	s.mu.Unlock()
	return true
}

func (s *Stream) queueTerminalLocked(ev api.Event) {
	line, err := Encode(ev)
	if err != nil { // a Result always encodes; a bug must still end the stream
		line, _ = Encode(api.Event{Event: api.EventError, Error: &api.Error{Code: api.CodeHostFault, Message: "encode the terminal event: " + err.Error()}})
	}
	s.queue = append(s.queue, line)
	s.bytes += len(line) // beyond the cap: the terminal event always goes
	s.ended = true
	s.signal()
}

func (s *Stream) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Serve writes the queued events with write as they come, a keepalive
// after keepalive of silence, until the terminal event is written (nil) or
// a write fails (ErrGone: the stream is over and later events are
// dropped). write must bound its own wait where it can.
func (s *Stream) Serve(write func([]byte) error, keepalive time.Duration) error {
	ka, _ := Encode(api.Event{Event: api.EventKeepalive})
	t := time.NewTimer(keepalive)
	defer t.Stop()
	gone := func() error {
		s.mu.Lock()
		s.gone, s.ended, s.queue = true, true, nil
		s.mu.Unlock()
		return ErrGone
	}
	for {
		s.mu.Lock()
		batch := s.queue
		s.queue = nil
		last := s.ended && len(batch) > 0
		s.mu.Unlock()
		for _, b := range batch {
			if err := write(b); err != nil {
				return gone()
			}
			s.mu.Lock()
			s.bytes -= len(b)
			s.mu.Unlock()
		}
		if last {
			return nil
		}
		if len(batch) > 0 {
			if !t.Stop() {
				select {
				case <-t.C:
				default:
				}
			}
			t.Reset(keepalive)
		}
		select {
		case <-s.wake:
		case <-t.C:
			if err := write(ka); err != nil {
				return gone()
			}
			t.Reset(keepalive)
		}
	}
}
