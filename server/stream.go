package server

import (
	"encoding/json"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/psych-runtime/psych/api"
)

// stream is one response's NDJSON event stream. Producers (the run's
// output, its calls) queue events without blocking; the request's own
// goroutine writes them (serve). The queue holds at most max bytes: a
// client that falls further behind gets error{slow_consumer} and onSlow
// runs (its run is cancelled). Exactly one terminal event is written.
type stream struct {
	max    int
	onSlow func()

	mu    sync.Mutex
	queue [][]byte
	// bytes are the events queued or being written: the client's lag.
	bytes int
	ended bool // a terminal event is queued (or the stream is over)
	gone  bool // the client is gone: nothing more is written
	wake  chan struct{}
}

func newStream(max int, onSlow func()) *stream {
	return &stream{max: max, onSlow: onSlow, wake: make(chan struct{}, 1)}
}

// send queues a non-terminal event. It never blocks; it reports false once
// the stream ended or the client is gone, when the event is dropped.
func (s *stream) send(ev api.Event) bool {
	line, err := json.Marshal(ev)
	if err != nil {
		return false
	}
	line = append(line, '\n')
	s.mu.Lock()
	if s.ended || s.gone {
		s.mu.Unlock()
		return false
	}
	if s.bytes+len(line) > s.max {
		// The client fell behind by more than the cap: what is queued is
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

// end queues the terminal event, unless one is queued already (the first
// wins). It reports whether ev is the stream's terminal event.
func (s *stream) end(ev api.Event) bool {
	s.mu.Lock()
	if s.ended {
		s.mu.Unlock()
		return false
	}
	s.queueTerminalLocked(ev)
	s.mu.Unlock()
	return true
}

func (s *stream) queueTerminalLocked(ev api.Event) {
	line, err := json.Marshal(ev)
	if err != nil { // a Result always encodes; a bug must still end the stream
		line, _ = json.Marshal(api.Event{Event: api.EventError, Error: &api.Error{Code: api.CodeHostFault, Message: "encode the terminal event: " + err.Error()}})
	}
	line = append(line, '\n')
	s.queue = append(s.queue, line)
	s.bytes += len(line) // beyond the cap: the terminal event always goes
	s.ended = true
	s.signal()
}

func (s *stream) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// errClientGone: a write to the client failed or timed out.
var errClientGone = errors.New("the client stopped reading")

// serve writes the queued events as they come, a keepalive after
// keepalive of silence, each write bounded by writeTimeout, until the
// terminal event is written (nil) or a write fails (errClientGone: the
// stream is over and later events are dropped).
func (s *stream) serve(w http.ResponseWriter, keepalive, writeTimeout time.Duration) error {
	rc := http.NewResponseController(w)
	write := func(b []byte) error {
		rc.SetWriteDeadline(time.Now().Add(writeTimeout))
		if _, err := w.Write(b); err != nil {
			return err
		}
		return rc.Flush()
	}
	ka, _ := json.Marshal(api.Event{Event: api.EventKeepalive})
	ka = append(ka, '\n')
	t := time.NewTimer(keepalive)
	defer t.Stop()
	for {
		s.mu.Lock()
		batch := s.queue
		s.queue = nil
		last := s.ended && len(batch) > 0
		s.mu.Unlock()
		for _, b := range batch {
			if err := write(b); err != nil {
				s.mu.Lock()
				s.gone, s.ended, s.queue = true, true, nil
				s.mu.Unlock()
				return errClientGone
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
				s.mu.Lock()
				s.gone, s.ended, s.queue = true, true, nil
				s.mu.Unlock()
				return errClientGone
			}
			t.Reset(keepalive)
		}
	}
}
