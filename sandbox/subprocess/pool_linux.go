//go:build linux && cgo

package subprocess

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/psych-runtime/psych/cgroups"
	"github.com/psych-runtime/psych/internal/layers"
	"github.com/psych-runtime/psych/internal/reexec"
	"github.com/psych-runtime/psych/sandbox"
	"github.com/psych-runtime/psych/sandbox/internal/host"
	"github.com/psych-runtime/psych/sandbox/internal/pool"
)

// takeWait bounds how long a request waits for a pooled sandbox being
// started when none is ready.
const takeWait = time.Second

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
	caps, err := pc.Validate(s.cfg.DefaultLimits)
	if err != nil {
		return fmt.Errorf("%w: %w", sandbox.ErrInvalidConfig, err)
	}
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
	maxAge := pc.MaxAge
	if maxAge == 0 {
		maxAge = sandbox.DefaultPoolMaxAge
	}
	s.poolCaps = caps
	s.pool, err = pool.New(pool.Config[*run]{
		Size:    pc.Size,
		MaxAge:  maxAge,
		Fill:    s.fill,
		Destroy: (*run).destroy,
		OnError: func(err error) { s.log.Warn("psych: starting a pooled sandbox", "err", err) },
	})
	if err != nil {
		return fmt.Errorf("%w: %w", sandbox.ErrInvalidConfig, err)
	}
	return nil
}

// WaitWarm blocks until the pool holds its Size sandboxes ready (at once
// without a pool), or ctx ends.
func (s *Sandbox) WaitWarm(ctx context.Context) error {
	if s.pool == nil {
		return nil
	}
	return s.pool.WaitReady(ctx, s.cfg.Pool.Size)
}

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
	if s.hooks.pooled != nil {
		s.hooks.pooled(r)
	}
	return r, nil
}

// warm serves hr from the pool: a pooled sandbox that passes its checks at
// dispatch, with hr applied. It returns nil and why when hr runs cold.
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
		s.log.Warn("psych: a pooled sandbox failed its check at dispatch; the run goes cold", "err", err)
		r.destroy()
		return nil, "a pooled sandbox failed its check at dispatch: " + err.Error()
	}
	r.iso.Warm, r.iso.AgeSeconds = true, age.Seconds()
	return r, ""
}

// serveWarm serves a dispatched run and returns its result once its
// processes are gone; its cgroup and directory are removed after, off the
// request's path (Close waits for that).
func (r *run) serveWarm(ctx context.Context) (*sandbox.Result, error) {
	res, err := r.serve(ctx)
	r.s.removing.Go(func() {
		if err := r.cleanup(); err != nil {
			r.s.log.Warn("psych: removing a served pooled sandbox", "err", err)
		}
	})
	return res, err
}

// dispatch gives a pooled run its request, before the start frame goes out:
// the sandbox must still read back as it was started (the attestation, the
// network namespace, no event in its cgroup); then the request's cgroup
// limits are written, the peaks reset and the CPU baseline taken, and the
// start frame carries the request's environment and rlimits, which the
// bootstrap lowers itself to. The wall clock starts with serve.
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
	if err := r.cg.SetLimits(r.cgLimits()); err != nil {
		return err
	}
	// A kernel that cannot reset the memory peak (v2 before 6.12) leaves
	// the interpreter's own start in it: the program's process all the same.
	if err := r.cg.ResetPeaks(); err != nil && !errors.Is(err, cgroups.ErrNotSupported) {
		return err
	}
	r.env = r.environ(r.home)
	r.iso.EnvKeys = host.EnvKeys(r.env)
	if err := hr.SetStart(r.env); err != nil {
		return err
	}
	if err := lowered(5 * time.Second); err != nil {
		return err
	}
	r.iso.Limits = host.ReadLimits(r.proc.InterpPID)
	// The baseline last: what the host did above is not the program's.
	base, err := r.cg.CPU()
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
