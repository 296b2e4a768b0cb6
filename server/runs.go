package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"mime"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/psych-runtime/psych"
	"github.com/psych-runtime/psych/api"
	"github.com/psych-runtime/psych/sandbox"
)

// Why a run's context was cancelled (its cause).
var (
	errDeleted      = errors.New("cancelled by DELETE")
	errDrained      = errors.New("the server's drain timeout ran out: retry the run on another server")
	errSlowConsumer = errors.New("cancelled: the client fell behind its event stream")
)

// activeRun is a run or a direct call in flight.
type activeRun struct {
	id, peer string
	direct   bool // a direct call (POST /v1/calls)
	started  time.Time
	cancel   context.CancelCauseFunc
	stream   *stream       // nil: the client asked for no events
	done     chan struct{} // closed when it ended
	met      *metrics

	mu       sync.Mutex
	calls    map[callKey]*pendingCall
	answered map[callKey]bool // calls answered, to tell 409 from 404
	order    []callKey        // answered, oldest first (bounded)
}

// admit takes a slot for r and reads its body: the decision (503 not
// ready or draining, 413 by Content-Length, 429 capacity) comes before the
// body is read; a body past MaxRequestBytes is 413 as soon as it passes.
// On success the caller must call release with the run's duration.
func (s *Server) admit(w http.ResponseWriter, r *http.Request) (body []byte, release func(time.Duration), wait time.Duration, ok bool) {
	if e := s.unavailable(); e != nil {
		s.refuse(w, r, e)
		return nil, nil, 0, false
	}
	if r.ContentLength > s.cfg.MaxRequestBytes {
		s.refuse(w, r, tooLarge(s.cfg.MaxRequestBytes))
		return nil, nil, 0, false
	}
	n := r.ContentLength
	if n < 0 { // chunked: it counts as the largest body it may be
		n = s.cfg.MaxRequestBytes
	}
	tk, e := s.adm.enter(n)
	if e != nil {
		s.refuse(w, r, e)
		return nil, nil, 0, false
	}
	// The body is read while the request waits (a slow one holds no slot
	// past the header timeout); then the client's going away is seen.
	rc := http.NewResponseController(w)
	rc.SetReadDeadline(time.Now().Add(s.cfg.HeaderTimeout))
	body, e = s.readBody(w, r)
	rc.SetReadDeadline(time.Time{})
	if e != nil {
		s.adm.leave(tk)
		s.refuse(w, r, e)
		return nil, nil, 0, false
	}
	rel, wait, e := s.adm.wait(r.Context(), tk)
	if e != nil {
		if e.Code != api.CodeCancelled { // else the client went away: nobody to answer
			s.refuse(w, r, e)
		}
		return nil, nil, 0, false
	}
	unhold := s.hold()
	return body, func(d time.Duration) { rel(d); unhold() }, wait, true
}

// readBody reads r's body: past MaxRequestBytes it is 413, as soon as it
// passes.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, *api.Error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxRequestBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, tooLarge(s.cfg.MaxRequestBytes)
		}
		return nil, invalid("read the body: %v", err)
	}
	return body, nil
}

func tooLarge(max int64) *api.Error {
	return &api.Error{Code: api.CodeTooLarge, Message: fmt.Sprintf("the body is larger than this server's cap, %d bytes", max)}
}

// wantsEvents reports whether r asks for an event stream.
func wantsEvents(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept"), ",") {
		if mt, _, err := mime.ParseMediaType(strings.TrimSpace(part)); err == nil && mt == api.MediaNDJSON {
			return true
		}
	}
	return false
}

// limitsCheck is what a request's limits are held to.
type limitsCheck struct {
	defaults, caps sandbox.Limits
	allowNetwork   bool
	envAllowlist   []string
}

func (s *Server) check() limitsCheck {
	return limitsCheck{defaults: s.cfg.Info.Defaults, caps: s.cfg.Caps, allowNetwork: s.cfg.AllowNetwork, envAllowlist: s.cfg.Info.EnvAllowlist}
}

// decodeRunRequest decodes and checks a run's body (api.DecodeRunRequest),
// then holds it to this server's caps, env allowlist and network grant;
// every refusal is a 400 naming what is wrong. It does not look at ids in
// use.
func decodeRunRequest(body []byte, c limitsCheck) (*api.RunRequest, *api.Error) {
	req, e := api.DecodeRunRequest(body)
	if e != nil {
		return nil, e
	}
	if e := checkLimits(req.Limits, c); e != nil {
		return nil, e
	}
	for name := range req.Env {
		if !slices.Contains(c.envAllowlist, name) {
			return nil, invalid("env: %.64q is not on this server's allowlist (GET /v1/info: env_allowlist)", name)
		}
	}
	if req.Network && !c.allowNetwork {
		return nil, invalid("network: this server grants no run the network (it was not started with --allow-network)")
	}
	return req, nil
}

func invalid(format string, args ...any) *api.Error {
	return &api.Error{Code: api.CodeInvalidRequest, Message: fmt.Sprintf(format, args...)}
}

// checkLimits refuses a negative limit, one above its cap (never clamped),
// and a merged set the contract refuses.
func checkLimits(l sandbox.Limits, c limitsCheck) *api.Error {
	fields := []struct {
		name     string
		val, cap float64
		stack    bool
	}{
		{string(sandbox.LimitCPUSeconds), l.CPUSeconds, c.caps.CPUSeconds, false},
		{string(sandbox.LimitAddressSpaceBytes), float64(l.AddressSpaceBytes), float64(c.caps.AddressSpaceBytes), false},
		{string(sandbox.LimitFileSizeBytes), float64(l.FileSizeBytes), float64(c.caps.FileSizeBytes), false},
		{string(sandbox.LimitProcessCount), float64(l.ProcessCount), float64(c.caps.ProcessCount), false},
		{string(sandbox.LimitWallSeconds), l.WallSeconds, c.caps.WallSeconds, false},
		{string(sandbox.LimitMemoryBytes), float64(l.MemoryBytes), float64(c.caps.MemoryBytes), false},
		{"stack_bytes", float64(l.StackBytes), float64(c.caps.StackBytes), true},
		{"open_files", float64(l.OpenFiles), float64(c.caps.OpenFiles), false},
		{string(sandbox.LimitApprovalSeconds), l.ApprovalSeconds, c.caps.ApprovalSeconds, false},
	}
	for _, f := range fields {
		switch {
		case f.val < 0 || math.IsNaN(f.val):
			return invalid("limits.%s: %v is negative", f.name, f.val)
		case f.val > f.cap:
			return invalid("limits.%s: %v is above this server's cap, %v", f.name, f.val, f.cap)
		}
	}
	if err := l.Merge(c.defaults).Validate(); err != nil {
		return invalid("limits: %v", err)
	}
	return nil
}

// begin reserves id for a run or call of peer: 409 when it is in flight
// or in the ledger.
func (s *Server) begin(ctx context.Context, id, peer string, direct bool, events bool, cancel context.CancelCauseFunc) (*activeRun, *api.Error) {
	if st := s.cfg.Store; st != nil && !direct {
		_, err := st.Execution(ctx, id)
		switch {
		case err == nil:
			return nil, &api.Error{Code: api.CodeConflict, Message: fmt.Sprintf("id %s is in the ledger", id)}
		case !errors.Is(err, psych.ErrNotFound):
			return nil, &api.Error{Code: api.CodeHostFault, Message: "read the ledger: " + err.Error()}
		}
	}
	ar := &activeRun{id: id, peer: peer, direct: direct, started: time.Now(), cancel: cancel,
		done: make(chan struct{}), met: s.met, calls: map[callKey]*pendingCall{}, answered: map[callKey]bool{}}
	if events {
		ar.stream = newStream(s.cfg.StreamBufferBytes, func() { cancel(errSlowConsumer) })
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.active[id] != nil {
		return nil, &api.Error{Code: api.CodeConflict, Message: fmt.Sprintf("id %s is in flight", id)}
	}
	s.active[id] = ar
	if !direct {
		s.owners.add(id, peer)
	}
	return ar, nil
}

func (s *Server) end(ar *activeRun) {
	s.mu.Lock()
	delete(s.active, ar.id)
	s.mu.Unlock()
	close(ar.done)
}

// runContext is a run's context: it ends with the request (the client went
// away), at cancel (DELETE, a slow consumer) and when the drain runs out
// (which ends the run with a retryable draining error).
func (s *Server) runContext(r *http.Request) (context.Context, context.CancelCauseFunc, func() bool) {
	ctx, cancel := context.WithCancelCause(r.Context())
	stop := context.AfterFunc(s.stop, func() { cancel(errDrained) })
	return ctx, cancel, stop
}

// endError is the API error for a run or call that ended without its
// Result or Outcome: err from the Runtime, ctx the run's.
func endError(ctx context.Context, err error) *api.Error {
	if ctx.Err() != nil {
		cause := context.Cause(ctx)
		switch {
		case errors.Is(cause, errSlowConsumer):
			return &api.Error{Code: api.CodeSlowConsumer, Message: cause.Error()}
		case errors.Is(cause, errDrained):
			// The server is going away, not the run's fault: retryable,
			// as a refusal while draining is. It ran in part: its
			// sandbox is gone, the calls it made were answered.
			return &api.Error{Code: api.CodeDraining, Message: cause.Error(), Retryable: true, RetryAfter: 1}
		case errors.Is(cause, errDeleted):
			return &api.Error{Code: api.CodeCancelled, Message: cause.Error()}
		}
		return &api.Error{Code: api.CodeCancelled, Message: "cancelled: the client went away"}
	}
	switch {
	case errors.Is(err, sandbox.ErrInvalidRequest):
		return &api.Error{Code: api.CodeInvalidRequest, Message: err.Error()}
	case errors.Is(err, psych.ErrDuplicateID):
		return &api.Error{Code: api.CodeConflict, Message: err.Error()}
	}
	return &api.Error{Code: api.CodeHostFault, Message: err.Error()}
}

// postRun is POST /v1/runs: a run, answered with its Result or, when the
// client accepts application/x-ndjson, with its events.
func (s *Server) postRun(w http.ResponseWriter, r *http.Request) {
	body, release, wait, ok := s.admit(w, r)
	if !ok {
		return
	}
	start := time.Now()
	var dur time.Duration
	defer func() { release(dur) }()
	req, e := decodeRunRequest(body, s.check())
	if e != nil {
		s.refuse(w, r, e)
		return
	}
	if req.ID == "" {
		req.ID = ulid.Make().String()
	}
	peer := peerOf(r.Context())
	ctx, cancel, stop := s.runContext(r)
	defer stop()
	defer cancel(nil)
	ar, rt, e := s.enter(ctx, req.ID, peer.Key, false, wantsEvents(r), cancel, req.Bindings)
	if e != nil {
		s.refuse(w, r, e)
		return
	}
	defer s.end(ar)
	sreq := sandbox.Request{ID: req.ID, Code: req.Code, Limits: req.Limits, Env: req.Env, Network: req.Network, Files: req.Files}
	execute := func(sreq sandbox.Request) (*sandbox.Result, *api.Error) {
		res, err := rt.Execute(ctx, sreq)
		dur = time.Since(start)
		if err != nil && res == nil {
			return nil, endError(ctx, err)
		}
		return res, nil
	}
	if ar.stream == nil {
		res, ae := execute(sreq)
		s.reply(w, res, ae)
		s.logRun(ar, wait, dur, res, ae)
		return
	}
	// started is sent as the program is about to start (the sandbox tells
	// whether a pooled sandbox took it), so before any output or call; a
	// run that never starts has none.
	sreq.Started = func(warm bool) {
		ar.stream.send(api.Event{Event: api.EventStarted, ID: req.ID, Warm: &warm})
	}
	sreq.Output = func(st sandbox.Stream, data string) {
		ar.stream.send(api.Event{Event: st.String(), Data: data})
	}
	s.streamEvents(w, ar, cancel, func() {
		res, ae := execute(sreq)
		if ae != nil {
			ar.stream.end(api.Event{Event: api.EventError, Error: ae})
		} else {
			ar.stream.end(api.Event{Event: api.EventResult, Result: res})
		}
		s.logRun(ar, wait, dur, res, ae)
	})
}

// enter begins a run or call (begin) and makes the Runtime it goes through
// (runtimeFor); a refusal leaves nothing begun. The caller ends it (end).
func (s *Server) enter(ctx context.Context, id, peer string, direct, events bool, cancel context.CancelCauseFunc, tools []api.Tool) (*activeRun, *psych.Runtime, *api.Error) {
	ar, e := s.begin(ctx, id, peer, direct, events, cancel)
	if e != nil {
		return nil, nil, e
	}
	rt, e := s.runtimeFor(ar, tools)
	if e != nil {
		s.end(ar)
		return nil, nil, e
	}
	return ar, rt, nil
}

// reply answers a run or call without events: e, or v with 200.
func (s *Server) reply(w http.ResponseWriter, v any, e *api.Error) {
	// A client that reads nothing holds its slot no longer than this.
	http.NewResponseController(w).SetWriteDeadline(time.Now().Add(s.cfg.WriteTimeout))
	if e != nil {
		writeError(w, e)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

// streamEvents answers with ar's event stream while work (which ends the
// stream) runs on a goroutine of its own, and returns once work has: a
// client gone cancels the run.
func (s *Server) streamEvents(w http.ResponseWriter, ar *activeRun, cancel context.CancelCauseFunc, work func()) {
	startStream(w)
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		work()
	}()
	if err := ar.stream.serve(w, s.cfg.Keepalive, s.cfg.WriteTimeout); err != nil {
		cancel(err) // the client is gone: so is its run
	}
	<-finished
}

// startStream writes an event stream's header.
func startStream(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Type", api.MediaNDJSON)
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	http.NewResponseController(w).Flush()
}

// logRun counts and logs a run's end: never its code, output or env.
func (s *Server) logRun(ar *activeRun, wait, dur time.Duration, res *sandbox.Result, e *api.Error) {
	outcome, limit, warm, cold := outcomeOK, "", false, ""
	switch {
	case e != nil && e.Code == api.CodeSlowConsumer:
		outcome = outcomeSlowConsumer
	case e != nil && (e.Code == api.CodeCancelled || e.Code == api.CodeDraining): // DELETE, gone, the drain ran out
		outcome = outcomeCancelled
	case e != nil && e.Code == api.CodeHostFault:
		outcome = outcomeHostFault
	case e != nil:
		outcome = outcomeRefused
	case res.Failure != nil:
		outcome = outcomeFailed
	}
	if res != nil {
		limit = limitLabel(res.LimitHit)
		if iso := res.Isolation; iso != nil {
			warm, cold = iso.Warm, coldLabel(iso.ColdReason)
		}
	}
	s.met.runs.WithLabelValues(outcome, limit, fmt.Sprint(warm)).Inc()
	s.met.runDuration.Observe(dur.Seconds())
	if cold != "" && sandbox.PoolStatusOf(s.cfg.Sandbox).Size > 0 {
		s.met.poolCold.WithLabelValues(cold).Inc()
	}
	s.log.Info("run", "id", ar.id, "peer", ar.peer, "queue_wait_seconds", wait.Seconds(),
		"duration_seconds", dur.Seconds(), "outcome", outcome, "limit_hit", limit, "warm", warm)
}

// owned returns the run or call id in flight if peer started it.
func (s *Server) owned(id, peer string) *activeRun {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ar := s.active[id]; ar != nil && ar.peer == peer {
		return ar
	}
	return nil
}

// ownedRun is owned for r's path's run id and r's peer; when there is no
// such run it refuses r (404) and returns nil.
func (s *Server) ownedRun(w http.ResponseWriter, r *http.Request) *activeRun {
	id := r.PathValue("id")
	ar := s.owned(id, peerOf(r.Context()).Key)
	if ar == nil {
		s.refuse(w, r, notFound("run", id))
	}
	return ar
}

func notFound(what, id string) *api.Error {
	return &api.Error{Code: api.CodeNotFound, Message: fmt.Sprintf("no %s %.64q", what, id)}
}

// getRun is GET /v1/runs/{id}: one of the peer's runs, from the ledger
// (without a Store, only while it is in flight).
func (s *Server) getRun(w http.ResponseWriter, r *http.Request) {
	id, peer := r.PathValue("id"), peerOf(r.Context()).Key
	run, e := s.readRun(r.Context(), id, peer, true)
	if e != nil {
		s.refuse(w, r, e)
		return
	}
	writeJSON(w, http.StatusOK, run)
}

func (s *Server) readRun(ctx context.Context, id, peer string, full bool) (*api.Run, *api.Error) {
	s.mu.Lock()
	owner := s.owners.get(id)
	ar := s.active[id]
	s.mu.Unlock()
	if owner != "" && owner != peer || (ar != nil && ar.direct) {
		return nil, notFound("run", id)
	}
	if st := s.cfg.Store; st != nil {
		e, err := st.Execution(ctx, id)
		switch {
		case err == nil && e.Owner != peer:
			// Another peer's, or a run no server asked for (the ledger
			// is shared with psych run --store): not this peer's.
			return nil, notFound("run", id)
		case err == nil:
			run := runOf(e)
			if !full {
				run.Code, run.Result = "", nil
			}
			return run, nil
		case !errors.Is(err, psych.ErrNotFound):
			return nil, &api.Error{Code: api.CodeHostFault, Message: "read the ledger: " + err.Error()}
		}
	}
	if ar != nil && owner == peer {
		return &api.Run{ID: id, Status: api.StatusIncomplete, Started: ar.started, Bindings: []sandbox.Binding{}}, nil
	}
	return nil, notFound("run", id)
}

// runOf is a ledger record as the API shows it.
func runOf(e *psych.Execution) *api.Run {
	run := &api.Run{ID: e.ID, Started: e.Started, Finished: e.Finished, Code: e.Code, Limits: e.Limits,
		Network: e.Network, Bindings: e.Bindings, Result: e.Result, Status: string(e.Status)}
	if run.Bindings == nil {
		run.Bindings = []sandbox.Binding{}
	}
	if run.Status == "" { // a record from before the ledger had a status
		run.Status = api.StatusIncomplete
		if e.Result != nil {
			run.Status = api.StatusFinished
		}
	}
	return run
}

// listRuns is GET /v1/runs: the peer's runs, oldest first: the last
// maxOwners of its runs in the ledger (with a Store), else of those this
// server remembers starting.
func (s *Server) listRuns(w http.ResponseWriter, r *http.Request) {
	peer := peerOf(r.Context()).Key
	s.mu.Lock()
	ids := s.owners.of(peer)
	s.mu.Unlock()
	list := api.RunList{Runs: []api.Run{}}
	if st := s.cfg.Store; st != nil {
		// The ledger knows the peer's runs from before this server too:
		// the last maxOwners of them.
		es, err := st.Executions(r.Context())
		if err != nil {
			s.refuse(w, r, &api.Error{Code: api.CodeHostFault, Message: "read the ledger: " + err.Error()})
			return
		}
		for i := range es {
			if es[i].Owner == peer {
				run := runOf(&es[i])
				run.Code, run.Result = "", nil
				list.Runs = append(list.Runs, *run)
			}
		}
		list.Runs = list.Runs[max(0, len(list.Runs)-maxOwners):]
		writeJSON(w, http.StatusOK, list)
		return
	}
	for _, id := range ids {
		run, e := s.readRun(r.Context(), id, peer, false)
		if e != nil {
			if e.Code == api.CodeNotFound {
				continue
			}
			s.refuse(w, r, e)
			return
		}
		list.Runs = append(list.Runs, *run)
	}
	writeJSON(w, http.StatusOK, list)
}

// deleteRun is DELETE /v1/runs/{id}: cancel one of the peer's runs in
// flight; it answers 204 once every process of the run is killed.
func (s *Server) deleteRun(w http.ResponseWriter, r *http.Request) {
	id, peer := r.PathValue("id"), peerOf(r.Context()).Key
	ar := s.owned(id, peer)
	if ar == nil {
		s.mu.Lock()
		owner := s.owners.get(id)
		s.mu.Unlock()
		if owner == peer {
			s.refuse(w, r, &api.Error{Code: api.CodeConflict, Message: fmt.Sprintf("run %s is not in flight", id)})
			return
		}
		s.refuse(w, r, notFound("run", id))
		return
	}
	ar.cancel(errDeleted)
	select {
	case <-ar.done:
		w.WriteHeader(http.StatusNoContent)
	case <-r.Context().Done():
	}
}

// maxOwners bounds how many runs' owners a server remembers.
const maxOwners = 4096

// owners remembers who started the last runs (a bounded FIFO).
type owners struct {
	byID  map[string]string
	order []string
	next  int
}

func newOwners(n int) owners {
	return owners{byID: make(map[string]string, n), order: make([]string, 0, n)}
}

func (o *owners) add(id, peer string) {
	if len(o.order) < cap(o.order) {
		o.order = append(o.order, id)
	} else {
		delete(o.byID, o.order[o.next])
		o.order[o.next] = id
		o.next = (o.next + 1) % len(o.order)
	}
	o.byID[id] = peer
}

func (o *owners) get(id string) string { return o.byID[id] }

// of lists peer's ids, oldest first.
func (o *owners) of(peer string) []string {
	var ids []string
	for i := range o.order {
		id := o.order[(o.next+i)%len(o.order)]
		if o.byID[id] == peer {
			ids = append(ids, id)
		}
	}
	return ids
}
