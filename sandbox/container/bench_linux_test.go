//go:build linux && cgo

package container

import (
	"context"
	"fmt"
	"os/exec"
	"testing"
	"time"

	"github.com/psych-runtime/psych/sandbox"
)

// BenchmarkRunNoop measures one execution of `None` on each engine beside
// `ctr run --rm` of the same image running `python3 -I -S -c pass`, all
// interleaved in one loop (one of each per iteration), so that a noisy host
// shifts them alike. It reports each one's mean in ms, and each engine's
// ratio to ctr run --rm.
func BenchmarkRunNoop(b *testing.B) {
	type side struct {
		name string
		run  func() error
		sum  time.Duration
	}
	sides := []*side{{name: "ctr-run-rm", run: func() error {
		id := fmt.Sprintf("psych-bench-%d", time.Now().UnixNano())
		return exec.Command("ctr", "-n", DefaultNamespace, "run", "--rm", testImage(), id, "/usr/bin/python3", "-I", "-S", "-c", "pass").Run()
	}}}
	for _, e := range engines {
		s, err := New(Config{Engine: e, Image: testImage()})
		if err != nil {
			b.Logf("%s: %v (left out)", e, err)
			continue
		}
		b.Cleanup(func() { s.Close() })
		sides = append(sides, &side{name: string(e), run: func() error {
			res, err := s.Run(context.Background(), sandbox.Request{Code: "None"})
			if err == nil && res.Failure != nil {
				err = fmt.Errorf("%+v", res.Failure)
			}
			return err
		}})
	}
	for b.Loop() {
		for _, s := range sides {
			t := time.Now()
			if err := s.run(); err != nil {
				b.Fatalf("%s: %v", s.name, err)
			}
			s.sum += time.Since(t)
		}
	}
	base := sides[0].sum
	for _, s := range sides {
		b.ReportMetric(float64(s.sum.Milliseconds())/float64(b.N), "ms/"+s.name)
		if s != sides[0] {
			b.ReportMetric(float64(s.sum)/float64(base), s.name+"/ctr")
		}
	}
}
