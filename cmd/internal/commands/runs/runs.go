// Package runs is `psych runs list|show|replay --store FILE [ID]`: the
// executions psych run --store recorded, one of them as a ledger, or its
// replay. psych-full has it; the lean psych hands it over.
package runs

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/psych-runtime/psych"
	"github.com/psych-runtime/psych/cmd/internal/full"
	"github.com/psych-runtime/psych/internal/cli"
	"github.com/psych-runtime/psych/sandbox"
)

const runsUsage = `usage: psych runs list --store FILE [--json]
       psych runs show --store FILE [--json] ID
       psych runs replay --store FILE [--network] [--recorded-limits] [sandbox flags] ID

list prints the recorded executions with their status (ok, failed: TYPE,
incomplete, cancelled, sandbox failed); show prints one (its program, its
result and its tool calls in order, as a ledger; what the program wrote is
escaped); replay runs its program again with every binding call answered
from the ledger, and exits 0 when the run is reproduced, 1 at the first
divergence (printed as {seq, want, got}). A replay runs under the default
limits and without the network, whatever the ledger says: --network grants
it, --recorded-limits takes the recorded limits where they are below the
defaults.
`

// exitDiverged is runs replay's exit code for a divergence; a host fault
// there exits exitReplayFault, so the two never meet.
const (
	exitDiverged    = 1
	exitReplayFault = 4
)

// Command is psych runs, on the SQLite store, replaying on the backend the
// sandbox flags ask for.
var Command = cli.Command{Name: "runs", Run: func(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	return command(args, stdout, stderr, full.OpenStore, func(fs *flag.FlagSet) func() (sandbox.Sandbox, func(), error) {
		var f cli.SandboxFlags
		f.Register(fs)
		return func() (sandbox.Sandbox, func(), error) { return f.New(full.Container) }
	})
}}

// command is `psych runs ARGS`: open opens the store, and sandboxFlags
// registers the sandbox flags of runs replay and makes the Sandbox they
// ask for (cli.SandboxFlags). It returns the exit code.
func command(args []string, stdout, stderr io.Writer, open func(path string) (full.Store, error), sandboxFlags func(*flag.FlagSet) func() (sandbox.Sandbox, func(), error)) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, runsUsage)
		return cli.ExitUsage
	}
	var store string
	var asJSON, network, recordedLimits bool
	var newSandbox func() (sandbox.Sandbox, func(), error)
	fs := flag.NewFlagSet("psych runs "+args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&store, "store", "", "the SQLite file psych run --store recorded into")
	switch args[0] {
	case "list", "show":
		fs.BoolVar(&asJSON, "json", false, "print JSON")
	case "replay":
		newSandbox = sandboxFlags(fs)
		fs.BoolVar(&network, "network", false, "grant the replay the host's network (the recorded grant is not taken)")
		fs.BoolVar(&recordedLimits, "recorded-limits", false, "run under the recorded limits, each at most the default")
	default:
		fmt.Fprintf(stderr, "psych runs: unknown command %q\n%s", args[0], runsUsage)
		return cli.ExitUsage
	}
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return cli.ExitOK
		}
		return cli.ExitUsage
	}
	wantArgs := 1
	if args[0] == "list" {
		wantArgs = 0
	}
	if store == "" || fs.NArg() != wantArgs {
		fmt.Fprint(stderr, runsUsage)
		return cli.ExitUsage
	}
	if _, err := os.Stat(store); err != nil {
		fmt.Fprintf(stderr, "psych runs: %v\n", err)
		return cli.ExitUsage
	}
	st, err := open(store)
	if err != nil {
		fmt.Fprintf(stderr, "psych runs: %v\n", err)
		return cli.ExitUsage
	}
	defer st.Close()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	switch args[0] {
	case "list":
		return runsList(ctx, st, asJSON, stdout, stderr)
	case "show":
		return runsShow(ctx, st, fs.Arg(0), asJSON, stdout, stderr)
	}
	opts := psych.ReplayOptions{Network: network, RecordedLimits: recordedLimits}
	return runsReplay(ctx, st, newSandbox, fs.Arg(0), opts, stdout, stderr)
}

// status is an execution's state in a word or two: ok, failed: TYPE (the
// program raised), incomplete (still running, or its host died), cancelled,
// or sandbox failed (the Sandbox could not run it; Execution.Reason says
// why).
func status(e *psych.Execution) string {
	switch {
	case e.Status == psych.ExecutionCancelled && e.Incomplete():
		return "cancelled"
	case e.Status == psych.ExecutionFailed && e.Incomplete():
		return "sandbox failed"
	case e.Incomplete():
		return "incomplete"
	case e.Result.Failure != nil:
		return "failed: " + e.Result.Failure.Type
	}
	return "ok"
}

func runsList(ctx context.Context, st psych.Store, asJSON bool, stdout, stderr io.Writer) int {
	execs, err := st.Executions(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "psych runs list: %v\n", err)
		return cli.ExitHostFault
	}
	if asJSON {
		type row struct {
			ID      string    `json:"id"`
			Started time.Time `json:"started"`
			Status  string    `json:"status"`
			Reason  string    `json:"reason,omitempty"`
			Backend string    `json:"backend"`
		}
		rows := []row{}
		for _, e := range execs {
			rows = append(rows, row{e.ID, e.Started, status(&e), e.Reason, e.Backend})
		}
		return encodeJSON(stdout, stderr, rows)
	}
	w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tSTARTED\tSTATUS\tPROGRAM")
	for _, e := range execs {
		fmt.Fprintf(w, "%s\t%s\t%s\t%.60q\n", full.Escape(e.ID, true), e.Started.Format(time.RFC3339), full.Escape(status(&e), true), firstLine(e.Code))
	}
	w.Flush()
	return cli.ExitOK
}

// ledgerCall is a call as runs show prints it.
type ledgerCall struct {
	Seq      int64           `json:"seq"`
	Tool     string          `json:"tool"`
	Args     json.RawMessage `json:"args"`
	Via      psych.Via       `json:"via"`
	Parent   string          `json:"parent"`
	Decision psych.Verdict   `json:"decision"`
	Approver string          `json:"approver,omitempty"`
	Outcome  string          `json:"outcome"`
	Value    json.RawMessage `json:"value,omitempty"`
	Error    string          `json:"error,omitempty"`
	Duration float64         `json:"duration"`
	// Set when the record holds only the head of args or value (the
	// Runtime's record caps): then a JSON string, and the whole's sha256.
	ArgsSHA256  string `json:"args_sha256,omitempty"`
	ValueSHA256 string `json:"value_sha256,omitempty"`
}

func runsShow(ctx context.Context, st psych.Store, id string, asJSON bool, stdout, stderr io.Writer) int {
	e, err := st.Execution(ctx, id)
	if err != nil {
		fmt.Fprintf(stderr, "psych runs show: %v\n", err)
		if errors.Is(err, psych.ErrNotFound) {
			return cli.ExitUsage
		}
		return cli.ExitHostFault
	}
	calls, err := st.Calls(ctx, id)
	if err != nil {
		fmt.Fprintf(stderr, "psych runs show: %v\n", err)
		return cli.ExitHostFault
	}
	ledger := []ledgerCall{}
	for _, c := range calls {
		ledger = append(ledger, ledgerCall{c.Seq, c.Tool, c.Args, c.Via, c.Parent, c.Decision, c.Approver, c.Outcome, c.Value, c.Error, c.Duration.Seconds(), c.ArgsSHA256, c.ValueSHA256})
	}
	if asJSON {
		return encodeJSON(stdout, stderr, struct {
			Execution *psych.Execution `json:"execution"`
			Status    string           `json:"status"`
			Calls     []ledgerCall     `json:"calls"`
		}{e, status(e), ledger})
	}
	// Everything from the ledger is escaped: a program wrote much of it.
	fmt.Fprintf(stdout, "execution %s  %s  %s\n", full.Escape(e.ID, true), e.Started.Format(time.RFC3339), full.Escape(status(e), true))
	if e.Reason != "" {
		fmt.Fprintf(stdout, "reason %s\n", full.Escape(e.Reason, true))
	}
	fmt.Fprintf(stdout, "backend %s %s  python %s\n", full.Escape(e.Backend, true), full.Escape(e.Engine, true), full.Escape(e.Interpreter, true))
	fmt.Fprintf(stdout, "--- program\n%s", full.Escape(e.Code, false))
	if !strings.HasSuffix(e.Code, "\n") {
		fmt.Fprintln(stdout)
	}
	fmt.Fprintf(stdout, "--- calls (%d)\n", len(ledger))
	w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "SEQ\tTOOL\tARGS\tDECISION\tOUTCOME\tDURATION")
	for _, c := range ledger {
		args, _ := full.Shown(c.Args, 80)
		fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\t%.3fms\n", c.Seq, full.Escape(c.Tool, true), args, full.Escape(string(c.Decision), true), full.Escape(c.Outcome, true), c.Duration*1000)
	}
	w.Flush()
	if r := e.Result; r != nil {
		fmt.Fprintln(stdout, "--- result")
		if r.Value != nil {
			fmt.Fprintf(stdout, "value %s\n", full.Escape(string(r.Value), true))
		}
		if f := r.Failure; f != nil {
			fmt.Fprint(stdout, full.Escape(f.Traceback, false))
		}
	}
	return cli.ExitOK
}

func runsReplay(ctx context.Context, st psych.Store, newSandbox func() (sandbox.Sandbox, func(), error), id string, opts psych.ReplayOptions, stdout, stderr io.Writer) int {
	sb, closeSandbox, err := newSandbox()
	if err != nil {
		return cli.Report(stderr, "psych runs replay", err)
	}
	defer closeSandbox()
	rt, err := psych.New(psych.Config{Sandbox: sb, Store: st})
	if err != nil {
		return cli.Report(stderr, "psych runs replay", err)
	}
	rep, err := rt.Replay(ctx, id, opts)
	if err != nil {
		fmt.Fprintf(stderr, "psych runs replay: %v\n", err)
		if errors.Is(err, psych.ErrNotFound) {
			return cli.ExitUsage
		}
		if code := cli.Report(io.Discard, "", err); code != cli.ExitHostFault {
			return code
		}
		return exitReplayFault
	}
	for _, n := range rep.Notes {
		fmt.Fprintf(stderr, "psych runs replay: note: %s\n", full.Escape(n, true))
	}
	if rep.Divergence != nil {
		encodeJSON(stdout, stderr, rep.Divergence)
		return exitDiverged
	}
	fmt.Fprintf(stdout, "reproduced %s\n", id)
	return cli.ExitOK
}

// encodeJSON prints v as JSON with every control and bidi character of
// its strings as a \u escape (full.JSONSafe): the ledger's strings are the
// program's.
func encodeJSON(stdout, stderr io.Writer, v any) int {
	var b bytes.Buffer
	if code := cli.EncodeJSON(&b, stderr, v); code != cli.ExitOK {
		return code
	}
	if _, err := stdout.Write(full.JSONSafe(b.Bytes())); err != nil {
		fmt.Fprintf(stderr, "psych runs: %v\n", err)
		return cli.ExitHostFault
	}
	return cli.ExitOK
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
