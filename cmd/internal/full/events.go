package full

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/psych-runtime/psych"
	"github.com/psych-runtime/psych/api"
	"github.com/psych-runtime/psych/cmd/internal/commands/run"
	"github.com/psych-runtime/psych/internal/eventstream"
	"github.com/psych-runtime/psych/sandbox"
)

// eventsRuntime is the Runtime of the embedded transport (psych run
// --events, psych call --events): sb (nil: no run_code), the demo tools
// when o asks, the store at o.Store, and the request's own tools, whose
// calls go to the client as call events. Every approval, of the
// request's tools and of the demo tools alike, is asked of the client
// (approval events). close releases what it opened.
func eventsRuntime(sb sandbox.Sandbox, tools []api.Tool, o run.ExecOptions, st *eventstream.Stdio) (rt *psych.Runtime, closeAll func(), retErr error) {
	var closers []func()
	closeAll = func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	defer func() {
		if retErr != nil {
			closeAll()
		}
	}()
	approver := psych.ApproverFunc(func(ctx context.Context, req psych.ApprovalRequest) (psych.Approval, error) {
		ok, reason, err := st.Approve(ctx, req.Call.ID, req.Spec.Name, req.Call.Args)
		if err != nil {
			return psych.Approval{}, err
		}
		return psych.Approval{Approved: ok, By: "client", Reason: reason}, nil
	})
	cfg := psych.Config{Sandbox: sb, Approver: approver}
	if o.DemoTools {
		dir, err := newDemoDir()
		if err != nil {
			return nil, nil, err
		}
		closers = append(closers, func() { os.RemoveAll(dir) })
		if cfg.Registry, err = demoRegistry(dir); err != nil {
			return nil, nil, err
		}
	}
	if o.Store != "" {
		s, err := OpenStore(o.Store)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: %w", sandbox.ErrInvalidConfig, err)
		}
		closers = append(closers, func() { s.Close() })
		cfg.Store = s
	}
	rt, err := psych.New(cfg)
	if err != nil {
		return nil, nil, err
	}
	if len(tools) == 0 {
		return rt, closeAll, nil
	}
	specs := make([]psych.Spec, 0, len(tools))
	for _, t := range tools {
		name := t.Name
		specs = append(specs, psych.Spec{Name: t.Name, Description: t.Description, Parameters: t.Parameters,
			Params: t.Params, Destructive: t.Destructive, Handler: func(ctx context.Context, c psych.Call) (any, error) {
				return st.Call(ctx, c.ID, name, c.Args)
			}})
	}
	rt, err = rt.WithTools(specs, approver)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: bindings: %w", sandbox.ErrInvalidRequest, err)
	}
	return rt, closeAll, nil
}

// Events is run.Config.Events: req through a Runtime as eventsRuntime
// makes it.
func Events(ctx context.Context, sb sandbox.Sandbox, req *api.RunRequest, sreq sandbox.Request, o run.ExecOptions, st *eventstream.Stdio) (*sandbox.Result, error) {
	rt, closeAll, err := eventsRuntime(sb, req.Bindings, o, st)
	if err != nil {
		return nil, err
	}
	defer closeAll()
	return rt.Execute(ctx, sreq)
}

// Call is one direct call of psych call --events (via model): the demo
// tools', run_code (when sb is set) or one of req's own tools, through the
// Runtime eventsRuntime makes. A bad argument, a denial and a tool's
// failure are the Outcome's.
func Call(ctx context.Context, sb sandbox.Sandbox, req *api.CallRequest, o run.ExecOptions, st *eventstream.Stdio) (*api.Outcome, error) {
	rt, closeAll, err := eventsRuntime(sb, req.Bindings, o, st)
	if err != nil {
		return nil, err
	}
	defer closeAll()
	out, err := rt.Call(ctx, psych.Call{ID: req.ID, Tool: req.Tool, Args: req.Args, Via: psych.ViaModel})
	if err != nil && (out == nil || ctx.Err() != nil) {
		return nil, err
	}
	if err != nil {
		return nil, errors.Join(errors.New("record the call"), err)
	}
	return &api.Outcome{CallID: out.CallID, Value: out.Value, Kind: out.Kind, Error: out.Error,
		Decision: api.Decision{Verdict: string(out.Decision.Verdict), Reason: out.Decision.Reason}}, nil
}
