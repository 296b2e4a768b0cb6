//go:build linux

package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
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
// Their close stops the server (SIGTERM: a drain).
func serveRows(cfg Config, program string, cold func(context.Context) (*sandbox.Isolation, error)) ([]*row, error) {
	dir, err := os.MkdirTemp("", "psych-bench-serve-")
	if err != nil {
		return nil, err
	}
	sock := filepath.Join(dir, "psych.sock")
	var stderr bytes.Buffer
	srv := exec.Command(cfg.CLI, "serve", "--listen", "unix://"+sock, "--python", cfg.Python,
		"--pool", strconv.Itoa(servePool), "--max-runs", strconv.Itoa(cfg.Saturation))
	srv.Stderr = &stderr
	if err := srv.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("start psych serve: %w", err)
	}
	exited := make(chan struct{})
	go func() { srv.Wait(); close(exited) }()
	stop := func() {
		srv.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(time.Minute):
			srv.Process.Kill()
			<-exited
		}
		os.RemoveAll(dir)
	}
	c, err := client.New("unix://"+sock, client.Options{})
	if err != nil {
		stop()
		return nil, err
	}
	// Ready once the self-check ran and the pool filled: /v1/info answers
	// with every pooled sandbox ready.
	refilled := func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		for {
			info, err := c.Info(ctx)
			if err == nil && info.Pool.Size > 0 && info.Pool.Ready == info.Pool.Size {
				return nil
			}
			select {
			case <-exited:
				return fmt.Errorf("psych serve exited: %s", bytes.TrimSpace(stderr.Bytes()))
			case <-ctx.Done():
				return fmt.Errorf("psych serve's pool not full: %v (%v)", ctx.Err(), err)
			case <-time.After(2 * time.Millisecond):
			}
		}
	}
	if err := refilled(context.Background()); err != nil {
		stop()
		return nil, err
	}
	sb := c.Sandbox()
	api := func(ctx context.Context) (*sandbox.Isolation, error) {
		res, err := sb.Run(ctx, sandbox.Request{Code: program})
		if err != nil {
			return nil, err
		}
		if res.Failure != nil {
			return res.Isolation, fmt.Errorf("the program failed: %s", res.Failure.Type)
		}
		return res.Isolation, nil
	}
	host := func(ctx context.Context) (*sandbox.Isolation, error) {
		cmd := exec.CommandContext(ctx, cfg.CLI, "run", "--json", "--host", "unix://"+sock, "-")
		cmd.Stdin = strings.NewReader(program)
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		if err := cmd.Run(); err != nil {
			return nil, fmt.Errorf("%w: %s", err, bytes.TrimSpace(errOut.Bytes()))
		}
		var res sandbox.Result
		if err := json.Unmarshal(out.Bytes(), &res); err != nil {
			return nil, err
		}
		if res.Failure != nil {
			return res.Isolation, fmt.Errorf("the program failed: %s", res.Failure.Type)
		}
		return res.Isolation, nil
	}
	// Each execution's refill is waited for after it too, so that no row
	// after it is measured beside the server's refill.
	settle := func() { refilled(context.Background()) }
	return []*row{
		{name: "serve-saturation", run: api, prep: refilled, settle: settle, saturate: true, cold: cold},
		{name: "serve", run: host, prep: refilled, settle: settle, close: func() { c.Close(); stop() }},
	}, nil
}
