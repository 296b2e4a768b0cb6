package cpython

import (
	"bufio"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"
)

// marker starts every line runner.py reports.
const marker = "\x1ePSYCHCPY "

// The outcomes runner.py reports, and the two the harness adds.
const (
	outOK    = "ok"
	outFail  = "fail"
	outError = "error"
	outSkip  = "skip"
	outXFail = "xfail"
	outUPass = "upass"
)

// failing reports whether an outcome counts as a failure: what "behaves as
// on the host" compares.
func failing(o string) bool { return o == outFail || o == outError || o == outUPass }

// outcome is one test id's result.
type outcome struct {
	Outcome string `json:"outcome"`
	Detail  string `json:"detail"`
}

// report is one run of one module on one side.
type report struct {
	Side     string
	Module   string
	Facts    map[string]any
	Tests    map[string]outcome
	State    string // libregrtest's verdict; "" when the run did not finish
	Finished bool
	// Crash says how a run that did not finish ended (the sandbox's
	// failure, the exit status); InFlight is the test it was in.
	Crash    string
	InFlight string
	Duration time.Duration
	Notes    []string
	Stdout   string
	Stderr   string
}

// moduleID is the pseudo test id of what happened to a module outside its
// tests: an import error, a loader error, a module-level skip, a crash.
func moduleID(module string) string { return module + " (module)" }

// parseReport reads runner.py's lines from stdout. crash describes how the
// process ended when that was not a clean exit ("" otherwise).
func parseReport(side, module, stdout, stderr, crash string) *report {
	r := &report{Side: side, Module: module, Tests: map[string]outcome{}, Stdout: stdout, Stderr: stderr}
	var started string
	sc := bufio.NewScanner(strings.NewReader(stdout))
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for sc.Scan() {
		line := sc.Text()
		i := strings.Index(line, marker)
		if i < 0 {
			continue
		}
		var ev struct {
			T       string         `json:"t"`
			ID      string         `json:"id"`
			Outcome string         `json:"outcome"`
			Detail  string         `json:"detail"`
			State   string         `json:"state"`
			Summary map[string]any `json:"summary"`
		}
		if err := json.Unmarshal([]byte(line[i+len(marker):]), &ev); err != nil {
			r.Notes = append(r.Notes, fmt.Sprintf("unparsable report line: %.120q", line))
			continue
		}
		switch ev.T {
		case "facts":
			if err := json.Unmarshal([]byte(line[i+len(marker):]), &r.Facts); err != nil {
				r.Notes = append(r.Notes, "unparsable facts")
			}
		case "start":
			started = ev.ID
		case "result":
			r.Tests[ev.ID] = outcome{ev.Outcome, ev.Detail}
			if ev.ID == started {
				started = ""
			}
		case "end":
			r.Finished = true
			r.State = ev.State
			started = ""
		}
	}
	if !r.Finished {
		r.InFlight = started
		if crash == "" {
			crash = "the runner exited without its end report"
		}
		r.Crash = crash
		how := "the run ended inside this test: " + crash + "\n" + tail(stderr, 1500)
		if started != "" {
			if _, ok := r.Tests[started]; !ok {
				r.Tests[started] = outcome{outError, how}
			}
		}
		r.Tests[moduleID(module)] = outcome{outError, "did not finish: " + how}
		return r
	}
	anyFailing := false
	for _, o := range r.Tests {
		anyFailing = anyFailing || failing(o.Outcome)
	}
	switch r.State {
	case "Passed", "EnvChanged":
	case "Skipped", "ResourceDenied":
		if len(r.Tests) == 0 {
			r.Tests[moduleID(module)] = outcome{outSkip, moduleSkipReason(stdout, module)}
		}
	default: // Failed, UncaughtException, DidNotRun, Interrupted, NoResult
		if !anyFailing {
			r.Tests[moduleID(module)] = outcome{outError, "libregrtest: " + r.State + "\n" + tail(stderr, 2000)}
		}
	}
	if r.State == "EnvChanged" {
		r.Notes = append(r.Notes, "libregrtest: environment changed")
	}
	return r
}

var skippedLine = regexp.MustCompile(`(?m)^(\S+) skipped -- (.*)$`)

func moduleSkipReason(stdout, module string) string {
	for _, m := range skippedLine.FindAllStringSubmatch(stdout, -1) {
		if m[1] == module {
			return m[2]
		}
	}
	return "module skipped"
}

func tail(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}

func (r *report) failingIDs() []string {
	var ids []string
	for id, o := range r.Tests {
		if failing(o.Outcome) {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	return ids
}

// Kinds of difference, as differences.txt names them, seen from the sandbox.
const (
	kindFail = "fail" // fails or errors in the sandbox, not on the host
	kindPass = "pass" // fails or errors on the host, not in the sandbox
	kindSkip = "skip" // skipped in the sandbox, not on the host
	kindRun  = "run"  // skipped on the host, not in the sandbox
)

// difference is one test id whose outcome differs between host and sandbox.
type difference struct {
	ID         string
	Kind       string
	Host, Sbx  outcome
	hostAbsent bool
	sbxAbsent  bool
	// Flaky: it did not reproduce when run again alone on both sides.
	Flaky  bool
	Rerun  string // what the rerun saw, for the notes
	Reason string // the differences.txt row that explains it
}

// diff compares a sandbox report with the host's.
func diff(host, sbx *report) []*difference {
	ids := map[string]bool{}
	for id := range host.Tests {
		ids[id] = true
	}
	for id := range sbx.Tests {
		ids[id] = true
	}
	// A side whose module failed as a whole (an import error, a crash) ran
	// none or only some of the tests: the other side's skips of tests it
	// never reached are no difference of their own.
	hostBroken := failing(host.Tests[moduleID(host.Module)].Outcome)
	sbxBroken := failing(sbx.Tests[moduleID(sbx.Module)].Outcome)
	var out []*difference
	for id := range ids {
		h, hok := host.Tests[id]
		s, sok := sbx.Tests[id]
		d := &difference{ID: id, Host: h, Sbx: s, hostAbsent: !hok, sbxAbsent: !sok}
		if (!sok && sbxBroken && !failing(h.Outcome)) || (!hok && hostBroken && !failing(s.Outcome)) {
			continue
		}
		switch {
		case failing(s.Outcome) && !failing(h.Outcome):
			d.Kind = kindFail
		case failing(h.Outcome) && !failing(s.Outcome):
			d.Kind = kindPass
		case failing(h.Outcome) && failing(s.Outcome):
			continue
		case s.Outcome == outSkip && h.Outcome != outSkip:
			d.Kind = kindSkip
		case h.Outcome == outSkip && s.Outcome != outSkip:
			d.Kind = kindRun
		default:
			continue
		}
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Kind != out[j].Kind {
			return out[i].Kind < out[j].Kind
		}
		return out[i].ID < out[j].ID
	})
	return out
}

var fixtureID = regexp.MustCompile(`^(\w+) \(([\w.]+)\)$`)

// rerunPattern is the libregrtest -m pattern that runs id again: the id
// itself, or for a class or module fixture (setUpClass (pkg.mod.Class)) every
// test under it. It returns "" for ids that cannot be run alone.
func rerunPattern(module, id string) string {
	if strings.HasPrefix(id, module+" (") {
		return ""
	}
	if m := fixtureID.FindStringSubmatch(id); m != nil {
		return m[2] + ".*"
	}
	if strings.ContainsAny(id, " *?[") {
		return ""
	}
	return id
}

// counts says how many failing and skipped ids a report has.
func (r *report) counts() (fail, skip, total int) {
	for _, o := range r.Tests {
		switch {
		case failing(o.Outcome):
			fail++
		case o.Outcome == outSkip:
			skip++
		}
	}
	return fail, skip, len(r.Tests)
}

// factDiffs lists the facts (identity, limits, signals) that differ
// between two reports, "key: host → sandbox".
func factDiffs(host, sbx *report) []string {
	if host.Facts == nil || sbx.Facts == nil {
		return nil
	}
	var keys []string
	for k := range host.Facts {
		keys = append(keys, k)
	}
	for k := range sbx.Facts {
		if _, ok := host.Facts[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var out []string
	for _, k := range keys {
		switch k {
		case "t", "cwd", "mounts":
			continue
		}
		h, s := host.Facts[k], sbx.Facts[k]
		if hm, ok := h.(map[string]any); ok {
			sm, _ := s.(map[string]any)
			var sub []string
			for kk := range hm {
				sub = append(sub, kk)
			}
			for kk := range sm {
				if _, ok := hm[kk]; !ok {
					sub = append(sub, kk)
				}
			}
			sort.Strings(sub)
			sub = slices.Compact(sub)
			for _, kk := range sub {
				hj, _ := json.Marshal(hm[kk])
				sj, _ := json.Marshal(sm[kk])
				if string(hj) != string(sj) {
					out = append(out, fmt.Sprintf("%s.%s: %s → %s", k, kk, hj, sj))
				}
			}
			continue
		}
		hj, _ := json.Marshal(h)
		sj, _ := json.Marshal(s)
		if string(hj) != string(sj) {
			out = append(out, fmt.Sprintf("%s: %s → %s", k, hj, sj))
		}
	}
	return out
}

func reportLines(lines ...string) string {
	var b strings.Builder
	for _, l := range lines {
		b.WriteString("noise from a test\n" + marker + l + "\n")
	}
	return b.String()
}

func TestParseAndDiff(t *testing.T) {
	host := parseReport("host", "test_x", reportLines(
		`{"t": "facts", "uid": 1000, "rlimits": {"nofile": [1024, 4096]}}`,
		`{"t": "start", "id": "test.test_x.A.test_a"}`,
		`{"t": "result", "id": "test.test_x.A.test_a", "outcome": "ok", "detail": ""}`,
		`{"t": "result", "id": "test.test_x.A.test_b", "outcome": "fail", "detail": "AssertionError"}`,
		`{"t": "result", "id": "test.test_x.A.test_c", "outcome": "ok", "detail": ""}`,
		`{"t": "result", "id": "test.test_x.A.test_d", "outcome": "skip", "detail": "needs root"}`,
		`{"t": "end", "state": "Failed", "summary": {}}`), "", "")
	sbx := parseReport("subprocess", "test_x", reportLines(
		`{"t": "facts", "uid": 1000, "rlimits": {"nofile": [1024, 1024]}}`,
		`{"t": "result", "id": "test.test_x.A.test_a", "outcome": "error", "detail": "OSError: [Errno 1]"}`,
		`{"t": "result", "id": "test.test_x.A.test_b", "outcome": "fail", "detail": "AssertionError"}`,
		`{"t": "result", "id": "test.test_x.A.test_c", "outcome": "skip", "detail": "no network"}`,
		`{"t": "result", "id": "test.test_x.A.test_d", "outcome": "ok", "detail": ""}`,
		`{"t": "result", "id": "setUpClass (test.test_x.B)", "outcome": "error", "detail": "PermissionError"}`,
		`{"t": "end", "state": "Failed", "summary": {}}`), "", "")
	if !host.Finished || !sbx.Finished || len(host.Tests) != 4 {
		t.Fatalf("parse: %+v", host)
	}
	got := map[string]string{}
	for _, d := range diff(host, sbx) {
		got[d.ID] = d.Kind
	}
	want := map[string]string{"test.test_x.A.test_a": kindFail, "test.test_x.A.test_c": kindSkip,
		"test.test_x.A.test_d": kindRun, "setUpClass (test.test_x.B)": kindFail}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("diff: %v, want %v", got, want)
	}
	if fd := factDiffs(host, sbx); len(fd) != 1 || !strings.HasPrefix(fd[0], "rlimits.nofile") {
		t.Fatalf("facts: %v", fd)
	}
	if p := rerunPattern("test_x", "setUpClass (test.test_x.B)"); p != "test.test_x.B.*" {
		t.Fatalf("rerun pattern %q", p)
	}
	if p := rerunPattern("test_x", moduleID("test_x")); p != "" {
		t.Fatalf("rerun pattern %q", p)
	}
}

func TestDiffBrokenModule(t *testing.T) {
	host := parseReport("host", "test_x", reportLines(
		`{"t": "result", "id": "test.test_x.A.test_a", "outcome": "skip", "detail": "no bz2"}`,
		`{"t": "result", "id": "test.test_x.A.test_b", "outcome": "ok", "detail": ""}`,
		`{"t": "end", "state": "Passed", "summary": {}}`), "", "")
	sbx := parseReport("subprocess", "test_x", reportLines(`{"t": "end", "state": "UncaughtException", "summary": {}}`), "KeyError", "")
	ds := diff(host, sbx)
	if len(ds) != 1 || ds[0].ID != moduleID("test_x") || ds[0].Kind != kindFail {
		t.Fatalf("diff of a module broken in the sandbox: %+v", ds)
	}
}

func TestParseCrash(t *testing.T) {
	r := parseReport("subprocess", "test_x", reportLines(
		`{"t": "start", "id": "test.test_x.A.test_a"}`,
		`{"t": "result", "id": "test.test_x.A.test_a", "outcome": "ok", "detail": ""}`,
		`{"t": "start", "id": "test.test_x.A.test_b"}`), "Fatal Python error: Segmentation fault", "Signal: SIGSEGV")
	if r.Finished || r.InFlight != "test.test_x.A.test_b" || r.Tests["test.test_x.A.test_b"].Outcome != outError ||
		r.Tests[moduleID("test_x")].Outcome != outError {
		t.Fatalf("crash: %+v", r)
	}
	r = parseReport("host", "test_x", reportLines(`{"t": "end", "state": "Skipped", "summary": {}}`)+"test_x skipped -- no tty\n", "", "")
	if o := r.Tests[moduleID("test_x")]; o.Outcome != outSkip || o.Detail != "no tty" {
		t.Fatalf("module skip: %+v", r.Tests)
	}
	r = parseReport("host", "test_x", reportLines(`{"t": "end", "state": "UncaughtException", "summary": {}}`), "ImportError: x", "")
	if o := r.Tests[moduleID("test_x")]; o.Outcome != outError {
		t.Fatalf("module error: %+v", r.Tests)
	}
}
