package cli

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/psych-runtime/psych/api"
	"github.com/psych-runtime/psych/internal/testutil"
)

// TestRunOutputLive: psych run without --json passes the program's output
// through as it comes: its first line is on psych's stdout while the
// program is still running (it waits for SIGINT, which comes only after).
func TestRunOutputLive(t *testing.T) {
	cmd := exec.Command(psychBin, "run", "--python", testPython(), "--wall-seconds", "60", "-")
	cmd.Stdin = strings.NewReader("import sys, time\nprint('first', flush=True)\nprint('second', file=sys.stderr, flush=True)\ntime.sleep(60)")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	errPipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 2)
	for _, p := range []io.Reader{out, errPipe} {
		go func() {
			r := bufio.NewReader(p)
			s, _ := r.ReadString('\n')
			lines <- s
			io.Copy(io.Discard, r)
		}()
	}
	var got []string
	for len(got) < 2 {
		select {
		case s := <-lines:
			got = append(got, s)
		case <-time.After(testutil.Scaled(30 * time.Second)):
			t.Fatalf("lines %q while the program runs, want its stdout and its stderr line", got)
		}
	}
	cmd.Process.Signal(syscall.SIGINT)
	cmd.Wait()
	slices.Sort(got)
	if got[0] != "first\n" || got[1] != "second\n" {
		t.Errorf("first lines %q, want the program's own, as they came", got)
	}
}

// eventsSession runs psych with args, writes request, answers each call
// and approval event with answer, and returns the events and the exit
// code.
func eventsSession(t *testing.T, request string, answer func(ev *api.Event) any, args ...string) ([]*api.Event, int) {
	t.Helper()
	cmd := exec.Command(psychBin, args...)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var errOut bytes.Buffer
	cmd.Stderr = &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	io.WriteString(in, request)
	var evs []*api.Event
	r := api.NewEventReader(out, 0)
	for {
		ev, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Errorf("read the events: %v (stderr %s)", err, errOut.String())
			break
		}
		evs = append(evs, ev)
		if ev.Event == api.EventCall || ev.Event == api.EventApproval {
			b, _ := json.Marshal(answer(ev))
			in.Write(append(b, '\n'))
		}
	}
	in.Close()
	err = cmd.Wait()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return evs, code
}

func names(evs []*api.Event) string {
	var s []string
	for _, ev := range evs {
		s = append(s, ev.Event)
	}
	return strings.Join(s, ",")
}

// TestRunEvents: psych run --events runs the request from stdin and
// writes the API's events: started first, the output as it comes (its
// data adding up to the Result's), a call event for the request's own
// tool and an approval for its destructive one, each answered on stdin
// and reaching the program, and exactly one terminal result; exit 0.
func TestRunEvents(t *testing.T) {
	req := `{"code":"import sys\nprint('out')\nprint('err', file=sys.stderr)\n[greet('bob'), remove(path='a')]",` +
		`"bindings":[{"name":"greet","params":["name"],"parameters":{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}},` +
		`{"name":"remove","params":["path"],"destructive":true}]}` + "\n"
	approvals := 0
	evs, code := eventsSession(t, req, func(ev *api.Event) any {
		if ev.Event == api.EventApproval {
			approvals++
			return api.Answer{CallID: ev.CallID, Approve: ptr(true), Reason: "test"}
		}
		var a map[string]any
		json.Unmarshal(ev.Args, &a)
		if ev.Tool == "greet" {
			return api.Answer{CallID: ev.CallID, Value: json.RawMessage(`"hello ` + a["name"].(string) + `"`)}
		}
		return api.Answer{CallID: ev.CallID, Value: json.RawMessage(`"removed"`)}
	}, "run", "--events", "--python", testPython())
	if code != 0 || len(evs) == 0 {
		t.Fatalf("exit %d, events %s", code, names(evs))
	}
	if evs[0].Event != api.EventStarted || evs[0].ID == "" || evs[0].Warm == nil {
		t.Fatalf("first event %+v, want started with id and warm", evs[0])
	}
	last := evs[len(evs)-1]
	if last.Event != api.EventResult || last.Result == nil || last.Result.ID != evs[0].ID {
		t.Fatalf("events %s: want a result of run %s last", names(evs), evs[0].ID)
	}
	var stdout, stderr string
	for _, ev := range evs {
		switch ev.Event {
		case api.EventStdout:
			stdout += ev.Data
		case api.EventStderr:
			stderr += ev.Data
		}
	}
	res := last.Result
	if res.Failure != nil || string(res.Value) != `["hello bob","removed"]` || approvals != 1 {
		t.Fatalf("value %s failure %+v, %d approvals", res.Value, res.Failure, approvals)
	}
	if stdout != res.Stdout || stderr != res.Stderr || stdout != "out\n" || stderr != "err\n" {
		t.Fatalf("output events %q %q, result %q %q", stdout, stderr, res.Stdout, res.Stderr)
	}

	// Denied: the program's call fails (BindingError), the run goes on.
	evs, code = eventsSession(t, strings.Replace(req, `[greet('bob'), remove(path='a')]`, `try:\n    remove('a')\nexcept Exception as e:\n    r = type(e).__name__\nr`, 1), func(ev *api.Event) any {
		if ev.Event == api.EventApproval {
			return api.Answer{CallID: ev.CallID, Approve: ptr(false), Reason: "no"}
		}
		t.Errorf("a call event for a denied call: %+v", ev)
		return api.Answer{CallID: ev.CallID, Value: json.RawMessage(`null`)}
	}, "run", "--events", "--python", testPython())
	if code != 0 || evs[len(evs)-1].Result == nil || string(evs[len(evs)-1].Result.Value) != `"BindingError"` {
		t.Fatalf("denied: exit %d, events %s", code, names(evs))
	}
}

func ptr[T any](v T) *T { return &v }

// TestRunEventsRefused: a request the embedded transport refuses is one
// error event (exit 0: a terminal event was written): an unknown field, a
// duplicate key, a bad binding, no request at all; a usage error is exit 2
// with no event; a reader that goes away is exit 1.
func TestRunEventsRefused(t *testing.T) {
	for _, req := range []string{`{"code":"1","nope":1}`, `{"code":"1","code":"2"}`, `{"code":"1","bindings":[{"name":"run_code"}]}`, ``, `{"code":"1","limits":{"cpu_seconds":-1}}`} {
		evs, code := eventsSession(t, req+"\n", nil, "run", "--events", "--python", testPython())
		if code != 0 || len(evs) != 1 || evs[0].Event != api.EventError || evs[0].Error.Code != api.CodeInvalidRequest {
			t.Errorf("request %q: exit %d, events %+v", req, code, evs)
		}
	}
	if _, _, code := cli(t, "", "run", "--events", "--python", testPython(), "-"); code != 2 {
		t.Errorf("--events with a FILE: exit %d, want 2", code)
	}
	if _, _, code := cli(t, "", "run", "--events", "--json"); code != 2 {
		t.Errorf("--events --json: exit %d, want 2", code)
	}
	// The client reads nothing and closes its end: no terminal event
	// could be written.
	cmd := exec.Command(psychBin, "run", "--events", "--python", testPython())
	cmd.Stdin = strings.NewReader(`{"code":"print('x' * 100000)"}` + "\n")
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	cmd.Stdout = w
	err = cmd.Run()
	w.Close()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Errorf("stdout closed: %v, want exit 1", err)
	}
}

// TestCallEvents: psych call --events calls one tool through the tool
// path: the schema refuses a bad argument (invalid, no call event), a
// denied approval is denied (no call event), an approved one is called,
// and run_code's program calls the request's tool as a binding.
func TestCallEvents(t *testing.T) {
	tool := `{"name":"rm","params":["p"],"parameters":{"type":"object","properties":{"p":{"type":"string"}},"required":["p"]},"destructive":true}`
	calls := 0
	answer := func(approve bool) func(*api.Event) any {
		return func(ev *api.Event) any {
			if ev.Event == api.EventApproval {
				return api.Answer{CallID: ev.CallID, Approve: &approve}
			}
			calls++
			return api.Answer{CallID: ev.CallID, Value: json.RawMessage(`"gone"`)}
		}
	}
	outcome := func(evs []*api.Event, code int) *api.Outcome {
		t.Helper()
		if code != 0 || len(evs) < 2 || evs[0].Event != api.EventStarted || evs[len(evs)-1].Outcome == nil {
			t.Fatalf("exit %d, events %s", code, names(evs))
		}
		return evs[len(evs)-1].Outcome
	}
	o := outcome(eventsSession(t, `{"tool":"rm","args":{"p":3},"bindings":[`+tool+`]}`+"\n", answer(true), "call", "--events"))
	if o.Kind != "invalid" || calls != 0 {
		t.Errorf("a bad argument: %+v, %d calls", o, calls)
	}
	o = outcome(eventsSession(t, `{"tool":"rm","args":{"p":"a"},"bindings":[`+tool+`]}`+"\n", answer(false), "call", "--events"))
	if o.Kind != "denied" || o.Decision.Verdict != "ask" || calls != 0 {
		t.Errorf("denied: %+v, %d calls", o, calls)
	}
	o = outcome(eventsSession(t, `{"tool":"rm","args":{"p":"a"},"bindings":[`+tool+`]}`+"\n", answer(true), "call", "--events"))
	if o.Kind != "ok" || string(o.Value) != `"gone"` || calls != 1 {
		t.Errorf("approved: %+v, %d calls", o, calls)
	}
	o = outcome(eventsSession(t, `{"tool":"run_code","args":{"code":"rm('b')"},"bindings":[`+tool+`]}`+"\n", answer(true), "call", "--events", "--python", testPython()))
	var res struct {
		Value json.RawMessage `json:"value"`
	}
	json.Unmarshal(o.Value, &res)
	if o.Kind != "ok" || string(res.Value) != `"gone"` || calls != 2 {
		t.Errorf("run_code: %+v, %d calls", o, calls)
	}
}

// TestRunAsFlags: --run-as sets the outside ids a run has (its uid_map
// shows them); uid 0, a malformed value and --extra-run-arg without the
// container backend are usage errors.
func TestRunAsFlags(t *testing.T) {
	testutil.RequireRoot(t, "only root can run as another uid")
	res := runJSON(t, "1", "--run-as", "43210:43211")
	if res.Isolation == nil || !strings.Contains(res.Isolation.UIDMap, " 43210 ") || !strings.Contains(res.Isolation.GIDMap, " 43211 ") {
		t.Fatalf("--run-as 43210:43211: isolation %+v", res.Isolation)
	}
	for _, args := range [][]string{{"--run-as", "0:0"}, {"--run-as", "x:1"}, {"--run-as", "1"}, {"--extra-run-arg", "--cpus=1"}} {
		if _, errOut, code := cli(t, "1", append(append([]string{"run", "--python", testPython()}, args...), "-")...); code != 2 {
			t.Errorf("%v: exit %d, want 2 (%s)", args, code, errOut)
		}
	}
}
