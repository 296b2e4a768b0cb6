package psych

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/psych-runtime/psych/egress"
	"github.com/psych-runtime/psych/sandbox"
)

// Config configures a Runtime. Every field is optional.
type Config struct {
	// Store records every execution and call; nil records nothing.
	Store Store
	// Model drives Turn; nil makes Turn return ErrNoModel.
	Model Model
	// Registry holds the tools; nil offers none but run_code.
	Registry *Registry
	// Sandbox runs run_code's programs; nil offers no run_code.
	Sandbox sandbox.Sandbox
	// Policy decides every call; nil is DefaultPolicy.
	Policy Policy
	// Approver answers the calls the Policy asks about; nil denies them.
	Approver Approver
	// Egress is the only way a tool's handler reaches the network
	// (EgressFrom); nil denies every request.
	Egress egress.Client
	// ApprovalTimeout bounds an Approver's wait, after which the call is
	// denied ("timed out"); zero is DefaultApprovalTimeout.
	ApprovalTimeout time.Duration
	// RequireFreeze refuses a Sandbox that cannot freeze a run while a
	// person decides (ErrCannotFreeze at New).
	RequireFreeze bool
	// Limits are run_code's limits; zero fields take the Sandbox's.
	Limits sandbox.Limits
	// MaxSteps caps Turn's model steps; zero is DefaultMaxSteps.
	MaxSteps int
	// RecordArgsBytes and RecordValueBytes bound what the Store is given
	// of one call's arguments and of its value (its error text counts
	// with the value); zero is DefaultRecordCallBytes. Past them the
	// record keeps the head, as a JSON string, with the full size and
	// sha256 (CallRecord.ArgsTruncated, ValueTruncated).
	RecordArgsBytes, RecordValueBytes int
	// RecordRunBytes bounds what the Store is given of all the calls of
	// one run (their arguments, values, errors and a fixed cost per
	// record); zero is DefaultRecordRunBytes. Past it each further call
	// is still recorded, keeping only its sizes and digests.
	RecordRunBytes int64
}

// The record caps when Config sets none.
const (
	DefaultRecordCallBytes = 64 << 10
	DefaultRecordRunBytes  = 16 << 20
)

// DefaultMaxSteps is Turn's step cap when Config sets none.
const DefaultMaxSteps = 16

// Runtime is the tool path. It is safe for concurrent use.
type Runtime struct {
	cfg Config
	reg *Registry
	// code is run_code, compiled on first use (Execute never needs it);
	// nil without a Sandbox.
	code func() (*tool, error)
	// client are the tools a client declared (WithTools), in order, and
	// clientByName the same by name; both fixed once made.
	client       []*tool
	clientByName map[string]*tool
	// observe is told of every call's end (WithObserver); nil for none.
	observe func(CallRecord)
	// owner is recorded with every execution (WithOwner).
	owner string
}

// New returns a Runtime over cfg.
func New(cfg Config) (*Runtime, error) {
	if cfg.Sandbox != nil && cfg.RequireFreeze && !sandbox.CanFreeze(cfg.Sandbox) {
		return nil, fmt.Errorf("new runtime: %w", ErrCannotFreeze)
	}
	if cfg.ApprovalTimeout < 0 || cfg.MaxSteps < 0 || cfg.RecordArgsBytes < 0 || cfg.RecordValueBytes < 0 || cfg.RecordRunBytes < 0 {
		return nil, fmt.Errorf("new runtime: %w: a negative ApprovalTimeout, MaxSteps or Record cap", ErrInvalidConfig)
	}
	cfg.RecordArgsBytes = cmp.Or(cfg.RecordArgsBytes, DefaultRecordCallBytes)
	cfg.RecordValueBytes = cmp.Or(cfg.RecordValueBytes, DefaultRecordCallBytes)
	cfg.RecordRunBytes = cmp.Or(cfg.RecordRunBytes, DefaultRecordRunBytes)
	if cfg.Policy == nil {
		cfg.Policy = DefaultPolicy
	}
	if cfg.Egress == nil {
		cfg.Egress = egress.DenyAll()
	}
	if cfg.ApprovalTimeout == 0 {
		cfg.ApprovalTimeout = DefaultApprovalTimeout
	}
	if cfg.MaxSteps == 0 {
		cfg.MaxSteps = DefaultMaxSteps
	}
	r := &Runtime{cfg: cfg, reg: cfg.Registry}
	if r.reg == nil {
		r.reg = NewRegistry()
	}
	if cfg.Sandbox != nil {
		r.code = sync.OnceValues(func() (*tool, error) { return compile(r.runCodeSpec()) })
	}
	return r, nil
}

// WithTools returns a Runtime that offers tools beside r's own, for the
// runs (Execute) and calls (Call) made through it: the tools a client of
// psych serve declares for one request. It shares r's Config and Registry;
// r itself is unchanged. Each Spec is compiled as Register does (name
// rules, schema) and marked Client. A name r offers (a registered tool,
// run_code, a client tool r already has) or one given twice is
// ErrDuplicate: r's tools are never shadowed, even by a tool registered
// later. A Policy's Ask about one of these tools goes to approver (nil
// denies: "no approver is configured"), never to Config.Approver; an Ask
// about r's own tools still goes to Config.Approver.
func (r *Runtime) WithTools(tools []Spec, approver Approver) (*Runtime, error) {
	d := &Runtime{
		cfg: r.cfg, reg: r.reg, code: r.code, observe: r.observe, owner: r.owner,
		client:       slices.Clip(slices.Clone(r.client)),
		clientByName: make(map[string]*tool, len(r.client)+len(tools)),
	}
	for _, t := range r.client {
		d.clientByName[t.spec.Name] = t
	}
	for _, spec := range tools {
		if err := checkName(spec.Name); err != nil {
			if spec.Name == RunCode && r.code != nil {
				return nil, fmt.Errorf("declare tool %q: %w (%w)", spec.Name, ErrDuplicate, err)
			}
			return nil, fmt.Errorf("declare tool %.64q: %w", spec.Name, err)
		}
		if r.reg.lookup(spec.Name) != nil || d.clientByName[spec.Name] != nil {
			return nil, fmt.Errorf("declare tool %q: %w", spec.Name, ErrDuplicate)
		}
		spec.Client = true
		t, err := compile(spec)
		if err != nil {
			return nil, fmt.Errorf("declare tool %q: %w", spec.Name, err)
		}
		t.approver = approver
		d.client = append(d.client, t)
		d.clientByName[spec.Name] = t
	}
	return d, nil
}

// WithObserver returns a Runtime that tells observe of the end of every
// call made through it (and through a Runtime WithTools derives from it):
// a direct call, and each binding call of its runs, whatever tool and via.
// observe gets the record as it stands before the record caps cut it; it
// runs on the call's goroutine, so it must not block (a server counts its
// metrics with it). r itself is unchanged.
func (r *Runtime) WithObserver(observe func(CallRecord)) *Runtime {
	d := *r
	d.observe = observe
	return &d
}

// WithOwner returns a Runtime that records owner as the Owner of every
// execution it runs (and a Runtime WithTools or WithObserver derives from
// it does too). r itself is unchanged.
func (r *Runtime) WithOwner(owner string) *Runtime {
	d := *r
	d.owner = owner
	return &d
}

// Tools lists what the model is offered: the registered tools, the tools
// a client declared (WithTools), then run_code when a Sandbox is
// configured. run_code's description is built when Tools is called, so it
// lists the tools registered by then.
func (r *Runtime) Tools() []Spec {
	specs := r.specs()
	if r.code != nil {
		specs = append(specs, r.runCodeSpec())
	}
	return specs
}

// specs are the registered tools, then the client's (but one whose name
// was registered since: r's own are never shadowed).
func (r *Runtime) specs() []Spec {
	specs := r.reg.Specs()
	for _, t := range r.client {
		if r.reg.lookup(t.spec.Name) == nil {
			specs = append(specs, t.spec)
		}
	}
	return specs
}

func (r *Runtime) lookup(name string) *tool {
	if name == RunCode && r.code != nil {
		c, err := r.code()
		if err != nil { // a static schema: only a broken build gets here
			panic(fmt.Sprintf("psych: run_code's schema: %v", err))
		}
		t := *c
		t.spec = r.runCodeSpec()
		return &t
	}
	if t := r.reg.lookup(name); t != nil {
		return t
	}
	return r.clientByName[name]
}

type egressKey struct{}

// EgressFrom is the egress seam a handler's ctx carries: the Runtime's
// Config.Egress, or one that denies everything outside a Runtime.
func EgressFrom(ctx context.Context) egress.Client {
	if c, ok := ctx.Value(egressKey{}).(egress.Client); ok {
		return c
	}
	return egress.DenyAll()
}

// Call runs one call through the one tool path, for a direct call and a
// binding call alike: the arguments are checked against the tool's schema,
// the Policy decides, the Approver answers an ask (a binding call's run is
// frozen meanwhile), the handler runs with the egress seam in its ctx, and
// the call is recorded whatever the outcome. The arguments everyone past
// the schema sees (the Policy, the Approver, the handler and the record)
// are one canonical form of them (see Spec.MaxArgsBytes): a duplicate key,
// keys equal but for case, and arguments past the tool's bounds are a bad
// argument. What is recorded is capped (Config.RecordArgsBytes and
// RecordValueBytes). A bad argument, a denial and
// a handler's error are the Outcome's, never a Go error; the error is
// non-nil only when ctx ended (before the handler ran, or failing it), or
// the Store failed.
func (r *Runtime) Call(ctx context.Context, c Call) (*Outcome, error) {
	return r.recordedCall(ctx, c, nil)
}

// recordedCall is Call, whose record counts against run's budget when the
// call came from a run.
func (r *Runtime) recordedCall(ctx context.Context, c Call, run *runBudget) (*Outcome, error) {
	if c.ID == "" {
		c.ID = ulid.Make().String()
	}
	if c.Via == "" {
		c.Via = ViaModel
	}
	if len(c.Args) == 0 {
		c.Args = json.RawMessage("{}")
	}
	rec := &CallRecord{
		ID: c.ID, Parent: c.Execution, Tool: c.Tool, Args: c.Args, Via: c.Via,
		Started: time.Now(),
	}
	out, ctxErr := r.call(ctx, c, rec)
	out.CallID = c.ID
	rec.Duration = time.Since(rec.Started)
	rec.Outcome, rec.Value, rec.Error = out.Kind, out.Value, out.Error
	rec.BytesIn, rec.BytesOut = len(rec.Args), len(out.Value)+len(out.Error)
	if r.observe != nil {
		r.observe(*rec)
	}
	if r.cfg.Store != nil {
		r.capRecord(rec, run)
		if err := r.cfg.Store.RecordCall(context.WithoutCancel(ctx), rec); err != nil {
			return out, fmt.Errorf("record call %s: %w", c.ID, err)
		}
	}
	return out, ctxErr
}

func (r *Runtime) call(ctx context.Context, c Call, rec *CallRecord) (*Outcome, error) {
	t := r.lookup(c.Tool)
	if t == nil {
		return &Outcome{Kind: OutcomeInvalid, Error: fmt.Sprintf("no tool named %.64q", c.Tool)}, nil
	}
	if c.Via == ViaRunCode || c.Via == ViaClient {
		// A binding call: Via client exactly for a client's tool.
		c.Via = ViaRunCode
		if t.spec.Client {
			c.Via = ViaClient
		}
		rec.Via = c.Via
	}
	canon, decoded, err := canonicalArgs(c.Args, cmp.Or(t.spec.MaxArgsBytes, DefaultMaxArgsBytes))
	if err == nil {
		err = t.validate(decoded)
	}
	if err != nil {
		return &Outcome{Kind: OutcomeInvalid, Error: c.Tool + ": " + err.Error()}, nil
	}
	// From here on, everyone sees the canonical form.
	c.Args, rec.Args = canon, canon
	d := r.cfg.Policy.Decide(ctx, t.spec, c)
	rec.Decision, rec.Reason = d.Verdict, d.Reason
	out := &Outcome{Decision: d}
	switch d.Verdict {
	case Allow:
	case Ask:
		if reason, ok := r.approve(ctx, t, c, d, rec); !ok {
			out.Kind, out.Error = OutcomeDenied, "denied by policy: "+reason
			return out, ctx.Err()
		}
	default: // Deny, and any verdict a Policy made up
		out.Kind, out.Error = OutcomeDenied, "denied by policy: "+orDefault(d.Reason, "no reason given")
		return out, nil
	}
	if err := ctx.Err(); err != nil {
		out.Kind, out.Error = OutcomeDenied, "cancelled"
		return out, err
	}
	v, err := r.handle(context.WithValue(ctx, egressKey{}, r.cfg.Egress), t.spec, c)
	if err != nil {
		out.Kind, out.Error = OutcomeError, err.Error()
		return out, ctx.Err() // the handler's error may be ctx's
	}
	out.Kind, out.Value = OutcomeOK, v
	return out, nil
}

// approve asks the Approver (the client's for a client's tool), freezing
// the run a binding call came from for as long as it waits. It returns the
// reason for a denial.
func (r *Runtime) approve(ctx context.Context, t *tool, c Call, d Decision, rec *CallRecord) (string, bool) {
	spec, approver := t.spec, r.cfg.Approver
	if spec.Client {
		approver = t.approver
	}
	if approver == nil {
		return "no approver is configured", false
	}
	if c.Via == ViaRunCode || c.Via == ViaClient {
		resume, err := sandbox.Suspend(ctx)
		if err != nil {
			return "cannot suspend the run while a person decides", false
		}
		defer resume()
	}
	actx, cancel := context.WithTimeout(ctx, r.cfg.ApprovalTimeout)
	defer cancel()
	start := time.Now()
	type answer struct {
		a   Approval
		err error
	}
	ch := make(chan answer, 1)
	go func() {
		// A panicking Approver denies the call; it never takes the host down.
		defer func() {
			if p := recover(); p != nil {
				ch <- answer{err: fmt.Errorf("the approver panicked: %v", p)}
			}
		}()
		a, err := approver.Approve(actx, ApprovalRequest{Spec: spec, Call: c, Decision: d})
		ch <- answer{a, err}
	}()
	var ans answer
	select {
	case ans = <-ch:
	case <-actx.Done():
		// An Approver that ignores its ctx does not hold the call.
		ans.err = actx.Err()
	}
	rec.DecisionTime = time.Since(start)
	rec.Approver = ans.a.By
	switch {
	case ctx.Err() != nil:
		return "cancelled while waiting for approval", false
	case errors.Is(ans.err, context.DeadlineExceeded):
		return fmt.Sprintf("approval timed out after %v", r.cfg.ApprovalTimeout), false
	case ans.err != nil:
		return "the approver failed: " + ans.err.Error(), false
	}
	approved := ans.a.Approved
	rec.Approved = &approved
	if !approved {
		return orDefault(ans.a.Reason, "the approver said no"), false
	}
	return "", true
}

// handle runs the handler; a panic in it is the tool's error, not the
// host's crash.
func (r *Runtime) handle(ctx context.Context, spec Spec, c Call) (v json.RawMessage, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%s: the tool panicked: %v", spec.Name, p)
		}
	}()
	val, err := spec.Handler(ctx, c)
	if err != nil {
		return nil, err
	}
	if raw, ok := val.(json.RawMessage); ok {
		if !json.Valid(raw) {
			return nil, fmt.Errorf("%s: the tool returned invalid JSON", spec.Name)
		}
		return raw, nil
	}
	b, err := json.Marshal(val)
	if err != nil {
		return nil, fmt.Errorf("%s: encode the tool's value: %w", spec.Name, err)
	}
	return b, nil
}

func orDefault(s, def string) string {
	if strings.TrimSpace(s) == "" {
		return def
	}
	return s
}
