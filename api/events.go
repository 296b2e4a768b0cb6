package api

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/psych-runtime/psych/sandbox"
)

// Event names. Exactly one terminal event (result, outcome, error) ends a
// stream.
const (
	EventStarted   = "started"   // id, warm
	EventStdout    = "stdout"    // data
	EventStderr    = "stderr"    // data
	EventCall      = "call"      // call_id, tool, args: answer with a CallAnswer
	EventApproval  = "approval"  // call_id, tool, args: answer with an ApprovalAnswer
	EventKeepalive = "keepalive" // after KeepaliveInterval of silence
	EventResult    = "result"    // result: a run's end
	EventOutcome   = "outcome"   // outcome: a direct call's end
	EventError     = "error"     // error: the run or call ended without one
)

// Event is one line of an event stream. Which fields are set depends on
// Event (see the Event… names).
type Event struct {
	Event string `json:"event"`
	// ID is the run's (or the direct call's) id, in started.
	ID string `json:"id,omitempty"`
	// Warm, in started, says a pooled sandbox took the run.
	Warm *bool `json:"warm,omitempty"`
	// Data is output, in stdout and stderr: the data of a stream's output
	// events concatenate to exactly the Result's stdout or stderr.
	Data string `json:"data,omitempty"`
	// CallID, Tool and Args describe a call or an approval to answer.
	CallID string          `json:"call_id,omitempty"`
	Tool   string          `json:"tool,omitempty"`
	Args   json.RawMessage `json:"args,omitempty"`
	// Result, Outcome and Error are the terminal events' payloads.
	Result  *sandbox.Result `json:"result,omitempty"`
	Outcome *Outcome        `json:"outcome,omitempty"`
	Error   *Error          `json:"error,omitempty"`
}

// Terminal reports whether e ends its stream.
func (e *Event) Terminal() bool {
	return e.Event == EventResult || e.Event == EventOutcome || e.Event == EventError
}

// DefaultMaxEventBytes bounds one event line a reader accepts: a result
// event carries the whole Result (two capped outputs, JSON-escaped, and a
// value).
const DefaultMaxEventBytes = 64 << 20

// Errors of an event stream.
var (
	// ErrNoTerminal: the stream ended without a terminal event. A client
	// reports it as a fault, never as a success.
	ErrNoTerminal = errors.New("event stream ended without a terminal event")
	// ErrBadEvent: a line that is not one well-formed event.
	ErrBadEvent = errors.New("bad event")
)

// EventReader reads an event stream, one bounded line at a time.
type EventReader struct {
	r     *bufio.Reader
	max   int
	ended bool
	line  []byte
}

// NewEventReader reads events from r; a line longer than max bytes (zero
// is DefaultMaxEventBytes) is ErrBadEvent.
func NewEventReader(r io.Reader, max int) *EventReader {
	if max <= 0 {
		max = DefaultMaxEventBytes
	}
	return &EventReader{r: bufio.NewReaderSize(r, 64<<10), max: max}
}

// Next returns the next event. After the terminal event it returns io.EOF;
// a stream that ends before one gives ErrNoTerminal; a malformed line, an
// event without a name, a terminal event without its payload, or data
// after the terminal event give ErrBadEvent. Fields it does not know are
// ignored. Blank lines are skipped.
func (er *EventReader) Next() (*Event, error) {
	for {
		line, err := er.readLine()
		if err == io.EOF {
			if er.ended {
				return nil, io.EOF
			}
			return nil, ErrNoTerminal
		}
		if err != nil {
			return nil, err
		}
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		if er.ended {
			return nil, fmt.Errorf("%w: data after the terminal event", ErrBadEvent)
		}
		var ev Event
		if err := json.Unmarshal(line, &ev); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrBadEvent, err)
		}
		if err := ev.check(); err != nil {
			return nil, err
		}
		er.ended = ev.Terminal()
		return &ev, nil
	}
}

func (ev *Event) check() error {
	bad := ""
	switch ev.Event {
	case "":
		bad = "no event name"
	case EventResult:
		if ev.Result == nil {
			bad = "a result event without its result"
		}
	case EventOutcome:
		if ev.Outcome == nil {
			bad = "an outcome event without its outcome"
		}
	case EventError:
		if ev.Error == nil || ev.Error.Code == "" {
			bad = "an error event without its error"
		}
	case EventCall, EventApproval:
		if ev.CallID == "" || ev.Tool == "" {
			bad = "a " + ev.Event + " event without call_id or tool"
		}
	}
	if bad != "" {
		return fmt.Errorf("%w: %s", ErrBadEvent, bad)
	}
	return nil
}

// readLine returns one line without its newline, holding at most max bytes.
func (er *EventReader) readLine() ([]byte, error) {
	er.line = er.line[:0]
	for {
		chunk, err := er.r.ReadSlice('\n')
		if len(er.line)+len(chunk) > er.max+1 {
			return nil, fmt.Errorf("%w: a line longer than %d bytes", ErrBadEvent, er.max)
		}
		er.line = append(er.line, chunk...)
		switch {
		case err == nil:
			return er.line[:len(er.line)-1], nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case err == io.EOF && len(er.line) > 0:
			return er.line, nil // a last line without its newline
		default:
			return nil, err
		}
	}
}
