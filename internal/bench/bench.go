// Package bench measures what isolation costs, layer by layer: N
// executions of a fixed small program per configuration, interleaved round
// by round so that the machine's drift cancels out, each row beside a bare
// `python3 -I -c pass` started the same way in the same run. It is psych
// bench's engine.
//
// The partial rows take layers away through internal/layers, which no
// user of psych can import; they always run the built-in program. A
// user's program (Config.Program) runs only in rows with full isolation.
package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/psych-runtime/psych/sandbox"
)

// Builtin is the fixed program every row runs (the value None).
const Builtin = "None"

// Config says what to measure.
type Config struct {
	// Runs is how many measured executions each row gets (after Warmup);
	// zero means 50.
	Runs   int
	Warmup int
	// Python is the interpreter; it must be named (no PATH lookup, no
	// shim: the bench measures psych, not pyenv).
	Python string
	// Program is the user's program for the fully isolated rows; empty
	// runs Builtin everywhere.
	Program string
	// CLI is the psych binary for the cli row; empty leaves the row out.
	CLI string
	// Image is the containers' image; empty leaves the engine rows out.
	Image string
	// Engines are tried in order; an unreachable one (or a missing image)
	// leaves its row out, with a note.
	Engines []string
	// Concurrency levels for the throughput table; nil means 1, 2, 4, 8.
	Concurrency []int
	// Progress, when set, gets a progress line per round.
	Progress io.Writer
}

// Row is one configuration's measurement.
type Row struct {
	Name        string  `json:"name"`
	MedianMS    float64 `json:"median_ms"`
	P90MS       float64 `json:"p90_ms"`
	Ratio       float64 `json:"ratio"`
	IncrementMS float64 `json:"increment_ms"`
	// Attestation is what the row's last execution had; nil for the rows
	// without a sandbox (python, bootstrap).
	Attestation *sandbox.Isolation `json:"attestation"`
}

// Binding is the round trip of a binding call beside the floor: the same
// payload echoed between a Python process and the Go host over the same
// kind of channel (a Unix stream socketpair) without the protocol.
type Binding struct {
	CallUS  float64 `json:"call_us"`
	FloorUS float64 `json:"floor_us"`
	Ratio   float64 `json:"ratio"`
}

// Throughput is executions per second of the full sandbox at one
// concurrency level.
type Throughput struct {
	Concurrency int     `json:"concurrency"`
	PerSecond   float64 `json:"per_second"`
}

// Machine describes where the numbers came from.
type Machine struct {
	Date    string `json:"date"`
	CPUs    int    `json:"cpus"`
	CPU     string `json:"cpu"`
	Kernel  string `json:"kernel"`
	Cgroups string `json:"cgroups"`
	Python  string `json:"python"`
	Go      string `json:"go"`
}

// Report is psych bench's output.
type Report struct {
	Machine Machine  `json:"machine"`
	Runs    int      `json:"runs"`
	Rows    []Row    `json:"rows"`
	Notes   []string `json:"notes,omitempty"`
	Binding *Binding `json:"binding,omitempty"`
	// Throughput and RSSPerRunKiB (the host's RSS growth with 8 runs in
	// flight, divided by 8) are measured on the full sandbox.
	Throughput   []Throughput `json:"throughput,omitempty"`
	RSSPerRunKiB float64      `json:"rss_per_run_kib,omitempty"`
}

// row is one configuration to measure: run executes once and returns the
// attestation of what ran.
type row struct {
	name  string
	run   func(ctx context.Context) (*sandbox.Isolation, error)
	close func()
	times []time.Duration
	last  *sandbox.Isolation
}

// Run measures every row, interleaved, then the binding floor and the
// throughput.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if cfg.Runs <= 0 {
		cfg.Runs = 50
	}
	if cfg.Warmup < 0 {
		cfg.Warmup = 0
	}
	if cfg.Concurrency == nil {
		cfg.Concurrency = []int{1, 2, 4, 8}
	}
	if cfg.Python == "" {
		return nil, fmt.Errorf("bench: name the interpreter")
	}
	rep := &Report{Machine: machine(cfg.Python), Runs: cfg.Runs}
	rows, full, notes, err := makeRows(cfg)
	for _, r := range rows {
		if r.close != nil {
			defer r.close()
		}
	}
	if err != nil {
		return nil, err
	}
	rep.Notes = notes
	total := cfg.Warmup + cfg.Runs
	for round := range total {
		if cfg.Progress != nil {
			progress(cfg.Progress, "rows", round+1, total)
		}
		for _, r := range rows {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			start := time.Now()
			iso, err := r.run(ctx)
			d := time.Since(start)
			if err != nil {
				return nil, fmt.Errorf("bench: row %s: %w", r.name, err)
			}
			r.last = iso
			if round >= cfg.Warmup {
				r.times = append(r.times, d)
			}
		}
	}
	if cfg.Progress != nil {
		fmt.Fprintln(cfg.Progress)
	}
	base := median(rows[0].times)
	prev := 0.0
	for _, r := range rows {
		m := median(r.times)
		rep.Rows = append(rep.Rows, Row{
			Name: r.name, MedianMS: ms(m), P90MS: ms(quantile(r.times, 0.9)),
			Ratio: float64(m) / float64(base), IncrementMS: ms(m) - prev, Attestation: r.last,
		})
		prev = ms(m)
	}
	if full != nil {
		if rep.Binding, err = bindingFloor(ctx, full, cfg.Python); err != nil {
			return nil, err
		}
		if rep.Throughput, rep.RSSPerRunKiB, err = throughput(ctx, full, cfg); err != nil {
			return nil, err
		}
	}
	return rep, nil
}

func progress(w io.Writer, what string, i, n int) {
	const width = 30
	done := i * width / n
	fmt.Fprintf(w, "\rbench %s [%s%s] %d/%d", what, strings.Repeat("#", done), strings.Repeat(".", width-done), i, n)
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func median(ts []time.Duration) time.Duration { return quantile(ts, 0.5) }

func quantile(ts []time.Duration, q float64) time.Duration {
	if len(ts) == 0 {
		return 0
	}
	s := slices.Clone(ts)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[min(int(q*float64(len(s))), len(s)-1)]
}

// Print writes the report as a table.
func Print(w io.Writer, rep *Report) {
	m := rep.Machine
	fmt.Fprintf(w, "%s: %d × %s, kernel %s, cgroups %s, %s, %d runs per row\n", m.Date, m.CPUs, m.CPU, m.Kernel, m.Cgroups, m.Python, rep.Runs)
	fmt.Fprintf(w, "%-24s %10s %10s %8s %12s\n", "row", "median ms", "p90 ms", "ratio", "+ms")
	for _, r := range rep.Rows {
		fmt.Fprintf(w, "%-24s %10.2f %10.2f %7.2f× %+12.2f\n", r.Name, r.MedianMS, r.P90MS, r.Ratio, r.IncrementMS)
	}
	if b := rep.Binding; b != nil {
		fmt.Fprintf(w, "binding round trip %.1f µs, raw echo floor %.1f µs: %.2f×\n", b.CallUS, b.FloorUS, b.Ratio)
	}
	for _, t := range rep.Throughput {
		fmt.Fprintf(w, "concurrency %d: %.1f executions/s\n", t.Concurrency, t.PerSecond)
	}
	if rep.RSSPerRunKiB != 0 {
		fmt.Fprintf(w, "host RSS per run in flight: %.0f KiB\n", rep.RSSPerRunKiB)
	}
	for _, n := range rep.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
}

func machine(python string) Machine {
	m := Machine{Date: time.Now().UTC().Format("2006-01-02"), CPUs: runtime.NumCPU(), Go: runtime.Version(), Python: python}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "model name"); ok {
				m.CPU = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	m.Cgroups = cgroupLayout()
	return m
}
