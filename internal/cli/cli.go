// Package cli is psych's command line, shared by its two builds:
//
//	psych run [flags] FILE|-
//	psych run --backend container [--engine E] [--image REF] [flags] FILE|-
//	psych run --demo-tools [--approve yes|no|ask] [--store FILE] FILE|-
//	psych runs list|show|replay --store FILE [ID]
//	psych doctor | psych bench
//
// cmd/psych links the subprocess backend only, so that `psych run` starts
// in what a small Go program costs. The container backend links the
// containerd client (gRPC, protobuf, OpenTelemetry: about 4 ms of package
// initialisation on every start), the store links SQLite (about 0.5 ms)
// and a psych.Runtime its policy, egress and schema code (about 0.5 ms),
// so they live in a second build, cmd/psych-full, with the commands that
// use them: runs, doctor and bench. psych hands those commands, `--backend
// container`, `--demo-tools` and `--store` to psych-full by exec, with the
// same arguments, looking beside its own executable and then on PATH;
// without it they fail with a usage error that says how to build it,
// having read nothing. Both builds accept every command.
//
// A run with bindings or a store goes through a psych.Runtime
// (internal/cli/runtimecmd): its bindings are the Runtime's tools (the demo
// tools with --demo-tools), called through its Policy (destructive tools
// ask; --approve answers, default no) and recorded into --store. A run with
// neither has nothing for a Runtime to do: it goes to the backend as it
// is, with the same result.
//
// Exit codes: 0 when a result was produced, whatever the program did; 2 for
// usage and configuration errors; 3 when the run was refused (a Require…
// option the host cannot meet); 1 for a host fault; 130 when interrupted.
// runs replay exits 0 when the run is reproduced, 1 on a divergence and 4
// on a host fault.
package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/psych-runtime/psych/sandbox"
	"github.com/psych-runtime/psych/sandbox/subprocess"
)

// Exit codes, for the commands psych-full adds.
const (
	ExitOK          = exitOK
	ExitHostFault   = exitHostFault
	ExitUsage       = exitUsage
	ExitInterrupted = exitInterrupted
)

// FullBinary is the build of this command line that links the container
// backend.
const FullBinary = "psych-full"

// The container backend's defaults, named in the flags' help; a test in
// cmd/psych-full keeps them equal to sandbox/container's.
const (
	DefaultImage           = "python:3.12-slim"
	DefaultContainerPython = "/usr/local/bin/python3"
)

// ContainerOptions are the run flags the container backend takes.
type ContainerOptions struct {
	Engine, Image, ContainerPython string
	EnvAllowlist                   []string
	RequireNetworkDenial           bool
	MaxOutputBytes                 int
}

// Engines is what psych-full adds: the container backend, runs through a
// psych.Runtime (Execute), and commands of its own (runs, doctor, bench)
// by name.
type Engines struct {
	Container func(ContainerOptions) (sandbox.Sandbox, func(), error)
	// Execute runs req on sb through a psych.Runtime with o's tools,
	// approval and store (runtimecmd.Execute).
	Execute  func(ctx context.Context, sb sandbox.Sandbox, req sandbox.Request, o ExecOptions) (*sandbox.Result, error)
	Commands map[string]func(args []string, stdout, stderr io.Writer) int
}

// ExecOptions are the run flags that need a psych.Runtime.
type ExecOptions struct {
	DemoTools bool
	Approve   string // yes, no or ask
	Store     string // the SQLite file to record into; empty: none
}

// cli is one invocation: its whole argument list, kept for a hand-over.
type cli struct {
	args []string
	eng  *Engines
}

// Main runs the command line args (without the program name) and returns
// the exit code. With eng nil, what needs the container backend is handed
// to psych-full (see the package doc).
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer, eng *Engines) int {
	c := &cli{args: args, eng: eng}
	return c.run(args, stdin, stdout, stderr)
}

// handOver replaces this process with psych-full, given the same
// arguments; it returns only on failure.
func (c *cli) handOver(stderr io.Writer, what string) int {
	path, err := findEngines()
	if err != nil {
		fmt.Fprintf(stderr, "psych: %s is in %s, the build that links the container backend: %v (make build puts it beside psych; or go install github.com/psych-runtime/psych/cmd/%s)\n", what, FullBinary, err, FullBinary)
		return exitUsage
	}
	err = syscall.Exec(path, append([]string{path}, c.args...), os.Environ())
	fmt.Fprintf(stderr, "psych: exec %s: %v\n", path, err)
	return exitHostFault
}

// findEngines looks for psych-full beside this executable, then on PATH.
func findEngines() (string, error) {
	if exe, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(exe), FullBinary)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	p, err := exec.LookPath(FullBinary)
	if err != nil {
		return "", fmt.Errorf("not beside this executable nor on PATH")
	}
	return filepath.Abs(p)
}

// Exit codes.
const (
	exitOK          = 0
	exitHostFault   = 1
	exitUsage       = 2
	exitRefused     = 3
	exitInterrupted = 130
)

const usage = `usage: psych run [flags] FILE|-
       psych runs list|show|replay --store FILE [ID]
       psych doctor [--json] [--python PATH] [--require-cgroup] [--image REF]

Runs one Python program in the sandbox and prints its result.
Run "psych run -h" for the flags.
`

func (c *cli) run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	switch args[0] {
	case "run":
		return c.runCmd(args[1:], stdin, stdout, stderr)
	case "runs", "doctor", "bench":
		if c.eng == nil {
			return c.handOver(stderr, "psych "+args[0])
		}
		return c.eng.Commands[args[0]](args[1:], stdout, stderr)
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, usage)
		return exitOK
	}
	fmt.Fprintf(stderr, "psych: unknown command %q\n%s", args[0], usage)
	return exitUsage
}

// runFlags are the flags of `psych run`.
type runFlags struct {
	sandboxFlags
	json, network, demoTools       bool
	approve, store                 string
	cpu, wall, approval            float64
	processes, openFiles           int
	addressSpace, fileSize, memory byteSize
	stack                          byteSize
}

// sandboxFlags choose and configure the backend (run, runs replay).
type sandboxFlags struct {
	requireDenial, requireIsolation, requireCgroup bool
	allowFallback                                  bool
	python                                         string
	backend, engine, image, containerPython        string
	env                                            envList
	maxOutput                                      byteSize
}

func (c *cli) runCmd(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	var f runFlags
	fs := flag.NewFlagSet("psych run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.BoolVar(&f.json, "json", false, "print the Result as one JSON object")
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
	f.sandboxFlags.register(fs)
	fs.StringVar(&f.approve, "approve", "no", "answer to a destructive tool's approval: yes, no, or ask (on the terminal)")
	fs.StringVar(&f.store, "store", "", "record the run and its tool calls into this SQLite file")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if fs.NArg() != 1 {
		fmt.Fprint(stderr, "psych run: want exactly one FILE or - (stdin)\n")
		return exitUsage
	}
	if f.backend == "container" && c.eng == nil {
		return c.handOver(stderr, "--backend container")
	}
	if f.store != "" && c.eng == nil {
		return c.handOver(stderr, "--store")
	}
	if f.demoTools && c.eng == nil {
		return c.handOver(stderr, "--demo-tools")
	}
	code, err := readProgram(fs.Arg(0), stdin)
	if err != nil {
		fmt.Fprintf(stderr, "psych run: %v\n", err)
		return exitUsage
	}
	for _, l := range []struct {
		flag  string
		value float64
	}{{"cpu-seconds", f.cpu}, {"wall-seconds", f.wall}, {"approval-seconds", f.approval}, {"processes", float64(f.processes)}, {"open-files", float64(f.openFiles)}} {
		if l.value < 0 {
			fmt.Fprintf(stderr, "psych run: --%s %g: must not be negative\n", l.flag, l.value)
			return exitUsage
		}
	}
	switch f.approve {
	case "yes", "no", "ask":
	default:
		fmt.Fprintf(stderr, "psych run: --approve %q: want yes, no or ask\n", f.approve)
		return exitUsage
	}
	interrupts := watchInterrupts()
	sb, closeSandbox, err := newSandbox(&f.sandboxFlags, c.eng)
	if err != nil {
		return report(stderr, err)
	}
	defer closeSandbox()
	req := sandbox.Request{
		Code:    code,
		Network: f.network,
		Env:     f.env.values(),
		Limits: sandbox.Limits{
			CPUSeconds:        f.cpu,
			AddressSpaceBytes: int64(f.addressSpace),
			FileSizeBytes:     int64(f.fileSize),
			ProcessCount:      f.processes,
			WallSeconds:       f.wall,
			MemoryBytes:       int64(f.memory),
			StackBytes:        int64(f.stack),
			OpenFiles:         f.openFiles,
			ApprovalSeconds:   f.approval,
		},
	}
	ctx, stop := interrupts()
	defer stop()
	var res *sandbox.Result
	if f.demoTools || f.store != "" {
		res, err = c.eng.Execute(ctx, sb, req, ExecOptions{DemoTools: f.demoTools, Approve: f.approve, Store: f.store})
	} else {
		res, err = sb.Run(ctx, req)
	}
	if err != nil && res == nil {
		return report(stderr, err)
	}
	status := exitOK
	if err != nil { // the result is in; recording it failed
		fmt.Fprintf(stderr, "psych run: %v\n", err)
		status = exitHostFault
	}
	if f.json {
		enc := json.NewEncoder(stdout)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(res); err != nil {
			fmt.Fprintf(stderr, "psych run: %v\n", err)
			return exitHostFault
		}
		return status
	}
	printHuman(res, stdout, stderr)
	return status
}

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

// SandboxFlags registers on fs the flags that choose and configure the
// backend (those of psych run), and returns what makes the Sandbox they
// ask for once fs is parsed, with its close.
func SandboxFlags(fs *flag.FlagSet, eng *Engines) func() (sandbox.Sandbox, func(), error) {
	var f sandboxFlags
	f.register(fs)
	return func() (sandbox.Sandbox, func(), error) { return newSandbox(&f, eng) }
}

// register registers the flags that choose and configure the backend.
func (f *sandboxFlags) register(fs *flag.FlagSet) {
	fs.Var(&f.maxOutput, "max-output", "cap on stdout and on stderr, each (default 1MiB)")
	fs.Var(&f.env, "env", "NAME passes this variable from psych's own environment, NAME=VALUE sets it for the run (repeatable)")
	fs.StringVar(&f.python, "python", "", "interpreter (default: python3 on PATH, resolved to sys.executable)")
	fs.BoolVar(&f.requireDenial, "require-network-denial", false, "refuse to run unless network denial is verified")
	fs.BoolVar(&f.requireIsolation, "require-isolation", false, "no effect: runs without user namespaces are refused unless --allow-fallback")
	fs.BoolVar(&f.allowFallback, "allow-fallback", false, "where no user namespace can be had, run in the fallback (no namespaces, no view; Landlock and seccomp confine files and sockets) instead of refusing")
	fs.BoolVar(&f.requireCgroup, "require-cgroup", false, "refuse to run without a per-run cgroup")
	fs.StringVar(&f.backend, "backend", "subprocess", "subprocess or container")
	fs.StringVar(&f.engine, "engine", "", "container engine: containerd, podman or docker (default: the first reachable)")
	fs.StringVar(&f.image, "image", "", "container image (default "+DefaultImage+"; make image builds localhost/psych-python:3.11)")
	fs.StringVar(&f.containerPython, "container-python", "", "interpreter inside the image where it has no io.psych.python label (default "+DefaultContainerPython+")")
}

// newSandbox makes the backend the flags ask for.
func newSandbox(f *sandboxFlags, eng *Engines) (sandbox.Sandbox, func(), error) {
	switch f.backend {
	case "subprocess":
		if f.engine != "" || f.image != "" || f.containerPython != "" {
			return nil, nil, fmt.Errorf("--engine, --image and --container-python are for --backend container: %w", sandbox.ErrInvalidConfig)
		}
		sb, err := subprocess.New(subprocess.Config{
			// A non-root user has no other id to run as: its own uid,
			// mapped inside the run's user namespace as always.
			AllowSameUID:         os.Geteuid() != 0,
			PythonBin:            f.python,
			EnvAllowlist:         f.env.names(),
			RequireNetworkDenial: f.requireDenial,
			AllowFallback:        f.allowFallback,
			RequireCgroup:        f.requireCgroup,
			MaxOutputBytes:       int(f.maxOutput),
		})
		if errors.Is(err, subprocess.ErrNoUserNamespace) {
			return nil, nil, fmt.Errorf("%w; pass --allow-fallback to run with weaker isolation (no namespaces and no filesystem view: files confined by Landlock where the kernel has it, IPv4 and IPv6 sockets refused without --network); `psych doctor` says what this host gives", err)
		}
		if err != nil {
			return nil, nil, err
		}
		// Close waits for the run's removal, which ends after its result.
		return sb, func() { sb.Close() }, nil
	case "container":
		if f.python != "" {
			return nil, nil, fmt.Errorf("--python is for --backend subprocess (use --container-python): %w", sandbox.ErrInvalidConfig)
		}
		if eng == nil || eng.Container == nil {
			return nil, nil, fmt.Errorf("--backend container: this build has no container backend (it is in %s): %w", FullBinary, sandbox.ErrInvalidConfig)
		}
		return eng.Container(ContainerOptions{
			Engine:               f.engine,
			Image:                f.image,
			ContainerPython:      f.containerPython,
			EnvAllowlist:         f.env.names(),
			RequireNetworkDenial: f.requireDenial,
			MaxOutputBytes:       int(f.maxOutput),
		})
	}
	return nil, nil, fmt.Errorf("--backend %q: want subprocess or container: %w", f.backend, sandbox.ErrInvalidConfig)
}

// Report prints a Go error of command cmd ("psych run") and picks the exit
// code.
func Report(stderr io.Writer, cmd string, err error) int {
	fmt.Fprintf(stderr, "%s: %v\n", cmd, err)
	switch {
	case errors.Is(err, sandbox.ErrRefused):
		return exitRefused
	case errors.Is(err, sandbox.ErrInvalidConfig), errors.Is(err, sandbox.ErrInvalidRequest):
		return exitUsage
	case errors.Is(err, context.Canceled):
		return exitInterrupted
	}
	return exitHostFault
}

func report(stderr io.Writer, err error) int { return Report(stderr, "psych run", err) }

// maxProgram bounds what psych run reads; the frame cap (16 MiB) bounds
// what it can run.
const maxProgram = 64 << 20

// ReadProgram reads a program from the file name, or from stdin for "-",
// bounded as psych run bounds it.
func ReadProgram(name string, stdin io.Reader) (string, error) { return readProgram(name, stdin) }

func readProgram(name string, stdin io.Reader) (string, error) {
	r := stdin
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return "", fmt.Errorf("read program: %w", err)
		}
		defer f.Close()
		r = f
	}
	b, err := io.ReadAll(io.LimitReader(r, maxProgram+1))
	if err != nil {
		return "", fmt.Errorf("read program: %w", err)
	}
	if len(b) > maxProgram {
		return "", fmt.Errorf("read program: larger than %d bytes", maxProgram)
	}
	return string(b), nil
}

// printHuman passes the program's output through, then prints the value on
// stdout and a one-line summary (after the traceback, if any) on stderr.
func printHuman(res *sandbox.Result, stdout, stderr io.Writer) {
	io.WriteString(stdout, res.Stdout)
	io.WriteString(stderr, res.Stderr)
	if res.Value != nil {
		fmt.Fprintf(stdout, "%s\n", res.Value)
	}
	var notes []string
	if res.StdoutTruncated {
		notes = append(notes, "stdout truncated")
	}
	if res.StderrTruncated {
		notes = append(notes, "stderr truncated")
	}
	if res.LimitHit != "" {
		notes = append(notes, fmt.Sprintf("limit_hit=%s (%s)", res.LimitHit, res.LimitSource))
	}
	notes = append(notes, fmt.Sprintf("network_denied=%v", res.NetworkDenied))
	if u := res.Usage; u != nil {
		notes = append(notes, fmt.Sprintf("cpu %.3fs, peak memory %s, peak processes %d", u.CPUSeconds, formatBytes(u.PeakMemoryBytes), u.PeakProcesses))
	}
	if iso := res.Isolation; iso != nil {
		var had []string
		if iso.Mode == "fallback" {
			had = append(had, map[bool]string{true: "files confined by Landlock", false: "files NOT confined"}[len(iso.LandlockFS) > 0])
			if iso.InetRefused {
				had = append(had, "IPv4/IPv6 sockets refused")
			}
		}
		notes = append(notes, fmt.Sprintf("isolation %s (%scgroup %s)", iso.Mode, strings.Join(append(had, ""), ", "), iso.Cgroup))
	}
	summary := "ok"
	if f := res.Failure; f != nil {
		if f.Traceback != "" {
			io.WriteString(stderr, f.Traceback)
			if !strings.HasSuffix(f.Traceback, "\n") {
				io.WriteString(stderr, "\n")
			}
		}
		summary = "failed: " + f.Type
		if f.Message != "" {
			summary += ": " + firstLine(f.Message)
		}
		if f.ExitCode != nil {
			summary += fmt.Sprintf(" (exit %d)", *f.ExitCode)
		}
		if f.Signal != "" {
			summary += fmt.Sprintf(" (%s)", f.Signal)
		}
	}
	fmt.Fprintf(stderr, "psych: %s in %.3fs; %s\n", summary, res.Duration.Seconds(), strings.Join(notes, ", "))
}

// EncodeJSON writes v as one JSON object (HTML left unescaped) and returns
// the exit code.
func EncodeJSON(stdout, stderr io.Writer, v any) int {
	enc := json.NewEncoder(stdout)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		fmt.Fprintf(stderr, "psych: %v\n", err)
		return exitHostFault
	}
	return exitOK
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// stringList is a repeatable string flag.
type stringList []string

// envList is --env: NAME (the host's value) or NAME=VALUE (the run's).
type envList struct{ stringList }

// names are the variables named, for the allowlist.
func (l envList) names() []string {
	var out []string
	for _, v := range l.stringList {
		name, _, _ := strings.Cut(v, "=")
		out = append(out, name)
	}
	return out
}

// values are the NAME=VALUE ones, for the request; nil without any.
func (l envList) values() map[string]string {
	var out map[string]string
	for _, v := range l.stringList {
		if name, value, ok := strings.Cut(v, "="); ok {
			if out == nil {
				out = map[string]string{}
			}
			out[name] = value
		}
	}
	return out
}

// Set refuses a variable whose name is empty or holds NUL, which no
// environment can carry.
func (l *envList) Set(v string) error {
	name, _, _ := strings.Cut(v, "=")
	switch {
	case name == "":
		return errors.New("the variable's name is empty")
	case strings.ContainsRune(name, 0):
		return fmt.Errorf("the variable's name %q is invalid", name)
	}
	return l.stringList.Set(v)
}

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }
