//go:build linux

package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/psych-runtime/psych/internal/echofloor"
	"github.com/psych-runtime/psych/internal/layers"
	"github.com/psych-runtime/psych/sandbox"
	"github.com/psych-runtime/psych/sandbox/demotools"
)

// calls is how many round trips each side of the binding measurement makes.
const calls = 5000

// medianLoop times each of n calls of body in the program and evaluates
// to the median in seconds.
func medianLoop(setup, body string) string {
	return fmt.Sprintf("import time\n%s\nts = []\nfor i in range(%d):\n    t = time.perf_counter()\n    %s\n    ts.append(time.perf_counter() - t)\nts.sort()\nts[len(ts) // 2]", setup, calls, body)
}

// rawEcho is the floor (internal/echofloor): the frame a binding call
// sends, written and read back with nothing but os.write and os.read, over
// fd 3.
var rawEcho = medianLoop(echofloor.Setup, "rt()")

// floorRounds is how many times each side of the binding measurement runs.
const floorRounds = 9

// bindingFloor measures echo(i=1) through the full sandbox and the raw echo
// of the same payload, alternately, floorRounds times each, and keeps each
// side's best median: on this kind of VM a round trip between two
// processes is fast, or 3-5× as slow when the reply must wake a halted
// vCPU (about 20-40 µs a wake), by where the scheduler puts them, from one
// process to the next, for the floor and the call alike (here the
// sandboxed call lands slow in about half its rounds, the floor in fewer).
// Each side's best is both in the fast placement; nine rounds make it
// unlikely that every round of one side lands slow.
func bindingFloor(ctx context.Context, sb sandbox.Sandbox, python string) (*Binding, error) {
	return roundTrips(ctx, sb, python, floorRounds, "bench: binding loop")
}

// roundTrips runs echo(i=1) through sb and the raw echo floor, alternately,
// rounds times each, and keeps each side's best median; what names the
// loop in an error.
func roundTrips(ctx context.Context, sb sandbox.Sandbox, python string, rounds int, what string) (*Binding, error) {
	var call, floor []float64
	for range rounds {
		res, err := sb.Run(ctx, sandbox.Request{Code: medianLoop("", "echo(i=1)"), Bindings: demotools.Bindings{}})
		if err != nil {
			return nil, err
		}
		if res.Failure != nil {
			return nil, fmt.Errorf("%s: %s", what, res.Failure.Message)
		}
		v, err := strconv.ParseFloat(string(res.Value), 64)
		if err != nil {
			return nil, err
		}
		call = append(call, v*1e6)
		f, err := echoFloor(python)
		if err != nil {
			return nil, err
		}
		floor = append(floor, f*1e6)
	}
	c, f := slices.Min(call), slices.Min(floor)
	return &Binding{CallUS: c, FloorUS: f, Ratio: c / f, CallRoundsUS: call, FloorRoundsUS: floor}, nil
}

// echoFloor runs rawEcho against a Go echo of each frame, returning the
// program's median in seconds.
func echoFloor(python string) (float64, error) {
	host, child, err := socketpair()
	if err != nil {
		return 0, err
	}
	defer host.Close()
	cmd := exec.Command(python, "-I", "-c", rawEcho+"\nprint(ts[len(ts) // 2])")
	cmd.ExtraFiles = []*os.File{child}
	var out strings.Builder
	cmd.Stdout = &out
	if err := cmd.Start(); err != nil {
		child.Close()
		return 0, err
	}
	child.Close()
	go echofloor.Serve(host, nil)
	if err := cmd.Wait(); err != nil {
		return 0, fmt.Errorf("bench: raw echo: %w", err)
	}
	return strconv.ParseFloat(strings.TrimSpace(out.String()), 64)
}

// throughput runs the built-in program at each concurrency for a fixed
// number of executions, then the host's RSS growth with 8 runs in flight.
func throughput(ctx context.Context, sb sandbox.Sandbox, cfg Config) ([]Throughput, float64, error) {
	var out []Throughput
	n := max(cfg.Runs, 8)
	run := runner(sb, Builtin, layers.Full())
	for _, c := range cfg.Concurrency {
		d, _, _, err := burst(ctx, run, c, n)
		if err != nil {
			return nil, 0, fmt.Errorf("bench: throughput run: %w", err)
		}
		out = append(out, Throughput{Concurrency: c, PerSecond: float64(n) / d.Seconds()})
	}
	rss, err := rssPerRun(ctx, sb)
	return out, rss, err
}

// rssPerRun is the host's RSS growth with 8 runs in flight (each asleep
// for a second), divided by 8, in KiB.
func rssPerRun(ctx context.Context, sb sandbox.Sandbox) (float64, error) {
	const inFlight = 8
	runtime.GC()
	debug.FreeOSMemory()
	before := rssKiB()
	started := make(chan struct{}, inFlight)
	b := &startedBindings{started: started}
	var wg sync.WaitGroup
	var firstErr error
	var mu sync.Mutex
	for range inFlight {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := sb.Run(ctx, sandbox.Request{Code: "started()\nimport time\ntime.sleep(1)", Bindings: b})
			if err == nil && res.Failure != nil {
				err = fmt.Errorf("%s", res.Failure.Message)
			}
			if err != nil {
				mu.Lock()
				firstErr = err
				mu.Unlock()
			}
		}()
	}
	peak := 0.0
	for range inFlight {
		select {
		case <-started:
		case <-time.After(30 * time.Second):
		}
	}
	for range 5 {
		peak = max(peak, rssKiB()-before)
		time.Sleep(50 * time.Millisecond)
	}
	wg.Wait()
	if firstErr != nil {
		return 0, fmt.Errorf("bench: rss run: %w", firstErr)
	}
	return peak / inFlight, nil
}

type startedBindings struct{ started chan struct{} }

func (b *startedBindings) List() []sandbox.Binding { return []sandbox.Binding{{Name: "started"}} }
func (b *startedBindings) Call(context.Context, string, json.RawMessage) (json.RawMessage, error) {
	b.started <- struct{}{}
	return json.RawMessage("null"), nil
}

// rssKiB is this process's VmRSS in KiB, or 0.
func rssKiB() float64 { return pidRSSKiB(os.Getpid()) }
