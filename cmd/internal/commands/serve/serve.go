// Package serve is `psych serve`: a resident psych (package server) over
// one Sandbox (the sandbox flags choose it; --pool N keeps N warm), a
// psych.Runtime and, with --store, the SQLite ledger, serving psych's API
// on every --listen address until SIGTERM or SIGINT, which drain it
// (runs in flight finish within --drain-timeout) and exit 0.
//
// With --doctor, psych doctor's checks run first: on a FAIL the server
// serves on, unready for good (/readyz says why), and exits 1 when stopped.
//
// Exit codes: 2 for a usage or configuration error, a second server on a
// live socket among them (nothing is served); 1 when the server cannot
// start (the self-check run failed, a doctor's FAIL) or a listener fails
// while serving; 0 after a drain. psych-full has it; the lean psych hands it over.
package serve

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/psych-runtime/psych"
	"github.com/psych-runtime/psych/api"
	"github.com/psych-runtime/psych/cmd/internal/full"
	"github.com/psych-runtime/psych/internal/cli"
	"github.com/psych-runtime/psych/internal/doctor"
	"github.com/psych-runtime/psych/sandbox"
	"github.com/psych-runtime/psych/server"
)

// Command is psych serve.
var Command = cli.Command{Name: "serve", Run: func(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	return command(args, stderr)
}}

// list is a repeatable string flag.
type list []string

func (l *list) String() string     { return strings.Join(*l, ",") }
func (l *list) Set(v string) error { *l = append(*l, v); return nil }

// ids is a repeatable flag of numeric ids, each value one id or several
// separated by commas.
type ids []uint32

func (l *ids) String() string { return fmt.Sprint(*l) }
func (l *ids) Set(v string) error {
	for _, s := range strings.Split(v, ",") {
		n, err := strconv.ParseUint(strings.TrimSpace(s), 10, 32)
		if err != nil {
			return fmt.Errorf("%q is not a numeric id", s)
		}
		*l = append(*l, uint32(n))
	}
	return nil
}

type flags struct {
	cli.SandboxFlags
	listen, preload                list
	modules                        []string // --preload's, split
	tokenFile, tlsCert, tlsKey     string
	metricsListen, store           string
	allowUIDs, allowGIDs           ids
	maxRuns, queue, pool           int
	queueTimeout, drainTimeout     time.Duration
	maxRequest                     cli.ByteSize
	allowNetwork, doctor           bool
	maxCPU, maxWall, maxApproval   float64
	maxProcesses, maxOpenFiles     int
	maxAddress, maxMemory, maxFile cli.ByteSize
	maxStack                       cli.ByteSize
}

func command(args []string, stderr io.Writer) int {
	var f flags
	fs := flag.NewFlagSet("psych serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Var(&f.listen, "listen", "serve the API here: unix:///PATH, tcp://HOST:PORT or tls://HOST:PORT (repeatable; default unix://"+server.DefaultSocket()+")")
	fs.StringVar(&f.tokenFile, "token-file", "", "the file holding the bearer token a tcp:// or tls:// listener requires (at least 16 bytes)")
	fs.StringVar(&f.tlsCert, "tls-cert", "", "a tls:// listener's certificate (PEM)")
	fs.StringVar(&f.tlsKey, "tls-key", "", "a tls:// listener's key (PEM)")
	fs.Var(&f.allowUIDs, "allow-uid", "a uid a Unix socket serves besides root and the server's own (repeatable, or comma-separated)")
	fs.Var(&f.allowGIDs, "allow-gid", "a primary gid a Unix socket serves (repeatable, or comma-separated)")
	fs.StringVar(&f.metricsListen, "metrics-listen", "", "serve /healthz, /readyz and /metrics without auth here (HOST:PORT, tcp://HOST:PORT or unix:///PATH)")
	fs.IntVar(&f.maxRuns, "max-runs", 0, "runs in flight at most (default: the pool's size, at least 2)")
	fs.IntVar(&f.queue, "queue", server.DefaultQueue, "requests waiting for a slot at most, in order (0: none)")
	fs.DurationVar(&f.queueTimeout, "queue-timeout", server.DefaultQueueTimeout, "how long a request may wait in the queue")
	fs.IntVar(&f.pool, "pool", 0, "keep this many sandboxes started ahead of requests (0: every run starts cold)")
	fs.Var(&f.preload, "preload", "a module each pooled sandbox imports before its request, such as pandas (repeatable, or comma-separated; needs --pool)")
	fs.Var(&f.maxRequest, "max-request-bytes", "a request body's cap (default 16MiB plus the files cap, 64MiB, in base64: about 101MiB)")
	fs.DurationVar(&f.drainTimeout, "drain-timeout", server.DefaultDrainTimeout, "on SIGTERM or SIGINT, how long runs in flight may finish before they are cancelled")
	fs.BoolVar(&f.allowNetwork, "allow-network", false, "let a request ask for the network")
	fs.BoolVar(&f.doctor, "doctor", false, "run psych doctor's checks before becoming ready: on a FAIL stay unready (/readyz says why) and serve on; GET /v1/info shows the report")
	fs.StringVar(&f.store, "store", "", "record every run and tool call into this SQLite file (GET /v1/runs reads it)")
	fs.Float64Var(&f.maxCPU, "max-cpu-seconds", 0, "the most CPU a request may ask for (default: the default, 10)")
	fs.Float64Var(&f.maxWall, "max-wall-seconds", 0, "the most wall clock a request may ask for (default 30)")
	fs.Float64Var(&f.maxApproval, "max-approval-seconds", 0, "the most suspended time a request may ask for (default 600)")
	fs.IntVar(&f.maxProcesses, "max-processes", 0, "the most processes a request may ask for (default 64)")
	fs.IntVar(&f.maxOpenFiles, "max-open-files", 0, "the most open files a request may ask for (default 1024)")
	fs.Var(&f.maxAddress, "max-address-space", "the most address space a request may ask for (default 512MiB)")
	fs.Var(&f.maxMemory, "max-memory", "the most memory a request may ask for (default: the address space's)")
	fs.Var(&f.maxFile, "max-file-size", "the largest file size a request may ask for (default 10MiB)")
	fs.Var(&f.maxStack, "max-stack", "the stack a request may ask for (a pooled run has the pool's; default 4MiB)")
	f.SandboxFlags.Register(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return cli.ExitOK
		}
		return cli.ExitUsage
	}
	if fs.NArg() != 0 {
		fmt.Fprint(stderr, "psych serve: takes no arguments (see psych serve -h)\n")
		return cli.ExitUsage
	}
	for _, n := range []struct {
		flag  string
		value float64
	}{{"max-runs", float64(f.maxRuns)}, {"queue", float64(f.queue)}, {"pool", float64(f.pool)}, {"queue-timeout", f.queueTimeout.Seconds()}, {"drain-timeout", f.drainTimeout.Seconds()},
		{"max-cpu-seconds", f.maxCPU}, {"max-wall-seconds", f.maxWall}, {"max-approval-seconds", f.maxApproval}, {"max-processes", float64(f.maxProcesses)}, {"max-open-files", float64(f.maxOpenFiles)}} {
		if n.value < 0 {
			fmt.Fprintf(stderr, "psych serve: --%s: must not be negative\n", n.flag)
			return cli.ExitUsage
		}
	}
	for _, m := range f.preload {
		for _, m := range strings.Split(m, ",") {
			if m = strings.TrimSpace(m); m != "" {
				f.modules = append(f.modules, m)
			}
		}
	}
	if len(f.modules) > 0 && f.pool == 0 {
		fmt.Fprint(stderr, "psych serve: --preload needs --pool: only a pooled sandbox imports ahead of its request\n")
		return cli.ExitUsage
	}
	if err := sandbox.CheckPreload(f.modules); err != nil {
		fmt.Fprintf(stderr, "psych serve: --preload: %v\n", err)
		return cli.ExitUsage
	}
	if len(f.listen) == 0 {
		f.listen = list{"unix://" + server.DefaultSocket()}
	}
	var token string
	if f.tokenFile != "" {
		t, err := api.ReadToken(f.tokenFile)
		if err != nil {
			fmt.Fprintf(stderr, "psych serve: --token-file: %v\n", err)
			return cli.ExitUsage
		}
		token = t
	}
	caps := sandbox.Limits{
		CPUSeconds: f.maxCPU, WallSeconds: f.maxWall, ApprovalSeconds: f.maxApproval,
		ProcessCount: f.maxProcesses, OpenFiles: f.maxOpenFiles,
		AddressSpaceBytes: int64(f.maxAddress), MemoryBytes: int64(f.maxMemory), FileSizeBytes: int64(f.maxFile), StackBytes: int64(f.maxStack),
	}
	return serve(&f, token, caps, stderr)
}

// serve runs the server by phase: its listeners, then what it serves
// (build), then serving until a signal (wait) and the drain.
func serve(f *flags, token string, caps sandbox.Limits, stderr io.Writer) int {
	// The listeners first: a second server on a live socket stops here,
	// before it makes a sandbox.
	ls, err := listen(f, token)
	defer ls.close()
	if err != nil {
		return fail(stderr, cli.ExitUsage, "%v", err)
	}
	srv, done, status := build(f, token, caps, stderr)
	if srv == nil {
		return status
	}
	defer done()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	status = wait(ctx, srv, ls.serve(srv), stderr)
	stop()
	dctx, cancel := context.WithTimeout(context.Background(), f.drainTimeout+30*time.Second)
	defer cancel()
	if err := srv.Shutdown(dctx); err != nil {
		fmt.Fprintf(stderr, "psych serve: %v\n", err)
		status = cli.ExitHostFault
	}
	return status
}

// fail writes psych serve's message and returns status.
func fail(stderr io.Writer, status int, format string, args ...any) int {
	fmt.Fprintf(stderr, "psych serve: "+format+"\n", args...)
	return status
}

// listeners are the server's: the API's, and the metrics' if asked for.
type listeners struct {
	api     []*server.Listener
	metrics net.Listener
}

// listen opens every --listen address and --metrics-listen. On an error
// the caller still closes what was opened.
func listen(f *flags, token string) (*listeners, error) {
	ls := &listeners{}
	for _, addr := range f.listen {
		l, err := server.Listen(addr, server.ListenOptions{TLSCert: f.tlsCert, TLSKey: f.tlsKey})
		if err != nil {
			if errors.Is(err, server.ErrSocketInUse) {
				return ls, fmt.Errorf("%w (another psych serve is listening there)", err)
			}
			return ls, fmt.Errorf("--listen: %w", err)
		}
		ls.api = append(ls.api, l)
		if l.Kind != "unix" && token == "" {
			return ls, fmt.Errorf("--listen %s: a tcp:// or tls:// listener needs --token-file (no exception for loopback)", addr)
		}
	}
	if f.metricsListen != "" {
		var err error
		if ls.metrics, err = listenMetrics(f.metricsListen); err != nil {
			return ls, fmt.Errorf("--metrics-listen: %w", err)
		}
	}
	return ls, nil
}

// serve serves srv on every listener; each one's end is sent on the
// channel. The API's listeners are the server's to close from here on
// (Shutdown).
func (ls *listeners) serve(srv *server.Server) <-chan error {
	served := make(chan error, len(ls.api)+1)
	for _, l := range ls.api {
		go func() { served <- srv.Serve(l) }()
	}
	ls.api = nil
	if ls.metrics != nil {
		go func() { served <- srv.ServeMetrics(ls.metrics) }()
	}
	return served
}

func (ls *listeners) close() {
	for _, l := range ls.api {
		l.Close()
	}
	if ls.metrics != nil {
		ls.metrics.Close()
	}
}

// build makes what the server serves: the sandbox (the pool started and
// its preload checked), the store, the runtime, and the server. On
// success done closes them, in reverse order; on a failure build has
// closed them, srv is nil and status is the exit code.
func build(f *flags, token string, caps sandbox.Limits, stderr io.Writer) (srv *server.Server, done func(), status int) {
	var undo []func()
	cleanup := func() {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
	}
	defer func() {
		if srv == nil {
			cleanup()
		}
	}()
	if f.pool > 0 {
		f.Pool = &sandbox.PoolConfig{Size: f.pool, Caps: caps, Preload: f.modules}
	}
	sb, closeSandbox, err := f.SandboxFlags.New(full.Container)
	if err != nil {
		return nil, nil, cli.Report(stderr, "psych serve", err)
	}
	undo = append(undo, closeSandbox)
	if len(f.modules) > 0 {
		if err := checkPreload(sb, f.modules); err != nil {
			return nil, nil, fail(stderr, cli.ExitUsage, "--preload: %v", err)
		}
	}
	cfg := psych.Config{Sandbox: sb}
	var store psych.Store
	if f.store != "" {
		st, err := full.OpenStore(f.store)
		if err != nil {
			return nil, nil, fail(stderr, cli.ExitUsage, "--store: %v", err)
		}
		undo = append(undo, func() { st.Close() })
		cfg.Store, store = st, st
	}
	rt, err := psych.New(cfg)
	if err != nil {
		return nil, nil, cli.Report(stderr, "psych serve", err)
	}
	backend, engine, python := f.Describe()
	srv, err = server.New(server.Config{
		Doctor:  doctorFunc(f, python),
		Runtime: rt, Sandbox: sb, Store: store,
		Info:         api.Info{Backend: backend, Engine: engine, Interpreter: python, EnvAllowlist: f.EnvNames()},
		Caps:         caps,
		AllowNetwork: f.allowNetwork,
		MaxRuns:      f.maxRuns,
		Queue:        map[bool]int{true: server.QueueNone, false: f.queue}[f.queue == 0],
		QueueTimeout: f.queueTimeout, DrainTimeout: f.drainTimeout,
		MaxRequestBytes: int64(f.maxRequest),
		AllowUIDs:       f.allowUIDs, AllowGIDs: f.allowGIDs, Token: token,
		Logger: slog.New(slog.NewJSONHandler(stderr, nil)),
	})
	if err != nil {
		return nil, nil, fail(stderr, cli.ExitUsage, "%v", err)
	}
	return srv, cleanup, cli.ExitOK
}

// doctorFunc is --doctor's check for the server to run before it is
// ready, nil without the flag.
func doctorFunc(f *flags, python string) func(context.Context) *api.Doctor {
	if !f.doctor {
		return nil
	}
	opts := doctor.Options{RequireCgroup: f.Requirements().Cgroup}
	if !f.Container() {
		opts.Python = python
	}
	return func(ctx context.Context) *api.Doctor { return doctorReport(doctor.Run(ctx, opts)) }
}

// wait starts srv and serves until ctx ends (a signal) or a listener
// fails, and returns the exit status before the drain.
func wait(ctx context.Context, srv *server.Server, served <-chan error, stderr io.Writer) int {
	err := srv.Start(ctx)
	switch {
	case err != nil && errors.Is(err, server.ErrDoctor) && ctx.Err() == nil:
		// Unready for good, but serving: the probes, /v1/info and the
		// log say why, where an exit would only restart the same FAIL.
		// It never served a run: exit 1 when it ends.
		fmt.Fprintf(stderr, "psych serve: %v (serving unready until stopped)\n", err)
		select {
		case <-ctx.Done():
		case err := <-served:
			fmt.Fprintf(stderr, "psych serve: %v\n", err)
		}
		return cli.ExitHostFault
	case err != nil && ctx.Err() == nil:
		fmt.Fprintf(stderr, "psych serve: %v\n", err)
		return cli.ExitHostFault
	case ctx.Err() == nil:
		select {
		case <-ctx.Done():
		case err := <-served:
			fmt.Fprintf(stderr, "psych serve: %v\n", err)
			return cli.ExitHostFault
		}
	}
	return cli.ExitOK
}

// doctorReport is rep as GET /v1/info serves it.
func doctorReport(rep doctor.Report) *api.Doctor {
	out := &api.Doctor{Failed: rep.Failed(), Checks: make([]api.DoctorCheck, 0, len(rep.Checks))}
	for _, c := range rep.Checks {
		out.Checks = append(out.Checks, api.DoctorCheck{Name: c.Name, Status: c.Status, Found: c.Found, Fix: c.Fix})
	}
	return out
}

// listenMetrics opens the metrics listener: HOST:PORT, tcp://HOST:PORT or
// unix:///PATH.
func listenMetrics(addr string) (net.Listener, error) {
	if !strings.Contains(addr, "://") {
		return net.Listen("tcp", addr)
	}
	kind, where, err := server.ParseAddress(addr)
	if err != nil {
		return nil, err
	}
	if kind == "tls" {
		return nil, fmt.Errorf("%s: the metrics listener is plain tcp:// or unix://", addr)
	}
	return net.Listen(map[bool]string{true: "unix", false: "tcp"}[kind == "unix"], where)
}

// checkPreload runs one program that imports the modules to preload: one
// the sandbox's interpreter cannot import would fail every fill of the
// pool, and the server would never be ready.
func checkPreload(sb sandbox.Sandbox, modules []string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := sb.Run(ctx, sandbox.Request{Code: "import " + strings.Join(modules, ", ") + "\nNone"})
	switch {
	case err != nil:
		return fmt.Errorf("check the modules: %w", err)
	case res.Failure != nil:
		return fmt.Errorf("the sandbox's interpreter cannot import them: %s: %s", res.Failure.Type, res.Failure.Message)
	}
	return nil
}
