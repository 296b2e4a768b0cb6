package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/psych-runtime/psych/api"
	"github.com/psych-runtime/psych/internal/testutil"
	"github.com/psych-runtime/psych/sandbox"
)

// served is a psych serve started by a test, on a Unix socket of its own.
type served struct {
	cmd    *exec.Cmd
	sock   string
	stderr *bytes.Buffer
	done   chan struct{}
	http   *http.Client
}

// startServe starts `psych serve` (the lean psych hands it to psych-full)
// on sock with args and waits until it is ready; Cleanup kills what is
// left.
func startServe(t *testing.T, sock string, args ...string) *served {
	t.Helper()
	s := &served{sock: sock, stderr: &bytes.Buffer{}, done: make(chan struct{})}
	s.cmd = exec.Command(psychBin, append([]string{"serve", "--listen", "unix://" + sock, "--python", testPython()}, args...)...)
	s.cmd.Stderr = s.stderr
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { s.cmd.Wait(); close(s.done) }()
	t.Cleanup(func() {
		s.cmd.Process.Kill()
		<-s.done
	})
	s.http = &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	t.Cleanup(s.http.CloseIdleConnections)
	testutil.WaitFor(t, testutil.Scaled(30*time.Second), "psych serve ready", func() bool {
		select {
		case <-s.done:
			t.Fatalf("psych serve exited: %v\n%s", s.cmd.ProcessState, s.stderr)
		default:
		}
		resp, err := s.http.Get("http://psych/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	return s
}

// inFlight reports how many runs the server has in flight (GET /v1/runs
// without a store lists those).
func (s *served) inFlight(t *testing.T) int {
	resp, err := s.http.Get("http://psych/v1/runs")
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	var l api.RunList
	json.NewDecoder(resp.Body).Decode(&l)
	return len(l.Runs)
}

// exitCode waits for the server's exit and returns its code.
func (s *served) exitCode(t *testing.T) int {
	t.Helper()
	select {
	case <-s.done:
	case <-time.After(testutil.Scaled(time.Minute)):
		t.Fatalf("psych serve did not exit\n%s", s.stderr)
	}
	return s.cmd.ProcessState.ExitCode()
}

// hostRun starts `psych run --json --host` of program.
func hostRun(sock, program string, args ...string) (*exec.Cmd, *bytes.Buffer, *bytes.Buffer) {
	cmd := exec.Command(psychBin, append(append([]string{"run", "--json", "--host", "unix://" + sock}, args...), "-")...)
	cmd.Stdin = strings.NewReader(program)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	cmd.Start()
	return cmd, &o, &e
}

func exitOf(cmd *exec.Cmd) int {
	err := cmd.Wait()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}

// TestServeSameJSON: `psych run --host` prints the same JSON as a local
// run for a value, a traceback, a limit hit and truncated output (what
// differs by nature aside: the id, times, usage, the attestation).
func TestServeSameJSON(t *testing.T) {
	testutil.RequireRoot(t, "a server's default socket and runs as root, as CI's")
	// Cold runs, as the local ones: a pooled run hit by its CPU limit is
	// killed by the host's watch (SIGKILL, limit_source host) where a cold
	// one mostly gets the kernel's SIGXCPU (under load, either: cpuEnforcer).
	s := startServe(t, filepath.Join(t.TempDir(), "psych.sock"))
	for _, tc := range []struct {
		name, program string
		args          []string
	}{
		{"value", "print('hi')\n{'a': [1, 2.5, None, 'x']}", nil},
		{"traceback", "def f():\n    raise ValueError('no')\nf()", nil},
		{"limit_hit", "while True:\n    pass", []string{"--cpu-seconds", "1"}},
		{"truncation", "import sys\nsys.stdout.write('x' * (3 << 20))\nsys.stderr.write('e')", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			local := runJSON(t, tc.program, tc.args...)
			cmd, out, errOut := hostRun(s.sock, tc.program, tc.args...)
			if code := exitOf(cmd); code != 0 {
				t.Fatalf("--host: exit %d, %s", code, errOut)
			}
			var remote sandbox.Result
			if err := json.Unmarshal(out.Bytes(), &remote); err != nil {
				t.Fatalf("--host printed no Result: %v\n%s", err, out)
			}
			if remote.Isolation == nil || !remote.NetworkDenied {
				t.Errorf("--host: no attestation or network not denied: %+v", remote)
			}
			for _, r := range []*sandbox.Result{local, &remote} {
				r.ID, r.Duration, r.Usage, r.Isolation, r.Suspended = "", 0, nil, nil, 0
				if tc.name == "limit_hit" {
					cpuEnforcer(t, r)
				}
			}
			a, _ := json.Marshal(local)
			b, _ := json.Marshal(&remote)
			if !bytes.Equal(a, b) {
				t.Errorf("local and --host differ:\nlocal %.600s\nhost  %.600s", a, b)
			}
		})
	}
}

// cpuEnforcer checks that r was ended by its CPU limit, enforced by the
// kernel (SIGXCPU) or the host's whole-run CPU watch (SIGKILL), and blanks
// which (the source and the signal): on a loaded machine either may fire first in any one run, local or
// through a server, as the contract suite's CPULimit allows.
func cpuEnforcer(t *testing.T, r *sandbox.Result) {
	t.Helper()
	f := r.Failure
	if r.LimitHit != sandbox.LimitCPUSeconds || f == nil || f.Type != sandbox.FailureCPUTimeout {
		t.Fatalf("limit %q, failure %+v; want the CPU limit's", r.LimitHit, f)
	}
	switch {
	case r.LimitSource == sandbox.SourceKernel && f.Signal == "SIGXCPU",
		r.LimitSource == sandbox.SourceHost && f.Signal == "SIGKILL":
	default:
		t.Fatalf("the CPU limit by %q with %+v; want the kernel's SIGXCPU or the host's SIGKILL", r.LimitSource, *f)
	}
	r.LimitSource, f.Signal = "", ""
}

// TestServeRetryAndDrain: a full server (--max-runs 1 --queue 0) refuses
// with 429, which psych run --host exits 75 for; SIGTERM with a run in
// flight lets it finish (exit 0), refuses new runs with 503 (exit 75),
// and the server exits 0.
func TestServeRetryAndDrain(t *testing.T) {
	testutil.RequireRoot(t, "runs as root, as CI's")
	s := startServe(t, filepath.Join(t.TempDir(), "psych.sock"), "--max-runs", "1", "--queue", "0")
	long, out, errOut := hostRun(s.sock, "import time\ntime.sleep(3)\n'done'")
	testutil.WaitFor(t, testutil.Scaled(20*time.Second), "the long run in flight", func() bool { return s.inFlight(t) == 1 })

	second, _, e2 := hostRun(s.sock, "1")
	if code := exitOf(second); code != 75 || !strings.Contains(e2.String(), "capacity_exhausted") {
		t.Errorf("a run past the bounds: exit %d, %s; want 75", code, e2)
	}

	s.cmd.Process.Signal(syscall.SIGTERM)
	testutil.WaitFor(t, testutil.Scaled(10*time.Second), "draining", func() bool {
		resp, err := s.http.Get("http://psych/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusServiceUnavailable
	})
	third, _, e3 := hostRun(s.sock, "1")
	if code := exitOf(third); code != 75 || !strings.Contains(e3.String(), "draining") {
		t.Errorf("a run while draining: exit %d, %s; want 75", code, e3)
	}
	if code := exitOf(long); code != 0 || !strings.Contains(out.String(), `"value":"done"`) {
		t.Errorf("the run in flight: exit %d, %s %s", code, out, errOut)
	}
	if code := s.exitCode(t); code != 0 {
		t.Errorf("psych serve exited %d after SIGTERM\n%s", code, s.stderr)
	}
}

// TestServeKilled: a server SIGKILLed with a run in flight leaves its
// client with an error (exit 1, never a Result); the next server on the
// same socket replaces the stale one and serves. A second server on a
// live socket exits 2 saying so.
func TestServeKilled(t *testing.T) {
	testutil.RequireRoot(t, "runs as root, as CI's")
	sock := filepath.Join(t.TempDir(), "psych.sock")
	s := startServe(t, sock)

	second := exec.Command(psychBin, "serve", "--listen", "unix://"+sock, "--python", testPython())
	msg, err := second.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(string(msg), "in use") {
		t.Errorf("a second server on a live socket: %v, %s; want exit 2", err, msg)
	}

	run, out, errOut := hostRun(sock, "import time\ntime.sleep(30)")
	testutil.WaitFor(t, testutil.Scaled(20*time.Second), "the run in flight", func() bool { return s.inFlight(t) == 1 })
	s.cmd.Process.Signal(syscall.SIGKILL)
	if code := exitOf(run); code != 1 || out.Len() != 0 {
		t.Errorf("a run whose server was killed: exit %d, stdout %q, stderr %s; want 1 and no Result", code, out, errOut)
	}
	<-s.done

	next := startServe(t, sock)
	cmd, out, errOut := hostRun(sock, "6 * 7")
	if code := exitOf(cmd); code != 0 || !strings.Contains(out.String(), `"value":42`) {
		t.Errorf("the next server: exit %d, %s %s", code, out, errOut)
	}
	next.cmd.Process.Signal(syscall.SIGTERM)
	if code := next.exitCode(t); code != 0 {
		t.Errorf("exit %d\n%s", code, next.stderr)
	}
}

// TestServeDoctor: `psych serve --doctor` runs psych doctor's checks
// before it becomes ready and serves them in GET /v1/info as doctor (this
// host passes them: no FAIL, the isolated run among them); without the
// flag, doctor is null.
func TestServeDoctor(t *testing.T) {
	testutil.RequireRoot(t, "runs as root, as CI's")
	for _, withDoctor := range []bool{true, false} {
		var args []string
		if withDoctor {
			args = []string{"--doctor"}
		}
		s := startServe(t, filepath.Join(t.TempDir(), "psych.sock"), args...)
		resp, err := s.http.Get("http://psych/v1/info")
		if err != nil {
			t.Fatal(err)
		}
		var info struct {
			Doctor *api.Doctor `json:"doctor"`
		}
		err = json.NewDecoder(resp.Body).Decode(&info)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if !withDoctor {
			if info.Doctor != nil {
				t.Errorf("without --doctor, info's doctor is %+v", info.Doctor)
			}
			continue
		}
		if info.Doctor == nil {
			t.Fatal("with --doctor, info's doctor is null")
		}
		names := map[string]string{}
		for _, c := range info.Doctor.Checks {
			names[c.Name] = c.Status
		}
		if info.Doctor.Failed || names["userns"] == "" || names["run"] != "OK" {
			t.Fatalf("info's doctor %+v: want this host's checks, none failed, the isolated run OK", info.Doctor)
		}
	}
}
