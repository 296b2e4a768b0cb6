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
	"sync"
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
	// Pools, when set, measures warm pools of these sizes instead of the
	// layers: rows python, full (cold), then for each size N
	// pool-N-saturation (Saturation requests at once) and pool-N (one
	// request at a time, each after the pool has refilled). The python row
	// runs only once every pool (psych serve's too) is full and every
	// earlier run removed, so that no refill runs beside it.
	Pools []int
	// Saturation is the concurrency of the saturation rows; zero means 8.
	Saturation int
	// Preload are the modules the pools preload (sandbox.PoolConfig's
	// Preload), psych serve's among them. With a Program, the pool rows
	// add python-program: the Program under plain python3, beside which
	// the pools' Program is judged.
	Preload []string
}

// Row is one configuration's measurement.
type Row struct {
	Name        string  `json:"name"`
	MedianMS    float64 `json:"median_ms"`
	P90MS       float64 `json:"p90_ms"`
	Ratio       float64 `json:"ratio"`
	IncrementMS float64 `json:"increment_ms"`
	// ExecsPerS is a saturation row's executions per second, and
	// ColdExecsPerS the cold sandbox's at the same concurrency, measured
	// in bursts interleaved with the row's.
	ExecsPerS     float64 `json:"execs_per_s,omitempty"`
	ColdExecsPerS float64 `json:"cold_execs_per_s,omitempty"`
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
	// Each round's median, in µs: CallUS and FloorUS are the best.
	CallRoundsUS  []float64 `json:"call_rounds_us"`
	FloorRoundsUS []float64 `json:"floor_rounds_us"`
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
	// ServeTool is a client tool's round trip through psych serve
	// (program, server, client, server, program) beside the raw echo
	// floor, and ServeRSS the server's RSS with runs in flight and queued:
	// measured with the serve rows.
	ServeTool *Binding  `json:"serve_tool,omitempty"`
	ServeRSS  *ServeRSS `json:"serve_rss,omitempty"`
}

// ServeRSS is psych serve's resident memory, idle and with InFlight runs
// in flight and Queued more waiting.
type ServeRSS struct {
	IdleKiB   float64 `json:"idle_kib"`
	LoadedKiB float64 `json:"loaded_kib"`
	InFlight  int     `json:"in_flight"`
	Queued    int     `json:"queued"`
}

// row is one configuration to measure: run executes once and returns the
// attestation of what ran.
type row struct {
	name string
	run  func(ctx context.Context) (*sandbox.Isolation, error)
	// prep, when set, runs untimed before each execution (a pool's refill).
	prep func(ctx context.Context) error
	// settle, when set, runs untimed after each execution: it waits for the
	// run's removal, which the library ends after Run returns, so that the
	// next row is not measured beside it.
	settle func()
	close  func()
	times  []time.Duration
	last   *sandbox.Isolation
	// saturate, when set, makes the row a saturation row, measured after
	// the rounds: bursts of concurrent executions of run, each beside one
	// of cold (the cold sandbox).
	saturate   bool
	cold       func(ctx context.Context) (*sandbox.Isolation, error)
	perSec     float64
	coldPerSec float64
	// report, when set, measures more after the rounds, into the report.
	report func(ctx context.Context, rep *Report) error
}

// Run measures every row, interleaved, then the binding floor and the
// throughput.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	rep := &Report{Machine: machine(cfg.Python), Runs: cfg.Runs}
	makeRows := makeRows
	if len(cfg.Pools) > 0 {
		makeRows = makePoolRows
	}
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
	if err := rounds(ctx, cfg, rows); err != nil {
		return nil, err
	}
	if err := afterRounds(ctx, cfg, rows, rep); err != nil {
		return nil, err
	}
	rep.Rows = summarize(rows)
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

// defaults fills in what cfg leaves out, and refuses a cfg without an
// interpreter.
func (cfg *Config) defaults() error {
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
		return fmt.Errorf("bench: name the interpreter")
	}
	if cfg.Saturation <= 0 {
		cfg.Saturation = 8
	}
	return nil
}

// rounds runs every row but the saturation rows once a round, in turn, for
// the warm-up rounds and then the measured ones.
func rounds(ctx context.Context, cfg Config, rows []*row) error {
	total := cfg.Warmup + cfg.Runs
	for round := range total {
		if cfg.Progress != nil {
			progress(cfg.Progress, "rows", round+1, total)
		}
		for _, r := range rows {
			if err := ctx.Err(); err != nil {
				return err
			}
			if r.saturate {
				continue
			}
			if err := r.once(ctx, round >= cfg.Warmup); err != nil {
				return fmt.Errorf("bench: row %s: %w", r.name, err)
			}
		}
	}
	if cfg.Progress != nil {
		fmt.Fprintln(cfg.Progress)
	}
	return nil
}

// once runs the row's execution once, timed without its prep and settle,
// and keeps the time if keep.
func (r *row) once(ctx context.Context, keep bool) error {
	if r.prep != nil {
		if err := r.prep(ctx); err != nil {
			return err
		}
	}
	start := time.Now()
	iso, err := r.run(ctx)
	d := time.Since(start)
	if err != nil {
		return err
	}
	if r.settle != nil {
		r.settle()
	}
	r.last = iso
	if keep {
		r.times = append(r.times, d)
	}
	return nil
}

// afterRounds measures the saturation rows, then each row's report.
func afterRounds(ctx context.Context, cfg Config, rows []*row, rep *Report) error {
	for _, r := range rows {
		if r.saturate {
			if err := saturate(ctx, r, cfg.Saturation, cfg.Runs); err != nil {
				return fmt.Errorf("bench: row %s: %w", r.name, err)
			}
		}
	}
	for _, r := range rows {
		if r.report != nil {
			if err := r.report(ctx, rep); err != nil {
				return fmt.Errorf("bench: row %s: %w", r.name, err)
			}
		}
	}
	return nil
}

// summarize is the rows as the report has them: the median against the
// first row's and the increment over the row before.
func summarize(rows []*row) []Row {
	var out []Row
	base := median(rows[0].times)
	prev := 0.0
	for _, r := range rows {
		m := median(r.times)
		out = append(out, Row{
			Name: r.name, MedianMS: ms(m), P90MS: ms(quantile(r.times, 0.9)),
			Ratio: float64(m) / float64(base), IncrementMS: ms(m) - prev, Attestation: r.last,
			ExecsPerS: r.perSec, ColdExecsPerS: r.coldPerSec,
		})
		prev = ms(m)
	}
	return out
}

// saturationBursts is how many bursts of each kind a saturation row runs.
const saturationBursts = 3

// saturate measures a saturation row: bursts of max(runs, 2×conc)/3
// executions, conc at a time, of the cold sandbox and of the row (from a
// full pool) in turn: each of the row's executions' latency, and both
// kinds' executions per second over their bursts.
func saturate(ctx context.Context, r *row, conc, runs int) error {
	n := max(runs, 2*conc)/saturationBursts + 1
	var coldN, warmN int
	var coldT, warmT time.Duration
	for range saturationBursts {
		if r.cold != nil {
			if r.prep != nil {
				if err := r.prep(ctx); err != nil {
					return err
				}
			}
			d, _, _, err := burst(ctx, r.cold, conc, n)
			if err != nil {
				return err
			}
			coldN, coldT = coldN+n, coldT+d
		}
		if r.prep != nil {
			if err := r.prep(ctx); err != nil {
				return err
			}
		}
		d, times, last, err := burst(ctx, r.run, conc, n)
		if err != nil {
			return err
		}
		warmN, warmT = warmN+n, warmT+d
		r.times, r.last = append(r.times, times...), last
	}
	r.perSec = float64(warmN) / warmT.Seconds()
	if coldN > 0 {
		r.coldPerSec = float64(coldN) / coldT.Seconds()
	}
	return nil
}

// burst runs n executions of run, conc at a time: how long they took in
// all, each one's latency and the last attestation. A worker stops at its
// first error, which burst returns.
func burst(ctx context.Context, run func(context.Context) (*sandbox.Isolation, error), conc, n int) (time.Duration, []time.Duration, *sandbox.Isolation, error) {
	next := make(chan struct{}, n)
	for range n {
		next <- struct{}{}
	}
	close(next)
	var mu sync.Mutex
	var times []time.Duration
	var last *sandbox.Isolation
	var firstErr error
	var wg sync.WaitGroup
	start := time.Now()
	for range conc {
		wg.Go(func() {
			for range next {
				t := time.Now()
				iso, err := run(ctx)
				d := time.Since(t)
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = err
				}
				times, last = append(times, d), iso
				mu.Unlock()
				if err != nil {
					return
				}
			}
		})
	}
	wg.Wait()
	return time.Since(start), times, last, firstErr
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
		fmt.Fprintf(w, "%-24s %10.2f %10.2f %7.2f× %+12.2f", r.Name, r.MedianMS, r.P90MS, r.Ratio, r.IncrementMS)
		if r.ExecsPerS > 0 {
			fmt.Fprintf(w, "  %.1f executions/s", r.ExecsPerS)
			if r.ColdExecsPerS > 0 {
				fmt.Fprintf(w, " (cold beside it: %.1f)", r.ColdExecsPerS)
			}
		}
		fmt.Fprintln(w)
	}
	if b := rep.Binding; b != nil {
		fmt.Fprintf(w, "binding round trip %.1f µs, raw echo floor %.1f µs: %.2f× (each the best of %d rounds)\n", b.CallUS, b.FloorUS, b.Ratio, len(b.CallRoundsUS))
	}
	for _, t := range rep.Throughput {
		fmt.Fprintf(w, "concurrency %d: %.1f executions/s\n", t.Concurrency, t.PerSecond)
	}
	if rep.RSSPerRunKiB != 0 {
		fmt.Fprintf(w, "host RSS per run in flight: %.0f KiB\n", rep.RSSPerRunKiB)
	}
	if b := rep.ServeTool; b != nil {
		fmt.Fprintf(w, "client tool round trip through psych serve %.1f µs, raw echo floor %.1f µs: %.2f× (each the best of %d rounds)\n", b.CallUS, b.FloorUS, b.Ratio, len(b.CallRoundsUS))
	}
	if m := rep.ServeRSS; m != nil {
		fmt.Fprintf(w, "psych serve RSS: %.0f KiB idle, %.0f KiB with %d in flight and %d queued (%+.1f MiB)\n", m.IdleKiB, m.LoadedKiB, m.InFlight, m.Queued, (m.LoadedKiB-m.IdleKiB)/1024)
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
