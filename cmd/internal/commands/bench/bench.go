// Package bench is `psych bench`: internal/bench's rows (the cold run
// layer by layer, each engine, the CLI, warm pools) measured on this host
// and printed. psych-full has it; the lean psych hands it over.
package bench

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/psych-runtime/psych/internal/bench"
	"github.com/psych-runtime/psych/internal/cli"
	"github.com/psych-runtime/psych/sandbox"
	"github.com/psych-runtime/psych/sandbox/container"
)

// Command is psych bench.
var Command = cli.Command{Name: "bench", Run: func(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	return command(args, stdout, stderr)
}}

func command(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("psych bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg bench.Config
	var asJSON bool
	var program, engines, pools, preload string
	fs.IntVar(&cfg.Runs, "runs", 50, "measured executions per row, after the warm-up")
	fs.IntVar(&cfg.Warmup, "warmup", 3, "unmeasured executions per row first")
	fs.StringVar(&cfg.Python, "python", "/usr/bin/python3", "the interpreter (named: the bench measures psych, not a shim)")
	fs.StringVar(&program, "program", "", "measure this program in the fully isolated rows (the partial rows always run None)")
	fs.StringVar(&cfg.Image, "image", "", "the containers' image; empty leaves the engine rows out (make image builds localhost/psych-python:3.11)")
	fs.StringVar(&engines, "engines", "containerd,podman,docker", "the engines to measure, where reachable")
	fs.BoolVar(&asJSON, "json", false, "print the report as JSON")
	fs.StringVar(&pools, "pool", "", "measure warm pools of these sizes (comma-separated, such as 2,8) beside the cold run, instead of the layers")
	fs.StringVar(&preload, "preload", "", "the pools (psych serve's too) preload these modules (comma-separated, such as pandas); needs --pool")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return cli.ExitOK
		}
		return cli.ExitUsage
	}
	if fs.NArg() != 0 || cfg.Runs <= 0 {
		fmt.Fprint(stderr, "usage: psych bench [--runs N] [--json] [--python PATH] [--program FILE] [--image REF] [--pool N,... [--preload MOD,...]]\n")
		return cli.ExitUsage
	}
	if program != "" {
		code, err := cli.ReadProgram(program, nil)
		if err != nil {
			fmt.Fprintf(stderr, "psych bench: %v\n", err)
			return cli.ExitUsage
		}
		cfg.Program = code
	}
	for _, p := range strings.Split(pools, ",") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 {
			fmt.Fprintf(stderr, "psych bench: --pool %q: want sizes of 1 or more\n", pools)
			return cli.ExitUsage
		}
		cfg.Pools = append(cfg.Pools, n)
	}
	for _, m := range strings.Split(preload, ",") {
		if m = strings.TrimSpace(m); m != "" {
			cfg.Preload = append(cfg.Preload, m)
		}
	}
	if len(cfg.Preload) > 0 && len(cfg.Pools) == 0 {
		fmt.Fprint(stderr, "psych bench: --preload needs --pool\n")
		return cli.ExitUsage
	}
	if err := sandbox.CheckPreload(cfg.Preload); err != nil {
		fmt.Fprintf(stderr, "psych bench: --preload: %v\n", err)
		return cli.ExitUsage
	}
	for _, e := range strings.Split(engines, ",") {
		if e = strings.TrimSpace(e); e != "" {
			cfg.Engines = append(cfg.Engines, e)
		}
	}
	if cfg.Image == "" {
		cfg.Engines = nil
	} else if cfg.Image == "default" {
		cfg.Image = container.DefaultImage
	}
	cfg.CLI = psychBinary(stderr)
	cfg.Progress = stderr
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := bench.Run(ctx, cfg)
	if err != nil {
		fmt.Fprintf(stderr, "psych bench: %v\n", err)
		if errors.Is(err, context.Canceled) {
			return cli.ExitInterrupted
		}
		return cli.ExitHostFault
	}
	if asJSON {
		return cli.EncodeJSON(stdout, stderr, rep)
	}
	bench.Print(stdout, rep)
	return cli.ExitOK
}

// psychBinary is the psych the cli row measures: the one beside this
// executable, else psych on PATH, else this build itself (which accepts
// every psych command but starts slower), said on stderr.
func psychBinary(stderr io.Writer) string {
	exe, err := os.Executable()
	if err == nil {
		p := filepath.Join(filepath.Dir(exe), "psych")
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return p
		}
	}
	if p, err := exec.LookPath("psych"); err == nil {
		if p, err = filepath.Abs(p); err == nil {
			return p
		}
	}
	if exe == "" {
		return ""
	}
	fmt.Fprintf(stderr, "psych bench: no psych beside %s or on PATH: the cli row measures %s itself\n", exe, exe)
	return exe
}
