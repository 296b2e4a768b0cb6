//go:build linux && cgo

package container

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/psych-runtime/psych/cgroups"
	"github.com/psych-runtime/psych/internal/reexec"
	"github.com/psych-runtime/psych/sandbox"
	"github.com/psych-runtime/psych/sandbox/internal/host"
	"github.com/psych-runtime/psych/sandbox/internal/pool"
)

// takeWait bounds how long a request waits for a pooled sandbox being
// started when none is ready.
const takeWait = 5 * time.Second

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
	caps, err := pc.Validate(s.cfg.DefaultLimits)
	if err != nil {
		return fmt.Errorf("%w: %w", sandbox.ErrInvalidConfig, err)
	}
	if s.cfg.RunAs != nil {
		return fmt.Errorf("%w: a pool needs outside ids per container (RunAs nil)", sandbox.ErrInvalidConfig)
	}
	maxAge := pc.MaxAge
	if maxAge == 0 {
		maxAge = sandbox.DefaultPoolMaxAge
	}
	s.poolCaps = caps
	s.pool, err = pool.New(pool.Config[*run]{
		Size:    pc.Size,
		MaxAge:  maxAge,
		Fill:    s.fill,
		Destroy: func(r *run) { r.destroy() },
		OnError: func(err error) { s.log.Warn("psych: starting a pooled container", "engine", s.eng.name(), "err", err) },
	})
	if err != nil {
		return fmt.Errorf("%w: %w", sandbox.ErrInvalidConfig, err)
	}
	return nil
}

// WaitWarm blocks until the pool holds its Size containers ready (at once
// without a pool), or ctx ends.
func (s *Sandbox) WaitWarm(ctx context.Context) error {
	if s.pool == nil {
		return nil
	}
	return s.pool.WaitReady(ctx, s.cfg.Pool.Size)
}

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
	return r, nil
}

// destroy kills and removes a run that will not be served.
func (r *run) destroy() {
	if err := r.unwind(); err != nil {
		r.s.log.Warn("psych: removing an unserved pooled container", "engine", r.s.eng.name(), "id", r.id, "err", err)
	}
}

// warm serves hr from the pool, or says why it runs cold.
func (s *Sandbox) warm(ctx context.Context, hr *host.Request) (*run, string) {
	if why := host.ColdReason(hr, s.poolCaps); why != "" {
		return nil, why
	}
	// An empty pool with a sandbox being started: that one, rather than
	// a cold start beside it (bounded, should the fill be stuck).
	r, age, ok := s.pool.TakeWait(ctx, takeWait)
	if !ok {
		return nil, "no pooled sandbox was ready"
	}
	if err := r.dispatch(hr); err != nil {
		s.log.Warn("psych: a pooled container failed its check at dispatch; the run goes cold", "engine", s.eng.name(), "err", err)
		r.destroy()
		return nil, "a pooled sandbox failed its check at dispatch: " + err.Error()
	}
	r.iso.Warm, r.iso.AgeSeconds = true, age.Seconds()
	return r, ""
}

// dispatch gives a pooled run its request before the start frame, as the
// subprocess backend does: the checks (host.CheckPooled), the request's
// cgroup limits and reset peaks, the interpreter's rlimits lowered by the
// init and read back, the environment in the start frame, the CPU baseline.
func (r *run) dispatch(hr *host.Request) error {
	s := r.s
	select {
	case <-r.exited:
		return errors.New("its interpreter is gone")
	default:
	}
	nc, err := host.CheckPooled(host.Pooled{
		Isolation: &r.iso, InitPID: r.proc.InitPID, InterpPID: r.proc.InterpPID, HostNS: s.hostNS,
		Netlink: int(r.netlink.Fd()), BeforeCheck: s.hooks.atDispatch, Cgroup: r.cg,
	})
	if err != nil {
		return err
	}
	r.iso.Network = nc
	r.req, r.limits = hr, hr.Limits
	// The init lowers the interpreter's rlimits to the request's (CPU's
	// counted from now) while the host writes the cgroup's; the
	// attestation reads them back before the start.
	used, err := host.ProcessCPU(r.proc.InterpPID)
	if err != nil {
		return err
	}
	lowered, err := r.proc.StartLower(reexec.FromNow(r.rlimits(), used))
	if err != nil {
		return err
	}
	lim := cgroups.Limits{MemoryBytes: r.limits.MemoryBytes, Pids: int64(r.limits.ProcessCount) + 1}
	if err := r.cg.SetLimits(lim); err != nil {
		return err
	}
	// A kernel that cannot reset the memory peak (v2 before 6.12) leaves
	// the interpreter's own start in it: the program's process all the same.
	if err := r.cg.ResetPeaks(); err != nil && !errors.Is(err, cgroups.ErrNotSupported) {
		return err
	}
	_, python := s.eng.image()
	r.env = r.environ(python)
	r.iso.EnvKeys = host.EnvKeys(r.env)
	if err := hr.SetStart(r.env); err != nil {
		return err
	}
	if err := lowered(5 * time.Second); err != nil {
		return err
	}
	r.iso.Limits = host.ReadLimits(r.proc.InterpPID)
	base, err := r.cg.CPU()
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
		return host.Env(host.Home, python, nil, nil)
	}
	return host.Env(host.Home, python, r.s.cfg.EnvAllowlist, r.req.Env)
}
