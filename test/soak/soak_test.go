//go:build linux && cgo

package soak

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/psych-runtime/psych/cgroups"
	"github.com/psych-runtime/psych/internal/testutil"
	"github.com/psych-runtime/psych/sandbox"
	"github.com/psych-runtime/psych/sandbox/subprocess"
	"github.com/psych-runtime/psych/test/contract"
)

// markerEnv carries the soak's marker into every run (EnvAllowlist), so
// that any process a run leaves behind shows it in /proc/PID/environ.
const markerEnv = "PSYCH_SOAK_MARKER"

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

func scaled(d time.Duration) time.Duration {
	return time.Duration(float64(d) * contract.TimeScale())
}

// newMarker is a fresh token for argv and environments.
var newMarker = testutil.NewMarker

// target is a backend under soak.
type target struct {
	name string
	// open returns a Sandbox whose runs pass the soak marker, and how to
	// close it (nil where the backend has no Close).
	open func(t *testing.T) (sandbox.Sandbox, func() error)
	// leftovers lists what this host's runs left with the backend: run
	// directories, run cgroups, mounts, containers, tasks, snapshots.
	leftovers func(t *testing.T) []string
	// known, where set, picks out of the leftovers those of a known
	// issue, each with why; knownFDs names the extra fds one leaks.
	known    func(left []string) (known map[string]string)
	knownFDs func(extra []string) string
	// clean removes what a known issue left, so that it does not stay on
	// a shared host.
	clean func(left []string)
}

// reportLeftovers fails on every leftover but those of a known issue,
// which it reports as such.
func reportLeftovers(t *testing.T, tg *target, after string, left []string) {
	t.Helper()
	var known map[string]string
	if tg.known != nil {
		known = tg.known(left)
	}
	var knownLeft []string
	byWhy := map[string][]string{}
	for _, l := range left {
		if why, ok := known[l]; ok {
			byWhy[why] = append(byWhy[why], l)
			knownLeft = append(knownLeft, l)
			continue
		}
		t.Errorf("left after %s: %s", after, l)
	}
	reportKnown(t, "left after "+after, byWhy)
	if len(knownLeft) > 0 && tg.clean != nil {
		tg.clean(knownLeft)
	}
}

// reportKnown reports known leftovers, one line per reason.
func reportKnown(t *testing.T, what string, byWhy map[string][]string) {
	t.Helper()
	whys := make([]string, 0, len(byWhy))
	for w := range byWhy {
		whys = append(whys, w)
	}
	sort.Strings(whys)
	for _, w := range whys {
		items := byWhy[w]
		knownIssue(t, "%s: %s: %d items: %.1500s", what, w, len(items), strings.Join(items, "; "))
	}
}

// subprocessTarget is the subprocess backend with its defaults.
func subprocessTarget() *target {
	cfg := func() subprocess.Config {
		return subprocess.Config{PythonBin: testutil.Python(), AllowSameUID: os.Geteuid() != 0, EnvAllowlist: []string{markerEnv}}
	}
	return &target{
		name: "subprocess",
		open: func(t *testing.T) (sandbox.Sandbox, func() error) {
			s, err := subprocess.New(cfg())
			if err != nil {
				t.Fatalf("subprocess.New: %v", err)
			}
			return s, s.Close // a run's removal may end after its result
		},
		leftovers: func(t *testing.T) []string {
			base := "/var/lib/psych/tmp"
			if os.Geteuid() != 0 {
				// subprocess.Config.TmpBase's default for another user.
				base = filepath.Join(os.Getenv("XDG_RUNTIME_DIR"), "psych")
				if cache, err := os.UserCacheDir(); os.Getenv("XDG_RUNTIME_DIR") == "" && err == nil {
					base = filepath.Join(cache, "psych", "runs")
				}
			}
			return subprocessLeftovers(base, cgroups.Config{})
		},
	}
}

// subprocessLeftovers lists what this host left of its subprocess runs:
// run directories under base, run cgroups under the parents cgcfg gives,
// mounts under its run directories.
func subprocessLeftovers(base string, cgcfg cgroups.Config) []string {
	owner := selfOwner()
	out := entriesWithPrefix(base, owner+"-")
	if m, err := cgroups.NewManager(cgcfg); err == nil {
		for _, parent := range m.Parents() {
			out = append(out, cgroupsOf(parent, owner+"-")...)
		}
	}
	return append(out, mountsWith(base+"/"+owner+"-")...)
}

func selfOwner() string {
	o, err := cgroups.SelfOwner()
	if err != nil {
		panic(err)
	}
	return o.String()
}

// entriesWithPrefix lists dir's entries named prefix...
func entriesWithPrefix(dir, prefix string) []string {
	var out []string
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), prefix) {
			out = append(out, filepath.Join(dir, e.Name()))
		}
	}
	return out
}

// cgroupsOf lists the cgroups under parent named prefix..., with the
// processes still in each.
func cgroupsOf(parent, prefix string) []string {
	var out []string
	for _, dir := range entriesWithPrefix(parent, prefix) {
		procs, _ := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
		out = append(out, fmt.Sprintf("cgroup %s (processes: %s)", dir, strings.Fields(string(procs))))
	}
	return out
}

// mountsWith lists this process's mounts whose mount point contains one of
// subs.
func mountsWith(subs ...string) []string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return []string{"mountinfo: " + err.Error()}
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		for _, s := range subs {
			if strings.Contains(fields[4], s) {
				out = append(out, "mount "+sc.Text())
				break
			}
		}
	}
	return out
}

// processesWith lists the host's processes (but this one) with m in their
// argv or environment.
func processesWith(m string) []string {
	var out []string
	paths, _ := filepath.Glob("/proc/[0-9]*")
	self := strconv.Itoa(os.Getpid())
	for _, p := range paths {
		if filepath.Base(p) == self {
			continue
		}
		for _, f := range []string{"cmdline", "environ"} {
			b, err := os.ReadFile(filepath.Join(p, f))
			if err == nil && bytes.Contains(b, []byte(m)) {
				comm, _ := os.ReadFile(filepath.Join(p, "comm"))
				out = append(out, fmt.Sprintf("process %s (%s) by its %s", filepath.Base(p), strings.TrimSpace(string(comm)), f))
				break
			}
		}
	}
	return out
}

// namedNetns lists the named network namespaces (ip netns, engines').
func namedNetns() []string {
	var out []string
	for _, dir := range []string{"/run/netns", "/run/docker/netns"} {
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			out = append(out, filepath.Join(dir, e.Name()))
		}
	}
	return out
}

// nsfsMounts lists nsfs mounts of net namespaces: a namespace pinned by a
// bind mount outlives its processes.
func nsfsMounts() []string {
	b, _ := os.ReadFile("/proc/self/mountinfo")
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, " - nsfs ") && strings.Contains(l, "net:[") {
			out = append(out, l)
		}
	}
	return out
}

// hostState is what must come back after the runs.
type hostState struct {
	goroutines int
	fds        []string
	rss        int64
	stacks     string
}

func rssBytes() int64 {
	b, _ := os.ReadFile("/proc/self/status")
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

func goroutineStacks() string {
	var buf bytes.Buffer
	pprof.Lookup("goroutine").WriteTo(&buf, 1)
	return buf.String()
}

func measure() hostState {
	runtime.GC()
	debug.FreeOSMemory()
	return hostState{goroutines: runtime.NumGoroutine(), fds: testutil.OpenFDs(), rss: rssBytes(), stacks: goroutineStacks()}
}

// settle waits, within a bound that means "hang", until the goroutines and
// the open fds are back to base's counts exactly.
func settle(t *testing.T, base hostState) hostState { return settleKnown(t, base, nil) }

// settleKnown is settle, where known may name the extra fds a known issue
// leaks (it returns "" for any other set).
func settleKnown(t *testing.T, base hostState, known func(extra []string) string) hostState {
	t.Helper()
	start := time.Now()
	end := start.Add(scaled(30 * time.Second))
	for {
		now := measure()
		if now.goroutines == base.goroutines && len(now.fds) == len(base.fds) {
			return now
		}
		// fds a known issue leaks stay: no need to wait out the bound.
		knownOnly := known != nil && now.goroutines == base.goroutines && time.Since(start) > 2*time.Second &&
			known(newFDs(base.fds, now.fds)) != ""
		if knownOnly || time.Now().After(end) {
			if now.goroutines != base.goroutines {
				t.Errorf("goroutines %d after the runs, %d before", now.goroutines, base.goroutines)
				t.Logf("goroutines before:\n%.20000s\nafter:\n%.20000s", base.stacks, now.stacks)
			}
			if len(now.fds) != len(base.fds) {
				extra := newFDs(base.fds, now.fds)
				if why := ""; known != nil {
					why = known(extra)
					if why != "" {
						knownIssue(t, "open fds %d after the runs, %d before: %s: %v", len(now.fds), len(base.fds), why, extra)
						return now
					}
				}
				t.Errorf("open fds %d after the runs, %d before; new: %v", len(now.fds), len(base.fds), extra)
				t.Logf("fds before: %v\nafter: %v", base.fds, now.fds)
			}
			return now
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// newFDs lists the fds in now and not in base.
func newFDs(base, now []string) []string {
	var extra []string
	for _, fd := range now {
		if !slices.Contains(base, fd) {
			extra = append(extra, fd)
		}
	}
	return extra
}

// deck deals kinds in proportion to their weights, shuffled per round, so
// every kind comes up once in each round.
type deck struct {
	kinds []kind
	rng   *mrand.Rand
	cards []int
}

func newDeck(ks []kind, seed uint64) *deck {
	return &deck{kinds: ks, rng: mrand.New(mrand.NewPCG(seed, 0x50a4))}
}

func (d *deck) next() kind {
	if len(d.cards) == 0 {
		for i, k := range d.kinds {
			for range k.weight {
				d.cards = append(d.cards, i)
			}
		}
		d.rng.Shuffle(len(d.cards), func(i, j int) { d.cards[i], d.cards[j] = d.cards[j], d.cards[i] })
	}
	c := d.cards[0]
	d.cards = d.cards[1:]
	return d.kinds[c]
}

// tally counts outcomes per kind.
type tally struct {
	mu       sync.Mutex
	runs     map[string]int
	fails    map[string]int
	errs     []string
	canceled int
	longest  map[string]time.Duration
}

func (tl *tally) add(k kind, d time.Duration, cancelled bool, err error) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	tl.runs[k.name]++
	tl.longest[k.name] = max(tl.longest[k.name], d)
	if cancelled {
		tl.canceled++
	}
	if err != nil {
		tl.fails[k.name]++
		if len(tl.errs) < 20 {
			tl.errs = append(tl.errs, fmt.Sprintf("%s: %v", k.name, err))
		}
	}
}

func (tl *tally) String() string {
	names := make([]string, 0, len(tl.runs))
	for n := range tl.runs {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, n := range names {
		fmt.Fprintf(&b, "  %-11s %5d runs, %d failed, longest %v\n", n, tl.runs[n], tl.fails[n], tl.longest[n].Round(time.Millisecond))
	}
	return b.String()
}

// runOne runs execution n of kind k on sb and checks its outcome.
func runOne(sb sandbox.Sandbox, k kind, n int, seed uint64) (cancelled bool, err error) {
	p := prog{n: n, marker: newMarker("psych-soak-run-")}
	ctx, stop := context.WithTimeout(context.Background(), scaled(2*time.Minute))
	defer stop()
	runCtx := ctx
	if k.cancelBelow > 0 {
		var cancel context.CancelFunc
		runCtx, cancel = context.WithCancel(ctx)
		delay := time.Duration(mrand.New(mrand.NewPCG(seed, uint64(n))).Int64N(int64(k.cancelBelow)))
		timer := time.AfterFunc(delay, cancel)
		defer timer.Stop()
		defer cancel()
	}
	res, err := sb.Run(runCtx, sandbox.Request{Code: k.code(p), Limits: k.limits, Bindings: bindingsFor(k)})
	if ctx.Err() != nil {
		return false, fmt.Errorf("run %d hung: no end within %v (%v)", n, scaled(2*time.Minute), err)
	}
	return runCtx.Err() != nil, k.check(p, res, err)
}

// soak runs the soak on tg: see the package doc.
func soak(t *testing.T, tg *target) {
	runs := envInt("PSYCH_SOAK_RUNS", 200)
	conc := envInt("PSYCH_SOAK_CONCURRENCY", 8)
	seed := uint64(time.Now().UnixNano())
	if v, err := strconv.ParseUint(os.Getenv("PSYCH_SOAK_SEED"), 10, 64); err == nil {
		seed = v
	}
	t.Logf("%s: %d runs (%d one after another, %d at concurrency %d), PSYCH_SOAK_SEED=%d", tg.name, runs, runs/2, runs-runs/2, conc, seed)
	marker := newMarker("psych-soak-")
	t.Setenv(markerEnv, marker)
	netnsBefore, nsfsBefore := namedNetns(), nsfsMounts()

	// The warm-up: one run of each kind, on a Sandbox of its own.
	all := kinds()
	sb, closeSB := tg.open(t)
	cgroupOK := true
	for i, k := range all {
		if k.needsCgroup && !cgroupOK {
			continue
		}
		if _, err := runOne(sb, k, i, seed); err != nil {
			t.Fatalf("warm-up %s: %v", k.name, err)
		}
		if k.name == "value" {
			res, err := sb.Run(context.Background(), sandbox.Request{Code: "1"})
			if err != nil {
				t.Fatal(err)
			}
			cgroupOK = res.Isolation != nil && res.Isolation.Cgroup != "" && res.Isolation.Cgroup != cgroups.ModeNone
		}
	}
	var mix []kind
	for _, k := range all {
		if k.needsCgroup && !cgroupOK {
			t.Logf("no run cgroup here: %s left out", k.name)
			continue
		}
		mix = append(mix, k)
	}
	if closeSB != nil {
		if err := closeSB(); err != nil {
			t.Fatalf("Close after the warm-up: %v", err)
		}
	}
	reportLeftovers(t, tg, "the warm-up", append(processesWith(marker), tg.leftovers(t)...))
	if t.Failed() {
		t.FailNow()
	}

	base := measure()
	start := time.Now()
	sb, closeSB = tg.open(t)
	tl := &tally{runs: map[string]int{}, fails: map[string]int{}, longest: map[string]time.Duration{}}
	d := newDeck(mix, seed)
	peak := base.goroutines
	n := len(all)
	for ; n < len(all)+runs/2; n++ {
		k := d.next()
		t0 := time.Now()
		c, err := runOne(sb, k, n, seed)
		tl.add(k, time.Since(t0), c, err)
	}
	seqDone := time.Now()
	jobs := make(chan int)
	var wg sync.WaitGroup
	var dmu sync.Mutex
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range jobs {
				dmu.Lock()
				k := d.next()
				peak = max(peak, runtime.NumGoroutine())
				dmu.Unlock()
				t0 := time.Now()
				c, err := runOne(sb, k, n, seed)
				tl.add(k, time.Since(t0), c, err)
			}
		}()
	}
	for ; n < len(all)+runs; n++ {
		jobs <- n
	}
	close(jobs)
	wg.Wait()
	if closeSB != nil {
		if err := closeSB(); err != nil {
			t.Errorf("Close: %v", err)
		}
	}
	elapsed, concurrent := time.Since(start), time.Since(seqDone)
	for _, e := range tl.errs {
		t.Error(e)
	}

	var left []string
	left = append(left, processesWith(marker)...)
	left = append(left, tg.leftovers(t)...)
	for _, ns := range namedNetns() {
		if !slices.Contains(netnsBefore, ns) {
			left = append(left, "named netns "+ns)
		}
	}
	for _, m := range nsfsMounts() {
		if !slices.Contains(nsfsBefore, m) {
			left = append(left, "netns mount "+m)
		}
	}
	reportLeftovers(t, tg, fmt.Sprintf("%d runs", runs), left)
	now := settleKnown(t, base, tg.knownFDs)
	grew := now.rss - base.rss
	t.Logf("%s soak: %d runs in %v (sequential %v, concurrent %v), %d cancelled; by kind:\n%s"+
		"goroutines %d before, %d after (peak sampled %d); fds %d before, %d after; RSS %.1f MiB before, %.1f MiB after (%+.1f MiB)",
		tg.name, runs, elapsed.Round(time.Millisecond), seqDone.Sub(start).Round(time.Millisecond), concurrent.Round(time.Millisecond),
		tl.canceled, tl, base.goroutines, now.goroutines, peak, len(base.fds), len(now.fds),
		float64(base.rss)/(1<<20), float64(now.rss)/(1<<20), float64(grew)/(1<<20))
	if raceBuild {
		t.Logf("the race detector is on: its own memory grows with every run, so the RSS bound is not checked")
	} else if grew > 16<<20 {
		t.Errorf("RSS grew by %.1f MiB over %d runs; the bound is 16 MiB", float64(grew)/(1<<20), runs)
	}
}

// soakGuard skips a soak that was not asked for: `go test -race ./...`
// leaves the soak to a step of its own.
func soakGuard(t *testing.T) {
	t.Helper()
	if os.Getenv("PSYCH_SOAK_RUNS") == "" {
		t.Skip("the soak runs in a step of its own, without the race detector (whose own memory swamps the 16 MiB RSS bound): " +
			"scripts/test.sh's soak phase sets PSYCH_SOAK_RUNS=200, make soak 2000")
	}
}

// TestSoakSubprocess soaks the subprocess backend.
func TestSoakSubprocess(t *testing.T) {
	soakGuard(t)
	soak(t, subprocessTarget())
}
