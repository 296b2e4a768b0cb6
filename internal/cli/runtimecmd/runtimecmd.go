// Package runtimecmd is the part of psych's command line that goes
// through a psych.Runtime: `psych run` with the demo tools (--demo-tools,
// their approval with --approve) or a store (--store), and `psych runs`.
// Only psych-full links it (and with it the root package, its policy,
// egress and schema code): a plain `psych run` has no bindings and no
// store, so the lean build hands the program to the backend itself and
// starts without them (see internal/cli).
package runtimecmd

import (
	"context"
	"fmt"
	"os"

	"github.com/psych-runtime/psych"
	"github.com/psych-runtime/psych/internal/cli"
	"github.com/psych-runtime/psych/sandbox"
)

// Store is a psych.Store that is closed when the command is done.
type Store interface {
	psych.Store
	Close() error
}

// Execute is cli.Engines.Execute: it runs req on sb through a
// psych.Runtime whose tools are the demo tools (o.DemoTools), asked
// through o.Approve, and records into the store at o.Store when given
// (open opens it). An --approve or store it cannot have is
// sandbox.ErrInvalidConfig, before anything runs. A result whose
// recording failed comes back with the error.
func Execute(ctx context.Context, sb sandbox.Sandbox, req sandbox.Request, o cli.ExecOptions, open func(path string) (Store, error)) (*sandbox.Result, error) {
	approver, closeApprover, err := newApprover(o.Approve)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", sandbox.ErrInvalidConfig, err)
	}
	defer closeApprover()
	cfg := psych.Config{Sandbox: sb, Approver: approver}
	if o.DemoTools {
		dir, err := newDemoDir()
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
		if cfg.Registry, err = demoRegistry(dir); err != nil {
			return nil, err
		}
	}
	if o.Store != "" {
		st, err := open(o.Store)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", sandbox.ErrInvalidConfig, err)
		}
		defer st.Close()
		cfg.Store = st
	}
	rt, err := psych.New(cfg)
	if err != nil {
		return nil, err
	}
	return rt.Execute(ctx, req)
}
