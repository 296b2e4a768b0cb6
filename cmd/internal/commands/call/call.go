// Package call is `psych call --events`: one direct call of a tool through
// psych's tool path (schema, Policy, approval, recording), the embedded
// transport's form of POST /v1/calls. The request (an api.CallRequest) is
// one JSON line on stdin; the API's events go to stdout, ending in an
// outcome or error event; the answers to call and approval events come on
// stdin. It exits 0 once a terminal event was written, else 1 (2 for a
// usage error, before any event).
//
// The tools are the request's own (its bindings, answered by the client),
// the demo tools with --demo-tools, and run_code when the request calls it
// (a sandbox made from the sandbox flags, whose programs call the other
// tools as bindings through the same path). With --store the call, and a
// run_code's run, are recorded. Only psych-full has it.
package call

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/oklog/ulid/v2"

	"github.com/psych-runtime/psych"
	"github.com/psych-runtime/psych/api"
	"github.com/psych-runtime/psych/cmd/internal/commands/run"
	"github.com/psych-runtime/psych/cmd/internal/full"
	"github.com/psych-runtime/psych/internal/cli"
	"github.com/psych-runtime/psych/internal/eventstream"
	"github.com/psych-runtime/psych/sandbox"
)

// Command is psych call.
var Command = cli.Command{Name: "call", Run: call}

func call(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	var (
		sf           cli.SandboxFlags
		events, demo bool
		store        string
	)
	fs := flag.NewFlagSet("psych call", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.BoolVar(&events, "events", false, "required: read one request (the API's POST /v1/calls body) as a JSON line on stdin, write the API's events on stdout, read the answers on stdin (api/events.md)")
	fs.BoolVar(&demo, "demo-tools", false, "offer the demo tools beside the request's own (see psych run -h)")
	fs.StringVar(&store, "store", "", "record the call into this SQLite file")
	sf.Register(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return cli.ExitOK
		}
		return cli.ExitUsage
	}
	switch {
	case !events:
		fmt.Fprint(stderr, "psych call: only --events is supported (a call's request on stdin, its events on stdout)\n")
		return cli.ExitUsage
	case fs.NArg() != 0:
		fmt.Fprint(stderr, "psych call: --events takes no argument: the request comes on stdin\n")
		return cli.ExitUsage
	}
	o := run.ExecOptions{DemoTools: demo, Store: store}
	return run.Serve(stdin, nil, stdout, stderr, func(ctx context.Context, line []byte, st *eventstream.Stdio) api.Event {
		req, e := api.DecodeCallRequest(line)
		if e != nil {
			return api.Event{Event: api.EventError, Error: e}
		}
		if req.ID == "" {
			req.ID = ulid.Make().String()
		}
		var sb sandbox.Sandbox
		if req.Tool == psych.RunCode { // the only tool that needs one
			s, closeSandbox, err := sf.New(full.Container)
			if err != nil {
				return api.Event{Event: api.EventError, Error: run.ErrorOf(ctx, err)}
			}
			defer closeSandbox()
			sb = s
		}
		st.Send(api.Event{Event: api.EventStarted, ID: req.ID})
		out, err := full.Call(ctx, sb, req, o, st)
		if err != nil {
			return api.Event{Event: api.EventError, Error: run.ErrorOf(ctx, err)}
		}
		return api.Event{Event: api.EventOutcome, Outcome: out}
	})
}
