package host

import (
	"context"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/psych-runtime/psych/cgroups"
	"github.com/psych-runtime/psych/sandbox"
	"github.com/psych-runtime/psych/sandbox/internal/attest"
)

// Meter reads a run's whole-run counters; a *cgroups.Run is one.
type Meter interface {
	Stats() (cgroups.Stats, error)
}

// Setup is what a backend hands the core once the interpreter exists.
type Setup struct {
	Request *Request
	// Wire is the host's end of the program's channel.
	Wire io.ReadWriter
	// MaxFrame caps a frame, MaxOutput each of stdout and stderr.
	MaxFrame, MaxOutput int
	// Stdout and Stderr are drained under the cap until their end.
	Stdout, Stderr io.Reader
	// Exited is closed once the run's processes are gone.
	Exited <-chan struct{}
	// Kill kills every process of the run. It may be called more than once,
	// also after the run ended.
	Kill func()
	// Meter watches the whole run's CPU, OOM kills and tasks; nil where the
	// run has no cgroup (RLIMIT_CPU alone then holds the CPU limit).
	Meter Meter
	// Started is when the backend began to start the run.
	Started time.Time
	// Freeze freezes (true) or thaws (false) every process of the run, and
	// returns once they are; nil where the backend cannot freeze. A freeze
	// must not stop Kill from killing the run.
	Freeze func(frozen bool) error
	// SetupInPidsPeak says the cgroup's pids.peak also counts the tasks the
	// backend's setup had in it (a container engine's runc init, whose Go
	// runtime has several threads): the peak then comes from the host's
	// own samples alone.
	SetupInPidsPeak bool
	// CPUBase is the Meter's CPU at dispatch, for a pooled sandbox: the
	// run's CPU budget and usage count from it.
	CPUBase time.Duration
	// EndAtExitFrame lets the run end at the program's own end, before the
	// interpreter's teardown: once the exit frame has come and the wire,
	// stdout and stderr have all ended (nothing of the program holds them),
	// Supervise kills the run and returns, and the status is the frame's.
	// A run the host has killed (a limit, a violation, ctx) ends at Exited
	// all the same. Only for a backend whose Kill takes the whole tree at once; else the
	// run ends at Exited.
	EndAtExitFrame bool
	// Warm says a warm pool's sandbox was dispatched the run (what
	// Isolation.Warm will say); Begin tells Request.Started so.
	Warm bool
}

// CPUPoll is how often the whole-run CPU and OOM counters are read.
const CPUPoll = 50 * time.Millisecond

// Evidence is what the host itself observed about how a run ended.
type Evidence struct {
	WallFired bool // the wall clock ran out and the host killed the run
	CPUFired  bool // the whole-run CPU watch killed the run
	OOMFired  bool // the host killed the run on the cgroup's first OOM kill
	// ApprovalFired: the run's suspended time reached its ApprovalSeconds
	// and the host killed the run.
	ApprovalFired bool
	// The run cgroup's counters, as last read.
	OOMKills, PidsMaxEvents int64
	// PidsPeak is the most tasks sampled, for kernels that keep no pids.peak.
	PidsPeak int64
}

// Execution is the host side of one run: it serves the wire, drains the
// output, supervises the limits and builds the Result. Begin starts it,
// Supervise waits for the end, Finish waits for the wire and the output,
// and Result describes it.
type Execution struct {
	s              Setup
	srv            *Server
	stdout, stderr Capture
	clock          *WallClock
	cancel         context.CancelFunc
	served         chan struct{}
	drains         sync.WaitGroup
	killOnce       sync.Once
	ev             Evidence
	ended          time.Time
	cancelled      bool
	atEnd          chan struct{} // closed at the program's own end (EndAtExitFrame)
	endedAtExit    bool

	// The suspension: freeze and the paused clock go together.
	susMu     sync.Mutex
	frozen    bool // the run is frozen and its clock paused
	over      bool // the run was killed or ended: no freeze from now on
	frozeAt   time.Time
	suspended time.Duration
	// The approval budget: armed while frozen for what is left of
	// ApprovalSeconds; approvalOut is closed when it runs out.
	approvalTimer *time.Timer
	approvalOut   chan struct{}
}

// Begin tells the request's Started (first: before any output is drained
// and the start frame is sent), then starts serving the wire and draining
// the output. The wall clock starts now.
func Begin(ctx context.Context, s Setup) *Execution {
	if s.Request.Started != nil {
		tellStarted(s.Request.Started, s.Warm)
	}
	e := &Execution{s: s, served: make(chan struct{}), approvalOut: make(chan struct{})}
	e.stdout.Max, e.stderr.Max = s.MaxOutput, s.MaxOutput
	if out := s.Request.Output; out != nil {
		var broken atomic.Bool // a call panicked: no more calls
		e.stdout.Emit = deliver(out, sandbox.Stdout, &broken)
		e.stderr.Emit = deliver(out, sandbox.Stderr, &broken)
	}
	for _, d := range []struct {
		r io.Reader
		c *Capture
	}{{s.Stdout, &e.stdout}, {s.Stderr, &e.stderr}} {
		e.drains.Add(1)
		go func() { defer e.drains.Done(); d.c.Drain(d.r) }()
	}
	e.srv = NewServer(s.Wire, s.Request, s.MaxFrame)
	rc := sandbox.RunContext{ID: s.Request.ID}
	if s.Freeze != nil {
		rc.Suspend = e.suspend
	}
	serveCtx, cancel := context.WithCancel(sandbox.WithRun(ctx, rc))
	e.cancel = cancel
	// The clock exists before the first call can suspend the run.
	e.clock = NewWallClock(time.Duration(s.Request.Limits.WallSeconds * float64(time.Second)))
	go func() { defer close(e.served); e.srv.Serve(serveCtx) }()
	if s.EndAtExitFrame {
		e.atEnd = make(chan struct{})
		go func() {
			<-e.served
			e.drains.Wait()
			if e.srv.Exit() != nil {
				close(e.atEnd)
			}
		}()
	}
	if s.Meter != nil {
		// The first sample: the interpreter exists, whatever the run's
		// length, and a kernel without pids.peak still shows it.
		if st, err := s.Meter.Stats(); err == nil {
			e.Sample(&st)
		}
	}
	return e
}

// deliver makes a Capture's Emit that calls out for stream, on the drain's
// goroutine and under no lock of the host's. A call that panics is
// recovered and ends the delivery of the run's output (sandbox.Output):
// the drain, and the Result, go on.
func deliver(out sandbox.Output, stream sandbox.Stream, broken *atomic.Bool) func(string) {
	return func(text string) {
		if broken.Load() {
			return
		}
		defer func() {
			if recover() != nil {
				broken.Store(true)
			}
		}()
		out(stream, text)
	}
}

// tellStarted calls started, recovering a panic (sandbox.Started): the run
// goes on.
func tellStarted(started sandbox.Started, warm bool) {
	defer func() { recover() }()
	started(warm)
}

// Clock is the run's wall clock; pause it while the run is frozen.
func (e *Execution) Clock() *WallClock { return e.clock }

// kill ends the run on the host's own account. A frozen run is thawed
// after the kill, so that a freezer that holds back even SIGKILL (cgroup
// v1's) lets its processes die.
func (e *Execution) kill() {
	e.killOnce.Do(e.srv.HostKilled)
	e.susMu.Lock()
	defer e.susMu.Unlock()
	e.over = true
	e.s.Kill()
	if e.frozen {
		e.unfreeze()
	}
}

// suspend freezes the run and then pauses its clock, so the clock is
// paused for no longer than the run is frozen. See sandbox.Suspend.
func (e *Execution) suspend() (func(), error) {
	e.susMu.Lock()
	defer e.susMu.Unlock()
	switch {
	case e.over:
		return nil, fmt.Errorf("suspend run %s: %w: the run is ending", e.s.Request.ID, sandbox.ErrCannotSuspend)
	case e.frozen:
		return nil, fmt.Errorf("suspend run %s: %w: it is suspended already", e.s.Request.ID, sandbox.ErrCannotSuspend)
	}
	if err := e.s.Freeze(true); err != nil {
		e.s.Freeze(false) // a half-done freeze must not hold the run
		return nil, fmt.Errorf("suspend run %s: %w: %w", e.s.Request.ID, sandbox.ErrCannotSuspend, err)
	}
	e.clock.Pause()
	e.frozen, e.frozeAt = true, time.Now()
	left := time.Duration(e.s.Request.Limits.ApprovalSeconds*float64(time.Second)) - e.suspended
	e.approvalTimer = time.AfterFunc(max(left, 0), e.approvalSpent)
	return sync.OnceFunc(e.resume), nil
}

// approvalSpent ends the approval budget if the run is still frozen:
// Supervise then kills it. A resume that came first won the race (the run
// goes on, and its next suspension has nothing left).
func (e *Execution) approvalSpent() {
	e.susMu.Lock()
	defer e.susMu.Unlock()
	if e.frozen && !e.over {
		select {
		case <-e.approvalOut:
		default:
			close(e.approvalOut)
		}
	}
}

// resume restarts the clock, then thaws the run.
func (e *Execution) resume() {
	e.susMu.Lock()
	defer e.susMu.Unlock()
	if !e.frozen {
		return
	}
	if e.over {
		e.unfreeze()
		return
	}
	if err := e.unfreeze(); err != nil {
		// A run that stays frozen would spend its wall budget doing
		// nothing: end it now.
		e.over = true
		e.s.Kill()
	}
}

// unfreeze ends the suspension; e.susMu is held.
func (e *Execution) unfreeze() error {
	e.suspended += time.Since(e.frozeAt)
	e.frozen = false
	e.approvalTimer.Stop()
	e.clock.Resume()
	return e.s.Freeze(false)
}

// Supervise waits until the run's processes are gone, killing them at the
// first of: the wall limit, the whole-run CPU limit, the approval limit
// (suspended time), an OOM kill in the run, a protocol violation, or ctx
// ending. It returns ctx's error when ctx ended
// first (the run is then killed and must still be torn down), else nil.
func (e *Execution) Supervise(ctx context.Context) error {
	var tick <-chan time.Time
	if e.s.Meter != nil {
		t := time.NewTicker(CPUPoll)
		defer t.Stop()
		tick = t.C
	}
	cpuLimit := time.Duration(e.s.Request.Limits.CPUSeconds * float64(time.Second))
	wall, violation, done := e.clock.C(), e.srv.Violation(), ctx.Done()
	approval := e.approvalOut
	killed := false
	atEnd := e.atEnd
	kill := func() {
		// A run the host killed ends on the kernel's word, never at an
		// exit frame its killed holders' closing output would unblock.
		killed, atEnd = true, nil
		e.kill()
	}
	for {
		select {
		case <-atEnd:
			// The program's own end: nothing of it runs from here, and
			// what it left is killed now, not on the host's account.
			e.endedAtExit = true
			e.s.Kill()
			return e.end(ctx)
		case <-e.s.Exited:
			return e.end(ctx)
		case <-wall:
			wall = nil
			e.ev.WallFired = !killed
			kill()
		case <-approval:
			approval = nil
			e.ev.ApprovalFired = !killed
			kill()
		case <-tick:
			if killed {
				break
			}
			st, err := e.s.Meter.Stats()
			if err != nil {
				break
			}
			e.Sample(&st)
			switch {
			case st.OOMKills > 0:
				// One OOM kill ends the run: a program that lost a process
				// to the cap has hit it.
				e.ev.OOMFired = true
				kill()
			case st.CPUKnown && st.CPU-e.s.CPUBase >= cpuLimit:
				e.ev.CPUFired = true
				kill()
			}
		case <-violation:
			violation = nil
			kill()
		case <-done:
			// Kill, then go on until the end as after any other, so the
			// backend tears down exactly as always.
			done, e.cancelled = nil, true
			kill()
		}
	}
}

// end records the run's end for Supervise.
func (e *Execution) end(ctx context.Context) error {
	e.ended = time.Now()
	e.susMu.Lock()
	e.over = true
	if e.frozen {
		// Gone while frozen: count the suspension to the end.
		e.suspended += e.ended.Sub(e.frozeAt)
		e.frozen = false
		e.approvalTimer.Stop()
	}
	e.susMu.Unlock()
	e.clock.Stop()
	e.cancel() // a binding call still in flight ends with the run
	if e.cancelled {
		return ctx.Err()
	}
	return nil
}

// EndedAtExitFrame reports whether Supervise ended the run at the
// program's own end (Setup.EndAtExitFrame): the backend's own exit report
// may then not exist yet, and Result takes the status from the exit frame.
func (e *Execution) EndedAtExitFrame() bool { return e.endedAtExit }

// Sample keeps what the host must watch for itself: the most tasks seen
// (where the kernel keeps no pids.peak) and the kernel's event counters.
func (e *Execution) Sample(st *cgroups.Stats) {
	e.ev.PidsPeak = max(e.ev.PidsPeak, st.PidsCurrent)
	e.ev.OOMKills = max(e.ev.OOMKills, st.OOMKills)
	e.ev.PidsMaxEvents = max(e.ev.PidsMaxEvents, st.PidsMaxEvents)
}

// Reported reports whether the program's result frame arrived (valid after
// Finish).
func (e *Execution) Reported() bool { return e.srv.Result() != nil }

// Finish stops serving and waits for the server and the output drains. The
// backend calls it after its processes are gone and the streams closed.
func (e *Execution) Finish() {
	e.cancel()
	<-e.served
	e.drains.Wait()
}

// Usage is what the whole run consumed: the meter's final read where there
// is one, over fallback (what the backend measured without it: the init's
// rusage, say). ownTasks is the number of tasks of the backend's own (its
// init) that the cgroup counts beside the program's.
func (e *Execution) Usage(fallback sandbox.Usage, ownTasks int64) *sandbox.Usage {
	u := fallback
	if e.s.Meter == nil {
		return &u
	}
	st, err := e.s.Meter.Stats()
	if err != nil {
		return &u
	}
	e.Sample(&st)
	if st.CPUKnown {
		u.CPUSeconds = max(st.CPU-e.s.CPUBase, 0).Seconds()
	}
	if st.MemoryPeakKnown {
		u.PeakMemoryBytes = st.MemoryPeak
	}
	peak := e.ev.PidsPeak
	if st.PidsPeakKnown && !e.s.SetupInPidsPeak {
		peak = max(peak, st.PidsPeak)
	}
	if e.ev.PidsMaxEvents > 0 {
		// The kernel refused a task at the cap.
		peak = int64(e.s.Request.Limits.ProcessCount) + ownTasks
	}
	u.PeakProcesses = max(peak-ownTasks, 0)
	return &u
}

// Outcome is what the backend knows of the run's end.
type Outcome struct {
	Status        ExitStatus
	Usage         *sandbox.Usage
	NetworkDenied bool
	Isolation     *sandbox.Isolation
	// TmpFull says one of the run's own tmpfs mounts was at its cap at
	// the end (TmpfsWatch.Full): with a SIGBUS, the tmp_bytes limit.
	TmpFull bool
}

// Result builds the run's Result from the output, the wire, the host's own
// evidence and o. Call it after Finish.
func (e *Execution) Result(o Outcome) *sandbox.Result {
	e.susMu.Lock()
	suspended := e.suspended
	e.susMu.Unlock()
	if o.Isolation != nil {
		o.Isolation.Freezable = e.s.Freeze != nil
		o.Isolation.Host = attest.Nodename()
	}
	res := &sandbox.Result{
		ID:        e.s.Request.ID,
		Suspended: suspended,
		Stdout:    e.stdout.Text(), Stderr: e.stderr.Text(),
		StdoutTruncated: e.stdout.Truncated(), StderrTruncated: e.stderr.Truncated(),
		Duration:      e.ended.Sub(e.s.Started),
		NetworkDenied: o.NetworkDenied,
		Usage:         o.Usage,
		Isolation:     o.Isolation,
	}
	if t := e.srv.CallTime(); t > 0 {
		if res.Usage == nil {
			res.Usage = &sandbox.Usage{}
		}
		res.Usage.HostCallSeconds = t.Seconds()
	}
	if e.endedAtExit {
		o.Status = ExitStatus{Code: e.srv.Exit().Code}
	}
	cpuUsed := 0.0
	if o.Usage != nil {
		cpuUsed = o.Usage.CPUSeconds
	}
	describe(res, e.s.Request.Limits, e.srv, Ending{Evidence: e.ev, Status: o.Status, CPUUsed: cpuUsed, TmpFull: o.TmpFull})
	return res
}
