//go:build linux && cgo

package subprocess

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	"golang.org/x/sys/unix"

	"github.com/psych-runtime/psych/internal/layers"
	"github.com/psych-runtime/psych/sandbox"
	"github.com/psych-runtime/psych/sandbox/internal/host"
	"github.com/psych-runtime/psych/sandbox/internal/pool"
)

// warmRun is what a pooled run adds to a cold one.
type warmRun struct {
	// netlink is the socket into the run's network namespace, kept to
	// check it again at dispatch.
	netlink *os.File
	// dispatched says the run was started ahead and served at dispatch.
	dispatched bool
	// cpuBase is the run cgroup's CPU at dispatch: the budget counts from it.
	cpuBase time.Duration
}

// startPool checks that this host can keep a pool, then starts filling it.
// A pooled sandbox needs the full design: a user namespace, a run cgroup
// whose CPU the host reads (the budget counts from dispatch) and outside
// ids of its own (RLIMIT_NPROC counts per uid, and a waiting sandbox holds
// its processes).
func (s *Sandbox) startPool(pc sandbox.PoolConfig) error {
	// The caps before the pool: its fills read them.
	caps, err := pc.Validate(s.cfg.DefaultLimits)
	if err != nil {
		return fmt.Errorf("%w: %w", sandbox.ErrInvalidConfig, err)
	}
	s.poolCaps = caps
	switch {
	case !s.userns:
		return fmt.Errorf("%w: a pool needs user namespaces, which this host does not give", sandbox.ErrInvalidConfig)
	case s.cg == nil:
		return fmt.Errorf("%w: a pool needs a run cgroup to count CPU from dispatch: %v", sandbox.ErrInvalidConfig, s.cgErr)
	case s.ids == nil:
		return fmt.Errorf("%w: a pool needs an outside id per sandbox (RunAs with Count > 1)", sandbox.ErrInvalidConfig)
	case s.ids.Count < uint32(pc.Size)+1:
		return fmt.Errorf("%w: a pool of %d needs more than %d outside ids", sandbox.ErrInvalidConfig, pc.Size, s.ids.Count)
	}
	if len(pc.Preload) > 0 {
		s.imports, s.preload = pool.NewImportEnv(), slices.Clone(pc.Preload)
	}
	s.pool, err = pool.Start(pc, s.fill, (*run).destroy, s.log)
	return err
}

// PoolStatus is the pool's size and how many sandboxes are ready now;
// zero without a pool.
func (s *Sandbox) PoolStatus() sandbox.PoolStatus { return s.pool.Status() }

// WaitWarm blocks until the pool holds its Size sandboxes ready (at once
// without a pool), or ctx ends.
func (s *Sandbox) WaitWarm(ctx context.Context) error { return s.pool.WaitWarm(ctx) }

// fill starts one pooled sandbox at the pool's caps, with only the
// sandbox's own environment, its network namespace verified.
func (s *Sandbox) fill(ctx context.Context) (*run, error) {
	uid, gid, release, err := s.acquire(ctx)
	if err != nil {
		return nil, err
	}
	r := &run{s: s, limits: s.poolCaps, uid: uid, gid: gid, release: release, layers: layers.Full()}
	if err := r.start(); err != nil {
		if r.proc != nil {
			r.destroy()
		} else if cerr := r.cleanup(); cerr != nil {
			err = errors.Join(err, cerr)
		}
		return nil, err
	}
	if r.netlink == nil || !r.netOK {
		r.destroy()
		return nil, fmt.Errorf("%w: a pooled sandbox without a verified network namespace", sandbox.ErrHostFault)
	}
	if s.imports != nil {
		pre, err := pool.PreloadFD(ctx, int(r.host.Fd()), pool.PreloadTimeout)
		if err != nil {
			r.destroy()
			return nil, fmt.Errorf("preload: %w", err)
		}
		s.imports.Add(pre)
	}
	if s.hooks.pooled != nil {
		s.hooks.pooled(r)
	}
	return r, nil
}

// warm serves hr from a pooled sandbox, or says why it runs cold.
func (s *Sandbox) warm(ctx context.Context, hr *host.Request) (*run, string) {
	r, age, why := pool.Warm(ctx, s.pool, hr, s.poolCaps, s.imports, pool.EnvNames(s.cfg.EnvAllowlist, hr.Env), func(r *run) error { return r.dispatch(hr) }, (*run).destroy, s.log)
	if r != nil {
		r.iso.Warm, r.iso.AgeSeconds = true, age.Seconds()
	}
	return r, why
}

// dispatch gives a pooled run its request (pool.Pooled.Dispatch); the wall
// clock starts with serve.
func (r *run) dispatch(hr *host.Request) error {
	r.req, r.limits = hr, hr.Limits
	hr.Figures = r.ws != nil
	r.env = r.environ(r.home)
	if err := r.writeFiles(); err != nil {
		return err
	}
	base, err := pool.Pooled{
		Isolation: &r.iso, InitPID: r.proc.InitPID, InterpPID: r.proc.InterpPID, HostNS: r.s.hostNS,
		Netlink: int(r.netlink.Fd()), BeforeCheck: r.s.hooks.atDispatch, Cgroup: r.cg, Proc: r.proc, Exited: r.exited,
	}.Dispatch(pool.Dispatch{Request: hr, Cgroup: r.cgLimits(), Rlimits: r.rlimits(), Env: r.env})
	if err != nil {
		return err
	}
	r.cpuBase, r.dispatched = base, true
	r.started = time.Now()
	return nil
}

// dupFile duplicates f (close-on-exec).
func dupFile(f *os.File) (*os.File, error) {
	fd, err := unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, os.NewSyscallError("dup", err)
	}
	return os.NewFile(uintptr(fd), f.Name()), nil
}
