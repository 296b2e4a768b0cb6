package server

import (
	"errors"
	"net/http"
	"time"

	"github.com/psych-runtime/psych/api"
	"github.com/psych-runtime/psych/internal/eventstream"
)

// stream is one response's NDJSON event stream: an eventstream.Stream
// (shared with psych run --events) written to the HTTP response, each
// write bounded and flushed.
type stream struct{ s *eventstream.Stream }

func newStream(max int, onSlow func()) *stream {
	return &stream{eventstream.New(max, onSlow)}
}

func (s *stream) send(ev api.Event) bool { return s.s.Send(ev) }
func (s *stream) end(ev api.Event) bool  { return s.s.End(ev) }

// errClientGone: a write to the client failed or timed out.
var errClientGone = eventstream.ErrGone

// serve writes the queued events as they come, a keepalive after
// keepalive of silence, each write bounded by writeTimeout, until the
// terminal event is written (nil) or a write fails (errClientGone: the
// stream is over and later events are dropped).
func (s *stream) serve(w http.ResponseWriter, keepalive, writeTimeout time.Duration) error {
	rc := http.NewResponseController(w)
	err := s.s.Serve(func(b []byte) error {
		rc.SetWriteDeadline(time.Now().Add(writeTimeout))
		if _, err := w.Write(b); err != nil {
			return err
		}
		return rc.Flush()
	}, keepalive)
	if errors.Is(err, eventstream.ErrGone) {
		return errClientGone
	}
	return err
}
