//go:build linux && cgo

package cpython

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/psych-runtime/psych/internal/testutil"
	"github.com/psych-runtime/psych/sandbox"
	"github.com/psych-runtime/psych/sandbox/container"
	"github.com/psych-runtime/psych/sandbox/subprocess"
)

//go:embed runner.py
var runnerSource string

// ciModules are the modules CI runs (scripts/test.sh); allModules the
// issue's whole list (make cpython-suite).
var (
	ciModules  = []string{"test_os", "test_subprocess", "test_socket", "test_shutil", "test_tarfile", "test_pty", "test_asyncio", "test_signal"}
	allModules = []string{
		"test_os", "test_posix", "test_threading", "test_subprocess", "test_signal", "test_select",
		"test_selectors", "test_mmap", "test_tempfile", "test_shutil", "test_json", "test_re",
		"test_unicode", "test_math", "test_random", "test_datetime", "test_time", "test_socket",
		"test_multiprocessing_fork", "test_multiprocessing_forkserver", "test_asyncio", "test_zlib",
		"test_pathlib", "test_io", "test_fileio", "test_resource", "test_pty", "test_fcntl",
		"test_faulthandler", "test_ctypes", "test_sys", "test_builtin", "test_concurrent_futures",
		"test_logging", "test_uuid", "test_hashlib", "test_zipfile", "test_tarfile",
	}
)

// expectedSeconds orders the jobs longest first (measured on the host; a
// module not listed counts as 10 s).
var expectedSeconds = map[string]float64{
	"test_multiprocessing_forkserver": 420, "test_multiprocessing_fork": 300, "test_concurrent_futures": 200,
	"test_asyncio": 100, "test_io": 90, "test_signal": 52, "test_threading": 45, "test_logging": 40,
	"test_socket": 27, "test_subprocess": 24, "test_zipfile": 30, "test_time": 20, "test_faulthandler": 20,
	"test_math": 15, "test_select": 12, "test_selectors": 15, "test_datetime": 15, "test_unicode": 10,
}

// limits are the generous limits. The sandbox's /tmp (also HOME and
// TMPDIR) is a tmpfs of sandboxTmpBytes and sandboxTmpInodes, where the
// host's is a directory on its disk: no limit of the list covers it,
// and its defaults (64 MiB, 4096 inodes) are sized for one model-written
// program, not for a test suite.
var limits = sandbox.Limits{
	CPUSeconds:        1800,
	WallSeconds:       900,
	AddressSpaceBytes: 8 << 30,
	MemoryBytes:       4 << 30,
	ProcessCount:      512,
	FileSizeBytes:     8 << 30,
}

// hostSoftRlimits are the soft limits the host baseline's runner lowers
// itself to: RLIMIT_NOFILE 1024, the kernel's default and what an
// unprivileged login gets on Debian (systemd's DefaultLimitNOFILE=1024:524288),
// where this harness's own root parent may have more (20000 on CI's
// machine), which skips test_subprocess's test_no_leaking ("failed to reach
// the file descriptor limit").
var hostSoftRlimits = map[string]int{"nofile": 1024}

const (
	sandboxTmpBytes   = 2 << 30
	sandboxTmpInodes  = 1 << 20
	maxOutputBytes    = 256 << 20
	defaultHostUID    = 1000
	defaultTestDir    = "/usr/lib/python3.11/test"
	defaultPython     = "/usr/bin/python3"
	sideHost          = "host"
	sideSubprocess    = "subprocess"
	sideContainerd    = "containerd"
	maxRerunPatterns  = 60
	defaultJobs       = 3
	hostEnvPath       = "/usr/bin:/usr/local/bin:/usr/bin:/bin" // the sandbox's PATH for /usr/bin/python3
	resultsFileHeader = "# CPython's test suite in the sandbox: results\n\n"
)

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// program is runner.py with the call that runs config.
func program(config map[string]any) string {
	b, err := json.Marshal(config) // only strings and lists of them: JSON is a Python literal
	if err != nil {
		panic(err)
	}
	return runnerSource + "\n(main(" + string(b) + ") if __name__ == \"__main__\" else None)\n"
}

// suite is one TestCPythonSuite run.
type suite struct {
	t        *testing.T
	python   string
	hostUID  int
	regrArgs []string
	base     string // the host runs' directories
	logs     string // PSYCH_CPYTHON_LOGS: raw output of every run
	sandbox  map[string]sandbox.Sandbox
	mu       sync.Mutex
	timings  []timing
}

type timing struct {
	side, module string
	rerun        bool
	d            time.Duration
}

// job is one run of one module on one side.
type job struct {
	side, module string
	match        []string // -m patterns: a rerun
	out          *report
}

func (s *suite) config(side, module string, match []string) map[string]any {
	c := map[string]any{"module": module, "regrtest_args": s.regrArgs, "match": append([]string{}, match...)}
	if side == sideHost {
		c["soft_rlimits"] = hostSoftRlimits
	}
	return c
}

func (s *suite) run(ctx context.Context, j *job) {
	start := time.Now()
	prog := program(s.config(j.side, j.module, j.match))
	if j.side == sideHost {
		j.out = s.runHost(ctx, j.module, prog)
	} else {
		j.out = s.runSandbox(ctx, j.side, j.module, prog)
	}
	j.out.Duration = time.Since(start)
	s.mu.Lock()
	s.timings = append(s.timings, timing{j.side, j.module, j.match != nil, j.out.Duration})
	s.mu.Unlock()
	if s.logs != "" {
		name := j.side + "-" + j.module
		if j.match != nil {
			name += "-rerun"
		}
		_ = os.WriteFile(filepath.Join(s.logs, name+".stdout"), []byte(j.out.Stdout), 0o644)
		_ = os.WriteFile(filepath.Join(s.logs, name+".stderr"), []byte(j.out.Stderr), 0o644)
	}
	s.t.Logf("%-10s %-32s %6.1fs  state %s, %s%s", j.side, j.module+map[bool]string{true: " (rerun)"}[j.match != nil],
		j.out.Duration.Seconds(), orDash(j.out.State), countsText(j.out), map[bool]string{true: ", CRASHED: " + j.out.Crash}[!j.out.Finished])
	j.out.Stdout, j.out.Stderr = "", "" // kept in the logs only
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func countsText(r *report) string {
	f, sk, n := r.counts()
	return fmt.Sprintf("%d ids, %d failing, %d skipped", n, f, sk)
}

// runHost runs prog on the host as the unprivileged user, in a fresh
// directory it owns (HOME, TMPDIR, the working directory), with the
// environment the sandbox gives its program and stdin /dev/null.
func (s *suite) runHost(ctx context.Context, module, prog string) *report {
	fail := func(err error) *report {
		s.t.Errorf("host %s: %v", module, err)
		return parseReport(sideHost, module, "", "", err.Error())
	}
	dir, err := os.MkdirTemp(s.base, module+"-")
	if err != nil {
		return fail(err)
	}
	defer os.RemoveAll(dir)
	if err := os.WriteFile(filepath.Join(dir, "prog.py"), []byte(prog), 0o644); err != nil {
		return fail(err)
	}
	if os.Geteuid() == 0 {
		for _, p := range []string{dir, filepath.Join(dir, "prog.py")} {
			if err := os.Chown(p, s.hostUID, s.hostUID); err != nil {
				return fail(err)
			}
		}
	}
	ctx, cancel := context.WithTimeout(ctx, time.Duration(limits.WallSeconds*float64(time.Second)))
	defer cancel()
	cmd := exec.CommandContext(ctx, s.python, "-I", "-B", "prog.py")
	cmd.Dir = dir
	cmd.Env = []string{"HOME=" + dir, "TMPDIR=" + dir, "PATH=" + hostEnvPath, "PYTHONDONTWRITEBYTECODE=1", "MALLOC_ARENA_MAX=2", "LC_ALL=C.UTF-8"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if os.Geteuid() == 0 {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(s.hostUID), Gid: uint32(s.hostUID), Groups: []uint32{}}
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	err = cmd.Run()
	if cmd.Process != nil {
		// What the tests left running in the group: the tree this run started.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	crash := ""
	switch {
	case ctx.Err() != nil:
		crash = fmt.Sprintf("wall clock: killed after %gs", limits.WallSeconds)
	case err != nil:
		crash = err.Error()
	}
	return parseReport(sideHost, module, stdout.String(), stderr.String(), crash)
}

func (s *suite) runSandbox(ctx context.Context, side, module, prog string) *report {
	res, err := s.sandbox[side].Run(ctx, sandbox.Request{Code: prog, Limits: limits})
	if err != nil {
		s.t.Errorf("%s %s: Run: %v", side, module, err)
		return parseReport(side, module, "", "", "Run: "+err.Error())
	}
	crash := ""
	if f := res.Failure; f != nil {
		crash = f.Type + ": " + f.Message
		if f.ExitCode != nil {
			crash += fmt.Sprintf(" (exit %d)", *f.ExitCode)
		}
		if f.Signal != "" {
			crash += " (" + string(f.Signal) + ")"
		}
	}
	if res.LimitHit != "" {
		crash += fmt.Sprintf(" limit_hit %s (%s)", res.LimitHit, res.LimitSource)
	}
	r := parseReport(side, module, res.Stdout, res.Stderr, strings.TrimSpace(crash))
	if res.StdoutTruncated || res.StderrTruncated {
		r.Notes = append(r.Notes, "output truncated")
	}
	if res.Failure != nil && r.Finished {
		r.Notes = append(r.Notes, "program failure after the report: "+strings.TrimSpace(crash))
	}
	return r
}

// pool runs jobs, longest expected first, on n workers.
func (s *suite) pool(ctx context.Context, n int, jobs []*job) {
	sort.SliceStable(jobs, func(a, b int) bool {
		ea, eb := expected(jobs[a]), expected(jobs[b])
		return ea > eb
	})
	ch := make(chan *job)
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range ch {
				s.run(ctx, j)
			}
		}()
	}
	for _, j := range jobs {
		ch <- j
	}
	close(ch)
	wg.Wait()
}

func expected(j *job) float64 {
	e, ok := expectedSeconds[j.module]
	if !ok {
		e = 10
	}
	if j.match != nil {
		e = 5
	}
	if j.side != sideHost {
		e *= 1.1 // a sandbox's start, and its slower file system paths
	}
	return e
}

// TestCPythonSuite runs PSYCH_CPYTHON_MODULES on the host and in the
// sandbox and compares them (see the package doc and README.md).
func TestCPythonSuite(t *testing.T) {
	sel := os.Getenv("PSYCH_CPYTHON_MODULES")
	var modules []string
	switch sel {
	case "":
		t.Skip("PSYCH_CPYTHON_MODULES is not set: scripts/test.sh runs the CI subset (ci), make cpython-suite all")
	case "ci":
		modules = ciModules
	case "all":
		modules = allModules
	default:
		for _, m := range strings.Split(sel, ",") {
			if m = strings.TrimSpace(m); m != "" {
				modules = append(modules, m)
			}
		}
	}
	testDir := envOr("PSYCH_CPYTHON_TESTDIR", defaultTestDir)
	// libregrtest comes with Python's stdlib; the modules come with the
	// testsuite package, without which every module is "not found".
	var missing []string
	if _, err := os.Stat(filepath.Join(testDir, "libregrtest")); err != nil {
		missing = append(missing, "libregrtest")
	}
	for _, m := range modules {
		_, errFile := os.Stat(filepath.Join(testDir, m+".py"))
		_, errDir := os.Stat(filepath.Join(testDir, m))
		if errFile != nil && errDir != nil {
			missing = append(missing, m)
		}
	}
	if len(missing) > 0 {
		if testutil.InCI() {
			t.Fatalf("%s lacks %s (scripts/deps.sh installs libpython3.11-testsuite)", testDir, strings.Join(missing, ", "))
		}
		t.Skipf("%s lacks %s (apt-get install libpython3.11-testsuite)", testDir, strings.Join(missing, ", "))
	}
	rows := loadAllowlist(t)
	s := &suite{
		t:        t,
		python:   envOr("PSYCH_CPYTHON_PYTHON", defaultPython),
		regrArgs: strings.Fields(envOr("PSYCH_CPYTHON_REGRTEST_ARGS", "-v")),
		logs:     os.Getenv("PSYCH_CPYTHON_LOGS"),
		sandbox:  map[string]sandbox.Sandbox{},
	}
	var err error
	if s.hostUID, err = strconv.Atoi(envOr("PSYCH_CPYTHON_HOST_UID", strconv.Itoa(defaultHostUID))); err != nil || s.hostUID == 0 {
		t.Fatalf("PSYCH_CPYTHON_HOST_UID: want a non-zero uid")
	}
	if os.Geteuid() != 0 {
		t.Logf("not root: the host baseline runs as this uid (%d), itself unprivileged", os.Geteuid())
	}
	if s.logs != "" {
		if err := os.MkdirAll(s.logs, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// The host runs' parent: traversable by the unprivileged user, each
	// run's own directory 0700 and theirs.
	if s.base, err = os.MkdirTemp("", "psych-cpython-"); err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(s.base)
	if err := os.Chmod(s.base, 0o711); err != nil {
		t.Fatal(err)
	}

	backends := strings.Split(envOr("PSYCH_CPYTHON_BACKENDS", sideSubprocess+","+sideContainerd), ",")
	var sides []string
	for _, b := range backends {
		switch b = strings.TrimSpace(b); b {
		case sideSubprocess:
			cfg := subprocess.Config{PythonBin: s.python, TmpBytes: sandboxTmpBytes, TmpInodes: sandboxTmpInodes, MaxOutputBytes: maxOutputBytes}
			cfg.AllowSameUID = os.Geteuid() != 0
			sb, err := subprocess.New(cfg)
			if err != nil {
				t.Fatalf("subprocess.New: %v", err)
			}
			s.sandbox[b] = sb
		case sideContainerd:
			if os.Geteuid() != 0 {
				t.Logf("containerd: skipped, the container backend needs a root host")
				continue
			}
			sb, err := container.New(container.Config{Engine: container.Containerd, Image: testutil.Image(),
				TmpBytes: sandboxTmpBytes, TmpInodes: sandboxTmpInodes, MaxOutputBytes: maxOutputBytes})
			if err != nil {
				if !testutil.InCI() && (errors.Is(err, container.ErrEngineUnreachable) || errors.Is(err, container.ErrImageNotFound)) {
					t.Logf("containerd: skipped: %v (scripts/engines.sh start; make image)", err)
					continue
				}
				t.Fatalf("container.New: %v", err)
			}
			defer sb.Close()
			s.sandbox[b] = sb
		case "":
		default:
			t.Fatalf("PSYCH_CPYTHON_BACKENDS: unknown backend %q (subprocess, containerd)", b)
		}
		if s.sandbox[b] != nil {
			sides = append(sides, b)
		}
	}
	jobsN := defaultJobs
	if v := os.Getenv("PSYCH_CPYTHON_JOBS"); v != "" {
		if jobsN, err = strconv.Atoi(v); err != nil || jobsN < 1 {
			t.Fatalf("PSYCH_CPYTHON_JOBS=%q", v)
		}
	}
	ctx := context.Background()
	if d, ok := t.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, d.Add(-30*time.Second))
		defer cancel()
	}

	// 1. Every module on every side.
	t0 := time.Now()
	first := map[string]map[string]*job{} // module → side → job
	var jobs []*job
	for _, m := range modules {
		first[m] = map[string]*job{}
		for _, side := range append([]string{sideHost}, sides...) {
			j := &job{side: side, module: m}
			first[m][side] = j
			jobs = append(jobs, j)
		}
	}
	t.Logf("running %d modules on host, %s: %d jobs, %d at a time (GOMAXPROCS %d)", len(modules), strings.Join(sides, ", "), len(jobs), jobsN, runtime.GOMAXPROCS(0))
	s.pool(ctx, jobsN, jobs)
	firstPass := time.Since(t0)

	// 2. The differences, and a rerun of the failing ones alone, on both
	// sides, to tell a reproducible difference from a flaky test.
	diffs := map[string]map[string][]*difference{}
	var reruns []*job
	hostPatterns := map[string][]string{}
	rerunOf := map[string]map[string]*job{}
	for _, m := range modules {
		diffs[m] = map[string][]*difference{}
		rerunOf[m] = map[string]*job{}
		for _, side := range sides {
			ds := diff(first[m][sideHost].out, first[m][side].out)
			diffs[m][side] = ds
			var pats []string
			for _, d := range ds {
				if d.Kind != kindFail && d.Kind != kindPass {
					continue
				}
				if p := rerunPattern(m, d.ID); p != "" {
					pats = append(pats, p)
				}
			}
			pats = uniq(pats)
			if len(pats) == 0 || len(pats) > maxRerunPatterns {
				continue
			}
			j := &job{side: side, module: m, match: pats}
			rerunOf[m][side] = j
			reruns = append(reruns, j)
			hostPatterns[m] = append(hostPatterns[m], pats...)
		}
		if pats := uniq(hostPatterns[m]); len(pats) > 0 {
			j := &job{side: sideHost, module: m, match: pats}
			rerunOf[m][sideHost] = j
			reruns = append(reruns, j)
		}
	}
	if len(reruns) > 0 {
		t.Logf("rerunning the differing tests alone: %d jobs", len(reruns))
		s.pool(ctx, jobsN, reruns)
	}
	for _, m := range modules {
		hr := rerunOf[m][sideHost]
		for _, side := range sides {
			sr := rerunOf[m][side]
			for _, d := range diffs[m][side] {
				if sr == nil || hr == nil || (d.Kind != kindFail && d.Kind != kindPass) || rerunPattern(m, d.ID) == "" {
					continue
				}
				ho, hok := hr.out.Tests[d.ID]
				so, sok := sr.out.Tests[d.ID]
				d.Rerun = fmt.Sprintf("alone: host %s, %s %s", outcomeOr(ho, hok), side, outcomeOr(so, sok))
				reproduced := (d.Kind == kindFail && failing(so.Outcome) && !failing(ho.Outcome)) ||
					(d.Kind == kindPass && failing(ho.Outcome) && !failing(so.Outcome))
				d.Flaky = !reproduced
			}
		}
	}

	// 3. Each difference against differences.txt.
	var unexplained []string
	for _, m := range modules {
		for _, side := range sides {
			for _, d := range diffs[m][side] {
				if d.Flaky {
					continue
				}
				if r := explain(rows, side, m, d); r != nil {
					d.Reason = fmt.Sprintf("differences.txt:%d: %s", r.Line, r.Reason)
				} else {
					unexplained = append(unexplained, fmt.Sprintf("%s %s: %s %s", side, m, d.Kind, d.ID))
				}
			}
		}
	}
	total := time.Since(t0)

	md := s.results(modules, sides, first, diffs, rows, firstPass, total)
	t.Log("\n" + md)
	if path := os.Getenv("PSYCH_CPYTHON_RESULTS"); path != "" {
		if err := os.WriteFile(path, []byte(md), 0o644); err != nil {
			t.Error(err)
		}
	}
	if len(unexplained) > 0 {
		t.Errorf("%d difference(s) from the host that differences.txt does not explain (details above):\n  %s",
			len(unexplained), strings.Join(unexplained, "\n  "))
	}
}

func outcomeOr(o outcome, ok bool) string {
	if !ok {
		return "absent"
	}
	return o.Outcome
}

func uniq(s []string) []string {
	sort.Strings(s)
	out := s[:0]
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}

// Verdict categories of one module on one backend.
const (
	catIdentical = iota // the same failing ids and the same skips
	catSame             // the same failing ids; skips differ, every one listed
	catListed           // failing ids differ, every difference listed
	catUnlisted         // some difference matches no row of differences.txt
)

// verdict sums up one module on one backend: its text, whether its failing
// ids are the host's, and its category.
func verdict(ds []*difference) (string, bool, int) {
	var fails, skips, flaky, unexplained int
	for _, d := range ds {
		switch {
		case d.Flaky:
			flaky++
		case d.Kind == kindFail || d.Kind == kindPass:
			fails++
			if d.Reason == "" {
				unexplained++
			}
		default:
			skips++
			if d.Reason == "" {
				unexplained++
			}
		}
	}
	var v string
	cat := catIdentical
	switch {
	case fails == 0 && skips == 0:
		v = "same"
	case fails == 0 && unexplained == 0:
		v, cat = fmt.Sprintf("same failures; %d skip(s) differ, listed", skips), catSame
	case fails == 0:
		v, cat = fmt.Sprintf("same failures; **%d skip(s) differ, unlisted**", skips), catUnlisted
	case unexplained == 0:
		v, cat = fmt.Sprintf("differs, listed (%d failing, %d skip)", fails, skips), catListed
	default:
		v, cat = fmt.Sprintf("**DIFFERS** (%d failing, %d skip; %d unlisted)", fails, skips, unexplained), catUnlisted
	}
	if flaky > 0 {
		v += fmt.Sprintf("; %d flaky", flaky)
	}
	return v, fails == 0, cat
}

// results renders the table and every difference in full, as Markdown.
func (s *suite) results(modules, sides []string, first map[string]map[string]*job, diffs map[string]map[string][]*difference,
	rows []*allowRow, firstPass, total time.Duration) string {
	var b strings.Builder
	b.WriteString(resultsFileHeader)
	fmt.Fprintf(&b, "Generated by `make cpython-suite` (TestCPythonSuite, test/cpython) on %s. Interpreter %s, ",
		time.Now().UTC().Format("2006-01-02 15:04 UTC"), s.python)
	fmt.Fprintf(&b, "libregrtest args `%s`; limits cpu %gs, wall %gs, address space %d GiB, memory %d GiB, %d processes, file size %d GiB; sandbox /tmp %d GiB, %d inodes. ",
		strings.Join(s.regrArgs, " "), limits.CPUSeconds, limits.WallSeconds, limits.AddressSpaceBytes>>30, limits.MemoryBytes>>30,
		limits.ProcessCount, limits.FileSizeBytes>>30, sandboxTmpBytes>>30, sandboxTmpInodes)
	fmt.Fprintf(&b, "Host baseline: uid %d, `%s -I -B`, the sandbox's environment. ", s.hostUID, s.python)
	fmt.Fprintf(&b, "A cell is the number of failing or erroring test ids; \"same\" means the same set as the host's.\n\n")

	same := map[string]int{}
	cats := map[string]map[int]int{}
	b.WriteString("| module | host |")
	for _, side := range sides {
		fmt.Fprintf(&b, " %s | %s verdict |", side, side)
	}
	b.WriteString(" notes |\n|---|---|")
	for range sides {
		b.WriteString("---|---|")
	}
	b.WriteString("---|\n")
	for _, m := range modules {
		h := first[m][sideHost].out
		hf, hs, hn := h.counts()
		fmt.Fprintf(&b, "| %s | %d (%d skipped of %d) |", m, hf, hs, hn)
		var notes []string
		notes = append(notes, prefixed("host", h)...)
		for _, side := range sides {
			r := first[m][side].out
			f, sk, n := r.counts()
			v, ok, cat := verdict(diffs[m][side])
			if ok {
				same[side]++
			}
			if cats[side] == nil {
				cats[side] = map[int]int{}
			}
			cats[side][cat]++
			fmt.Fprintf(&b, " %d (%d skipped of %d) | %s |", f, sk, n, v)
			notes = append(notes, prefixed(side, r)...)
		}
		fmt.Fprintf(&b, " %s |\n", strings.Join(notes, "; "))
	}
	b.WriteString("\n")
	for _, side := range sides {
		c := cats[side]
		fmt.Fprintf(&b, "**%s: %d of %d modules behave as on the host** (the same failing and erroring ids; %d of them with the same skips too). "+
			"%d of %d pass the check (every difference listed in differences.txt); modules with a difference it does not list: %d.\n\n",
			side, same[side], len(modules), c[catIdentical], c[catIdentical]+c[catSame]+c[catListed], len(modules), c[catUnlisted])
	}

	b.WriteString("## Differences\n\nKinds, seen from the sandbox: `fail` fails or errors in the sandbox only; `pass` fails on the host only; `skip` skipped in the sandbox only; `run` skipped on the host only. A `fail`/`pass` difference was run again alone on both sides; one that did not reproduce is flaky.\n\n")
	any := false
	for _, m := range modules {
		for _, side := range sides {
			ds := diffs[m][side]
			if len(ds) == 0 {
				continue
			}
			any = true
			fmt.Fprintf(&b, "### %s on %s\n\n", m, side)
			for _, d := range ds {
				status := "**not in differences.txt**"
				switch {
				case d.Flaky:
					status = "flaky (" + d.Rerun + ")"
				case d.Reason != "":
					status = d.Reason
				}
				fmt.Fprintf(&b, "- `%s` **%s** — host: %s; %s: %s — %s\n", d.ID, d.Kind, brief(d.Host, d.hostAbsent), side, brief(d.Sbx, d.sbxAbsent), status)
				if !d.Flaky && d.Rerun != "" {
					fmt.Fprintf(&b, "  - reproduced %s\n", d.Rerun)
				}
				detail := d.Sbx.Detail
				if d.Kind == kindPass || d.Kind == kindRun {
					detail = d.Host.Detail
				}
				if detail != "" && (d.Kind == kindFail || d.Kind == kindPass) {
					fmt.Fprintf(&b, "\n  ```\n%s\n  ```\n", indent(tail(detail, 1200), "  "))
				}
			}
			b.WriteString("\n")
		}
	}
	if !any {
		b.WriteString("None.\n\n")
	}

	b.WriteString("## What differs between the host's process and the sandbox's\n\nFrom the runner's facts (the first module's run), host → sandbox:\n\n")
	if len(modules) > 0 {
		for _, side := range sides {
			fmt.Fprintf(&b, "- %s: %s\n", side, strings.Join(factDiffs(first[modules[0]][sideHost].out, first[modules[0]][side].out), "; "))
		}
	}
	var stale []string
	for _, r := range rows {
		if !r.used {
			stale = append(stale, fmt.Sprintf("differences.txt:%d (%s %s %s)", r.Line, r.Module, r.Kind, r.Pattern))
		}
	}
	if len(stale) > 0 {
		fmt.Fprintf(&b, "\nRows that matched nothing in this run (their module did not run, or the difference is gone): %s\n", strings.Join(stale, ", "))
	}

	b.WriteString("\n## Time\n\n")
	per := map[string]time.Duration{}
	for _, tm := range s.timings {
		per[tm.side] += tm.d
	}
	var parts []string
	for _, side := range append([]string{sideHost}, sides...) {
		parts = append(parts, fmt.Sprintf("%s %.0fs", side, per[side].Seconds()))
	}
	fmt.Fprintf(&b, "Wall: %.0fs in all (first pass %.0fs, then the reruns). Summed run time per side: %s.\n\n",
		total.Seconds(), firstPass.Seconds(), strings.Join(parts, ", "))
	b.WriteString("| module |")
	for _, side := range append([]string{sideHost}, sides...) {
		fmt.Fprintf(&b, " %s |", side)
	}
	b.WriteString("\n|---|")
	for range append([]string{sideHost}, sides...) {
		b.WriteString("---|")
	}
	b.WriteString("\n")
	for _, m := range modules {
		fmt.Fprintf(&b, "| %s |", m)
		for _, side := range append([]string{sideHost}, sides...) {
			fmt.Fprintf(&b, " %.1fs |", first[m][side].out.Duration.Seconds())
		}
		b.WriteString("\n")
	}
	return b.String()
}

func prefixed(side string, r *report) []string {
	var out []string
	if !r.Finished {
		in := ""
		if r.InFlight != "" {
			in = " in " + r.InFlight
		}
		out = append(out, fmt.Sprintf("%s: did not finish%s: %s", side, in, r.Crash))
	}
	for _, n := range r.Notes {
		out = append(out, side+": "+n)
	}
	return out
}

func brief(o outcome, absent bool) string {
	if absent {
		return "not run"
	}
	if o.Outcome == outSkip {
		return "skip (" + firstLine(o.Detail) + ")"
	}
	if failing(o.Outcome) {
		return o.Outcome + " (" + lastLine(o.Detail) + ")"
	}
	return o.Outcome
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return strings.ReplaceAll(s, "|", `\|`)
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndex(s, "\n"); i >= 0 {
		s = s[i+1:]
	}
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return strings.ReplaceAll(s, "|", `\|`)
}

func indent(s, pre string) string {
	return pre + strings.ReplaceAll(s, "\n", "\n"+pre)
}
