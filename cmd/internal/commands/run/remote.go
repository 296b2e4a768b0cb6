package run

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/psych-runtime/psych/api"
	"github.com/psych-runtime/psych/client"
	"github.com/psych-runtime/psych/internal/cli"
	"github.com/psych-runtime/psych/sandbox"
)

// localOnly are the flags that configure a Sandbox or the local tool
// path, which a server has its own of: with --host each is a usage error.
var localOnly = map[string]string{
	"python":           "the server's interpreter is its own",
	"backend":          "the server's backend is its own",
	"engine":           "the server's backend is its own",
	"image":            "the server's backend is its own",
	"container-python": "the server's backend is its own",
	"store":            "the server records into its own ledger (psych serve --store)",
	"demo-tools":       "the server's tools are its own",
	"max-output":       "the server's output cap is its own",
}

// remote is psych run through a server (--host or PSYCH_HOST): the same
// output, JSON and exit codes as a local run, plus ExitRetry for a
// refusal a later try may not meet (429, 503).
func remote(f *flags, fs *flag.FlagSet, stdin io.Reader, stdout, stderr io.Writer) int {
	bad := ""
	fs.Visit(func(fl *flag.Flag) {
		if why, ok := localOnly[fl.Name]; ok && bad == "" {
			bad = fmt.Sprintf("psych run: --%s with --host: %s\n", fl.Name, why)
		}
	})
	if bad != "" {
		fmt.Fprint(stderr, bad)
		return cli.ExitUsage
	}
	code, status := f.program(fs.Arg(0), stdin, stderr)
	if status != cli.ExitOK {
		return status
	}
	token := os.Getenv("PSYCH_TOKEN")
	if f.tokenFile != "" {
		t, err := api.ReadToken(f.tokenFile)
		if err != nil {
			fmt.Fprintf(stderr, "psych run: --token-file: %v\n", err)
			return cli.ExitUsage
		}
		token = t
	}
	c, err := client.New(f.host, client.Options{Token: token})
	if err != nil {
		fmt.Fprintf(stderr, "psych run: --host: %v\n", err)
		return cli.ExitUsage
	}
	defer c.Close()
	ctx, stop := watchInterrupts()()
	defer stop()

	need := f.Requirements()
	if need.NetworkDenial || need.Cgroup {
		info, err := c.Info(ctx)
		if err != nil {
			return reportRemote(stderr, err)
		}
		if why := unmet(need, info.SelfCheck, f.network); why != "" {
			fmt.Fprintf(stderr, "psych run: the server's self-check: %s: %v\n", why, sandbox.ErrRefused)
			return cli.ExitRefused
		}
	}
	req := api.RunRequest{Code: code, Limits: f.limits(), Env: f.EnvValues(), Network: f.network, Files: f.reqFiles}
	h := client.Handler{Approve: approver(f.approve)}
	if !f.json {
		out := passThrough(stdout, stderr)
		h.Output = func(stream, data string) {
			if stream == "stderr" {
				out(sandbox.Stderr, data)
			} else {
				out(sandbox.Stdout, data)
			}
		}
	}
	res, err := c.Stream(ctx, req, h)
	if err != nil {
		return reportRemote(stderr, err)
	}
	if why := unmet(need, res.Isolation, f.network); why != "" {
		fmt.Fprintf(stderr, "psych run: run %s: %s: %v\n", res.ID, why, sandbox.ErrRefused)
		return cli.ExitRefused
	}
	status = cli.ExitOK
	if err := f.writeOut(res, stderr); err != nil {
		status = cli.ExitHostFault
	}
	if f.json {
		if s := cli.EncodeJSON(stdout, stderr, res); s != cli.ExitOK {
			return s
		}
		return status
	}
	if h.Output == nil {
		cli.PrintResult(res, stdout, stderr)
	} else {
		cli.PrintEnd(res, stdout, stderr)
	}
	return status
}

// unmet says which requirement iso (a self-check's or a run's) does not
// meet, or "".
func unmet(need cli.Requirements, iso *sandbox.Isolation, network bool) string {
	switch {
	case iso == nil && (need.NetworkDenial || need.Cgroup):
		return "no attestation"
	case iso == nil:
		return ""
	case need.NetworkDenial && !network && (iso.Network == nil || !iso.Network.Verified):
		return "network denial not verified (--require-network-denial)"
	case need.Cgroup && (iso.Cgroup == "" || iso.Cgroup == "none"):
		return "no per-run cgroup (--require-cgroup)"
	case !need.AllowFallback && iso.Mode == "fallback":
		return "run in the fallback, without namespaces (pass --allow-fallback to accept it)"
	}
	return ""
}

// reportRemote prints a run's error and picks the exit code: 75 for a
// refusal to retry (429, 503), 2 for the request's or the caller's fault
// (400, 401, 403, 404, 409, 413), 130 when interrupted, 1 for the rest (a
// host fault, an unreachable server, a broken stream).
func reportRemote(stderr io.Writer, err error) int {
	var ae *api.Error
	switch {
	case errors.Is(err, context.Canceled):
		fmt.Fprintf(stderr, "psych run: %v\n", err)
		return cli.ExitInterrupted
	case errors.As(err, &ae) && ae.Retryable && ae.Status != 0:
		fmt.Fprintf(stderr, "psych run: %v (retry after %ds)\n", err, ae.RetryAfter)
		return cli.ExitRetry
	case errors.As(err, &ae) && ae.Status/100 == 4:
		fmt.Fprintf(stderr, "psych run: %v\n", err)
		return cli.ExitUsage
	}
	fmt.Fprintf(stderr, "psych run: %v\n", err)
	return cli.ExitHostFault
}

// approver answers approval events as --approve says: yes, no, or ask on
// the terminal (denied where there is none).
func approver(mode string) func(context.Context, client.CallEvent) (bool, string) {
	switch mode {
	case "yes":
		return func(context.Context, client.CallEvent) (bool, string) { return true, "--approve=yes" }
	case "ask":
		return askTTY
	}
	return func(context.Context, client.CallEvent) (bool, string) { return false, "--approve=no" }
}

// askTTY asks on /dev/tty; the tool's name and arguments are quoted and
// capped, so nothing a program wrote reaches the terminal as written.
func askTTY(ctx context.Context, ce client.CallEvent) (bool, string) {
	tty, err := os.OpenFile("/dev/tty", os.O_RDWR, 0)
	if err != nil {
		return false, "no terminal to ask on"
	}
	defer tty.Close()
	args := string(ce.Args)
	if len(args) > 2048 {
		args = args[:2048] + "…"
	}
	fmt.Fprintf(tty, "psych: the run wants to call %s with %s. Allow? [y/N] ", strconv.QuoteToGraphic(ce.Tool), strconv.QuoteToGraphic(args))
	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(tty).ReadString('\n')
		line <- s
	}()
	select {
	case s := <-line:
		s = strings.TrimSpace(s)
		if strings.EqualFold(s, "y") || strings.EqualFold(s, "yes") {
			return true, "approved on the terminal"
		}
		return false, "refused on the terminal"
	case <-ctx.Done():
		fmt.Fprintln(tty)
		return false, "no answer on the terminal"
	}
}
