//go:build linux

package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/psych-runtime/psych/bootstrap"
	"github.com/psych-runtime/psych/cgroups"
	"github.com/psych-runtime/psych/internal/layers"
	"github.com/psych-runtime/psych/sandbox"
	"github.com/psych-runtime/psych/sandbox/container"
	"github.com/psych-runtime/psych/sandbox/subprocess"
	"github.com/psych-runtime/psych/sandbox/wire"
)

// partial are the subprocess rows between the bootstrap and the full
// sandbox, each adding one layer to the one before.
var partial = []struct {
	name string
	set  layers.Set
}{
	{"rlimits-env", layers.Set{Rlimits: true}},
	{"userns", layers.Set{Rlimits: true, UserNS: true}},
	{"netns", layers.Set{Rlimits: true, UserNS: true, NetNS: true}},
	{"pid-ipc-uts", layers.Set{Rlimits: true, UserNS: true, NetNS: true, PidIpcUts: true}},
	{"mount", layers.Set{Rlimits: true, UserNS: true, NetNS: true, PidIpcUts: true, Mount: true}},
	{"seccomp-landlock", layers.Set{Rlimits: true, UserNS: true, NetNS: true, PidIpcUts: true, Mount: true, Seccomp: true}},
}

// makeRows builds the rows in order; full is the whole subprocess sandbox,
// for the binding and throughput measurements.
func makeRows(cfg Config) (rows []*row, full sandbox.Sandbox, notes []string, err error) {
	python := cfg.Python
	// The python row waits for the removal of the runs before it and for
	// psych serve's pool to be full: nothing of psych runs beside it.
	var quiet []func(context.Context) error
	rows = append(rows, &row{name: "python", prep: all(&quiet), run: func(context.Context) (*sandbox.Isolation, error) {
		return nil, exec.Command(python, "-I", "-c", "pass").Run()
	}})
	launcher, err := bootstrap.Prepare(python)
	if err != nil {
		return rows, nil, nil, err
	}
	// As the sandbox loads it: the compiled bootstrap from a file, not argv.
	code, err := os.CreateTemp("", "psych-bench-bootstrap-")
	if err != nil {
		return rows, nil, nil, err
	}
	codePath := code.Name()
	_, err = code.Write(launcher.Code())
	if cerr := code.Close(); err == nil {
		err = cerr
	}
	rows = append(rows, &row{name: "bootstrap", run: func(context.Context) (*sandbox.Isolation, error) {
		return nil, bare(python, launcher.FileArgs(codePath, bareWireFD))
	}, close: func() { os.Remove(codePath) }})
	if err != nil {
		return rows, nil, nil, err
	}
	sb, err := subprocess.New(subprocess.Config{PythonBin: python, RequireIsolation: true, RequireNetworkDenial: true, AllowSameUID: os.Geteuid() != 0})
	if err != nil {
		return rows, nil, nil, err
	}
	quiet = append(quiet, settled(sb))
	for _, p := range partial {
		rows = append(rows, &row{name: p.name, run: runner(sb, Builtin, p.set), settle: sb.Settle})
	}
	program := cfg.Program
	if program == "" {
		program = Builtin
	}
	// Closed last: its runs' removals finish there.
	rows = append(rows, &row{name: "full", run: runner(sb, program, layers.Full()), settle: sb.Settle, close: func() { sb.Close() }})
	if cfg.CLI != "" {
		rows = append(rows, &row{name: "cli", run: func(ctx context.Context) (*sandbox.Isolation, error) {
			return cliRun(ctx, cfg.CLI, python, program)
		}})
	}
	if cfg.Image != "" {
		containerd := false
		for _, e := range cfg.Engines {
			c, err := container.New(container.Config{Engine: container.Engine(e), Image: cfg.Image})
			if err != nil {
				notes = append(notes, fmt.Sprintf("container-%s left out: %v", e, err))
				continue
			}
			rows = append(rows, &row{name: "container-" + e, run: runner(c, program, layers.Full()), close: func() { c.Close() }})
			containerd = containerd || e == string(container.Containerd)
		}
		if _, err := exec.LookPath("ctr"); err == nil && containerd {
			rows = append(rows, &row{name: "ctr-run", run: ctrRun(cfg.Image)})
		}
	}
	// Last, so that the rows before them keep their order.
	if cfg.CLI != "" {
		served, full, err := serveRows(cfg, program, runner(sb, program, layers.Full()))
		if err != nil {
			notes = append(notes, fmt.Sprintf("serve rows left out: %v", err))
		} else {
			quiet = append(quiet, full)
		}
		rows = append(rows, served...)
	}
	return rows, sb, notes, nil
}

// all runs each of *waits in turn (read when called: the list grows as
// the rows are made).
func all(waits *[]func(context.Context) error) func(context.Context) error {
	return func(ctx context.Context) error {
		for _, w := range *waits {
			if err := w(ctx); err != nil {
				return err
			}
		}
		return nil
	}
}

// settled waits for sb's pool to be full, then for the removal of every
// run it served, where sb tells of either.
func settled(sb sandbox.Sandbox) func(context.Context) error {
	return func(ctx context.Context) error {
		if w, ok := sb.(interface{ WaitWarm(context.Context) error }); ok {
			if err := w.WaitWarm(ctx); err != nil {
				return err
			}
		}
		if s, ok := sb.(interface{ Settle() }); ok {
			s.Settle()
		}
		return nil
	}
}

// warmer is a Sandbox with a pool to wait for.
type warmer interface {
	sandbox.Sandbox
	WaitWarm(ctx context.Context) error
}

// makePoolRows builds the pool rows: python, full (cold), then per pool
// size its saturation row and its low-load row; with an image, each
// engine's cold row and its pooled rows. Before each timed execution every
// pool is full again, so no refill runs beside it.
func makePoolRows(cfg Config) (rows []*row, full sandbox.Sandbox, notes []string, err error) {
	python := cfg.Python
	var waits []func(context.Context) error
	quiet := all(&waits)
	rows = append(rows, &row{name: "python", prep: quiet, run: func(context.Context) (*sandbox.Isolation, error) {
		return nil, exec.Command(python, "-I", "-c", "pass").Run()
	}})
	program := cfg.Program
	if program == "" {
		program = Builtin
	} else {
		rows = append(rows, &row{name: "python-program", prep: quiet, run: func(context.Context) (*sandbox.Isolation, error) {
			out, err := exec.Command(python, "-I", "-c", program).CombinedOutput()
			if err != nil {
				return nil, fmt.Errorf("python3 -I -c PROGRAM: %w: %s", err, bytes.TrimSpace(out))
			}
			return nil, nil
		}})
	}
	base := subprocess.Config{PythonBin: python, RequireIsolation: true, RequireNetworkDenial: true}
	sb, err := subprocess.New(base)
	if err != nil {
		return rows, nil, nil, err
	}
	waits = append(waits, settled(sb))
	rows = append(rows, &row{name: "full", prep: quiet, run: runner(sb, program, layers.Full()), close: func() { sb.Close() }})
	pooled := func(name string, p warmer, cold func(context.Context) (*sandbox.Isolation, error)) {
		waits = append(waits, settled(p))
		run := runner(p, program, layers.Full())
		rows = append(rows,
			&row{name: name + "-saturation", run: run, prep: quiet, saturate: true, cold: cold},
			&row{name: name, run: run, prep: quiet, close: func() { p.Close() }})
	}
	fullRun := runner(sb, program, layers.Full())
	for _, n := range cfg.Pools {
		pc := base
		pc.Pool = &sandbox.PoolConfig{Size: n, Preload: cfg.Preload}
		p, err := subprocess.New(pc)
		if err != nil {
			return rows, nil, nil, err
		}
		pooled(fmt.Sprintf("pool-%d", n), p, fullRun)
	}
	if cfg.Image != "" {
		for _, e := range cfg.Engines {
			c, err := container.New(container.Config{Engine: container.Engine(e), Image: cfg.Image})
			if err != nil {
				notes = append(notes, fmt.Sprintf("container-%s left out: %v", e, err))
				continue
			}
			coldRun := runner(c, program, layers.Full())
			rows = append(rows, &row{name: "container-" + e, prep: quiet, run: coldRun, close: func() { c.Close() }})
			for _, n := range cfg.Pools {
				p, err := container.New(container.Config{Engine: container.Engine(e), Image: cfg.Image, Pool: &sandbox.PoolConfig{Size: n, Preload: cfg.Preload}})
				if err != nil {
					notes = append(notes, fmt.Sprintf("pool-%d-container-%s left out: %v", n, e, err))
					continue
				}
				pooled(fmt.Sprintf("pool-%d-container-%s", n, e), p, coldRun)
			}
		}
	}
	// Last, so that the rows before them keep their order.
	if cfg.CLI != "" {
		served, full, err := serveRows(cfg, program, fullRun)
		if err != nil {
			notes = append(notes, fmt.Sprintf("serve rows left out: %v", err))
		} else {
			waits = append(waits, full)
		}
		rows = append(rows, served...)
	}
	return rows, sb, notes, nil
}

// runner runs program once on sb with the layers of set.
func runner(sb sandbox.Sandbox, program string, set layers.Set) func(context.Context) (*sandbox.Isolation, error) {
	return func(ctx context.Context) (*sandbox.Isolation, error) {
		res, err := sb.Run(layers.With(ctx, set), sandbox.Request{Code: program})
		if err != nil {
			return nil, err
		}
		if res.Failure != nil {
			return res.Isolation, fmt.Errorf("the program failed: %s: %s", res.Failure.Type, res.Failure.Message)
		}
		return res.Isolation, nil
	}
}

// bareWireFD is the wire's fd in bare's child: its ExtraFiles[0].
const bareWireFD = 3

// bare runs the bootstrap with no sandbox at all: the interpreter as this
// process's child, its wire a socketpair, the start frame and the result.
func bare(python string, args []string) error {
	host, child, err := socketpair()
	if err != nil {
		return err
	}
	defer host.Close()
	cmd := exec.Command(python, args...)
	cmd.ExtraFiles = []*os.File{child}
	err = cmd.Start()
	child.Close()
	if err != nil {
		return err
	}
	start, _ := wire.Marshal(&wire.Start{V: wire.Version, Code: Builtin, MaxFrame: wire.DefaultMaxFrame})
	enc, dec := wire.NewEncoder(host, wire.DefaultMaxFrame), wire.NewDecoder(host, wire.DefaultMaxFrame)
	if err := enc.WriteBody(start); err != nil {
		cmd.Wait()
		return err
	}
	m, err := dec.Next()
	if err == nil {
		if r, ok := m.(*wire.Result); !ok || r.Failure != nil {
			err = fmt.Errorf("bootstrap: unexpected %T %+v", m, m)
		}
	}
	return errors.Join(err, cmd.Wait())
}

func socketpair() (*os.File, *os.File, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("socketpair: %w", err)
	}
	return os.NewFile(uintptr(fds[0]), "host"), os.NewFile(uintptr(fds[1]), "child"), nil
}

// cliRun is `psych run --json` as a whole process.
func cliRun(ctx context.Context, psych, python, program string) (*sandbox.Isolation, error) {
	return cliJSON(ctx, psych, program, "--python", python)
}

// cliJSON runs program through `psych run --json` with args, as a whole
// process.
func cliJSON(ctx context.Context, psych, program string, args ...string) (*sandbox.Isolation, error) {
	cmd := exec.CommandContext(ctx, psych, append(append([]string{"run", "--json"}, args...), "-")...)
	cmd.Stdin = strings.NewReader(program)
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%w: %s", err, bytes.TrimSpace(stderr.Bytes()))
	}
	var res sandbox.Result
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		return nil, err
	}
	return outcome(&res)
}

// outcome is a run's attestation, with an error if its program failed.
func outcome(res *sandbox.Result) (*sandbox.Isolation, error) {
	if res.Failure != nil {
		return res.Isolation, fmt.Errorf("the program failed: %s", res.Failure.Type)
	}
	return res.Isolation, nil
}

// ctrRun is the engine's own reference: `ctr run --rm` of the image.
func ctrRun(image string) func(context.Context) (*sandbox.Isolation, error) {
	n := 0
	return func(ctx context.Context) (*sandbox.Isolation, error) {
		n++
		id := fmt.Sprintf("psych-bench-ctr-%d-%d", os.Getpid(), n)
		cmd := exec.CommandContext(ctx, "ctr", "-n", container.DefaultNamespace, "run", "--rm", image, id, "/usr/bin/python3", "-I", "-S", "-c", "pass")
		cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
		return nil, cmd.Run()
	}
}

func cgroupLayout() string {
	l, err := cgroups.DetectLayout()
	if err != nil {
		return "unknown"
	}
	return string(l)
}
