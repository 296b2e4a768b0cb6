package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/psych-runtime/psych"
	"github.com/psych-runtime/psych/api"
	"github.com/psych-runtime/psych/sandbox"
)

// A call waiting for its client is a call (answered with a CallAnswer) or
// an approval (an ApprovalAnswer); the two share call ids.
type callKind uint8

const (
	kindCall callKind = iota + 1
	kindApproval
)

type callKey struct {
	kind callKind
	id   string
}

// pendingCall is a call or an approval waiting for the client's answer.
type pendingCall struct {
	ctx    context.Context // the binding call's: Suspend reads it
	answer chan any        // *api.CallAnswer or *api.ApprovalAnswer; room for one
	done   bool            // answered
	resume func()          // set while the client suspended the run
}

// release resumes a run its client left suspended.
func (pc *pendingCall) release() {
	if pc.resume != nil {
		pc.resume()
		pc.resume = nil
	}
}

// maxAnswered bounds the answered calls a run remembers (to answer a
// second answer 409 rather than 404).
const maxAnswered = 4096

// open registers a call waiting for the client.
func (ar *activeRun) open(k callKey, ctx context.Context) (*pendingCall, error) {
	ar.mu.Lock()
	defer ar.mu.Unlock()
	if ar.calls[k] != nil || ar.answered[k] {
		return nil, fmt.Errorf("call id %s is in use", k.id)
	}
	pc := &pendingCall{ctx: ctx, answer: make(chan any, 1)}
	ar.calls[k] = pc
	return pc, nil
}

// close forgets a call that ended: it resumes the run if the client left
// it suspended, and remembers the id as answered.
func (ar *activeRun) close(k callKey) {
	ar.mu.Lock()
	defer ar.mu.Unlock()
	if pc := ar.calls[k]; pc != nil {
		pc.release()
		delete(ar.calls, k)
	}
	ar.answered[k] = true
	ar.order = append(ar.order, k)
	if len(ar.order) > maxAnswered {
		delete(ar.answered, ar.order[0])
		ar.order = ar.order[1:]
	}
}

// waitingLocked returns call k when it waits for an answer, else the
// refusal: 404 for a call the run does not have, 409 for one answered
// already. ar.mu is held.
func (ar *activeRun) waitingLocked(k callKey) (*pendingCall, *api.Error) {
	pc := ar.calls[k]
	switch {
	case pc == nil && ar.answered[k], pc != nil && pc.done:
		return nil, &api.Error{Code: api.CodeConflict, Message: fmt.Sprintf("call %s is answered already", k.id)}
	case pc == nil:
		return nil, notFound("call", k.id)
	}
	return pc, nil
}

// waiting returns nil when call k waits for an answer, else the refusal
// (waitingLocked's): checked before an answer's body is read.
func (ar *activeRun) waiting(k callKey) *api.Error {
	ar.mu.Lock()
	defer ar.mu.Unlock()
	_, e := ar.waitingLocked(k)
	return e
}

// deliver hands the client's answer to the call waiting for it, or
// refuses as waiting does.
func (ar *activeRun) deliver(k callKey, a any) *api.Error {
	ar.mu.Lock()
	defer ar.mu.Unlock()
	pc, e := ar.waitingLocked(k)
	if e != nil {
		return e
	}
	pc.done = true
	pc.answer <- a
	return nil
}

// runtimeFor is the Runtime a run or call goes through: the server's, with
// the client's tools beside its own, every call's end counted
// (psych_tool_calls_total: the server's own tools' too), and the peer
// recorded as the run's owner. A clash with one of the server's is 400.
func (s *Server) runtimeFor(ar *activeRun, tools []api.Tool) (*psych.Runtime, *api.Error) {
	observed := s.cfg.Runtime.WithObserver(s.met.observeCall).WithOwner(ar.peer)
	if len(tools) == 0 {
		return observed, nil
	}
	specs := make([]psych.Spec, 0, len(tools))
	for _, t := range tools {
		specs = append(specs, psych.Spec{Name: t.Name, Description: t.Description, Parameters: t.Parameters,
			Params: t.Params, Destructive: t.Destructive, Handler: ar.handler(t.Name)})
	}
	rt, err := observed.WithTools(specs, ar.approver())
	if err != nil {
		if errors.Is(err, psych.ErrDuplicate) {
			return nil, invalid("bindings: %v: the server has a tool of that name", err)
		}
		return nil, invalid("bindings: %v", err)
	}
	return rt, nil
}

// errNoEvents: a request without an event stream cannot answer a call.
var errNoEvents = fmt.Errorf("this request cannot answer a client tool's call: it did not ask for events (Accept: %s)", api.MediaNDJSON)

// handler is a client tool's Handler: a call event, then the client's
// answer, or the end of the run.
func (ar *activeRun) handler(tool string) psych.Handler {
	return func(ctx context.Context, c psych.Call) (any, error) {
		return ar.ask(ctx, c, tool)
	}
}

func (ar *activeRun) ask(ctx context.Context, c psych.Call, tool string) (any, error) {
	if ar.stream == nil {
		return nil, fmt.Errorf("client tool %s: %w", tool, errNoEvents)
	}
	k := callKey{kindCall, c.ID}
	pc, err := ar.open(k, ctx)
	if err != nil {
		return nil, fmt.Errorf("client tool %s: %w", tool, err)
	}
	defer ar.close(k)
	if !ar.stream.send(api.Event{Event: api.EventCall, CallID: c.ID, Tool: tool, Args: c.Args}) {
		return nil, fmt.Errorf("client tool %s: the client's event stream has ended", tool)
	}
	select {
	case a := <-pc.answer:
		ans := a.(*api.CallAnswer)
		if ans.Error != nil {
			return nil, errors.New(*ans.Error)
		}
		return ans.Value, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("client tool %s: no answer came: %w", tool, ctx.Err())
	}
}

// approver asks the client about its own destructive tools (an approval
// event); a request without events cannot answer, so its asks are denied.
// The Runtime freezes the run meanwhile.
func (ar *activeRun) approver() psych.Approver {
	return psych.ApproverFunc(func(ctx context.Context, req psych.ApprovalRequest) (psych.Approval, error) {
		if ar.stream == nil {
			return psych.Approval{By: "psych serve", Reason: errNoEvents.Error()}, nil
		}
		k := callKey{kindApproval, req.Call.ID}
		pc, err := ar.open(k, ctx)
		if err != nil {
			return psych.Approval{}, err
		}
		defer ar.close(k)
		if !ar.stream.send(api.Event{Event: api.EventApproval, CallID: req.Call.ID, Tool: req.Spec.Name, Args: req.Call.Args}) {
			return psych.Approval{}, errors.New("the client's event stream has ended")
		}
		select {
		case a := <-pc.answer:
			ans := a.(*api.ApprovalAnswer)
			return psych.Approval{Approved: ans.Approve, By: ar.peer, Reason: ans.Reason}, nil
		case <-ctx.Done():
			return psych.Approval{}, ctx.Err()
		}
	})
}

// readAnswer reads a small answer body strictly.
func (s *Server) readAnswer(w http.ResponseWriter, r *http.Request, v any) bool {
	if r.ContentLength > s.cfg.MaxRequestBytes {
		s.refuse(w, r, tooLarge(s.cfg.MaxRequestBytes))
		return false
	}
	body, e := s.readBody(w, r)
	if e != nil {
		s.refuse(w, r, e)
		return false
	}
	if err := api.DecodeStrict(body, v); err != nil {
		s.refuse(w, r, invalid("%v", err))
		return false
	}
	return true
}

// answerCall is POST /v1/runs/{id}/calls/{call_id}: the client's answer
// to a call event, exactly one of value and error.
func (s *Server) answerCall(w http.ResponseWriter, r *http.Request) {
	var a api.CallAnswer
	s.answer(w, r, kindCall, &a, func() *api.Error {
		if (a.Value == nil) == (a.Error == nil) {
			return invalid("an answer has exactly one of value and error")
		}
		return nil
	})
}

// answerApproval is POST /v1/runs/{id}/approvals/{call_id}.
func (s *Server) answerApproval(w http.ResponseWriter, r *http.Request) {
	var a api.ApprovalAnswer
	s.answer(w, r, kindApproval, &a, nil)
}

// answer is an answer's route: the peer's run in flight (else 404), its
// call of that kind waiting (else 404 or 409), the body read strictly
// into a and held to check (if not nil), then delivered: 204.
func (s *Server) answer(w http.ResponseWriter, r *http.Request, kind callKind, a any, check func() *api.Error) {
	ar := s.ownedRun(w, r)
	if ar == nil {
		return
	}
	k := callKey{kind, r.PathValue("call_id")}
	if e := ar.waiting(k); e != nil {
		s.refuse(w, r, e)
		return
	}
	if !s.readAnswer(w, r, a) {
		return
	}
	if check != nil {
		if e := check(); e != nil {
			s.refuse(w, r, e)
			return
		}
	}
	if e := ar.deliver(k, a); e != nil {
		s.refuse(w, r, e)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// suspendCall is POST /v1/runs/{id}/calls/{call_id}/suspend: the run is
// frozen (its wall clock stopped, as sandbox.Suspend does) while its
// client works on the call, until resume, the answer or the run's end.
func (s *Server) suspendCall(w http.ResponseWriter, r *http.Request) {
	s.suspendOrResume(w, r, true)
}

// resumeCall is POST /v1/runs/{id}/calls/{call_id}/resume.
func (s *Server) resumeCall(w http.ResponseWriter, r *http.Request) {
	s.suspendOrResume(w, r, false)
}

func (s *Server) suspendOrResume(w http.ResponseWriter, r *http.Request, suspend bool) {
	ar := s.ownedRun(w, r)
	if ar == nil {
		return
	}
	ar.mu.Lock()
	defer ar.mu.Unlock()
	pc, e := ar.waitingLocked(callKey{kindCall, r.PathValue("call_id")})
	if e != nil {
		s.refuse(w, r, e)
		return
	}
	if !suspend {
		pc.release()
		w.WriteHeader(http.StatusNoContent)
		return
	}
	if pc.resume == nil {
		resume, err := sandbox.Suspend(pc.ctx)
		if err != nil {
			s.refuse(w, r, &api.Error{Code: api.CodeConflict, Message: "suspend: " + err.Error()})
			return
		}
		pc.resume = resume
	}
	w.WriteHeader(http.StatusNoContent)
}

// postCall is POST /v1/calls: one direct call of a tool through the
// Runtime (via model), answered with its Outcome or, with events, ending
// in an outcome event. It takes a slot as a run does, and lasts at most
// the cap of wall_seconds.
func (s *Server) postCall(w http.ResponseWriter, r *http.Request) {
	body, release, _, ok := s.admit(w, r)
	if !ok {
		return
	}
	start := time.Now()
	defer func() { release(time.Since(start)) }()
	req, e := api.DecodeCallRequest(body)
	if e != nil {
		s.refuse(w, r, e)
		return
	}
	if req.ID == "" {
		req.ID = ulid.Make().String()
	}
	ctx, cancel, stop := s.runContext(r)
	defer stop()
	defer cancel(nil)
	ctx, cancelT := context.WithTimeout(ctx, time.Duration(s.cfg.Caps.WallSeconds*float64(time.Second)))
	defer cancelT()
	ar, rt, e := s.enter(ctx, req.ID, peerOf(r.Context()).Key, true, wantsEvents(r), cancel, req.Bindings)
	if e != nil {
		s.refuse(w, r, e)
		return
	}
	defer s.end(ar)
	c := psych.Call{ID: req.ID, Tool: req.Tool, Args: req.Args, Via: psych.ViaModel}
	finish := func() (*api.Outcome, *api.Error) {
		out, err := rt.Call(ctx, c)
		s.logCall(ar, req.Tool, time.Since(start), out)
		if err != nil && (out == nil || ctx.Err() != nil) {
			return nil, endError(ctx, err)
		}
		if err != nil {
			return nil, &api.Error{Code: api.CodeHostFault, Message: err.Error()}
		}
		return outcomeOf(out), nil
	}
	if ar.stream == nil {
		out, e := finish()
		s.reply(w, out, e)
		return
	}
	ar.stream.send(api.Event{Event: api.EventStarted, ID: req.ID})
	s.streamEvents(w, ar, cancel, func() {
		out, e := finish()
		if e != nil {
			ar.stream.end(api.Event{Event: api.EventError, Error: e})
			return
		}
		ar.stream.end(api.Event{Event: api.EventOutcome, Outcome: out})
	})
}

// outcomeOf is a Runtime's Outcome as the API shows it.
func outcomeOf(o *psych.Outcome) *api.Outcome {
	return &api.Outcome{CallID: o.CallID, Value: o.Value, Kind: o.Kind, Error: o.Error,
		Decision: api.Decision{Verdict: string(o.Decision.Verdict), Reason: o.Decision.Reason}}
}

// logCall logs a direct call's end (runtimeFor's observer counts it): its tool's name, never its
// arguments or value.
func (s *Server) logCall(ar *activeRun, tool string, dur time.Duration, out *psych.Outcome) {
	kind := "error"
	if out != nil {
		kind = decisionLabel(out.Kind)
	}
	s.log.Info("call", "id", ar.id, "peer", ar.peer, "tool", tool, "duration_seconds", dur.Seconds(), "outcome", kind)
}
