package psych

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/psych-runtime/psych/sandbox"
)

// runCodeParameters is run_code's schema: {"code": string}.
var runCodeParameters = json.RawMessage(`{"type":"object","properties":{"code":{"type":"string","description":"The Python program. Its last expression is its value."}},"required":["code"],"additionalProperties":false}`)

// runCodeSpec is run_code as the model is offered it: its description
// lists the bindings a program may call, with their parameters.
func (r *Runtime) runCodeSpec() Spec {
	var b strings.Builder
	b.WriteString("Run a Python program in a fresh, isolated sandbox (no network, no state kept between runs) and return its result as JSON: value (the last expression), stdout, stderr and, on failure, the traceback.")
	specs := r.specs()
	if len(specs) == 0 {
		b.WriteString(" The program can call no host functions.")
	} else {
		b.WriteString(" The program can call these host functions as ordinary Python functions; a refused or failed call raises BindingError:")
		for _, s := range specs {
			fmt.Fprintf(&b, "\n- %s(%s)", s.Name, strings.Join(s.Params, ", "))
			if s.Description != "" {
				b.WriteString(": " + s.Description)
			}
			if s.Destructive {
				b.WriteString(" (needs approval)")
			}
		}
	}
	return Spec{Name: RunCode, Description: b.String(), Parameters: runCodeParameters, Params: []string{"code"}, Handler: r.runCode}
}

// runCode is run_code's handler.
func (r *Runtime) runCode(ctx context.Context, c Call) (any, error) {
	var args struct {
		Code string `json:"code"`
	}
	if err := json.Unmarshal(c.Args, &args); err != nil {
		return nil, fmt.Errorf("run_code: %w", err)
	}
	res, err := r.execute(ctx, c.ID, sandbox.Request{Code: args.Code})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// Execute runs a program in the Sandbox as run_code does, outside a
// model's call (the CLI's path): it is recorded, and its bindings are the
// Runtime's tools, called through Call with Via run_code (Via client for a
// client's tool, see WithTools). When the Sandbox fails, the record says
// cancelled if ctx ended, else failed, with the error's first KiB as its
// Reason. req's Bindings are ignored; its Limits fields override
// Config.Limits; an empty ID is made here.
func (r *Runtime) Execute(ctx context.Context, req sandbox.Request) (*sandbox.Result, error) {
	return r.execute(ctx, "", req)
}

func (r *Runtime) execute(ctx context.Context, callID string, req sandbox.Request) (*sandbox.Result, error) {
	if r.cfg.Sandbox == nil {
		return nil, fmt.Errorf("run code: %w", ErrNoSandbox)
	}
	if req.ID == "" {
		req.ID = ulid.Make().String()
	} else if err := sandbox.CheckID(req.ID); err != nil {
		return nil, fmt.Errorf("run code: %w", err)
	}
	b := &bindings{r: r, budget: &runBudget{left: r.cfg.RecordRunBytes}}
	req.Bindings, req.Limits = b, req.Limits.Merge(r.cfg.Limits)
	rec := &Execution{
		ID: req.ID, CallID: callID, Owner: r.owner, Started: time.Now(),
		Code: req.Code, Limits: req.Limits, Network: req.Network, Bindings: b.List(),
		Files: fileRecords(req.Files),
	}
	if st := r.cfg.Store; st != nil {
		if err := st.BeginExecution(context.WithoutCancel(ctx), rec); err != nil {
			return nil, fmt.Errorf("record execution: %w", err)
		}
	}
	res, err := r.cfg.Sandbox.Run(ctx, req)
	if err != nil {
		err = fmt.Errorf("run code: %w", err)
		if st := r.cfg.Store; st != nil {
			status := ExecutionFailed
			if ctx.Err() != nil {
				status = ExecutionCancelled
			}
			reason := err.Error()
			reason = cut(reason, min(len(reason), maxAbortReason))
			if aerr := st.AbortExecution(context.WithoutCancel(ctx), rec.ID, status, reason); aerr != nil {
				return nil, fmt.Errorf("%w (record execution %s: %w)", err, rec.ID, aerr)
			}
		}
		return nil, err
	}
	if st := r.cfg.Store; st != nil {
		if err := st.FinishExecution(context.WithoutCancel(ctx), rec.ID, ledgerResult(res)); err != nil {
			return res, fmt.Errorf("record execution %s: %w", rec.ID, err)
		}
	}
	return res, nil
}

// fileRecords are files as the ledger records them.
func fileRecords(files []sandbox.File) []FileRecord {
	var out []FileRecord
	for _, f := range files {
		sum := sha256.Sum256(f.Data)
		out = append(out, FileRecord{Path: f.Path, Size: int64(len(f.Data)), SHA256: hex.EncodeToString(sum[:])})
	}
	return out
}

// ledgerResult is res as the Store records it: each of its files by path,
// size, SHA-256 and mode, each artifact by name, size, SHA-256 and its
// sides, never their data (a copy; res is the caller's).
func ledgerResult(res *sandbox.Result) *sandbox.Result {
	if len(res.Files) == 0 && len(res.Artifacts) == 0 {
		return res
	}
	c := *res
	c.Files = nil
	for _, f := range res.Files {
		f.Data = nil
		c.Files = append(c.Files, f)
	}
	c.Artifacts = nil
	for _, a := range res.Artifacts {
		a.Data = nil
		c.Artifacts = append(c.Artifacts, a)
	}
	return &c
}

// maxAbortReason bounds the Reason an execution that ended without a
// result is recorded with (the Sandbox's error's text).
const maxAbortReason = 1 << 10

// bindings are the Runtime's tools as one program sees them: each call is
// the Runtime's own Call, Via run_code (Via client for a client's tool),
// with the run's id as the parent.
type bindings struct {
	r      *Runtime
	budget *runBudget // what the run may still make the Store record
}

func (b *bindings) List() []sandbox.Binding {
	specs := b.r.specs()
	out := make([]sandbox.Binding, 0, len(specs))
	for _, s := range specs {
		out = append(out, sandbox.Binding{Name: s.Name, Params: s.Params, Doc: s.Description})
	}
	return out
}

func (b *bindings) Call(ctx context.Context, name string, args json.RawMessage) (json.RawMessage, error) {
	out, err := b.r.recordedCall(ctx, Call{Tool: name, Args: args, Via: ViaRunCode, Execution: sandbox.RunID(ctx)}, b.budget)
	if out != nil && out.Kind != OutcomeOK {
		return nil, errors.New(out.Error)
	}
	if err != nil {
		return nil, err
	}
	return out.Value, nil
}
