package psych_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"sort"
	"testing"

	"github.com/psych-runtime/psych"
	"github.com/psych-runtime/psych/sandbox"
	"github.com/psych-runtime/psych/sandbox/demotools"
	"github.com/psych-runtime/psych/store/sqlite"
)

// perCall times each of 5000 binding calls in the program and returns the
// median, in seconds.
const perCall = `import time
ts = []
for i in range(5000):
    t = time.perf_counter()
    echo(i=i)
    ts.append(time.perf_counter() - t)
ts.sort()
ts[len(ts) // 2]`

// BenchmarkToolPath is the tool path's cost per binding call (schema check,
// Policy, recording to SQLite) beside a bare binding of the same sandbox,
// interleaved in one run: each iteration runs both, and the metrics are the
// medians of the per-call medians.
func BenchmarkToolPath(b *testing.B) {
	sb := newSandbox(b)
	st, err := sqlite.Open(filepath.Join(b.TempDir(), "ledger.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	reg := psych.NewRegistry()
	if err := reg.Register(psych.Spec{
		Name: "echo", Parameters: json.RawMessage(`{"type":"object","properties":{"i":{"type":"integer"}},"required":["i"]}`),
		Handler: func(_ context.Context, c psych.Call) (any, error) { return c.Args, nil },
	}); err != nil {
		b.Fatal(err)
	}
	rt, err := psych.New(psych.Config{Registry: reg, Sandbox: sb, Store: st})
	if err != nil {
		b.Fatal(err)
	}
	median := func(res *sandbox.Result, err error) float64 {
		if err != nil || res.Failure != nil {
			b.Fatal(err, res.Failure)
		}
		var v float64
		if err := json.Unmarshal(res.Value, &v); err != nil {
			b.Fatal(err)
		}
		return v * 1e6
	}
	var bare, path []float64
	for b.Loop() {
		bare = append(bare, median(sb.Run(context.Background(), sandbox.Request{Code: perCall, Bindings: demotools.Bindings{}})))
		path = append(path, median(rt.Execute(context.Background(), sandbox.Request{Code: perCall})))
	}
	mid := func(v []float64) float64 { sort.Float64s(v); return v[len(v)/2] }
	mb, mp := mid(bare), mid(path)
	b.ReportMetric(mb, "bare-µs/call")
	b.ReportMetric(mp, "toolpath-µs/call")
	b.ReportMetric(mp-mb, "added-µs/call")
}
