package server

import (
	"context"
	"fmt"
	"testing"

	"github.com/psych-runtime/psych/client"
	"github.com/psych-runtime/psych/sandbox"
	"github.com/psych-runtime/psych/sandbox/demotools"
)

// BenchmarkClientToolRoundTrip is one call of a tool the client declares
// (echo), answered by the Go client through the server: program, server,
// client, server, program. One run makes b.N calls; the run's start is
// left out of the timing as far as it can be (the first call is not
// timed).
func BenchmarkClientToolRoundTrip(b *testing.B) {
	ts := newTestServer(b, serverOpts{})
	c, err := client.New("unix://"+ts.sock, client.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	code := fmt.Sprintf("import time\necho(i=0)\nt = time.perf_counter()\nfor _ in range(%d):\n    echo(i=1)\ntime.perf_counter() - t", b.N)
	res, err := c.Sandbox().Run(context.Background(), sandbox.Request{Code: code, Bindings: demotools.Bindings{}, Limits: sandbox.Limits{WallSeconds: 30, CPUSeconds: 10}})
	if err != nil {
		b.Fatal(err)
	}
	if res.Failure != nil {
		b.Fatalf("%s: %s", res.Failure.Type, res.Failure.Message)
	}
	var secs float64
	fmt.Sscan(string(res.Value), &secs)
	b.ReportMetric(secs*1e6/float64(b.N), "µs/call")
}
