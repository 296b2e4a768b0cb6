// Package contract is psych's shared contract suite: one set of programs
// with asserted outcomes that every backend must pass unchanged, run by each
// backend's tests through a factory (as containerd's snapshots/testsuite).
package contract

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/psych-runtime/psych/bootstrap"
	"github.com/psych-runtime/psych/internal/testutil"
	"github.com/psych-runtime/psych/sandbox"
	"github.com/psych-runtime/psych/sandbox/demotools"
)

// Options are what a test asks of the backend's configuration.
type Options struct {
	// EnvAllowlist must reach the backend's env allowlist.
	EnvAllowlist []string
	// Preload must reach a pooled backend's PoolConfig.Preload; a backend
	// without a pool has nothing to preload and ignores it.
	Preload []string
}

// Backend describes the backend under test.
type Backend struct {
	// New returns a Sandbox configured with opts. It must also clean up
	// what it made (t.Cleanup).
	New func(t *testing.T, opts Options) sandbox.Sandbox
	// SandboxEnv names the variables the backend documents setting beyond
	// HOME, TMPDIR, PATH and PYTHONDONTWRITEBYTECODE.
	SandboxEnv []string
	// TimeScale multiplies the suite's time bounds, for slow hosts such as
	// an emulated VM. Zero means 1, or PSYCH_TIME_SCALE where set.
	TimeScale float64
	// NoIsolation, when set, says why this host cannot isolate at all (the
	// subprocess backend's fallback without user namespaces); the
	// isolation cases are then skipped with that reason. It must be empty
	// wherever isolation can exist.
	NoIsolation string

	// The honest differences between backends, each checked as declared,
	// never skipped. docs/container.md lists them.

	// Namespaces are the namespaces the attestation must list as not
	// shared with the host. Nil: user, mnt, net, pid, ipc, uts and cgroup.
	Namespaces []string
	// HostUIDs says the program's ids are the host's own (no user
	// namespace: the uid map is the identity map), as under an engine that
	// cannot give a run a user namespace. The run uid must still not be 0.
	// False: a user namespace maps the program's uid to a non-zero
	// outside uid, and uid 0 is not mapped.
	HostUIDs bool
	// Arch is the architecture the program runs on, which numbers the raw
	// syscalls of the denial probes. Empty: runtime.GOARCH.
	Arch string
	// ImageRoot says the root file system is a container image's own tree,
	// not one built from nothing: the image's directories (/var, /run,
	// /home, /root, /sys) and files (/etc/shadow among them) are there,
	// read-only, with nothing of the host in them. The host's own paths
	// must still be absent, and the image's secrets unreadable.
	ImageRoot bool
	// Cases, when set, runs only the cases of these names (the
	// interpreter matrix's subset).
	Cases []string
	// Without names the cases a backend's mode cannot pass by design, each
	// with why (the subprocess backend's fallback confined by Landlock has
	// no /proc, /tmp or pseudo-terminals of its own); each is skipped with
	// its reason.
	Without map[string]string
	// OneOutsideID, when set, says why every run has the same outside uid
	// here (an unprivileged host has only its own): OwnOutsideIDs then
	// checks that they share it, and that the quota crosses is no failure.
	OneOutsideID string
	// Warm says New's sandboxes come from a warm pool, full when New
	// returns: every run must say it was warm, or why it ran cold.
	Warm bool
	// Host is the node name every run's isolation.host must be (a remote
	// server's pod). Empty: this process's own (os.Hostname).
	Host string
}

// AllNamespaces are the namespaces of a fully isolated subprocess run.
var AllNamespaces = []string{"user", "mnt", "net", "pid", "ipc", "uts", "cgroup"}

// TimeScale is PSYCH_TIME_SCALE where it is a positive number, else 1: the
// factor by which tests on a slow host (an emulated VM) stretch time bounds.
func TimeScale() float64 { return testutil.TimeScale() }

// Run runs the whole suite. Its tests run one after another: several
// exercise limits that the host counts per user. Suites may run in parallel
// with one another (t.Parallel) where their runs share no such limit: the
// cases that set the host's environment take turns (setenv).
func Run(t *testing.T, b Backend) {
	if b.TimeScale == 0 {
		b.TimeScale = TimeScale()
	}
	s := &suite{b: b}
	for _, tc := range s.cases() {
		if len(b.Cases) > 0 && !slices.Contains(b.Cases, tc.name) {
			continue
		}
		if why, ok := b.Without[tc.name]; ok {
			t.Run(tc.name, func(t *testing.T) { t.Skip(why) })
			continue
		}
		t.Run(tc.name, tc.fn)
	}
	for _, tc := range s.isolationCases() {
		if len(b.Cases) > 0 && !slices.Contains(b.Cases, tc.name) {
			continue
		}
		t.Run(tc.name, func(t *testing.T) {
			if b.NoIsolation != "" {
				t.Skip("this host cannot isolate: " + b.NoIsolation)
			}
			tc.fn(t)
		})
	}
}

// testCase is one case of the suite, a subtest of Run.
type testCase = struct {
	name string
	fn   func(*testing.T)
}

// cases are the suite's cases but the isolation ones, in the order Run
// runs them.
func (s *suite) cases() []testCase {
	cases := []testCase{
		{"Values", s.values},
		{"FailureTraceback", s.failureTraceback},
		{"TracebackShowsSource", s.tracebackSource},
		{"SyntaxError", s.syntaxError},
		{"SourceForms", s.sourceForms},
		{"SubclassValues", s.subclassValues},
		{"CPULimit", s.cpuLimit},
		{"WallLimit", s.wallLimit},
		{"AddressSpace", s.addressSpace},
		{"AddressSpaceCaught", s.addressSpaceCaught},
		{"FileSize", s.fileSize},
		{"ThreadBomb", s.threadBomb},
		{"ThreadsFitDefaults", s.threadsFitDefaults},
		{"RecursionDefaultStack", s.recursionDefaultStack},
		{"ThreadStackOutOfAddressSpace", s.threadStackOutOfAddressSpace},
		{"SelfSentSignals", s.selfSentSignals},
		{"ChildOOMParentGoesOn", s.childOOMParentGoesOn},
		{"TmpfsOverflow", s.tmpfsOverflow},
		{"OpenFiles", s.openFiles},
		{"StdoutFlood", s.stdoutFlood},
		{"OutputLive", s.outputLive},
		{"OutputMatchesResult", s.outputMatchesResult},
		{"OutputNothingAfterRun", s.outputNothingAfterRun},
		{"OutputPanics", s.outputPanics},
		{"Started", s.started},
		{"Environment", s.environment},
		{"SetsidGrandchild", s.setsidGrandchild},
		{"ContextCancel", s.contextCancel},
		{"ReservedNames", s.reservedNames},
		{"BootstrapSource", s.bootstrapSource},
		{"Bindings", s.bindings},
		{"BindingLoop", s.bindingLoop},
		{"BindingError", s.bindingError},
		{"BindingSleepBurnsNoCPU", s.bindingSleep},
		{"UnknownName", s.unknownName},
		{"Exits", s.exits},
		{"StdinEOF", s.stdinEOF},
		{"Multiprocessing", s.multiprocessing},
		{"FreshTmp", s.freshTmp},
		{"Hostile", s.hostile},
		{"ForgedResult", s.forgedResult},
		{"CallFlood", s.callFlood},
		{"RunIDs", s.runIDs},
		{"Suspend", s.suspend},
		{"SuspendCancel", s.suspendCancel},
		{"ApprovalLimit", s.approvalLimit},
		{"RootEntries", s.rootEntries},
		{"NetworkDatabases", s.networkDatabases},
		{"TrustStore", s.trustStore},
		{"DataLibraries", s.dataLibraries},
		{"PseudoTerminals", s.pseudoTerminals},
		{"SetIDRefused", s.setIDRefused},
		{"RecursionTraceback", s.recursionTraceback},
		{"PatchedBuiltins", s.patchedBuiltins},
		{"LoneSurrogates", s.loneSurrogates},
		{"BindingInSignalHandler", s.bindingInSignalHandler},
		{"ResultWhileCallPending", s.resultWhileCallPending},
		{"InterruptedCall", s.interruptedCall},
		{"OwnOutsideIDs", s.ownOutsideIDs},
		{"RequestEnv", s.requestEnv},
		{"NoStateAcrossRuns", s.noStateAcrossRuns},
		{"Pool", s.pool},
		{"Preload", s.preload},
		{"Host", s.host},
	}
	return append(append(cases, s.filesCases()...), s.figuresCases()...)
}

type suite struct{ b Backend }

func (s *suite) scaled(d time.Duration) time.Duration {
	return time.Duration(float64(d) * s.b.TimeScale)
}

// run runs code with default options and no bindings unless given.
func (s *suite) run(t *testing.T, code string, limits sandbox.Limits, bindings sandbox.Bindings) *sandbox.Result {
	t.Helper()
	return s.runWith(t, s.b.New(t, Options{}), code, limits, bindings)
}

func (s *suite) runWith(t *testing.T, sb sandbox.Sandbox, code string, limits sandbox.Limits, bindings sandbox.Bindings) *sandbox.Result {
	t.Helper()
	return s.runReq(t, sb, sandbox.Request{Code: code, Limits: limits, Bindings: bindings})
}

// checkWarm: a pooled backend's run is warm or says why it is not; one
// without a pool says neither.
func (s *suite) checkWarm(t *testing.T, res *sandbox.Result) {
	t.Helper()
	iso := res.Isolation
	switch {
	case iso == nil:
		t.Fatal("a result without an attestation")
	case s.b.Warm && iso.Warm == (iso.ColdReason != ""):
		t.Fatalf("a pooled backend's run: warm %v, cold reason %q; want exactly one", iso.Warm, iso.ColdReason)
	case !s.b.Warm && (iso.Warm || iso.ColdReason != ""):
		t.Fatalf("a backend without a pool ran warm %v, cold reason %q", iso.Warm, iso.ColdReason)
	}
}

func mustJSON(t *testing.T, raw json.RawMessage) any {
	t.Helper()
	if raw == nil {
		return nil
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("value %q is not JSON: %v", raw, err)
	}
	return v
}

func wantSuccess(t *testing.T, res *sandbox.Result) {
	t.Helper()
	if res.Failure != nil {
		t.Fatalf("unexpected failure %+v\nstdout: %s\nstderr: %s", *res.Failure, res.Stdout, res.Stderr)
	}
	if res.LimitHit != "" {
		t.Fatalf("limit_hit %q on a clean run", res.LimitHit)
	}
}

func wantFailure(t *testing.T, res *sandbox.Result, typ string) *sandbox.Failure {
	t.Helper()
	if res.Failure == nil {
		t.Fatalf("want failure %s, got success with value %s\nstdout: %s", typ, res.Value, res.Stdout)
	}
	if typ != "" && res.Failure.Type != typ {
		t.Fatalf("failure type %q, want %q: %+v\nstderr: %s", res.Failure.Type, typ, *res.Failure, res.Stderr)
	}
	return res.Failure
}

func wantLimit(t *testing.T, res *sandbox.Result, limit sandbox.LimitName, source string) {
	t.Helper()
	if res.LimitHit != limit {
		f := "<nil>"
		if res.Failure != nil {
			b, _ := json.Marshal(res.Failure)
			f = string(b)
		}
		t.Fatalf("limit_hit %q, want %q; failure %s\nstderr: %.2000s", res.LimitHit, limit, f, res.Stderr)
	}
	if source != "" && res.LimitSource != source {
		t.Fatalf("limit_source %q, want %q", res.LimitSource, source)
	}
}

func (s *suite) values(t *testing.T) {
	sb := s.b.New(t, Options{})
	cases := []struct {
		code string
		want any
	}{
		{"40 + 2", 42.0},
		{"None", nil},
		{"x = 1", nil},
		{"{'a': [1, {'b': None}], 'c': 'd'}", map[string]any{"a": []any{1.0, map[string]any{"b": nil}}, "c": "d"}},
		{"(1, 'two', (3,))", []any{1.0, "two", []any{3.0}}},
		{"import math\nmath.inf", "inf"},
	}
	for _, c := range cases {
		res := s.runWith(t, sb, c.code, sandbox.Limits{}, nil)
		wantSuccess(t, res)
		if got := mustJSON(t, res.Value); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%q: value %#v, want %#v", c.code, got, c.want)
		}
	}
	res := s.runWith(t, sb, "class C:\n    def __repr__(self): return 'C!'\nC()", sandbox.Limits{}, nil)
	wantSuccess(t, res)
	if got := mustJSON(t, res.Value); got != "C!" {
		t.Errorf("non-JSON value came back as %#v, want its repr", got)
	}
}

func (s *suite) failureTraceback(t *testing.T) {
	res := s.run(t, "print('before')\nx = 1\n1/0\nprint('after')", sandbox.Limits{}, nil)
	f := wantFailure(t, res, "ZeroDivisionError")
	if res.Stdout != "before\n" {
		t.Errorf("stdout %q, want the output printed before the failure", res.Stdout)
	}
	if !strings.Contains(f.Traceback, `File "<program>", line 3`) {
		t.Errorf("traceback lacks the program's line 3:\n%s", f.Traceback)
	}
	if strings.Contains(f.Traceback, "bootstrap") || strings.Contains(f.Traceback, `File "<string>"`) {
		t.Errorf("traceback shows bootstrap frames:\n%s", f.Traceback)
	}
	if f.ExitCode == nil || *f.ExitCode != 1 || f.Signal != "" {
		t.Errorf("exit code %v signal %q, want 1 and none", f.ExitCode, f.Signal)
	}
	if res.LimitHit != "" {
		t.Errorf("limit_hit %q for a plain error", res.LimitHit)
	}
}

func (s *suite) tracebackSource(t *testing.T) {
	res := s.run(t, "def f():\n    return undefined_name\n\nf()", sandbox.Limits{}, nil)
	f := wantFailure(t, res, "NameError")
	for _, want := range []string{`line 4, in <module>`, "    f()", `line 2, in f`, "    return undefined_name"} {
		if !strings.Contains(f.Traceback, want) {
			t.Errorf("traceback lacks %q:\n%s", want, f.Traceback)
		}
	}
}

func (s *suite) syntaxError(t *testing.T) {
	res := s.run(t, "x = 1\ndef f(:\n    pass", sandbox.Limits{}, nil)
	f := wantFailure(t, res, "SyntaxError")
	if !strings.Contains(f.Traceback, "line 2") {
		t.Errorf("SyntaxError traceback lacks line 2:\n%s", f.Traceback)
	}
}

func (s *suite) cpuLimit(t *testing.T) {
	res := s.run(t, "while True:\n    pass", sandbox.Limits{CPUSeconds: 1, WallSeconds: 30}, nil)
	wantFailure(t, res, "")
	wantLimit(t, res, sandbox.LimitCPUSeconds, "")
	if res.Duration > s.scaled(15*time.Second) {
		t.Errorf("a 1 s CPU limit took %v", res.Duration)
	}
}

func (s *suite) wallLimit(t *testing.T) {
	res := s.run(t, "import time\ntime.sleep(100)", sandbox.Limits{WallSeconds: 2}, nil)
	wantFailure(t, res, sandbox.FailureWallTimeout)
	wantLimit(t, res, sandbox.LimitWallSeconds, sandbox.SourceHost)
	if res.Duration < 2*time.Second || res.Duration > s.scaled(10*time.Second) {
		t.Errorf("a 2 s wall limit ended after %v", res.Duration)
	}
}

func (s *suite) addressSpace(t *testing.T) {
	res := s.run(t, "b = bytearray(2 << 30)", sandbox.Limits{AddressSpaceBytes: 512 << 20}, nil)
	wantFailure(t, res, "MemoryError")
	wantLimit(t, res, sandbox.LimitAddressSpaceBytes, sandbox.SourceProgram)
}

func (s *suite) addressSpaceCaught(t *testing.T) {
	res := s.run(t, "try:\n    b = bytearray(2 << 30)\nexcept MemoryError:\n    r = 'survived'\nr",
		sandbox.Limits{AddressSpaceBytes: 512 << 20}, nil)
	wantSuccess(t, res)
	if got := mustJSON(t, res.Value); got != "survived" {
		t.Fatalf("value %#v", got)
	}
}

func (s *suite) fileSize(t *testing.T) {
	code := "import os\nwith open(os.path.join(os.environ['TMPDIR'], 'big'), 'wb') as f:\n" +
		"    for _ in range(4):\n        f.write(b'x' * (1 << 20))\n        f.flush()"
	res := s.run(t, code, sandbox.Limits{FileSizeBytes: 1 << 20}, nil)
	f := wantFailure(t, res, "")
	if !strings.Contains(f.Message, "File too large") {
		t.Errorf("failure %+v, want EFBIG", *f)
	}
	wantLimit(t, res, sandbox.LimitFileSizeBytes, sandbox.SourceProgram)
}

func (s *suite) threadBomb(t *testing.T) {
	code := "import threading, time\nts = []\nwhile True:\n" +
		"    t = threading.Thread(target=time.sleep, args=(60,), daemon=True)\n    t.start()\n    ts.append(t)"
	res := s.run(t, code, sandbox.Limits{ProcessCount: 16}, nil)
	wantFailure(t, res, "")
	wantLimit(t, res, sandbox.LimitProcessCount, "")
}

func (s *suite) stdoutFlood(t *testing.T) {
	code := "import sys\nb = b'x' * (1 << 20)\nfor _ in range(256):\n    sys.stdout.buffer.write(b)\n'done'"
	sb := s.b.New(t, Options{})
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	res := s.runWith(t, sb, code, sandbox.Limits{}, nil)
	runtime.ReadMemStats(&after)
	wantSuccess(t, res)
	if got := mustJSON(t, res.Value); got != "done" {
		t.Fatalf("value %#v, want the flood to run to completion", got)
	}
	if !res.StdoutTruncated || len(res.Stdout) != 1<<20 {
		t.Errorf("stdout %d bytes, truncated %v; want exactly the 1 MiB cap, truncated", len(res.Stdout), res.StdoutTruncated)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 64<<20 {
		t.Errorf("the host allocated %d MiB to drain a 256 MiB flood", grew>>20)
	}
}

// envMu is held by a case that sets the host's environment, from setenv to
// its end: suites running in parallel in one process share it.
var envMu sync.Mutex

// setenv sets the host's variables (name, value, name, value...) for the
// rest of the case, as t.Setenv, which a parallel suite cannot use; the
// case holds envMu until it ends, so no other setenv case sees or changes
// them meanwhile. A case that allowlists a name without setenv must use a
// name no case sets (noStateAcrossRuns): the host's value would reach it.
func setenv(t *testing.T, kv ...string) {
	t.Helper()
	envMu.Lock()
	t.Cleanup(envMu.Unlock) // after the restore below: cleanups run last first
	for i := 0; i+1 < len(kv); i += 2 {
		k, v := kv[i], kv[i+1]
		old, had := os.LookupEnv(k)
		if err := os.Setenv(k, v); err != nil {
			t.Fatalf("setenv %s: %v", k, err)
		}
		t.Cleanup(func() {
			if had {
				os.Setenv(k, old)
			} else {
				os.Unsetenv(k)
			}
		})
	}
}

func (s *suite) environment(t *testing.T) {
	setenv(t, "PSYCH_CONTRACT_ALLOWED", "let-me-in", "PSYCH_CONTRACT_SECRET", "hunter2")
	sb := s.b.New(t, Options{EnvAllowlist: []string{"PSYCH_CONTRACT_ALLOWED"}})
	res := s.runWith(t, sb, "import os\ndict(os.environ)", sandbox.Limits{}, nil)
	wantSuccess(t, res)
	var env map[string]string
	if err := json.Unmarshal(res.Value, &env); err != nil {
		t.Fatal(err)
	}
	want := append([]string{"HOME", "TMPDIR", "PATH", "PYTHONDONTWRITEBYTECODE", "PSYCH_CONTRACT_ALLOWED"}, s.b.SandboxEnv...)
	var got []string
	for k := range env {
		got = append(got, k)
	}
	sort.Strings(got)
	sort.Strings(want)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("child env keys %v, want exactly %v", got, want)
	}
	if env["PSYCH_CONTRACT_ALLOWED"] != "let-me-in" {
		t.Errorf("allowlisted variable = %q", env["PSYCH_CONTRACT_ALLOWED"])
	}
	for k, v := range env {
		if strings.Contains(v, "hunter2") {
			t.Errorf("host secret reached the child in %s", k)
		}
	}
}

// Marker returns a unique argv token to find a run's processes from the host.
func Marker() string { return testutil.NewMarker("psych-contract-") }

// ProcessesWith lists the /proc/PID/cmdline paths of the host's processes
// whose command line contains m.
func ProcessesWith(m string) []string { return testutil.ProcessesWith(m) }

// detachCode starts a setsid'd, double-forked sleeper tagged with m.
func detachCode(m string) string {
	return "import os, subprocess, sys\n" +
		"subprocess.Popen([sys.executable, '-c', 'import os, time\\nif os.fork() == 0:\\n    os.setsid()\\n    time.sleep(300)', '" + m + "'],\n" +
		"                 start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
}

// within reports whether cond holds within d (scaled), checking every 10 ms.
func (s *suite) within(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(s.scaled(d))
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
}

func (s *suite) waitSpawned(t *testing.T, m string) {
	t.Helper()
	if !s.within(10*time.Second, func() bool { return len(ProcessesWith(m)) > 0 }) {
		t.Fatal("the detached sleeper never started")
	}
}

// wantGone fails t unless the processes tagged m are gone within a moment:
// every process of a run is SIGKILLed before Run returns, and the kernel's
// end of them follows (a busy host may take milliseconds to schedule a
// killed process's exit).
func (s *suite) wantGone(t *testing.T, m, what string) {
	t.Helper()
	var left []string
	if !s.within(2*time.Second, func() bool { left = ProcessesWith(m); return len(left) == 0 }) {
		t.Fatalf("%s: %v", what, left)
	}
}

func (s *suite) setsidGrandchild(t *testing.T) {
	m := Marker()
	// The program waits until its detached grandchild runs, then returns.
	code := detachCode(m) + "import time\n" +
		"def alive():\n    return any('" + m + "' in open(f'/proc/{p}/cmdline').read() for p in os.listdir('/proc') if p.isdigit() and os.path.exists(f'/proc/{p}/cmdline'))\n" +
		"deadline = time.time() + 10\nwhile not alive() and time.time() < deadline:\n    time.sleep(0.02)\nalive()"
	res := s.run(t, code, sandbox.Limits{}, nil)
	wantSuccess(t, res)
	if got := mustJSON(t, res.Value); got != true {
		t.Fatalf("the grandchild never started inside the run (value %#v, stderr %s)", got, res.Stderr)
	}
	s.wantGone(t, m, "setsid'd grandchild survived Run")
}

func (s *suite) contextCancel(t *testing.T) {
	m := Marker()
	sb := s.b.New(t, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	var res *sandbox.Result
	go func() {
		var err error
		res, err = sb.Run(ctx, sandbox.Request{Code: detachCode(m) + "import time\ntime.sleep(100)"})
		done <- err
	}()
	s.waitSpawned(t, m)
	cancel()
	start := time.Now()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) || res != nil {
			t.Fatalf("Run after cancel: %v, %v; want context.Canceled and no result", res, err)
		}
	case <-time.After(s.scaled(10 * time.Second)):
		t.Fatal("Run did not return after its context was cancelled")
	}
	if d := time.Since(start); d > s.scaled(3*time.Second) {
		t.Errorf("Run took %v to return after cancel", d)
	}
	s.wantGone(t, m, "processes survived a cancelled Run")
}

// reservedNames: a binding name the rule refuses (sandbox.CheckName) is
// ErrInvalidRequest at Run, and nothing runs.
func (s *suite) reservedNames(t *testing.T) {
	sb := s.b.New(t, Options{})
	m := Marker()
	for _, name := range []string{"__spec__", "run_code", "BindingError", "class", "__"} {
		res, err := sb.Run(context.Background(), sandbox.Request{
			Code:     detachCode(m),
			Bindings: namedBindings{name},
		})
		if !errors.Is(err, sandbox.ErrInvalidRequest) || res != nil {
			t.Errorf("binding %q: %v, %+v; want ErrInvalidRequest and no result", name, err, res)
		}
	}
	if left := ProcessesWith(m); len(left) > 0 {
		t.Fatalf("a refused request ran: %v", left)
	}
}

// bootstrapSource: the bootstrap the interpreter runs is bootstrap.Source,
// byte for byte, whichever backend started it: on argv verbatim, or
// compiled from it (the code object equal to compiling Source anew), on
// argv or in the file argv names.
func (s *suite) bootstrapSource(t *testing.T) {
	src, _ := json.Marshal(bootstrap.Source)
	code := "import binascii, marshal\nSOURCE = " + string(src) + "\n" +
		"argv = open('/proc/self/cmdline', 'rb').read().split(b'\\0')\n" +
		"i = argv.index(b'-c')\n" +
		"if argv[i + 1].decode() == SOURCE:\n    r = ['verbatim', True]\n" +
		"else:\n    arg = argv[i + 2]\n" +
		"    how, data = ('compiled, from a file', open(arg, 'rb').read()) if arg.startswith(b'/') else ('compiled', binascii.a2b_base64(arg))\n" +
		"    r = [how, marshal.loads(data) == compile(SOURCE, '<psych-bootstrap>', 'exec')]\nr"
	res := s.run(t, code, sandbox.Limits{}, nil)
	wantSuccess(t, res)
	var got []any
	if err := json.Unmarshal(res.Value, &got); err != nil || len(got) != 2 || got[1] != true {
		t.Fatalf("the bootstrap the interpreter ran is not bootstrap.Source: %s", res.Value)
	}
	t.Logf("the interpreter ran bootstrap.Source %s", got[0])
}

// namedBindings declares one binding of the given name.
type namedBindings struct{ name string }

func (b namedBindings) List() []sandbox.Binding { return []sandbox.Binding{{Name: b.name}} }
func (namedBindings) Call(context.Context, string, json.RawMessage) (json.RawMessage, error) {
	return nil, errors.New("never called")
}

func (s *suite) bindings(t *testing.T) {
	res := s.run(t, "echo(a=1, b=[1, (2, 3)], c={'d': None})", sandbox.Limits{}, demotools.Bindings{})
	wantSuccess(t, res)
	want := map[string]any{"a": 1.0, "b": []any{1.0, []any{2.0, 3.0}}, "c": map[string]any{"d": nil}}
	if got := mustJSON(t, res.Value); !reflect.DeepEqual(got, want) {
		t.Fatalf("echo returned %#v, want %#v", got, want)
	}
	res = s.run(t, "sleep(0.01)", sandbox.Limits{}, demotools.Bindings{})
	wantSuccess(t, res)
	if got := mustJSON(t, res.Value); got != 0.01 {
		t.Fatalf("sleep(0.01) positional returned %#v", got)
	}
}

func (s *suite) bindingLoop(t *testing.T) {
	res := s.run(t, "total = 0\nfor i in range(1000):\n    total += echo(i=i)['i']\ntotal", sandbox.Limits{}, demotools.Bindings{})
	wantSuccess(t, res)
	if got := mustJSON(t, res.Value); got != 499500.0 {
		t.Fatalf("1,000 echo calls summed to %#v", got)
	}
}

func (s *suite) bindingError(t *testing.T) {
	res := s.run(t, "try:\n    fail('boom')\nexcept BindingError as e:\n    r = ['caught', str(e), isinstance(e, Exception)]\nr",
		sandbox.Limits{}, demotools.Bindings{})
	wantSuccess(t, res)
	if got := mustJSON(t, res.Value); !reflect.DeepEqual(got, []any{"caught", "boom", true}) {
		t.Fatalf("host error reached the program as %#v", got)
	}
	res = s.run(t, "fail('uncaught boom')", sandbox.Limits{}, demotools.Bindings{})
	if f := wantFailure(t, res, "BindingError"); !strings.Contains(f.Message, "uncaught boom") {
		t.Fatalf("failure %+v", *f)
	}
}

func (s *suite) bindingSleep(t *testing.T) {
	res := s.run(t, "sleep(seconds=3)", sandbox.Limits{CPUSeconds: 1}, demotools.Bindings{})
	wantSuccess(t, res)
	if got := mustJSON(t, res.Value); got != 3.0 {
		t.Fatalf("sleep returned %#v", got)
	}
	// The host's time in the call is the run's, counted apart from its CPU.
	if u := res.Usage; u == nil || u.HostCallSeconds < 3 || u.HostCallSeconds > res.Duration.Seconds() {
		t.Fatalf("usage %+v after a 3 s binding call in a %v run: want host_call_seconds from 3 s to the run's duration", u, res.Duration)
	}
}

func (s *suite) unknownName(t *testing.T) {
	res := s.run(t, "search(query='x')", sandbox.Limits{}, demotools.Bindings{})
	wantFailure(t, res, "NameError")
}

func (s *suite) exits(t *testing.T) {
	res := s.run(t, "import sys\nsys.exit(3)", sandbox.Limits{}, nil)
	f := wantFailure(t, res, "SystemExit")
	if f.ExitCode == nil || *f.ExitCode != 3 {
		t.Errorf("sys.exit(3): exit code %v", f.ExitCode)
	}
	res = s.run(t, "import os\nprint('bye', flush=True)\nos._exit(7)", sandbox.Limits{}, nil)
	f = wantFailure(t, res, "")
	if f.ExitCode == nil || *f.ExitCode != 7 || res.Stdout != "bye\n" {
		t.Errorf("os._exit(7): exit code %v, stdout %q", f.ExitCode, res.Stdout)
	}
	res = s.run(t, "import ctypes\nctypes.string_at(0)", sandbox.Limits{}, nil)
	f = wantFailure(t, res, "")
	if f.Signal != "SIGSEGV" || f.ExitCode != nil {
		t.Errorf("segfault: signal %q exit %v", f.Signal, f.ExitCode)
	}
}

func (s *suite) stdinEOF(t *testing.T) {
	res := s.run(t, "import sys\nsys.stdin.read()", sandbox.Limits{WallSeconds: 10}, nil)
	wantSuccess(t, res)
	if got := mustJSON(t, res.Value); got != "" {
		t.Fatalf("stdin read %#v, want EOF", got)
	}
}

func (s *suite) multiprocessing(t *testing.T) {
	res := s.run(t, "from multiprocessing import Pool\ndef sq(x):\n    return x * x\nwith Pool(2) as p:\n    r = p.map(sq, range(5))\nr",
		sandbox.Limits{}, nil)
	wantSuccess(t, res)
	if got := mustJSON(t, res.Value); !reflect.DeepEqual(got, []any{0.0, 1.0, 4.0, 9.0, 16.0}) {
		t.Fatalf("Pool.map returned %#v", got)
	}
}

func (s *suite) freshTmp(t *testing.T) {
	sb := s.b.New(t, Options{})
	code := "import os\nd = os.environ['TMPDIR']\nseen = sorted(os.listdir(d)) + sorted(os.listdir('.'))\nopen(os.path.join(d, 'left'), 'w').write('x')\nopen('left', 'w').write('x')\n[os.getcwd(), seen]"
	for i := 0; i < 2; i++ {
		res := s.runWith(t, sb, code, sandbox.Limits{}, nil)
		wantSuccess(t, res)
		if got := mustJSON(t, res.Value); !reflect.DeepEqual(got, []any{sandbox.WorkDir, []any{}}) {
			t.Fatalf("run %d: [cwd, TMPDIR and cwd entries] = %#v, want [%q, []]", i, got, sandbox.WorkDir)
		}
	}
}
