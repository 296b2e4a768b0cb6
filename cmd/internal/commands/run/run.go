// Package run is `psych run [flags] FILE|-`: it runs one Python program in
// the sandbox and prints its result (internal/cli's report), or its
// Result as JSON with --json.
//
// Both builds have it: the lean psych's (Lean) runs on the subprocess
// backend and hands --backend container, --demo-tools and --store to
// psych-full; psych-full's (New with cmd/internal/full's backend and
// Runtime) has them all. This package links neither the container backend
// nor a psych.Runtime: the lean psych imports it.
//
// With --host ADDR (or PSYCH_HOST) the run goes through a psych serve
// instead (remote.go, the client package): the same output, JSON and exit
// codes, plus cli.ExitRetry (75) when the server refuses it for now (429,
// 503); 400, 401, 403 exit 2, a host fault or an unreachable server 1.
// --env NAME sends psych's own value; --require-* are checked against the
// server's self-check and the run's attestation; --approve answers the
// server's approval events (ask: on /dev/tty, with a prompt of its own,
// since cmd/internal/full's is psych.Approver's and the lean psych links
// no Runtime). The flags that configure a Sandbox or the local tool path
// (--python, --backend, --engine, --image, --container-python, --store,
// --demo-tools, --max-output) are a usage error with it.
package run

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/psych-runtime/psych/internal/cli"
	"github.com/psych-runtime/psych/sandbox"
)

// Config is what a build adds to psych run beyond the subprocess backend.
type Config struct {
	// Container makes the container backend; nil hands --backend
	// container to psych-full.
	Container cli.ContainerBackend
	// Execute runs req on sb through a psych.Runtime with o's tools,
	// approval and store; nil hands --demo-tools and --store to
	// psych-full.
	Execute func(ctx context.Context, sb sandbox.Sandbox, req sandbox.Request, o ExecOptions) (*sandbox.Result, error)
	// Events runs a request of psych run --events (events.go); nil hands
	// --events to psych-full.
	Events EventsFunc
}

// ExecOptions are the run flags that need a psych.Runtime.
type ExecOptions struct {
	DemoTools bool
	Approve   string // yes, no or ask
	Store     string // the SQLite file to record into; empty: none
}

// Lean is psych run as the lean psych has it: the subprocess backend only.
var Lean = New(Config{})

// New is psych run with what c adds.
func New(c Config) cli.Command {
	return cli.Command{Name: "run", Run: func(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
		return run(c, args, stdin, stdout, stderr)
	}}
}

// flags are the flags of psych run.
type flags struct {
	cli.SandboxFlags
	json, network, demoTools       bool
	events                         bool
	requestFD                      int
	approve, store                 string
	host, tokenFile                string
	cpu, wall, approval            float64
	processes, openFiles           int
	addressSpace, fileSize, memory cli.ByteSize
	stack                          cli.ByteSize
	fileFlags
	reqFiles []sandbox.File // --file's, read by program
}

// run parses the flags and runs the program where they say: a request of
// --events, through a server (--host), or here (local).
func run(c Config, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	var f flags
	fs := f.flagSet(stderr)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return cli.ExitOK
		}
		return cli.ExitUsage
	}
	if f.host == "" {
		f.host = os.Getenv("PSYCH_HOST")
	}
	if f.events {
		return events(c, &f, fs, args, stdin, stdout, stderr)
	}
	if fs.NArg() != 1 {
		fmt.Fprint(stderr, "psych run: want exactly one FILE or - (stdin)\n")
		return cli.ExitUsage
	}
	if f.host != "" {
		return remote(&f, fs, stdin, stdout, stderr)
	}
	if f.tokenFile != "" {
		fmt.Fprint(stderr, "psych run: --token-file is for a run through a server (--host or PSYCH_HOST)\n")
		return cli.ExitUsage
	}
	return local(c, &f, fs.Arg(0), args, stdin, stdout, stderr)
}

// flagSet is psych run's flags, bound to f.
func (f *flags) flagSet(stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("psych run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.BoolVar(&f.json, "json", false, "print the Result as one JSON object")
	fs.IntVar(&f.requestFD, "request-fd", 0, "with --events: read the request from this fd, not stdin (the lean psych hands a request it read to psych-full so)")
	fs.BoolVar(&f.events, "events", false, "the embedded transport: read one request (the API's POST /v1/runs body) as a JSON line on stdin, write the API's events on stdout, read the answers to call and approval events on stdin (api/events.md)")
	fs.Float64Var(&f.cpu, "cpu-seconds", 0, "CPU limit in seconds (default 10)")
	fs.Var(&f.addressSpace, "address-space", "address-space limit: bytes, or with KiB/MiB/GiB (default 512MiB)")
	fs.Var(&f.fileSize, "file-size", "largest file the program may write (default 10MiB)")
	fs.Var(&f.memory, "memory", "resident memory of the whole run, all processes together (default: the address-space limit)")
	fs.IntVar(&f.processes, "processes", 0, "processes and threads (default 64)")
	fs.Var(&f.stack, "stack", "RLIMIT_STACK: the main thread's stack and each thread's (default 4MiB, so that 64 threads fit in 512MiB)")
	fs.IntVar(&f.openFiles, "open-files", 0, "open file descriptors per process, RLIMIT_NOFILE (default 1024; at most the host's own hard limit)")
	fs.Float64Var(&f.wall, "wall-seconds", 0, "wall-clock limit in seconds (default 30)")
	fs.Float64Var(&f.approval, "approval-seconds", 0, "total time the run may spend suspended while a person approves its tool calls (default 600)")
	fs.BoolVar(&f.network, "network", false, "grant the program the host's network (it then shares the host's network namespace)")
	fs.BoolVar(&f.demoTools, "demo-tools", false, "offer the demo tools echo(**kw), sleep(seconds), fail(message) and the destructive remove_file(path), which acts in a demo directory of its own")
	f.SandboxFlags.Register(fs)
	fs.StringVar(&f.approve, "approve", "no", "answer to a destructive tool's approval: yes, no, or ask (on the terminal)")
	fs.StringVar(&f.store, "store", "", "record the run and its tool calls into this SQLite file")
	fs.StringVar(&f.host, "host", "", "run through the psych serve at this address: unix:///PATH, tcp://HOST:PORT or tls://HOST:PORT (default $PSYCH_HOST; without either, run here)")
	fs.Var(fileList{&f.fileFlags}, "file", "LOCAL[:PATH]: hand the local file LOCAL to the program as /work/PATH (default: LOCAL's base name); repeatable")
	fs.StringVar(&f.out, "out", "", "write the files the run created or changed in /work into DIR (made if missing; exec and setuid bits dropped)")
	fs.BoolVar(&f.force, "force", false, "with --out: overwrite files already in DIR")
	fs.StringVar(&f.tokenFile, "token-file", "", "with --host: the file holding the server's bearer token (default $PSYCH_TOKEN)")
	return fs
}

// local runs the program here, on this build's sandbox, or hands the run
// to psych-full where it needs what this build lacks.
func local(c Config, f *flags, name string, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	whole := append([]string{"run"}, args...)
	if f.Container() && c.Container == nil {
		return cli.HandOver(stderr, whole, "--backend container")
	}
	if f.store != "" && c.Execute == nil {
		return cli.HandOver(stderr, whole, "--store")
	}
	if f.demoTools && c.Execute == nil {
		return cli.HandOver(stderr, whole, "--demo-tools")
	}
	code, status := f.program(name, stdin, stderr)
	if status != cli.ExitOK {
		return status
	}
	interrupts := watchInterrupts()
	sb, closeSandbox, err := f.SandboxFlags.New(c.Container)
	if err != nil {
		return report(stderr, err)
	}
	defer closeSandbox()
	req := sandbox.Request{Code: code, Network: f.network, Env: f.Env(), Limits: f.limits(), Files: f.reqFiles}
	if !f.json {
		req.Output = passThrough(stdout, stderr)
	}
	ctx, stop := interrupts()
	defer stop()
	var res *sandbox.Result
	if f.demoTools || f.store != "" {
		res, err = c.Execute(ctx, sb, req, ExecOptions{DemoTools: f.demoTools, Approve: f.approve, Store: f.store})
	} else {
		res, err = sb.Run(ctx, req)
	}
	if err != nil && res == nil {
		return report(stderr, err)
	}
	if err != nil { // the result is in; recording it failed
		fmt.Fprintf(stderr, "psych run: %v\n", err)
		status = cli.ExitHostFault
	}
	return f.end(res, status, stdout, stderr)
}

// end writes the files the run left (--out) and prints its result, and
// returns status, or ExitHostFault where either failed.
func (f *flags) end(res *sandbox.Result, status int, stdout, stderr io.Writer) int {
	if err := f.writeOut(res, stderr); err != nil {
		status = cli.ExitHostFault
	}
	if f.json {
		enc := json.NewEncoder(stdout)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(res); err != nil {
			fmt.Fprintf(stderr, "psych run: %v\n", err)
			return cli.ExitHostFault
		}
		return status
	}
	cli.PrintEnd(res, stdout, stderr)
	return status
}

// program reads the program and checks the flags both paths share: the
// exit status is not ExitOK when one is wrong.
func (f *flags) program(name string, stdin io.Reader, stderr io.Writer) (string, int) {
	code, err := cli.ReadProgram(name, stdin)
	if err != nil {
		fmt.Fprintf(stderr, "psych run: %v\n", err)
		return "", cli.ExitUsage
	}
	for _, l := range []struct {
		flag  string
		value float64
	}{{"cpu-seconds", f.cpu}, {"wall-seconds", f.wall}, {"approval-seconds", f.approval}, {"processes", float64(f.processes)}, {"open-files", float64(f.openFiles)}} {
		if l.value < 0 {
			fmt.Fprintf(stderr, "psych run: --%s %g: must not be negative\n", l.flag, l.value)
			return "", cli.ExitUsage
		}
	}
	switch f.approve {
	case "yes", "no", "ask":
	default:
		fmt.Fprintf(stderr, "psych run: --approve %q: want yes, no or ask\n", f.approve)
		return "", cli.ExitUsage
	}
	if f.force && f.out == "" {
		fmt.Fprint(stderr, "psych run: --force is for --out\n")
		return "", cli.ExitUsage
	}
	if f.reqFiles, err = f.requestFiles(); err != nil {
		fmt.Fprintf(stderr, "psych run: %v\n", err)
		return "", cli.ExitUsage
	}
	return code, cli.ExitOK
}

// limits are the limits the flags set.
func (f *flags) limits() sandbox.Limits {
	return sandbox.Limits{
		CPUSeconds:        f.cpu,
		AddressSpaceBytes: int64(f.addressSpace),
		FileSizeBytes:     int64(f.fileSize),
		ProcessCount:      f.processes,
		WallSeconds:       f.wall,
		MemoryBytes:       int64(f.memory),
		StackBytes:        int64(f.stack),
		OpenFiles:         f.openFiles,
		ApprovalSeconds:   f.approval,
	}
}

func report(stderr io.Writer, err error) int { return cli.Report(stderr, "psych run", err) }

// watchInterrupts starts catching SIGINT and SIGTERM beside the backend's
// setup: signal.Notify's first call waits for the runtime's signal thread
// to start (about 1 ms here). The function it returns waits for that and
// gives the context they cancel. Until then a signal ends psych as it would
// without a handler; the sandbox dies with it, and the next run sweeps what
// it left.
func watchInterrupts() func() (context.Context, context.CancelFunc) {
	type caught struct {
		ctx  context.Context
		stop context.CancelFunc
	}
	ready := make(chan caught, 1)
	go func() {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		ready <- caught{ctx, stop}
	}()
	return func() (context.Context, context.CancelFunc) {
		c := <-ready
		return c.ctx, c.stop
	}
}
