//go:build linux && cgo

// The warm pool is the Linux backends' (its dispatch drives the init through
// internal/reexec): no other build has one.

package pool

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/psych-runtime/psych/cgroups"
	"github.com/psych-runtime/psych/internal/eintr"
	"github.com/psych-runtime/psych/internal/reexec"
	"github.com/psych-runtime/psych/sandbox"
	"github.com/psych-runtime/psych/sandbox/internal/attest"
	"github.com/psych-runtime/psych/sandbox/internal/host"
)

// TakeWait bounds how long a request waits for a pooled sandbox being
// started when none is ready (Pool.TakeWait): should the fill be stuck.
const TakeWait = 5 * time.Second

// PreloadTimeout bounds how long a fill waits for a pooled interpreter's
// preloaded frame (its imports).
const PreloadTimeout = 2 * time.Minute

// PreloadFD reads the preloaded frame from fd, a blocking socket, at most
// timeout or until ctx ends; the socket is left as it was.
func PreloadFD(ctx context.Context, fd int, timeout time.Duration) (*Preloaded, error) {
	return ReadPreloaded(&pollReader{ctx: ctx, fd: fd, deadline: time.Now().Add(timeout)})
}

// PreloadConn is PreloadFD for a connection with deadlines; the deadline is
// cleared after.
func PreloadConn(ctx context.Context, c interface {
	io.Reader
	SetReadDeadline(time.Time) error
}, timeout time.Duration) (*Preloaded, error) {
	c.SetReadDeadline(time.Now().Add(timeout))
	stop := context.AfterFunc(ctx, func() { c.SetReadDeadline(time.Now()) })
	defer func() {
		stop()
		c.SetReadDeadline(time.Time{})
	}()
	return ReadPreloaded(c)
}

// pollReader reads a blocking fd only once poll says it can, in slices of
// at most 100 ms, so a deadline and ctx bound every read.
type pollReader struct {
	ctx      context.Context
	fd       int
	deadline time.Time
}

func (r *pollReader) Read(b []byte) (int, error) {
	for {
		if err := r.ctx.Err(); err != nil {
			return 0, err
		}
		left := time.Until(r.deadline)
		if left <= 0 {
			return 0, os.ErrDeadlineExceeded
		}
		fds := []unix.PollFd{{Fd: int32(r.fd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, int(min(left, 100*time.Millisecond)/time.Millisecond)+1)
		if err == unix.EINTR || err == nil && n == 0 {
			continue
		}
		if err != nil {
			return 0, os.NewSyscallError("poll", err)
		}
		m, err := eintr.Value(func() (int, error) { return unix.Read(r.fd, b) })
		switch {
		case err == unix.EAGAIN:
			continue
		case err != nil:
			return 0, os.NewSyscallError("read", err)
		case m == 0:
			return 0, io.EOF
		}
		return m, nil
	}
}

// Start starts a pool of a backend's sandboxes as pc asks (its MaxAge
// defaulted). The caller validates pc first (PoolConfig.Validate) and keeps
// the caps where its fills read them: the fills start here. Errors wrap
// sandbox.ErrInvalidConfig.
func Start[T any](pc sandbox.PoolConfig, fill func(context.Context) (T, error), destroy func(T), log *slog.Logger) (*Pool[T], error) {
	maxAge := pc.MaxAge
	if maxAge == 0 {
		maxAge = sandbox.DefaultPoolMaxAge
	}
	p, err := New(Config[T]{
		Size: pc.Size, MaxAge: maxAge, Fill: fill, Destroy: destroy,
		OnError: func(err error) { log.Warn("psych: starting a pooled sandbox", "err", err) },
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", sandbox.ErrInvalidConfig, err)
	}
	return p, nil
}

// Status is the pool's size and how many sandboxes are ready now; zero
// for a nil pool (a backend that keeps none).
func (p *Pool[T]) Status() sandbox.PoolStatus {
	if p == nil {
		return sandbox.PoolStatus{}
	}
	return sandbox.PoolStatus{Size: p.cfg.Size, Ready: p.Ready()}
}

// WaitWarm blocks until the pool holds its Size sandboxes ready, or ctx
// ends; at once for a nil pool.
func (p *Pool[T]) WaitWarm(ctx context.Context) error {
	if p == nil {
		return nil
	}
	return p.WaitReady(ctx, p.cfg.Size)
}

// Warm takes a sandbox from p for req and dispatches it, or says why req
// runs cold: what ColdReason says, a variable of the program's environment
// (envNames) read as the interpreter starts (StartEnvReason) or that the
// pool's preloaded modules read at import (imports, nil without a
// preload), no sandbox ready (an empty pool with one being
// started waits for that one, at most TakeWait, rather than start another
// beside it), or one that failed dispatch, which is destroyed unused. It
// returns the served sandbox's age.
func Warm[T any](ctx context.Context, p *Pool[T], req *host.Request, caps sandbox.Limits, imports *ImportEnv, envNames []string, dispatch func(T) error, destroy func(T), log *slog.Logger) (item T, age time.Duration, coldReason string) {
	if why := ColdReason(req, caps); why != "" {
		return item, 0, why
	}
	if why := StartEnvReason(envNames); why != "" {
		return item, 0, why
	}
	if why := imports.ColdReason(envNames); why != "" {
		return item, 0, why
	}
	item, age, ok := p.TakeWait(ctx, TakeWait)
	if !ok {
		return item, 0, "no pooled sandbox was ready"
	}
	// A fill that ended since the check may have reported a read the
	// check did not know: the taken sandbox's report is in imports now.
	if why := imports.ColdReason(envNames); why != "" {
		destroy(item)
		var zero T
		return zero, 0, why
	}
	if err := dispatch(item); err != nil {
		log.Warn("psych: a pooled sandbox failed its check at dispatch; the run goes cold", "err", err)
		destroy(item)
		var zero T
		return zero, 0, "a pooled sandbox failed its check at dispatch: " + err.Error()
	}
	return item, age, ""
}

// Pooled is a sandbox of a warm pool as the core dispatches it.
type Pooled struct {
	// Isolation is the attestation read when the sandbox was started; a
	// served one gets the dispatch's reads (network, env keys, rlimits,
	// warm).
	Isolation          *sandbox.Isolation
	InitPID, InterpPID int
	HostNS             map[string]string
	// Netlink is a NETLINK_ROUTE socket in the sandbox's network
	// namespace, kept since its start; BeforeCheck (a test hook) runs on
	// it first.
	Netlink     int
	BeforeCheck func(fd int) error
	Cgroup      *cgroups.Run
	Proc        *reexec.Process
	// Exited is closed once the sandbox's interpreter is gone.
	Exited <-chan struct{}
}

// Dispatch is what a request sets in a pooled sandbox.
type Dispatch struct {
	Request *host.Request
	// Cgroup are the request's cgroup limits, Rlimits its rlimits as the
	// init would set them, Env the program's whole environment.
	Cgroup  cgroups.Limits
	Rlimits []reexec.Rlimit
	Env     []string
}

// Dispatch gives a pooled sandbox its request, before the start frame.
// First the sandbox must still read back as it was started (CheckPooled);
// then the init lowers the interpreter's rlimits to d's (RLIMIT_CPU counted
// from now: reexec.FromNow) while the host writes the cgroup's limits and
// resets its memory peak (a kernel that cannot, v2 before 6.12, leaves the
// interpreter's own start in it: the program's process all the same), the
// start frame takes the environment, and the attestation reads the
// rlimits back. It returns the cgroup's CPU at its end: the budget's zero.
func (p Pooled) Dispatch(d Dispatch) (cpuBase time.Duration, err error) {
	select {
	case <-p.Exited:
		return 0, errors.New("its interpreter is gone")
	default:
	}
	nc, err := CheckPooled(p)
	if err != nil {
		return 0, err
	}
	used, err := attest.ProcessCPU(p.InterpPID)
	if err != nil {
		return 0, err
	}
	lowered, err := p.Proc.StartLower(reexec.FromNow(d.Rlimits, used))
	if err != nil {
		return 0, err
	}
	if err := p.Cgroup.SetLimits(d.Cgroup); err != nil {
		return 0, err
	}
	if err := p.Cgroup.ResetPeaks(); err != nil && !errors.Is(err, cgroups.ErrNotSupported) {
		return 0, err
	}
	if err := d.Request.SetStart(d.Env); err != nil {
		return 0, err
	}
	if err := lowered(5 * time.Second); err != nil {
		return 0, err
	}
	iso := p.Isolation
	iso.Network, iso.EnvKeys, iso.Limits = nc, host.EnvKeys(d.Env), attest.ReadLimits(p.InterpPID)
	// The baseline last: what the host did above is not the program's.
	return p.Cgroup.CPU()
}

// CheckPooled refuses a pooled sandbox that no longer reads back as it was
// started: its attestation (Readback), its network namespace (the check
// again: lo alone), or its cgroup (an OOM kill, a refused fork). They are
// read one after the other: side by side on goroutines of their own they
// were slower here (two CPUs, and threads to wake). On success it returns
// the network check, for the run's attestation.
func CheckPooled(p Pooled) (*sandbox.NetworkCheck, error) {
	if what := attest.Readback(p.Isolation, p.InitPID, p.InterpPID, p.HostNS); what != "" {
		return nil, fmt.Errorf("its attestation no longer reads back the same: %s", what)
	}
	if p.BeforeCheck != nil {
		if err := p.BeforeCheck(p.Netlink); err != nil {
			return nil, err
		}
	}
	nc, err := attest.CheckNetwork(p.Netlink, nil)
	switch {
	case err != nil:
		return nil, fmt.Errorf("network check: %w", err)
	case !nc.Verified:
		return nil, fmt.Errorf("its network namespace no longer passes the check: %s", nc.Reason)
	}
	oom, refused, err := p.Cgroup.Events()
	switch {
	case err != nil:
		return nil, err
	case oom > 0 || refused > 0:
		return nil, fmt.Errorf("its cgroup recorded %d OOM kills and %d refused forks", oom, refused)
	}
	return nc, nil
}

// ColdReason says why a warm pool started at caps cannot serve r, as
// Isolation.ColdReason reports it: the network granted, a limit above its
// cap, or a stack_bytes other than the pool's (glibc sizes thread stacks
// from RLIMIT_STACK as the interpreter starts); "" when it can.
func ColdReason(r *host.Request, caps sandbox.Limits) string {
	switch n := r.Limits.Above(caps); {
	case r.Network:
		return "the request grants the network"
	case n == "stack_bytes":
		return "stack_bytes other than the pool's"
	case n != "":
		return string(n) + " above the pool's cap"
	}
	return ""
}
