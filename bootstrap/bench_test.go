package bootstrap_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/psych-runtime/psych/bootstrap"
	"github.com/psych-runtime/psych/internal/echofloor"
	"github.com/psych-runtime/psych/internal/testutil"
	"github.com/psych-runtime/psych/sandbox"
	"github.com/psych-runtime/psych/sandbox/wire"
)

// The benchmarks measure the bootstrap without a sandbox: a cold run (start
// frame to exit) beside bare python, and a binding round trip beside the raw
// echo floor that `psych bench` compares it with (internal/bench). Compare
// the sub-benchmarks of one run, never numbers of two runs: the machine may
// be noisy. A bootstrap.py named by PSYCH_BENCH_BASELINE is measured beside
// the embedded one, compiled the same way (sub-benchmark "baseline"), for a
// before/after in one run:
//
//	git show HEAD:bootstrap/bootstrap.py > /tmp/old.py
//	PSYCH_BENCH_BASELINE=/tmp/old.py go test -run '^$' -bench . -count 5 ./bootstrap/
//
// Pinning the run to one CPU (taskset -c 0) measures the code path without
// the cost of waking a process on another CPU, which on a VM can dominate.

// launchers are the bootstraps under measurement: "bootstrap" (Source) and,
// when PSYCH_BENCH_BASELINE names a file, "baseline".
func launchers(b *testing.B, py string) map[string][]string {
	b.Helper()
	l, err := bootstrap.Prepare(py)
	if err != nil {
		b.Fatal(err)
	}
	out := map[string][]string{"bootstrap": l.Args(3)}
	if path := os.Getenv("PSYCH_BENCH_BASELINE"); path != "" {
		src, err := os.ReadFile(path)
		if err != nil {
			b.Fatal(err)
		}
		cmd := exec.Command(py, "-I", "-B", "-c",
			"import marshal,binascii,sys;"+
				"sys.stdout.write(binascii.b2a_base64(marshal.dumps(compile(sys.stdin.read(),'<psych-bootstrap>','exec')),newline=False).decode())")
		cmd.Stdin = strings.NewReader(string(src))
		code, err := cmd.Output()
		if err != nil {
			b.Fatalf("compile %s: %v", path, err)
		}
		l, err := bootstrap.NewLauncher(string(code))
		if err != nil {
			b.Fatal(err)
		}
		out["baseline"] = l.Args(3)
	}
	return out
}

func benchPython(b *testing.B) string {
	b.Helper()
	return testutil.RequirePython(b)
}

// BenchmarkColdRun: one execution of None, from starting the interpreter to
// its exit, as a backend sees it (less the sandbox); "python" is
// `python -I -B -c None`.
func BenchmarkColdRun(b *testing.B) {
	py := benchPython(b)
	b.Run("python", func(b *testing.B) {
		for range b.N {
			if err := exec.Command(py, "-I", "-B", "-c", "None").Run(); err != nil {
				b.Fatal(err)
			}
		}
	})
	for name, args := range launchers(b, py) {
		b.Run(name, func(b *testing.B) {
			for range b.N {
				coldRun(b, py, args)
			}
		})
	}
}

func coldRun(b *testing.B, py string, args []string) {
	hostEnd, childEnd := benchSocketpair(b)
	defer hostEnd.Close()
	cmd := exec.Command(py, args...)
	cmd.ExtraFiles = []*os.File{childEnd}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	childEnd.Close()
	if err := wire.NewEncoder(hostEnd, 0).Encode(&wire.Start{V: wire.Version, Code: "None", Figures: "/nonexistent/psych-figures"}); err != nil {
		b.Fatal(err)
	}
	dec := wire.NewDecoder(bufio.NewReader(hostEnd), 0)
	var res *wire.Result
	for {
		m, ok := nextFrame(b, dec)
		if !ok {
			break
		}
		if r, ok := m.(*wire.Result); ok { // the exit frame follows it
			res = r
		}
	}
	if err := cmd.Wait(); err != nil || res == nil || res.Failure != nil {
		b.Fatalf("run: %v, result %+v", err, res)
	}
}

// BenchmarkBindingRoundTrip: echo(i=1) through the bootstrap, served as
// sandbox/internal/host's Server serves it (a buffered wire.Decoder, a
// wire.Encoder, the reply checked as JSON), beside "floor": the same call
// frame written and read back by a bare python loop of os.write and os.read
// against a Go echo (internal/bench's raw echo). One op is one round trip,
// timed on the host from the first call frame to the result.
func BenchmarkBindingRoundTrip(b *testing.B) {
	py := benchPython(b)
	b.Run("floor", func(b *testing.B) { rawEchoFloor(b, py) })
	for name, args := range launchers(b, py) {
		b.Run(name, func(b *testing.B) { bindingLoop(b, py, args) })
	}
}

func bindingLoop(b *testing.B, py string, args []string) {
	hostEnd, childEnd := benchSocketpair(b)
	defer hostEnd.Close()
	cmd := exec.Command(py, args...)
	cmd.ExtraFiles = []*os.File{childEnd}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	childEnd.Close()
	code := fmt.Sprintf("for _ in range(%d):\n    echo(i=1)", b.N)
	start := &wire.Start{V: wire.Version, Code: code, Bindings: []sandbox.Binding{{Name: "echo"}}, MaxFrame: wire.DefaultMaxFrame}
	enc := wire.NewEncoder(hostEnd, 0)
	if err := enc.Encode(start); err != nil {
		b.Fatal(err)
	}
	dec := wire.NewDecoder(bufio.NewReaderSize(hostEnd, 64<<10), 0)
	b.ResetTimer()
	b.StopTimer()
	calls := 0
	for {
		m, ok := nextFrame(b, dec)
		if !ok {
			break
		}
		switch m := m.(type) {
		case *wire.Call:
			if calls++; calls == 1 {
				b.StartTimer()
			}
			if !json.Valid(m.Args) {
				b.Fatalf("call args %q", m.Args)
			}
			if err := enc.Encode(&wire.Reply{ID: m.ID, Value: m.Args}); err != nil {
				b.Fatal(err)
			}
		case *wire.Result:
			b.StopTimer()
			if m.Failure != nil {
				b.Fatalf("failure %s: %s", m.Failure.Type, m.Failure.Message)
			}
		}
	}
	if err := cmd.Wait(); err != nil || calls != b.N {
		b.Fatalf("wait: %v, %d calls of %d", err, calls, b.N)
	}
}

// rawEchoFloor is internal/bench's floor (internal/echofloor), a round
// trip per iteration, timed from the first frame.
func rawEchoFloor(b *testing.B, py string) {
	hostEnd, childEnd := benchSocketpair(b)
	defer hostEnd.Close()
	cmd := exec.Command(py, "-I", "-c", echofloor.Setup+"for _ in range(int(os.environ['N'])):\n    rt()\n")
	cmd.Env = []string{fmt.Sprintf("N=%d", b.N)}
	cmd.ExtraFiles = []*os.File{childEnd}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	childEnd.Close()
	b.ResetTimer()
	b.StopTimer()
	if err := echofloor.Serve(hostEnd, b.StartTimer); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	if err := cmd.Wait(); err != nil {
		b.Fatal(err)
	}
}

// benchSocketpair is socketpair for a benchmark: both ends blocking, as the
// subprocess backend's (a reply wakes the serving thread straight from the
// kernel, not through the netpoller).
func benchSocketpair(b *testing.B) (hostEnd, childEnd *os.File) {
	b.Helper()
	fds, err := streamPair()
	if err != nil {
		b.Fatal(err)
	}
	return os.NewFile(uintptr(fds[0]), "host"), os.NewFile(uintptr(fds[1]), "child")
}
