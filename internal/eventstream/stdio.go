package eventstream

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/psych-runtime/psych/api"
)

// MaxAnswerBytes bounds one answer line on stdin (a call's value).
const MaxAnswerBytes = 16 << 20

// ErrLineTooLong: a line past its cap.
var ErrLineTooLong = errors.New("line too long")

// ErrNoAnswers: the client closed its answers (stdin) before answering.
var ErrNoAnswers = errors.New("the client's answers ended (stdin closed) before this call was answered")

// Stdio is the embedded transport's side of a run or call: its events go
// to a Stream, and the client's answers (api.Answer lines) come from a
// reader, each handed to the call or approval waiting for it. A call or
// approval id is answered once; an answer to nothing waiting is reported
// to warn and dropped.
type Stdio struct {
	*Stream

	mu      sync.Mutex
	closed  bool // the answers ended
	pending map[key]chan *api.Answer
}

type key struct {
	approval bool
	id       string
}

// NewStdio makes a Stdio over a Stream of max bytes (see New).
func NewStdio(max int, onSlow func()) *Stdio {
	return &Stdio{Stream: New(max, onSlow), pending: map[key]chan *api.Answer{}}
}

// ReadLine reads one line of at most max bytes from r (without its
// newline). A longer one is read to its end and dropped: ErrLineTooLong. A
// last line without a newline counts.
func ReadLine(r *bufio.Reader, max int) ([]byte, error) {
	var line []byte
	over := false
	for {
		chunk, err := r.ReadSlice('\n')
		if !over && len(line)+len(chunk) > max+1 {
			over, line = true, nil
		}
		if !over {
			line = append(line, chunk...)
		}
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case over && (err == nil || err == io.EOF):
			return nil, fmt.Errorf("read a line: %w: more than %d bytes", ErrLineTooLong, max)
		case err == nil:
			return line[:len(line)-1], nil
		case err == io.EOF && len(line) > 0:
			return line, nil
		default:
			return nil, err
		}
	}
}

// ReadAnswers reads answer lines from r until it ends, delivering each;
// then every call still waiting, and every later one, fails with
// ErrNoAnswers. A line that is not one answer, or that answers nothing
// waiting, is reported to warn and dropped.
func (s *Stdio) ReadAnswers(r *bufio.Reader, warn func(string)) {
	defer func() {
		s.mu.Lock()
		s.closed = true
		for k, ch := range s.pending {
			close(ch)
			delete(s.pending, k)
		}
		s.mu.Unlock()
	}()
	for {
		line, err := ReadLine(r, MaxAnswerBytes)
		if err == io.EOF {
			return
		}
		if errors.Is(err, ErrLineTooLong) {
			warn("an answer: " + err.Error())
			continue
		}
		if err != nil {
			warn("read the answers: " + err.Error())
			return
		}
		if len(line) == 0 {
			continue
		}
		var a api.Answer
		if err := api.DecodeStrict(line, &a); err != nil {
			warn(fmt.Sprintf("an answer: %v", err))
			continue
		}
		if err := s.deliver(&a); err != nil {
			warn(fmt.Sprintf("an answer: %v", err))
		}
	}
}

func (s *Stdio) deliver(a *api.Answer) error {
	n := 0
	for _, set := range []bool{a.Value != nil, a.Error != nil, a.Approve != nil} {
		if set {
			n++
		}
	}
	if n != 1 || a.CallID == "" {
		return errors.New("want call_id and exactly one of value, error and approve")
	}
	k := key{approval: a.Approve != nil, id: a.CallID}
	s.mu.Lock()
	defer s.mu.Unlock()
	ch := s.pending[k]
	if ch == nil {
		return fmt.Errorf("no call %.64q waits for this answer", a.CallID)
	}
	delete(s.pending, k)
	ch <- a
	return nil
}

func (s *Stdio) wait(ctx context.Context, k key, ev api.Event) (*api.Answer, error) {
	ch := make(chan *api.Answer, 1)
	s.mu.Lock()
	switch {
	case s.closed:
		s.mu.Unlock()
		return nil, ErrNoAnswers
	case s.pending[k] != nil:
		s.mu.Unlock()
		return nil, fmt.Errorf("call id %s is in use", k.id)
	}
	s.pending[k] = ch
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		if s.pending[k] == ch {
			delete(s.pending, k)
		}
		s.mu.Unlock()
	}()
	if !s.Send(ev) {
		return nil, errors.New("the client's event stream has ended")
	}
	select {
	case a, ok := <-ch:
		if !ok {
			return nil, ErrNoAnswers
		}
		return a, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("no answer came: %w", ctx.Err())
	}
}

// Call sends a call event and waits for its answer: the value, or the
// client's error as an error.
func (s *Stdio) Call(ctx context.Context, callID, tool string, args json.RawMessage) (json.RawMessage, error) {
	a, err := s.wait(ctx, key{id: callID}, api.Event{Event: api.EventCall, CallID: callID, Tool: tool, Args: args})
	if err != nil {
		return nil, fmt.Errorf("client tool %s: %w", tool, err)
	}
	if a.Value == nil {
		if a.Error == nil {
			return nil, fmt.Errorf("client tool %s: an approval's answer to a call", tool)
		}
		return nil, errors.New(*a.Error)
	}
	return a.Value, nil
}

// Approve sends an approval event and waits for its answer.
func (s *Stdio) Approve(ctx context.Context, callID, tool string, args json.RawMessage) (approved bool, reason string, err error) {
	a, err := s.wait(ctx, key{approval: true, id: callID}, api.Event{Event: api.EventApproval, CallID: callID, Tool: tool, Args: args})
	if err != nil {
		return false, "", fmt.Errorf("approve %s: %w", tool, err)
	}
	return *a.Approve, a.Reason, nil
}
