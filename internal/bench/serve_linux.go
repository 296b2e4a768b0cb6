//go:build linux

package bench

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/psych-runtime/psych/client"
	"github.com/psych-runtime/psych/sandbox"
)

// servePool is the serve rows' server's warm pool.
const servePool = 2

// serveRows are the rows through a psych serve (started from cfg.CLI, which
// hands serve to psych-full, with --pool 2, no store, --max-runs at the
// saturation's concurrency), on a Unix socket in a temporary directory:
//
//   - serve: `psych run --json --host` as a whole process, each execution
//     started once the server's pool has refilled, as /v1/info tells;
//   - serve-saturation: executions through the API (the Go client),
//     cfg.Saturation at once, beside cold, the library's cold sandbox.
//
// Their close stops the server (SIGTERM: a drain). full waits until the
// server's pool is full.
func serveRows(cfg Config, program string, cold func(context.Context) (*sandbox.Isolation, error)) (rows []*row, full func(context.Context) error, err error) {
	s, err := startServe(cfg)
	if err != nil {
		return nil, nil, err
	}
	if err := s.refilled(context.Background()); err != nil {
		s.stop()
		return nil, nil, err
	}
	sb := s.client.Sandbox()
	api := func(ctx context.Context) (*sandbox.Isolation, error) {
		res, err := sb.Run(ctx, sandbox.Request{Code: program})
		if err != nil {
			return nil, err
		}
		return outcome(res)
	}
	host := func(ctx context.Context) (*sandbox.Isolation, error) {
		return cliJSON(ctx, cfg.CLI, program, "--host", "unix://"+s.sock)
	}
	// Each execution's refill is waited for after it too, so that no row
	// after it is measured beside the server's refill.
	settle := func() { s.refilled(context.Background()) }
	measure := func(ctx context.Context, rep *Report) error {
		if err := s.refilled(ctx); err != nil {
			return err
		}
		var err error
		if rep.ServeTool, err = serveTool(ctx, sb, cfg.Python); err != nil {
			return err
		}
		rep.ServeRSS, err = serveRSS(ctx, sb, s.cmd.Process.Pid, cfg.Saturation)
		return err
	}
	return []*row{
		{name: "serve-saturation", run: api, prep: s.refilled, settle: settle, saturate: true, cold: cold, report: measure},
		{name: "serve", run: host, prep: s.refilled, settle: settle, close: func() { s.client.Close(); s.stop() }},
	}, s.refilled, nil
}

// serveProcess is the psych serve the serve rows run through, and its
// client.
type serveProcess struct {
	dir, sock string
	cmd       *exec.Cmd
	stderr    bytes.Buffer // read once exited is closed
	exited    chan struct{}
	client    *client.Client
}

// startServe starts psych serve on a socket in a temporary directory. The
// caller stops it.
func startServe(cfg Config) (*serveProcess, error) {
	dir, err := os.MkdirTemp("", "psych-bench-serve-")
	if err != nil {
		return nil, err
	}
	s := &serveProcess{dir: dir, sock: filepath.Join(dir, "psych.sock"), exited: make(chan struct{})}
	args := []string{"serve", "--listen", "unix://" + s.sock, "--python", cfg.Python,
		"--pool", strconv.Itoa(servePool), "--max-runs", strconv.Itoa(cfg.Saturation)}
	for _, m := range cfg.Preload {
		args = append(args, "--preload", m)
	}
	s.cmd = exec.Command(cfg.CLI, args...)
	s.cmd.Stderr = &s.stderr
	if err := s.cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("start psych serve: %w", err)
	}
	go func() { s.cmd.Wait(); close(s.exited) }()
	if s.client, err = client.New("unix://"+s.sock, client.Options{}); err != nil {
		s.stop()
		return nil, err
	}
	return s, nil
}

// stop drains the server (SIGTERM), kills it after a minute, and removes
// its directory.
func (s *serveProcess) stop() {
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(time.Minute):
		s.cmd.Process.Kill()
		<-s.exited
	}
	os.RemoveAll(s.dir)
}

// refilled waits until the server is ready: the self-check ran and
// /v1/info answers with every pooled sandbox ready.
func (s *serveProcess) refilled(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute) // a preload's fills, on a loaded host
	defer cancel()
	for {
		info, err := s.client.Info(ctx)
		if err == nil && info.Pool.Size > 0 && info.Pool.Ready == info.Pool.Size {
			return nil
		}
		select {
		case <-s.exited:
			return fmt.Errorf("psych serve exited: %s", bytes.TrimSpace(s.stderr.Bytes()))
		case <-ctx.Done():
			return fmt.Errorf("psych serve's pool not full: %v (%v)", ctx.Err(), err)
		case <-time.After(2 * time.Millisecond):
		}
	}
}

// serveRounds is how many times each side of the client tool's round trip
// runs (fewer than the library's floorRounds: each round through the
// server is a few seconds on a loaded machine).
const serveRounds = 3

// serveTool measures echo(i=1) as a tool the client declares, answered by
// the client through the server (program, server, client, server,
// program), and the raw echo floor, alternately, keeping each side's best
// median (see bindingFloor).
func serveTool(ctx context.Context, sb sandbox.Sandbox, python string) (*Binding, error) {
	return roundTrips(ctx, sb, python, serveRounds, "client tool loop")
}

// serveQueued is how many runs wait in the server's queue while its RSS is
// read (its default queue's size).
const serveQueued = 64

// serveRSS reads the server's VmRSS idle, then its peak over a second with
// inFlight runs asleep and serveQueued more waiting, which are then
// cancelled.
func serveRSS(ctx context.Context, sb sandbox.Sandbox, pid, inFlight int) (*ServeRSS, error) {
	idle := pidRSSKiB(pid)
	if idle == 0 {
		return nil, fmt.Errorf("no VmRSS for psych serve (pid %d)", pid)
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var ended atomic.Int32 // before the cancel: refused, or failed
	for range inFlight + serveQueued {
		wg.Go(func() {
			sb.Run(ctx, sandbox.Request{Code: "import time\ntime.sleep(30)"})
			if ctx.Err() == nil {
				ended.Add(1)
			}
		})
	}
	time.Sleep(500 * time.Millisecond)
	peak := 0.0
	for range 10 {
		peak = max(peak, pidRSSKiB(pid))
		time.Sleep(100 * time.Millisecond)
	}
	n := int(ended.Load())
	cancel()
	wg.Wait()
	if n > 0 {
		return nil, fmt.Errorf("%d of the %d runs for the RSS ended before it was read (refused?)", n, inFlight+serveQueued)
	}
	return &ServeRSS{IdleKiB: idle, LoadedKiB: peak, InFlight: inFlight, Queued: serveQueued}, nil
}

// pidRSSKiB is a process's VmRSS in KiB, or 0.
func pidRSSKiB(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			n, _ := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 64)
			return n
		}
	}
	return 0
}
