//go:build linux && cgo

package subprocess

import (
	"context"
	"fmt"
	"os/exec"
	"runtime"
	"testing"

	"github.com/psych-runtime/psych/sandbox"
	"github.com/psych-runtime/psych/sandbox/demotools"
)

// BenchmarkRunNoop measures one execution of `None` through the whole
// backend, beside a bare `python3 -I -c pass` in the same run: compare the
// two sub-benchmarks' ns/op as a ratio.
func BenchmarkRunNoop(b *testing.B) {
	b.Run("bare-python", func(b *testing.B) {
		for b.Loop() {
			if err := exec.Command(testPython(), "-I", "-c", "pass").Run(); err != nil {
				b.Fatal(err)
			}
		}
	})
	run := func(b *testing.B, noCgroup bool) {
		s, err := New(Config{PythonBin: testPython()})
		if err != nil {
			b.Fatal(err)
		}
		if noCgroup {
			s.cg = nil
		}
		for b.Loop() {
			res, err := s.Run(context.Background(), sandbox.Request{Code: "None"})
			if err != nil || res.Failure != nil {
				b.Fatal(err, res)
			}
		}
	}
	b.Run("psych", func(b *testing.B) { run(b, false) })
	// Without the run cgroup: on this hybrid host its v1 attach (a
	// synchronize_rcu in the kernel) is most of the difference.
	b.Run("psych-no-cgroup", func(b *testing.B) { run(b, true) })
	// Start-up cost must not grow with the host's memory: the init is
	// started through Go's vfork path, which copies no page tables.
	b.Run("psych-1GiB-heap", func(b *testing.B) {
		heap := make([]byte, 1<<30)
		for i := 0; i < len(heap); i += 4096 {
			heap[i] = 1
		}
		run(b, false)
		runtime.KeepAlive(heap)
	})
}

// BenchmarkBindingRoundTrip reports microseconds per echo call inside one
// program (the goal is 30 µs or less).
func BenchmarkBindingRoundTrip(b *testing.B) {
	s, err := New(Config{PythonBin: testPython()})
	if err != nil {
		b.Fatal(err)
	}
	const calls = 20000
	code := "import time\nt = time.perf_counter()\nfor i in range(20000):\n    echo(i=i)\ntime.perf_counter() - t"
	var total float64
	for b.Loop() {
		res, err := s.Run(context.Background(), sandbox.Request{Code: code, Bindings: demotools.Bindings{}})
		if err != nil || res.Failure != nil {
			b.Fatal(err, res.Failure)
		}
		var secs float64
		if _, err := fmt.Sscan(string(res.Value), &secs); err != nil {
			b.Fatal(err)
		}
		total += secs
	}
	b.ReportMetric(total/float64(b.N)/calls*1e6, "µs/call")
}
