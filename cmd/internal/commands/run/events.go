package run

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/psych-runtime/psych/api"
	"github.com/psych-runtime/psych/internal/cli"
	"github.com/psych-runtime/psych/internal/eventstream"
	"github.com/psych-runtime/psych/sandbox"
)

// Bounds of the embedded transport's event stream (psych serve's
// defaults).
const (
	eventsBufferBytes = 4 << 20
	eventsKeepalive   = 15 * time.Second
)

// EventsFunc runs req through a psych.Runtime whose tools are o's and the
// request's own (its bindings, answered through st's call events), every
// approval asked through st (approval events). sreq is req as a
// sandbox.Request, with Output and Started set. psych-full has one
// (cmd/internal/full); the lean psych hands --events to it.
type EventsFunc func(ctx context.Context, sb sandbox.Sandbox, req *api.RunRequest, sreq sandbox.Request, o ExecOptions, st *eventstream.Stdio) (*sandbox.Result, error)

// eventsFlags are the flags a run with --events refuses: the request
// carries the program, its limits, env and network, and the answers
// come from the client.
var eventsFlags = map[string]string{
	"json":    "the events are JSON already",
	"host":    "the embedded transport runs here (a client talks to a server itself)",
	"approve": "approvals are answered on stdin",
	"network": "the request's network field asks for it",
}

// events is psych run --events: one request (POST /v1/runs's body) as a
// JSON line on stdin, the API's events on stdout, the answers to its call
// and approval events on stdin. It exits 0 once a terminal event was
// written, else 1 (2 for a usage error, before any event).
func events(c Config, f *flags, fs *flag.FlagSet, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	bad := ""
	fs.Visit(func(fl *flag.Flag) {
		if why, ok := eventsFlags[fl.Name]; ok && bad == "" {
			bad = fmt.Sprintf("psych run: --%s with --events: %s\n", fl.Name, why)
		}
	})
	switch {
	case bad != "":
		fmt.Fprint(stderr, bad)
		return cli.ExitUsage
	case fs.NArg() != 0:
		fmt.Fprint(stderr, "psych run: --events takes no FILE: the request comes on stdin\n")
		return cli.ExitUsage
	case f.host != "" || f.tokenFile != "":
		fmt.Fprint(stderr, "psych run: --events runs here: not with --host, PSYCH_HOST or --token-file\n")
		return cli.ExitUsage
	case c.Events == nil && (f.Container() || f.store != "" || f.demoTools):
		return cli.HandOver(stderr, append([]string{"run"}, args...), "--events with --backend container, --store or --demo-tools")
	}
	for _, l := range []struct {
		flag  string
		value float64
	}{{"cpu-seconds", f.cpu}, {"wall-seconds", f.wall}, {"approval-seconds", f.approval}, {"processes", float64(f.processes)}, {"open-files", float64(f.openFiles)}} {
		if l.value < 0 {
			fmt.Fprintf(stderr, "psych run: --%s %g: must not be negative\n", l.flag, l.value)
			return cli.ExitUsage
		}
	}
	var request io.Reader
	if f.requestFD > 0 { // psych handed over a request it read (handOver)
		request = takeRequestFile(f.requestFD)
	}
	return Serve(stdin, request, stdout, stderr, func(ctx context.Context, line []byte, st *eventstream.Stdio) api.Event {
		req, e := api.DecodeRunRequest(line)
		if e != nil {
			return api.Event{Event: api.EventError, Error: e}
		}
		if c.Events == nil && len(req.Bindings) > 0 {
			// The request's tools go through the tool path, which
			// psych-full links: it reads the request again from a memfd.
			fd, err := requestFile(line)
			if err != nil {
				return api.Event{Event: api.EventError, Error: ErrorOf(ctx, err)}
			}
			cli.HandOver(stderr, append([]string{"run", fdArg(fd)}, args...), "--events with bindings")
			return api.Event{Event: api.EventError, Error: &api.Error{Code: api.CodeHostFault, Message: "hand the run over to " + cli.FullBinary + " failed (see stderr)"}}
		}
		sb, closeSandbox, err := f.SandboxFlags.New(c.Container)
		if err != nil {
			return api.Event{Event: api.EventError, Error: ErrorOf(ctx, err)}
		}
		defer closeSandbox()
		if req.ID == "" {
			req.ID = ulid.Make().String()
		}
		sreq := sandbox.Request{ID: req.ID, Code: req.Code, Limits: req.Limits.Merge(f.limits()), Env: req.Env, Network: req.Network, Files: req.Files,
			Started: func(warm bool) { st.Send(api.Event{Event: api.EventStarted, ID: req.ID, Warm: &warm}) },
			Output:  func(s sandbox.Stream, data string) { st.Send(api.Event{Event: s.String(), Data: data}) },
		}
		var res *sandbox.Result
		if c.Events == nil { // no tools, no store: the sandbox itself
			res, err = sb.Run(ctx, sreq)
		} else {
			res, err = c.Events(ctx, sb, req, sreq, ExecOptions{DemoTools: f.demoTools, Store: f.store}, st)
		}
		if err != nil && res == nil {
			return api.Event{Event: api.EventError, Error: ErrorOf(ctx, err)}
		}
		if err != nil { // the result is in; recording it failed
			fmt.Fprintf(stderr, "psych run: %v\n", err)
		}
		return api.Event{Event: api.EventResult, Result: res}
	})
}

func invalid(format string, args ...any) *api.Error {
	return &api.Error{Code: api.CodeInvalidRequest, Message: fmt.Sprintf(format, args...)}
}

// ErrorOf is the error event for a run or call that ended without its
// Result or Outcome.
func ErrorOf(ctx context.Context, err error) *api.Error {
	switch {
	case ctx.Err() != nil || errors.Is(err, context.Canceled):
		return &api.Error{Code: api.CodeCancelled, Message: err.Error()}
	case errors.Is(err, sandbox.ErrRefused):
		return &api.Error{Code: api.CodeRefused, Message: err.Error()}
	case errors.Is(err, sandbox.ErrInvalidConfig), errors.Is(err, sandbox.ErrInvalidRequest):
		return &api.Error{Code: api.CodeInvalidRequest, Message: err.Error()}
	case errors.Is(err, sandbox.ErrBusy):
		return &api.Error{Code: api.CodeCapacityExhausted, Message: err.Error(), Retryable: true}
	}
	return &api.Error{Code: api.CodeHostFault, Message: err.Error()}
}

// Serve is the embedded transport around do (psych run --events, psych
// call --events): it reads the request line from stdin, then the answers
// while do runs; writes do's events and its terminal event to stdout; and
// cancels do's context on SIGINT or SIGTERM, when the client stops
// reading (a failed write, a broken pipe) or falls behind by more than
// the stream's cap. It exits 0 once the terminal event was written, else
// 1. request, when not nil, holds the request line in place of stdin.
func Serve(stdin, request io.Reader, stdout, stderr io.Writer, do func(ctx context.Context, line []byte, st *eventstream.Stdio) api.Event) int {
	// A broken pipe on stdout is a write error here, not the end of psych:
	// the run is cancelled and torn down.
	pipe := make(chan os.Signal, 1)
	signal.Notify(pipe, syscall.SIGPIPE)
	defer signal.Stop(pipe)
	ctx, stop := watchInterrupts()()
	defer stop()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st := eventstream.NewStdio(eventsBufferBytes, cancel)
	in := bufio.NewReaderSize(stdin, 64<<10)
	from := in
	if request != nil {
		from = bufio.NewReaderSize(request, 64<<10)
	}
	line, err := eventstream.ReadLine(from, api.MaxStdioRequestBytes)
	if err != nil {
		what := err.Error()
		if err == io.EOF {
			what = "no request on stdin"
		}
		st.End(api.Event{Event: api.EventError, Error: invalid("read the request: %s", what)})
	} else {
		go st.ReadAnswers(in, func(msg string) { fmt.Fprintf(stderr, "psych: %s\n", msg) })
		done := make(chan struct{})
		go func() {
			defer close(done)
			ev := do(ctx, line, st)
			st.End(ev)
		}()
		defer func() { <-done }()
	}
	if err := st.Serve(func(b []byte) error { _, err := stdout.Write(b); return err }, eventsKeepalive); err != nil {
		cancel()
		fmt.Fprintf(stderr, "psych: write the events: %v\n", err)
		return cli.ExitHostFault
	}
	return cli.ExitOK
}
