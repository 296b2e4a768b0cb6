// Package full is what only psych-full links of the command line: the
// container backend (Container), runs through a psych.Runtime (Execute:
// the demo tools, their approval, the SQLite store) and the store itself
// (OpenStore). psych run's full form and psych runs use it. The lean psych
// must not import it (test/importrules): with it come the containerd
// client, SQLite and the root package's policy, egress and schema code,
// and a plain `psych run` has no bindings and no store, so the lean build
// hands the program to the backend itself and starts without them.
package full

import (
	"context"
	"fmt"
	"os"

	"github.com/psych-runtime/psych"
	"github.com/psych-runtime/psych/cmd/internal/commands/run"
	"github.com/psych-runtime/psych/internal/cli"
	"github.com/psych-runtime/psych/sandbox"
	"github.com/psych-runtime/psych/sandbox/container"
	"github.com/psych-runtime/psych/store/sqlite"
)

// Store is a psych.Store that is closed when the command is done.
type Store interface {
	psych.Store
	Close() error
}

// OpenStore opens the SQLite store at path.
func OpenStore(path string) (Store, error) { return sqlite.Open(path) }

// Container is the container backend the sandbox flags ask for
// (cli.ContainerBackend).
func Container(o cli.ContainerOptions) (sandbox.Sandbox, func(), error) {
	var ids *container.IDs
	if o.RunAs != nil {
		ids = &container.IDs{UID: o.RunAs[0], GID: o.RunAs[1]}
	}
	sb, err := container.New(container.Config{
		RunAs:                ids,
		ExtraRunArgs:         o.ExtraRunArgs,
		Engine:               container.Engine(o.Engine),
		Image:                o.Image,
		ContainerPythonBin:   o.ContainerPython,
		EnvAllowlist:         o.EnvAllowlist,
		RequireNetworkDenial: o.RequireNetworkDenial,
		MaxOutputBytes:       o.MaxOutputBytes,
		Pool:                 o.Pool,
	})
	if err != nil {
		return nil, nil, err
	}
	return sb, func() { sb.Close() }, nil
}

// Execute is run.Config.Execute with the SQLite store: it runs req on sb
// through a psych.Runtime whose tools are the demo tools (o.DemoTools),
// asked through o.Approve, and records into the store at o.Store when
// given. An --approve or store it cannot have is sandbox.ErrInvalidConfig,
// before anything runs. A result whose recording failed comes back with
// the error.
func Execute(ctx context.Context, sb sandbox.Sandbox, req sandbox.Request, o run.ExecOptions) (*sandbox.Result, error) {
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
		st, err := OpenStore(o.Store)
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
