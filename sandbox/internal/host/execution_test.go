package host

import (
	"context"
	"errors"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/psych-runtime/psych/cgroups"
	"github.com/psych-runtime/psych/sandbox"
	"github.com/psych-runtime/psych/sandbox/wire"
)

// fakeRun is a run without a process: Kill ends it.
type fakeRun struct {
	exited chan struct{}
	once   sync.Once
	kills  int
	mu     sync.Mutex
	child  net.Conn
}

func (f *fakeRun) kill() {
	f.mu.Lock()
	f.kills++
	f.mu.Unlock()
	f.once.Do(func() { f.child.Close(); close(f.exited) })
}

type fakeMeter struct{ cpu time.Duration }

func (m fakeMeter) Stats() (cgroups.Stats, error) {
	return cgroups.Stats{CPU: m.cpu, CPUKnown: true, PidsCurrent: 2}, nil
}

func begin(t *testing.T, ctx context.Context, limits sandbox.Limits, meter Meter) (*Execution, *fakeRun) {
	t.Helper()
	return beginBase(t, ctx, limits, meter, 0)
}

func beginBase(t *testing.T, ctx context.Context, limits sandbox.Limits, meter Meter, base time.Duration) (*Execution, *fakeRun) {
	t.Helper()
	req, err := Prepare(sandbox.Request{Code: "x", Limits: limits}, sandbox.DefaultLimits(), wire.DefaultMaxFrame, nil)
	if err != nil {
		t.Fatal(err)
	}
	hostEnd, child := net.Pipe()
	f := &fakeRun{exited: make(chan struct{}), child: child}
	go func() { // the program: reads the start frame, then nothing
		wire.NewDecoder(child, 0).Next()
	}()
	s := Setup{Request: req, Wire: hostEnd, MaxFrame: wire.DefaultMaxFrame, MaxOutput: 1 << 20,
		Stdout: strings.NewReader(""), Stderr: strings.NewReader(""),
		Exited: f.exited, Kill: f.kill, Started: time.Now(), CPUBase: base}
	if meter != nil {
		s.Meter = meter
	}
	return Begin(ctx, s), f
}

// TestSuperviseWallPaused: time the wall clock is paused (a run frozen for
// a person's approval) is not spent.
func TestSuperviseWallPaused(t *testing.T) {
	e, _ := begin(t, context.Background(), sandbox.Limits{WallSeconds: 0.3}, nil)
	e.Clock().Pause()
	start := time.Now()
	go func() { time.Sleep(time.Second); e.Clock().Resume() }()
	if err := e.Supervise(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.Finish()
	if d := time.Since(start); d < 1200*time.Millisecond {
		t.Errorf("a 0.3 s wall limit, paused for 1 s, fired after %v", d)
	}
	res := e.Result(Outcome{Status: ExitStatus{Signal: sigKILL}})
	if res.LimitHit != sandbox.LimitWallSeconds || res.Failure == nil || res.Failure.Type != sandbox.FailureWallTimeout {
		t.Fatalf("result %+v", res)
	}
}

// TestSuperviseCPU: the whole-run CPU watch ends a run at its limit.
func TestSuperviseCPU(t *testing.T) {
	e, f := begin(t, context.Background(), sandbox.Limits{CPUSeconds: 1}, fakeMeter{cpu: 2 * time.Second})
	if err := e.Supervise(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.Finish()
	res := e.Result(Outcome{Status: ExitStatus{Signal: sigKILL}})
	if f.kills == 0 || res.LimitHit != sandbox.LimitCPUSeconds || res.LimitSource != sandbox.SourceHost {
		t.Fatalf("kills %d, result %+v", f.kills, res)
	}
}

// TestSuperviseCPUFromBase: a pooled sandbox's CPU budget and usage count
// from its baseline at dispatch: 2.5 s used of which 2 s before dispatch
// is within a 1 s budget, and the usage is 0.5 s.
func TestSuperviseCPUFromBase(t *testing.T) {
	e, f := beginBase(t, context.Background(), sandbox.Limits{CPUSeconds: 1, WallSeconds: 0.3}, fakeMeter{cpu: 2500 * time.Millisecond}, 2*time.Second)
	if err := e.Supervise(context.Background()); err != nil {
		t.Fatal(err)
	}
	u := e.Usage(sandbox.Usage{}, 0)
	e.Finish()
	res := e.Result(Outcome{Status: ExitStatus{Signal: sigKILL}, Usage: u})
	if f.kills == 0 || res.LimitHit != sandbox.LimitWallSeconds || u.CPUSeconds != 0.5 {
		t.Fatalf("kills %d, limit %q, cpu %v; want the wall limit and 0.5 s from the baseline", f.kills, res.LimitHit, u.CPUSeconds)
	}
}

// TestSuperviseCancel: an ended context kills the run and Supervise
// returns its error once the run is gone.
func TestSuperviseCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	e, f := begin(t, ctx, sandbox.Limits{}, nil)
	time.AfterFunc(50*time.Millisecond, cancel)
	if err := e.Supervise(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Supervise: %v, want context.Canceled", err)
	}
	e.Finish()
	if f.kills == 0 {
		t.Fatal("the run was not killed")
	}
}

// fakeFreezer records the freezes and thaws asked of it, in order.
type fakeFreezer struct {
	mu    sync.Mutex
	calls []bool
	fail  bool // a freeze fails
}

func (f *fakeFreezer) freeze(frozen bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, frozen)
	if frozen && f.fail {
		return errors.New("freezer broke")
	}
	return nil
}

func (f *fakeFreezer) seen() []bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]bool(nil), f.calls...)
}

// TestSuspend: a suspension freezes, then pauses the clock; resume undoes
// both once; a kill during it thaws after killing (so a v1 freezer lets the
// processes die), and nothing suspends a run that is ending. A failed
// freeze is ErrCannotSuspend with the run thawed and the clock running.
func TestSuspend(t *testing.T) {
	e, f := begin(t, context.Background(), sandbox.Limits{WallSeconds: 60}, nil)
	fz := &fakeFreezer{}
	e.s.Freeze = fz.freeze
	resume, err := e.suspend()
	if err != nil {
		t.Fatal(err)
	}
	if !e.Clock().Paused() || !slices.Equal(fz.seen(), []bool{true}) {
		t.Fatalf("after suspend: paused %v, freezer %v", e.Clock().Paused(), fz.seen())
	}
	if _, err := e.suspend(); !errors.Is(err, sandbox.ErrCannotSuspend) {
		t.Fatalf("nested suspend: %v, want ErrCannotSuspend", err)
	}
	time.Sleep(20 * time.Millisecond)
	resume()
	resume()
	if e.Clock().Paused() || !slices.Equal(fz.seen(), []bool{true, false}) || e.suspended < 20*time.Millisecond {
		t.Fatalf("after resume: paused %v, freezer %v, suspended %v", e.Clock().Paused(), fz.seen(), e.suspended)
	}
	if _, err := e.suspend(); err != nil {
		t.Fatal(err)
	}
	e.kill()
	if f.kills != 1 || !slices.Equal(fz.seen(), []bool{true, false, true, false}) {
		t.Fatalf("kill while frozen: %d kills, freezer %v; want the kill, then a thaw", f.kills, fz.seen())
	}
	if _, err := e.suspend(); !errors.Is(err, sandbox.ErrCannotSuspend) {
		t.Fatalf("suspend after the kill: %v, want ErrCannotSuspend", err)
	}
	if e.Supervise(context.Background()) != nil {
		t.Fatal("Supervise")
	}
	e.Finish()

	e, _ = begin(t, context.Background(), sandbox.Limits{WallSeconds: 60}, nil)
	fz = &fakeFreezer{fail: true}
	e.s.Freeze = fz.freeze
	if _, err := e.suspend(); !errors.Is(err, sandbox.ErrCannotSuspend) || e.Clock().Paused() || !slices.Equal(fz.seen(), []bool{true, false}) {
		t.Fatalf("failed freeze: %v, paused %v, freezer %v", err, e.Clock().Paused(), fz.seen())
	}
	e.kill()
	e.Supervise(context.Background())
	e.Finish()
}

// beginProgram begins a run with EndAtExitFrame whose program sends frames
// and then, with closeOutput, closes the wire and its stdout and stderr;
// without, stdout stays open (a child of it would hold it) until Kill.
func beginProgram(t *testing.T, frames []any, closeOutput bool) (*Execution, *fakeRun, func()) {
	t.Helper()
	req, err := Prepare(sandbox.Request{Code: "x"}, sandbox.DefaultLimits(), wire.DefaultMaxFrame, nil)
	if err != nil {
		t.Fatal(err)
	}
	hostEnd, child := net.Pipe()
	outR, outW := net.Pipe()
	f := &fakeRun{exited: make(chan struct{}), child: child}
	kill := func() { outW.Close(); f.kill() }
	go func() {
		wire.NewDecoder(child, 0).Next()
		enc := wire.NewEncoder(child, 0)
		for _, m := range frames {
			if enc.Encode(m) != nil {
				return
			}
		}
		if closeOutput {
			outW.Close()
			child.Close()
		}
	}()
	s := Setup{Request: req, Wire: hostEnd, MaxFrame: wire.DefaultMaxFrame, MaxOutput: 1 << 20,
		Stdout: outR, Stderr: strings.NewReader(""),
		Exited: f.exited, Kill: kill, Started: time.Now(), EndAtExitFrame: true}
	return Begin(context.Background(), s), f, kill
}

// TestEndAtExitFrame: a run whose program sent its result and exit frame
// and closed its output ends there: Kill is called (the rest of the tree),
// the status is the frame's, and the host's evidence shows no kill of its
// own.
func TestEndAtExitFrame(t *testing.T) {
	e, f, _ := beginProgram(t, []any{&wire.Result{Failure: &wire.Failure{Type: "SystemExit", Message: "3"}}, &wire.Exit{Code: 3}}, true)
	done := make(chan error, 1)
	go func() { done <- e.Supervise(context.Background()) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Supervise did not return at the exit frame")
	}
	e.Finish()
	if !e.EndedAtExitFrame() || f.kills != 1 {
		t.Fatalf("ended at the exit frame %v, kills %d; want true and 1", e.EndedAtExitFrame(), f.kills)
	}
	res := e.Result(Outcome{Status: ExitStatus{Signal: sigKILL}}) // the kernel's word is not in yet
	if res.Failure == nil || res.Failure.Type != "SystemExit" || res.Failure.ExitCode == nil || *res.Failure.ExitCode != 3 || res.LimitHit != "" {
		t.Fatalf("result %+v, failure %+v; want the program's SystemExit with exit code 3", res, res.Failure)
	}
}

// TestNoEndAtExitFrameWhileHeld: with the output still held open (by a
// child of the program, say) the run does not end at the exit frame; once
// the host kills it, it ends on the kernel's word, even though the kill
// releases the output before the processes are reported gone.
func TestNoEndAtExitFrameWhileHeld(t *testing.T) {
	e, _, kill := beginProgram(t, []any{&wire.Result{}, &wire.Exit{Code: 0}}, false)
	// The kernel's word comes a little after the output is released.
	exited := make(chan struct{})
	var once sync.Once
	e.s.Exited = exited
	e.s.Kill = func() {
		kill()
		once.Do(func() { time.AfterFunc(100*time.Millisecond, func() { close(exited) }) })
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Supervise(ctx) }()
	select {
	case <-done:
		t.Fatal("Supervise returned before the run's processes were gone")
	case <-time.After(300 * time.Millisecond):
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Supervise: %v, want context.Canceled", err)
	}
	e.Finish()
	if e.EndedAtExitFrame() {
		t.Fatal("ended at the exit frame after the host killed the run")
	}
}

// TestExitFrameBeforeResult: an exit frame before the result breaks the
// protocol: the host kills the run for it, and never takes its status.
func TestExitFrameBeforeResult(t *testing.T) {
	e, f, _ := beginProgram(t, []any{&wire.Exit{Code: 0}, &wire.Result{}}, true)
	if err := e.Supervise(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.Finish()
	if e.EndedAtExitFrame() || e.srv.ProtocolError() == nil || f.kills == 0 {
		t.Fatalf("ended at the exit frame %v, protocol error %v, kills %d; want a violation and a kill", e.EndedAtExitFrame(), e.srv.ProtocolError(), f.kills)
	}
}
