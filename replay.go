package psych

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"sync"

	"github.com/psych-runtime/psych/sandbox"
)

// Replay is what Runtime.Replay found.
type Replay struct {
	// ID is the recorded execution's id.
	ID string `json:"id"`
	// Reproduced is true when the new run made the same calls with the same
	// arguments, in order, and ended with the same value or failure.
	Reproduced bool `json:"reproduced"`
	// Divergence is the first difference; nil when Reproduced.
	Divergence *Divergence `json:"divergence"`
	// Result is the new run's.
	Result *sandbox.Result `json:"result"`
	// Notes say where the new run's setting differs from the recorded one
	// (backend, interpreter, image, environment names): a divergence may
	// come from there.
	Notes []string `json:"notes,omitempty"`
}

// Divergence is where a replay first differed. Seq is the recorded call's
// place in the store (0 where the recording had no such call, or for the
// result); Index is the call's place in the run, from 1 (0 for the result).
type Divergence struct {
	Seq   int64           `json:"seq"`
	Index int             `json:"index"`
	Want  json.RawMessage `json:"want"`
	Got   json.RawMessage `json:"got"`
}

// replayedCall is how a divergence shows a call.
type replayedCall struct {
	Tool string          `json:"tool"`
	Args json.RawMessage `json:"args"`
}

// ReplayOptions say how Replay runs a recorded program. The zero value runs
// it as the operator's own runs go: under Config.Limits (zero fields take
// the Sandbox's defaults) and without the network, whatever the recording
// had: a ledger is data, and its limits and grant are not the operator's.
type ReplayOptions struct {
	// Limits override Config.Limits field by field.
	Limits sandbox.Limits
	// Network grants the replay the network; the recorded grant is never
	// taken by itself.
	Network bool
	// RecordedLimits takes the recorded run's limits, each no larger than
	// the replay's own (Limits over Config.Limits over
	// sandbox.DefaultLimits).
	RecordedLimits bool
}

// Replay runs a recorded execution's program again in a fresh sandbox,
// answering each binding call from the ledger in recorded order instead of
// calling the tool (no handler runs, no Policy is asked, nothing is
// recorded), and reports where the new run diverges: a different call or
// arguments, a call too many or too few, or a different value or failure.
// After a divergence, every further call raises BindingError. A recorded
// call whose arguments were cut (CallRecord.ArgsTruncated) is matched by
// their sha256; one whose value was cut raises BindingError, with a note.
func (r *Runtime) Replay(ctx context.Context, id string, opts ReplayOptions) (*Replay, error) {
	switch {
	case r.cfg.Store == nil:
		return nil, fmt.Errorf("replay %s: %w", id, ErrNoStore)
	case r.cfg.Sandbox == nil:
		return nil, fmt.Errorf("replay %s: %w", id, ErrNoSandbox)
	}
	rec, err := r.cfg.Store.Execution(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("replay %s: %w", id, err)
	}
	calls, err := r.cfg.Store.Calls(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("replay %s: %w", id, err)
	}
	p := &player{decls: rec.Bindings, calls: calls}
	limits := opts.Limits.Merge(r.cfg.Limits)
	if opts.RecordedLimits {
		limits = within(rec.Limits, limits.Merge(sandbox.DefaultLimits()))
	}
	res, err := r.cfg.Sandbox.Run(ctx, sandbox.Request{Code: rec.Code, Limits: limits, Network: opts.Network, Bindings: p})
	if err != nil {
		return nil, fmt.Errorf("replay %s: %w", id, err)
	}
	rep := &Replay{ID: id, Result: res, Notes: notes(rec, res)}
	if rec.Network && !opts.Network {
		rep.Notes = append(rep.Notes, "the recorded run had the network; this replay has none")
	}
	if len(rec.Files) > 0 {
		rep.Notes = append(rep.Notes, fmt.Sprintf("the recorded run had %d files in, which the ledger keeps by hash only; this replay has none", len(rec.Files)))
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.div != nil:
	case p.next < len(calls):
		c := calls[p.next]
		p.div = &Divergence{Seq: c.Seq, Index: p.next + 1, Want: show(replayedCall{c.Tool, c.Args}), Got: json.RawMessage("null")}
	case rec.Result != nil && !sameEnd(rec.Result, res):
		p.div = &Divergence{Want: show(end(rec.Result)), Got: show(end(res))}
	}
	rep.Notes = append(rep.Notes, p.notes...)
	rep.Divergence, rep.Reproduced = p.div, p.div == nil && rec.Result != nil
	if rec.Result == nil && p.div == nil {
		how := "is incomplete"
		if rec.Status.Aborted() {
			how = "ended without a result (" + string(rec.Status) + ")"
		}
		rep.Notes = append(rep.Notes, "the recorded execution "+how+": its calls were reproduced, its end cannot be compared")
	}
	return rep, nil
}

// player answers a replay's binding calls from the recorded ones.
type player struct {
	decls []sandbox.Binding
	mu    sync.Mutex
	calls []CallRecord
	next  int
	div   *Divergence
	notes []string
}

func (p *player) List() []sandbox.Binding { return p.decls }

func (p *player) Call(_ context.Context, name string, args json.RawMessage) (json.RawMessage, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.div != nil {
		return nil, fmt.Errorf("replay diverged at call %d", p.div.Index)
	}
	index := p.next + 1
	got := show(replayedCall{name, args})
	if p.next >= len(p.calls) {
		p.div = &Divergence{Index: index, Want: json.RawMessage("null"), Got: got}
		return nil, fmt.Errorf("replay diverged at call %d: the recording has no such call", index)
	}
	c := p.calls[p.next]
	if c.Tool != name || !sameArgs(&c, args) {
		p.div = &Divergence{Seq: c.Seq, Index: index, Want: show(replayedCall{c.Tool, c.Args}), Got: got}
		return nil, fmt.Errorf("replay diverged at call %d", index)
	}
	p.next++
	if c.ValueTruncated && c.Outcome == OutcomeOK {
		p.notes = append(p.notes, fmt.Sprintf("call %d's value was not recorded whole (its head only): the program got a BindingError instead", index))
		return nil, fmt.Errorf("replay cannot answer call %d: the ledger kept only the head of its value", index)
	}
	if c.Outcome != OutcomeOK {
		return nil, fmt.Errorf("%s", c.Error)
	}
	if len(c.Value) == 0 {
		return json.RawMessage("null"), nil
	}
	return c.Value, nil
}

// sameArgs says whether args are the recorded call's: by their canonical
// form's sha256 when the record kept only a head.
func sameArgs(c *CallRecord, args json.RawMessage) bool {
	if !c.ArgsTruncated {
		return sameJSON(c.Args, args)
	}
	if canon, _, err := canonicalArgs(args, len(args)); err == nil {
		args = canon
	}
	return digest(args) == c.ArgsSHA256
}

// within is rec with zero fields and fields above caps taken from caps:
// every numeric field of sandbox.Limits, by reflection, so that a limit
// added later is capped too.
func within(rec, caps sandbox.Limits) sandbox.Limits {
	out := caps
	rv, ov := reflect.ValueOf(rec), reflect.ValueOf(&out).Elem()
	for i := range rv.NumField() {
		f, c := rv.Field(i), ov.Field(i)
		switch f.Kind() {
		case reflect.Int, reflect.Int64:
			if f.Int() > 0 && f.Int() < c.Int() {
				c.SetInt(f.Int())
			}
		case reflect.Float64:
			if f.Float() > 0 && f.Float() < c.Float() {
				c.SetFloat(f.Float())
			}
		}
	}
	return out
}

// runEnd is what a replay compares of a run's end.
type runEnd struct {
	Value   json.RawMessage `json:"value"`
	Failure *endFailure     `json:"failure"`
}

type endFailure struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

func end(res *sandbox.Result) runEnd {
	e := runEnd{Value: res.Value}
	if f := res.Failure; f != nil {
		e.Failure = &endFailure{f.Type, f.Message}
	}
	return e
}

func sameEnd(a, b *sandbox.Result) bool {
	ea, eb := end(a), end(b)
	return sameJSON(ea.Value, eb.Value) && reflect.DeepEqual(ea.Failure, eb.Failure)
}

// sameJSON compares two JSON texts by value (key order and spacing aside).
func sameJSON(a, b json.RawMessage) bool {
	if len(bytes.TrimSpace(a)) == 0 {
		a = json.RawMessage("null")
	}
	if len(bytes.TrimSpace(b)) == 0 {
		b = json.RawMessage("null")
	}
	var va, vb any
	if json.Unmarshal(a, &va) != nil || json.Unmarshal(b, &vb) != nil {
		return bytes.Equal(a, b)
	}
	return reflect.DeepEqual(va, vb)
}

func show(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}

// notes compare the recorded setting with the new run's attestation.
func notes(rec *Execution, res *sandbox.Result) []string {
	now := &Execution{}
	now.Attest(res)
	var out []string
	for _, f := range []struct{ name, was, is string }{
		{"backend", rec.Backend, now.Backend}, {"engine", rec.Engine, now.Engine},
		{"interpreter", rec.Interpreter, now.Interpreter}, {"image", rec.Image, now.Image},
	} {
		if rec.Result != nil && f.was != f.is {
			out = append(out, fmt.Sprintf("%s was %q, is %q", f.name, f.was, f.is))
		}
	}
	if rec.Result != nil && !reflect.DeepEqual(rec.EnvKeys, now.EnvKeys) {
		out = append(out, fmt.Sprintf("environment names were %v, are %v", rec.EnvKeys, now.EnvKeys))
	}
	return out
}
