package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/psych-runtime/psych/cgroups"
	"github.com/psych-runtime/psych/internal/testutil"
	"github.com/psych-runtime/psych/sandbox"
)

var psychBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "psych-cli-test")
	if err != nil {
		panic(err)
	}
	// psych and, beside it, psych-full, which it hands the container
	// backend, doctor and bench to; linked statically, as make build
	// links them.
	psychBin = filepath.Join(dir, "psych")
	build := exec.Command("go", "build", "-tags", "netgo,osusergo", "-ldflags", "-linkmode=external -extldflags=-static", "-o", dir+"/", "../../cmd/psych", "../../cmd/psych-full")
	if out, err := build.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		panic("build psych and psych-full: " + err.Error() + "\n" + string(out))
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// publicBins is a fresh directory every user may enter, with psych and
// psych-full copied into it, and the copy of psych: for the tests that run
// the CLI as another user, who cannot reach the test's own.
func publicBins(t *testing.T) (dir, bin string) {
	t.Helper()
	dir = testutil.PublicDir(t, "", "psych-cli-", 0o755)
	for _, name := range []string{"psych", "psych-full"} {
		b, err := os.ReadFile(filepath.Join(filepath.Dir(psychBin), name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir, filepath.Join(dir, "psych")
}

func testPython() string { return testutil.Python() }

// cli runs the built CLI with program on stdin.
func cli(t *testing.T, program string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(psychBin, args...)
	cmd.Stdin = strings.NewReader(program)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return o.String(), e.String(), ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return o.String(), e.String(), 0
}

func runJSON(t *testing.T, program string, args ...string) *sandbox.Result {
	t.Helper()
	out, errOut, code := cli(t, program, append([]string{"run", "--json", "--python", testPython()}, append(args, "-")...)...)
	if code != 0 {
		t.Fatalf("exit %d, stderr %s", code, errOut)
	}
	var res sandbox.Result
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("--json output is not a Result: %v\n%s", err, out)
	}
	// The Result's JSON field names, which the contract fixes (sandbox.Result).
	var raw map[string]json.RawMessage
	json.Unmarshal([]byte(out), &raw)
	for _, k := range []string{"stdout", "stderr", "stdout_truncated", "stderr_truncated", "value", "failure", "duration_seconds", "limit_hit", "network_denied", "usage", "isolation"} {
		if _, ok := raw[k]; !ok {
			t.Errorf("--json output lacks %q: %s", k, out)
		}
	}
	return &res
}

func TestRunJSON(t *testing.T) {
	res := runJSON(t, "print('hi')\n{'a': (1, 2)}")
	if res.Stdout != "hi\n" || string(res.Value) != `{"a":[1,2]}` || res.Failure != nil {
		t.Fatalf("result %+v", res)
	}
	if res.Duration <= 0 {
		t.Errorf("duration %v", res.Duration)
	}
}

func TestRunJSONFailureExitsZero(t *testing.T) {
	res := runJSON(t, "1/0")
	if res.Failure == nil || res.Failure.Type != "ZeroDivisionError" || res.Failure.ExitCode == nil || *res.Failure.ExitCode != 1 {
		t.Fatalf("failure %+v", res.Failure)
	}
}

func TestRunLimitsFlags(t *testing.T) {
	res := runJSON(t, "import os\nwith open(os.environ['TMPDIR'] + '/f', 'wb') as f:\n    f.write(b'x' * 5000)", "--file-size", "4KiB")
	if res.LimitHit != sandbox.LimitFileSizeBytes {
		t.Fatalf("--file-size 4KiB: limit_hit %q, failure %+v", res.LimitHit, res.Failure)
	}
	res = runJSON(t, "import time\ntime.sleep(30)", "--wall-seconds", "1")
	if res.LimitHit != sandbox.LimitWallSeconds {
		t.Fatalf("--wall-seconds 1: limit_hit %q", res.LimitHit)
	}
	if os.Geteuid() == 0 { // a root host has a run cgroup
		// Two processes over the cap together; the parent is the OOM
		// killer's choice (a raised oom_score_adj), so the program never
		// completes: an OOM kill after a result would be a completion.
		res = runJSON(t, "import os\npid = os.fork()\nif pid:\n    open('/proc/self/oom_score_adj', 'w').write('1000')\n"+
			"b = bytearray(48 << 20)\nfor i in range(0, len(b), 4096): b[i] = 1\nif pid: os.wait()", "--memory", "64MiB")
		if res.LimitHit != sandbox.LimitMemoryBytes || res.Usage == nil || res.Usage.PeakMemoryBytes > 64<<20+(4<<20) {
			t.Fatalf("--memory 64MiB: limit_hit %q, usage %+v", res.LimitHit, res.Usage)
		}
	}
	res = runJSON(t, "print('x' * 5000)", "--max-output", "1KiB")
	if !res.StdoutTruncated || len(res.Stdout) != 1024 {
		t.Fatalf("--max-output 1KiB: %d bytes, truncated %v", len(res.Stdout), res.StdoutTruncated)
	}
}

func TestRunDemoToolsAndEnv(t *testing.T) {
	t.Setenv("PSYCH_CLI_PASSED", "yes")
	t.Setenv("PSYCH_CLI_HIDDEN", "no")
	res := runJSON(t, "import os\n[echo(x=1), os.environ.get('PSYCH_CLI_PASSED'), os.environ.get('PSYCH_CLI_HIDDEN')]",
		"--demo-tools", "--env", "PSYCH_CLI_PASSED")
	if string(res.Value) != `[{"x":1},"yes",null]` {
		t.Fatalf("value %s, failure %+v", res.Value, res.Failure)
	}
	// NAME=VALUE sets the run's own value, in place of the host's.
	res = runJSON(t, "import os\n[os.environ.get('PSYCH_CLI_PASSED'), os.environ.get('PSYCH_CLI_SET')]",
		"--env", "PSYCH_CLI_PASSED=mine", "--env", "PSYCH_CLI_SET=a=b")
	if string(res.Value) != `["mine","a=b"]` {
		t.Fatalf("--env NAME=VALUE: value %s, failure %+v", res.Value, res.Failure)
	}
	res = runJSON(t, "echo(x=1)")
	if res.Failure == nil || res.Failure.Type != "NameError" {
		t.Fatalf("without --demo-tools, echo should be undefined: %+v", res.Failure)
	}
}

func TestRunHuman(t *testing.T) {
	out, errOut, code := cli(t, "print('hello')\n6 * 7", "run", "--python", testPython(), "-")
	if code != 0 || out != "hello\n42\n" {
		t.Fatalf("exit %d stdout %q", code, out)
	}
	if !strings.Contains(errOut, "psych: ok in ") {
		t.Fatalf("summary missing: %q", errOut)
	}
	_, errOut, code = cli(t, "x = 1\n1/0", "run", "--python", testPython(), "-")
	if code != 0 || !strings.Contains(errOut, `File "<program>", line 2`) || !strings.Contains(errOut, "failed: ZeroDivisionError") {
		t.Fatalf("exit %d stderr %q", code, errOut)
	}
}

func TestExitCodes(t *testing.T) {
	py := testPython()
	cases := []struct {
		name string
		args []string
		want int
		msg  string
	}{
		{"no command", nil, exitUsage, "usage"},
		{"unknown command", []string{"launch"}, exitUsage, "unknown command"},
		{"no file", []string{"run", "--python", py}, exitUsage, "exactly one"},
		{"bad byte flag", []string{"run", "--file-size", "10XB", "-"}, exitUsage, "not a byte count"},
		{"negative limit", []string{"run", "--python", py, "--cpu-seconds", "-1", "-"}, exitUsage, "--cpu-seconds -1: must not be negative"},
		{"negative wall", []string{"run", "--python", py, "--wall-seconds", "-2", "-"}, exitUsage, "--wall-seconds -2: must not be negative"},
		{"negative approval", []string{"run", "--python", py, "--approval-seconds", "-1", "-"}, exitUsage, "--approval-seconds -1: must not be negative"},
		{"approval out of range", []string{"run", "--python", py, "--approval-seconds", "1e9", "-"}, exitUsage, "limit approval_seconds out of range"},
		{"missing file", []string{"run", "--python", py, "/nonexistent/prog.py"}, exitUsage, "no such file"},
		{"bad python", []string{"run", "--python", "/nonexistent/python3", "-"}, exitUsage, "/nonexistent/python3"},
		{"reserved env", []string{"run", "--python", py, "--env", "PATH", "-"}, exitUsage, "set by the sandbox"},
		{"empty env name", []string{"run", "--python", py, "--env", "=oops", "-"}, exitUsage, "name is empty"},
		{"python is a directory", []string{"run", "--python", "/usr/bin", "-"}, exitUsage, "/usr/bin is a directory"},
		{"refused", []string{"run", "--python", py, "--require-network-denial", "--network", "-"}, exitRefused, "network denial"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, errOut, code := cli(t, "1", c.args...)
			if code != c.want || !strings.Contains(errOut, c.msg) {
				t.Fatalf("exit %d (want %d), stderr %q (want %q)", code, c.want, errOut, c.msg)
			}
		})
	}
}

// TestContainerBackend: --backend container prints the same Result fields,
// attested as a container; its flags are refused with the other backend.
func TestContainerBackend(t *testing.T) {
	testutil.RequireRoot(t, "the container backend needs a root host")
	image := testutil.Image()
	out, errOut, code := cli(t, "print('hi')\n6 * 7", "run", "--json", "--backend", "container", "--engine", "containerd", "--image", image, "-")
	if code == 2 && strings.Contains(errOut, "unreachable") && !testutil.InCI() {
		t.Skipf("containerd is not reachable here: %s", errOut)
	}
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var res sandbox.Result
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	if res.Stdout != "hi\n" || string(res.Value) != "42" || res.Isolation == nil || res.Isolation.Backend != "container" || res.Isolation.Engine != "containerd" || !res.NetworkDenied {
		t.Fatalf("result %s", out)
	}
	for _, args := range [][]string{
		{"--backend", "bogus"},
		{"--engine", "docker"},
		{"--backend", "container", "--python", "/usr/bin/python3"},
		{"--backend", "container", "--engine", "containerd", "--image", "localhost/psych-no-such-image:0"},
	} {
		_, errOut, code := cli(t, "1", append(append([]string{"run"}, args...), "-")...)
		if code != 2 {
			t.Errorf("psych run %v: exit %d (%s), want 2", args, code, errOut)
		}
	}
}

// TestHandOver: psych hands doctor, bench, runs, --store, --demo-tools and
// --backend container to psych-full beside it; alone (not beside it, not on PATH) it says where
// they are and exits 2, having read nothing of stdin.
func TestHandOver(t *testing.T) {
	out, errOut, code := cli(t, "", "doctor", "--json", "--python", testPython())
	var rep struct{ Checks []struct{ Name string } }
	if json.Unmarshal([]byte(out), &rep) != nil || len(rep.Checks) == 0 {
		t.Fatalf("psych doctor through psych-full: exit %d, stdout %q, stderr %s", code, out, errOut)
	}
	alone := filepath.Join(t.TempDir(), "psych")
	b, err := os.ReadFile(psychBin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(alone, b, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"doctor"},
		{"bench", "--runs", "1"},
		{"run", "--backend", "container", "-"},
		{"runs", "replay", "--backend=container", "--store", "x.db", "ID"},
		{"runs", "list", "--store", "x.db"},
		{"run", "--store", "x.db", "-"},
		{"run", "--demo-tools", "-"},
	} {
		cmd := exec.Command(alone, args...)
		cmd.Env = []string{"PATH=/nonexistent"}
		cmd.Stdin = strings.NewReader("1")
		var e bytes.Buffer
		cmd.Stderr = &e
		err := cmd.Run()
		ee, ok := err.(*exec.ExitError)
		if !ok || ee.ExitCode() != exitUsage || !strings.Contains(e.String(), "psych-full") {
			t.Errorf("psych %v alone: %v, stderr %q; want exit 2 naming psych-full", args, err, e.String())
		}
	}
	// The lean build runs the subprocess backend itself.
	cmd := exec.Command(alone, "run", "--json", "--python", testPython(), "-")
	cmd.Env = []string{"PATH=/nonexistent"}
	cmd.Stdin = strings.NewReader("6 * 7")
	if out, err := cmd.Output(); err != nil || !strings.Contains(string(out), `"value":42`) {
		t.Fatalf("psych run alone: %v, %s", err, out)
	}
}

// TestRunLeavesNothing: psych run exits only after its run's directory and
// cgroups are removed (their removal ends after the result).
func TestRunLeavesNothing(t *testing.T) {
	testutil.RequireRoot(t, "the run cgroups and /var/lib/psych/tmp are a root host's")
	m, err := cgroups.NewManager(cgroups.Config{})
	if err != nil {
		t.Fatalf("cgroups here: %v", err)
	}
	for i := 0; i < 5; i++ {
		cmd := exec.Command(psychBin, "run", "--json", "--python", testPython(), "-")
		cmd.Stdin = strings.NewReader("print('x')\n1")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("psych run: %v: %s", err, out)
		}
		for _, left := range leftBy(m, cmd.Process.Pid) {
			t.Errorf("psych run (pid %d) left %s", cmd.Process.Pid, left)
		}
	}
}

// leftBy lists the run directories and run cgroups of the psych process
// pid (named after it) that are still there.
func leftBy(m *cgroups.Manager, pid int) []string {
	prefix := fmt.Sprintf("%d.", pid)
	dirs := []string{"/var/lib/psych/tmp"}
	for _, parent := range m.Parents() {
		dirs = append(dirs, parent)
	}
	var left []string
	for _, dir := range dirs {
		ents, _ := os.ReadDir(dir)
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), prefix) {
				left = append(left, filepath.Join(dir, e.Name()))
			}
		}
	}
	return left
}

// TestRunInterrupted: SIGINT during a run ends psych with exit code 130
// (no result printed), and the run's processes, directory and cgroups go
// with it.
func TestRunInterrupted(t *testing.T) {
	cmd := exec.Command(psychBin, "run", "--json", "--python", testPython(), "-")
	cmd.Stdin = strings.NewReader("import time\ntime.sleep(60)")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	// The run is under way once the interpreter exists below psych.
	deadline := time.Now().Add(30 * time.Second)
	for !slices.ContainsFunc(descendants(pid), func(p int) bool { return strings.HasPrefix(comm(p), "python") }) {
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("no interpreter below psych (pid %d) after 30 s; stderr: %s", pid, errb.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	below := descendants(pid)
	cmd.Process.Signal(os.Interrupt)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatal("psych did not end within 30 s of SIGINT")
	}
	if code := cmd.ProcessState.ExitCode(); code != exitInterrupted || out.Len() != 0 {
		t.Fatalf("exit %d (%v), stdout %q, stderr %q; want %d and no result", code, cmd.ProcessState, out.String(), errb.String(), exitInterrupted)
	}
	// Each was psych's descendant; the fork server dies of its death
	// signal just after it. (A pid taken again meanwhile would be another
	// process, and fail the test.)
	alive := func(p int) bool {
		st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p))
		return err == nil && !strings.Contains(string(st), ") Z ")
	}
	for end := time.Now().Add(5 * time.Second); slices.ContainsFunc(below, alive) && time.Now().Before(end); {
		time.Sleep(10 * time.Millisecond)
	}
	for _, p := range below {
		if alive(p) {
			t.Errorf("process %d (%s) of the run outlived psych by 5 s", p, comm(p))
		}
	}
	if os.Geteuid() == 0 {
		m, err := cgroups.NewManager(cgroups.Config{})
		if err != nil {
			t.Fatalf("cgroups here: %v", err)
		}
		for _, left := range leftBy(m, pid) {
			t.Errorf("the interrupted psych (pid %d) left %s", pid, left)
		}
	}
}

// descendants lists the processes below pid, by their parents in /proc.
func descendants(pid int) []int {
	parent := map[int]int{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// The fields after the command's closing parenthesis: state, ppid.
		f := strings.Fields(string(st[bytes.LastIndexByte(st, ')')+1:]))
		if len(f) > 1 {
			parent[p], _ = strconv.Atoi(f[1])
		}
	}
	var out []int
	for p := range parent {
		for q := parent[p]; q > 1; q = parent[q] {
			if q == pid {
				out = append(out, p)
				break
			}
		}
	}
	return out
}

// comm is the process's command name, empty once it is gone.
func comm(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	return strings.TrimSpace(string(b))
}
