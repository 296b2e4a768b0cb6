package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/psych-runtime/psych/sandbox"
)

// Report prints a Go error of command cmd ("psych run") and picks the exit
// code.
func Report(stderr io.Writer, cmd string, err error) int {
	fmt.Fprintf(stderr, "%s: %v\n", cmd, err)
	switch {
	case errors.Is(err, sandbox.ErrRefused):
		return ExitRefused
	case errors.Is(err, sandbox.ErrInvalidConfig), errors.Is(err, sandbox.ErrInvalidRequest):
		return ExitUsage
	case errors.Is(err, context.Canceled):
		return ExitInterrupted
	}
	return ExitHostFault
}

// maxProgram bounds what psych run reads; the frame cap (16 MiB) bounds
// what it can run.
const maxProgram = 64 << 20

// ReadProgram reads a program from the file name, or from stdin for "-",
// bounded as psych run bounds it.
func ReadProgram(name string, stdin io.Reader) (string, error) {
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

// PrintResult passes the program's output through, then prints the value
// on stdout and a one-line summary (after the traceback, if any) on stderr.
func PrintResult(res *sandbox.Result, stdout, stderr io.Writer) {
	io.WriteString(stdout, res.Stdout)
	io.WriteString(stderr, res.Stderr)
	PrintEnd(res, stdout, stderr)
}

// PrintEnd is PrintResult without the program's output, for a run whose
// output was passed through as it came.
func PrintEnd(res *sandbox.Result, stdout, stderr io.Writer) {
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
		return ExitHostFault
	}
	return ExitOK
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
