//go:build linux && cgo

package container

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/psych-runtime/psych/cgroups"
	"github.com/psych-runtime/psych/sandbox"
	"github.com/psych-runtime/psych/sandbox/internal/host"
	"github.com/psych-runtime/psych/sandbox/internal/pool"
	"github.com/psych-runtime/psych/sandbox/internal/resources"
)

// warmRun is what a pooled run adds to a cold one.
type warmRun struct {
	// netlink is the socket into the container's network namespace, kept
	// to check it again at dispatch.
	netlink *os.File
	// cpuBase is the run cgroup's CPU at dispatch: the budget counts from it.
	cpuBase time.Duration
}

// startPool starts filling the pool: containers started at the caps, each
// blocked on its start frame. A pooled container needs its cgroup's CPU
// usage (the budget counts from dispatch) and outside ids of its own.
func (s *Sandbox) startPool(pc sandbox.PoolConfig) error {
	if s.cfg.RunAs != nil {
		return fmt.Errorf("%w: a pool needs outside ids per container (RunAs nil)", sandbox.ErrInvalidConfig)
	}
	// The caps before the pool: its fills read them.
	caps, err := pc.Validate(s.cfg.DefaultLimits)
	if err != nil {
		return fmt.Errorf("%w: %w", sandbox.ErrInvalidConfig, err)
	}
	s.poolCaps = caps
	if len(pc.Preload) > 0 {
		s.imports, s.preload = pool.NewImportEnv(), slices.Clone(pc.Preload)
	}
	s.pool, err = pool.Start(pc, s.fill, func(r *run) { r.destroy() }, s.log)
	return err
}

// PoolStatus is the pool's size and how many sandboxes are ready now;
// zero without a pool.
func (s *Sandbox) PoolStatus() sandbox.PoolStatus { return s.pool.Status() }

// WaitWarm blocks until the pool holds its Size containers ready (at once
// without a pool), or ctx ends.
func (s *Sandbox) WaitWarm(ctx context.Context) error { return s.pool.WaitWarm(ctx) }

// fill starts one pooled container.
func (s *Sandbox) fill(ctx context.Context) (*run, error) {
	r := &run{s: s, limits: s.poolCaps}
	if err := r.start(ctx); err != nil {
		return nil, errors.Join(err, r.unwind())
	}
	if r.cg == nil || r.netlink == nil {
		r.destroy()
		return nil, fmt.Errorf("%w: a pooled container needs its cgroup and a verified network namespace", sandbox.ErrHostFault)
	}
	if s.imports != nil {
		pre, err := pool.PreloadConn(ctx, r.wire, pool.PreloadTimeout)
		if err != nil {
			r.destroy()
			return nil, fmt.Errorf("preload: %w", err)
		}
		s.imports.Add(pre)
	}
	return r, nil
}

// destroy kills and removes a run that will not be served.
func (r *run) destroy() {
	if err := r.unwind(); err != nil {
		r.s.log.Warn("psych: removing an unserved pooled container", "engine", r.s.eng.name(), "id", r.id, "err", err)
	}
}

// warm serves hr from a pooled container, or says why it runs cold.
func (s *Sandbox) warm(ctx context.Context, hr *host.Request) (*run, string) {
	r, age, why := pool.Warm(ctx, s.pool, hr, s.poolCaps, s.imports, pool.EnvNames(s.cfg.EnvAllowlist, hr.Env), func(r *run) error { return r.dispatch(hr) }, func(r *run) { r.destroy() }, s.log)
	if r != nil {
		r.iso.Warm, r.iso.AgeSeconds = true, age.Seconds()
	}
	return r, why
}

// dispatch gives a pooled run its request (pool.Pooled.Dispatch), as the
// subprocess backend does.
func (r *run) dispatch(hr *host.Request) error {
	r.req, r.limits = hr, hr.Limits
	hr.Figures = true // the workspace's tmp is the run's /tmp
	_, python := r.s.eng.image()
	r.env = r.environ(python)
	if err := r.writeFiles(); err != nil {
		return err
	}
	base, err := pool.Pooled{
		Isolation: &r.iso, InitPID: r.proc.InitPID, InterpPID: r.proc.InterpPID, HostNS: r.s.hostNS,
		Netlink: int(r.netlink.Fd()), BeforeCheck: r.s.hooks.atDispatch, Cgroup: r.cg, Proc: r.proc, Exited: r.exited,
	}.Dispatch(pool.Dispatch{
		Request: hr,
		Cgroup:  cgroups.Limits{MemoryBytes: r.limits.MemoryBytes, Pids: int64(r.limits.ProcessCount) + 1},
		Rlimits: r.rlimits(), Env: r.env,
	})
	if err != nil {
		return err
	}
	r.cpuBase = base
	r.started = time.Now()
	return nil
}

// environ is the program's environment, built from nothing: in a pooled
// run before dispatch only the sandbox's own variables.
func (r *run) environ(python string) []string {
	if r.req == nil {
		return host.Env(resources.Home, python, nil, nil)
	}
	return host.Env(resources.Home, python, r.s.cfg.EnvAllowlist, r.req.Env)
}
