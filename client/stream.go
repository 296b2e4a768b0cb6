package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/psych-runtime/psych/api"
	"github.com/psych-runtime/psych/sandbox"
)

// Handler takes a stream's events. Every field may be nil.
type Handler struct {
	// Started gets the run's (or the direct call's) id, and whether a
	// pooled sandbox took it.
	Started func(id string, warm bool)
	// Output gets each stdout and stderr event's data, in order, as the
	// program writes it (stream is "stdout" or "stderr"). It is called on
	// the stream's reading goroutine and must return quickly: a client
	// that falls behind by more than the output cap has its run cancelled
	// by the server (slow_consumer).
	Output func(stream, data string)
	// Call answers a call event: a call of a tool this client declared.
	// Its value (nil is null) or its error goes back to the server. ctx
	// ends when the stream does. Calls are answered on goroutines of
	// their own, so output keeps flowing meanwhile. Nil answers every
	// call with an error.
	Call func(ctx context.Context, c CallEvent) (json.RawMessage, error)
	// Approve answers an approval event (a destructive tool this client
	// declared): approve or deny, with a reason. The run is frozen
	// meanwhile. Nil denies every one.
	Approve func(ctx context.Context, c CallEvent) (approve bool, reason string)
}

// CallEvent is a call or an approval to answer.
type CallEvent struct {
	// RunID is the run's id (a direct call's own id for Call), CallID the
	// call's: Suspend and Resume take them.
	RunID, CallID string
	Tool          string
	Args          json.RawMessage
}

// Stream asks for a run (POST /v1/runs) as an event stream, hands its
// events to h, and returns the Result of its terminal result event. A
// refusal, or an error event, is an error (errors.As finds the *api.Error);
// a stream that ends without a terminal event, or is silent past
// Options.IdleTimeout, is an ErrProtocol. When ctx ends first the run is
// cancelled (DELETE, then the connection is closed) and ctx's error
// returned.
func (c *Client) Stream(ctx context.Context, req api.RunRequest, h Handler) (*sandbox.Result, error) {
	ev, err := c.stream(ctx, "/runs", req, req.ID, h)
	if err != nil {
		return nil, fmt.Errorf("run: %w", err)
	}
	if ev.Event != api.EventResult {
		return nil, fmt.Errorf("run: %w: the stream ended with %.32q, not a result", ErrProtocol, ev.Event)
	}
	if string(ev.Result.Value) == "null" {
		// A program that returned nothing has no Value, as on the
		// library: JSON's null decodes as the bytes "null".
		ev.Result.Value = nil
	}
	return ev.Result, nil
}

// Call makes one direct call of a tool (POST /v1/calls), the server's or
// one req declares, through the server's tool path, and returns its
// Outcome: a bad argument, a denial and the tool's failure are outcomes,
// not errors. Calls of the tools req declares, and their approvals, go to
// h.
func (c *Client) Call(ctx context.Context, req api.CallRequest, h Handler) (*api.Outcome, error) {
	ev, err := c.stream(ctx, "/calls", req, req.ID, h)
	if err != nil {
		return nil, fmt.Errorf("call %.64q: %w", req.Tool, err)
	}
	if ev.Event != api.EventOutcome {
		return nil, fmt.Errorf("call %.64q: %w: the stream ended with %.32q, not an outcome", req.Tool, ErrProtocol, ev.Event)
	}
	return ev.Outcome, nil
}

// Suspend freezes a run while this client works on one of its calls
// (POST /v1/runs/{id}/calls/{call_id}/suspend): the run's wall clock stops
// until Resume. A refusal wraps sandbox.ErrCannotSuspend.
func (c *Client) Suspend(ctx context.Context, runID, callID string) error {
	if err := c.small(ctx, http.MethodPost, callPath(runID, callID)+"/suspend", nil, nil); err != nil {
		return fmt.Errorf("suspend run %.80q: %w: %w", runID, sandbox.ErrCannotSuspend, err)
	}
	return nil
}

// Resume ends a Suspend (POST /v1/runs/{id}/calls/{call_id}/resume).
func (c *Client) Resume(ctx context.Context, runID, callID string) error {
	if err := c.small(ctx, http.MethodPost, callPath(runID, callID)+"/resume", nil, nil); err != nil {
		return fmt.Errorf("resume run %.80q: %w", runID, err)
	}
	return nil
}

func callPath(runID, callID string) string {
	return "/runs/" + url.PathEscape(runID) + "/calls/" + url.PathEscape(callID)
}

// stream posts body to path asking for events and runs the stream to its
// terminal event, which it returns. id is the run's id as the request set
// it, if it did (the started event's wins).
func (c *Client) stream(ctx context.Context, path string, body any, id string, h Handler) (*api.Event, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	b, err := encode(body)
	if err != nil {
		return nil, err
	}
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	// The idle timer cancels the request when the server is silent too
	// long: it starts once the body is encoded, and every read of the body
	// as it is sent and every event resets it (a large body's upload is
	// not the server's silence).
	var idled atomic.Bool
	timer := time.AfterFunc(c.idle, func() { idled.Store(true); stop() })
	defer timer.Stop()
	silent := func(err error) error {
		if idled.Load() && ctx.Err() == nil {
			return fmt.Errorf("%w: no event for %v", ErrProtocol, c.idle)
		}
		return err
	}

	resp, err := c.send(sctx, http.MethodPost, path, b, func() { timer.Reset(c.idle) }, api.MediaNDJSON)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, silent(err)
	}
	defer resp.Body.Close()
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != api.MediaNDJSON {
		return nil, fmt.Errorf("%w: the answer is %.64q, not an event stream", ErrProtocol, mt)
	}

	s := &session{c: c, h: h, runID: id, ctx: sctx, stop: stop}
	defer s.wait() // after stop: the handlers' contexts have ended
	defer stop()
	er := api.NewEventReader(resp.Body, c.max)
	for {
		if err := s.failed(); err != nil {
			return nil, err // what the reader has buffered goes unread
		}
		timer.Reset(c.idle)
		ev, err := er.Next()
		if err != nil {
			if ctx.Err() != nil {
				s.cancelRun()
				return nil, ctx.Err()
			}
			if err := s.failed(); err != nil {
				return nil, err
			}
			switch {
			case errors.Is(err, api.ErrNoTerminal), errors.Is(err, api.ErrBadEvent):
				return nil, silent(fmt.Errorf("%w: %w", ErrProtocol, err))
			case err == io.EOF: // cannot be: the terminal event returns first
				return nil, fmt.Errorf("%w: %w", ErrProtocol, api.ErrNoTerminal)
			}
			return nil, silent(fmt.Errorf("%w: read the stream: %v", ErrUnreachable, err))
		}
		switch ev.Event {
		case api.EventStarted:
			if ev.ID != "" {
				s.setRunID(ev.ID)
			}
			if h.Started != nil {
				h.Started(ev.ID, ev.Warm != nil && *ev.Warm)
			}
		case api.EventStdout, api.EventStderr:
			if h.Output != nil {
				h.Output(ev.Event, ev.Data)
			}
		case api.EventCall, api.EventApproval:
			s.answer(ev)
		case api.EventError:
			if err := s.failed(); err != nil {
				return nil, err
			}
			if ev.Error.Code == api.CodeCancelled && ctx.Err() != nil {
				return nil, ctx.Err()
			}
			ev.Error.Status = 0
			return nil, ev.Error
		case api.EventResult, api.EventOutcome:
			stop() // the calls still answered end with the stream
			if err := s.failed(); err != nil {
				return nil, err
			}
			return ev, nil
		}
		// keepalive, and events this client does not know: ignored.
	}
}

// session is one stream's state: the run's id and the answers in flight.
type session struct {
	c    *Client
	h    Handler
	ctx  context.Context
	stop context.CancelFunc // ends the stream

	mu      sync.Mutex
	runID   string
	err     error // the first answer that could not be delivered
	pending int   // answers in flight
	wg      sync.WaitGroup
}

// maxPending bounds the calls and approvals a stream may have unanswered at
// once: a program's calls come one at a time (the bootstrap serialises
// them), so a server that sends more is not speaking the API.
const maxPending = 16

func (s *session) setRunID(id string) { s.mu.Lock(); s.runID = id; s.mu.Unlock() }

func (s *session) id() string { s.mu.Lock(); defer s.mu.Unlock(); return s.runID }

func (s *session) failed() error { s.mu.Lock(); defer s.mu.Unlock(); return s.err }

func (s *session) wait() { s.wg.Wait() }

// answer answers a call or an approval event on a goroutine of its own.
func (s *session) answer(ev *api.Event) {
	runID := s.id()
	ce := CallEvent{RunID: runID, CallID: ev.CallID, Tool: ev.Tool, Args: ev.Args}
	s.mu.Lock()
	flood := s.pending >= maxPending
	if !flood {
		s.pending++
	}
	s.mu.Unlock()
	if flood {
		s.fail(fmt.Errorf("%w: more than %d calls unanswered at once", ErrProtocol, maxPending))
		return
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer func() { s.mu.Lock(); s.pending--; s.mu.Unlock() }()
		if runID == "" {
			s.fail(fmt.Errorf("%w: a %s event before the run's id", ErrProtocol, ev.Event))
			return
		}
		var path string
		var body any
		if ev.Event == api.EventApproval {
			approve, reason := false, "this client approves nothing"
			if s.h.Approve != nil {
				approve, reason = s.h.Approve(s.ctx, ce)
			}
			path = "/runs/" + url.PathEscape(runID) + "/approvals/" + url.PathEscape(ev.CallID)
			body = api.ApprovalAnswer{Approve: approve, Reason: reason}
		} else {
			path = callPath(runID, ev.CallID)
			body = callAnswer(s.ctx, s.h, ce)
		}
		if s.ctx.Err() != nil {
			return // the stream ended: nobody waits for the answer
		}
		err := s.c.small(s.ctx, http.MethodPost, path, body, nil)
		var ae *api.Error
		if err != nil && s.ctx.Err() == nil && !(errors.As(err, &ae) && (ae.Status == http.StatusNotFound || ae.Status == http.StatusConflict)) {
			// The program would wait for this answer until its wall
			// limit: end the run instead, and say why.
			s.fail(fmt.Errorf("answer %s %.64q: %w", ev.Event, ev.CallID, err))
		}
	}()
}

// callAnswer runs h.Call and makes its answer: exactly one of a JSON value
// and an error.
func callAnswer(ctx context.Context, h Handler, ce CallEvent) (a api.CallAnswer) {
	if h.Call == nil {
		msg := "this client answers no calls"
		return api.CallAnswer{Error: &msg}
	}
	defer func() {
		if p := recover(); p != nil {
			msg := fmt.Sprintf("the client's handler panicked: %v", p)
			a = api.CallAnswer{Error: &msg}
		}
	}()
	v, err := h.Call(ctx, ce)
	switch {
	case err != nil:
		msg := err.Error()
		return api.CallAnswer{Error: &msg}
	case v == nil:
		return api.CallAnswer{Value: json.RawMessage("null")}
	case !json.Valid(v):
		msg := "the client's handler returned invalid JSON"
		return api.CallAnswer{Error: &msg}
	}
	return api.CallAnswer{Value: v}
}

// fail records the first answer that could not be delivered, cancels the
// run, whose program would otherwise wait for it, and ends the stream.
func (s *session) fail(err error) {
	s.mu.Lock()
	first := s.err == nil
	if first {
		s.err = err
	}
	s.mu.Unlock()
	if first {
		s.cancelRun()
		s.stop()
	}
}

// cancelRun asks the server to cancel the run (bounded, off the stream's
// own context, which may have ended); closing the connection cancels it
// too.
func (s *session) cancelRun() {
	id := s.id()
	if id == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s.c.Cancel(ctx, id)
}

// progress is a request body that calls moved (if not nil) after each
// read that took bytes from it.
type progress struct {
	r     io.Reader
	moved func()
}

func (p *progress) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	if n > 0 && p.moved != nil {
		p.moved()
	}
	return n, err
}
