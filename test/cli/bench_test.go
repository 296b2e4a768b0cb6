package cli

import (
	"encoding/json"
	"maps"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/psych-runtime/psych/internal/testutil"
	"github.com/psych-runtime/psych/sandbox"
)

// facts are what a bench row's attestation shows of each layer.
func facts(iso *sandbox.Isolation) map[string]bool {
	f := map[string]bool{}
	if iso == nil {
		return f
	}
	for _, ns := range iso.Namespaces {
		f["ns:"+ns] = true
	}
	in := iso.Interpreter
	set := func(name string, ok bool) {
		if ok {
			f[name] = true
		}
	}
	set("rlimits", iso.Limits["cpu"] == "10 11" && iso.Limits["nproc"] != "")
	set("env", slices.Equal(iso.EnvKeys, []string{"HOME", "LC_ALL", "MALLOC_ARENA_MAX", "PATH", "PYTHONDONTWRITEBYTECODE", "TMPDIR"}))
	set("no_new_privs", in.NoNewPrivs == 1)
	set("no-caps", in.CapEff != "" && strings.Trim(in.CapEff, "0") == "")
	set("not-root", len(in.UID) > 0 && !slices.Contains(in.UID, 0))
	set("uid-map", iso.UIDMap != "")
	set("net-verified", iso.Network != nil && iso.Network.Verified)
	set("view", iso.RootMount == "own:tmpfs")
	set("seccomp", in.Seccomp == 2 && iso.SeccompDigest != "")
	set("landlock", len(iso.LandlockScoped) > 0)
	set("cgroup", iso.Cgroup != "" && iso.Cgroup != "none")
	return f
}

// layerFacts are what each row must add to the row before it, exactly.
var layerFacts = map[string][]string{
	"rlimits-env":      {"rlimits", "env", "no_new_privs", "no-caps", "not-root"},
	"userns":           {"ns:user", "uid-map"},
	"netns":            {"ns:net", "net-verified"},
	"pid-ipc-uts":      {"ns:pid", "ns:ipc", "ns:uts"},
	"mount":            {"ns:mnt", "ns:cgroup", "view"},
	"seccomp-landlock": {"seccomp", "landlock"},
	"full":             {"cgroup"},
}

func keys(m map[string]bool) []string {
	k := slices.Collect(maps.Keys(m))
	sort.Strings(k)
	return k
}

// TestBenchLayers: psych bench --runs 3 --json completes; its rows have the
// documented fields, in order; each partial row's attestation adds exactly
// its layer to the row before (a layer silently not applied fails); cli
// has what full has; each engine row meets the floor. Timings are not
// checked.
func TestBenchLayers(t *testing.T) {
	testutil.RequireRoot(t, "the bench's layer rows need a uid range for the run ids")
	image := testutil.Image()
	out, errOut, code := cli(t, "", "bench", "--runs", "3", "--warmup", "1", "--json", "--python", testPython(), "--image", image)
	if code != 0 {
		t.Fatalf("psych bench: exit %d\n%s", code, errOut)
	}
	var raw struct {
		Machine map[string]any
		Rows    []map[string]json.RawMessage
		Notes   []string
	}
	if err := json.Unmarshal([]byte(out), &raw); err != nil {
		t.Fatalf("bench --json: %v\n%s", err, out)
	}
	for _, r := range raw.Rows {
		for _, field := range []string{"name", "median_ms", "p90_ms", "ratio", "increment_ms", "attestation"} {
			if _, ok := r[field]; !ok {
				t.Fatalf("row %s lacks %q", r["name"], field)
			}
		}
	}
	var rep struct {
		Rows []struct {
			Name        string
			MedianMS    float64 `json:"median_ms"`
			Ratio       float64
			Attestation *sandbox.Isolation
		}
	}
	json.Unmarshal([]byte(out), &rep)
	var names []string
	for _, r := range rep.Rows {
		names = append(names, r.Name)
	}
	want := []string{"python", "bootstrap", "rlimits-env", "userns", "netns", "pid-ipc-uts", "mount", "seccomp-landlock", "full", "cli"}
	if !slices.Equal(names[:min(len(names), len(want))], want) {
		t.Fatalf("rows %v, want %v first", names, want)
	}
	if rep.Rows[0].Ratio != 1 || rep.Rows[0].MedianMS <= 0 {
		t.Fatalf("the python row is the reference: %+v", rep.Rows[0])
	}
	prev := map[string]bool{}
	for i, r := range rep.Rows {
		got := facts(r.Attestation)
		switch add, ok := layerFacts[r.Name]; {
		case i < 2:
			if r.Attestation != nil {
				t.Errorf("row %s has an attestation: it runs no sandbox", r.Name)
			}
		case ok:
			wantFacts := maps.Clone(prev)
			for _, a := range add {
				wantFacts[a] = true
			}
			if !maps.Equal(got, wantFacts) {
				t.Errorf("row %s: facts %v, want %v (the previous row's %v plus %v)", r.Name, keys(got), keys(wantFacts), keys(prev), add)
			}
			if wantMode := map[bool]string{true: "namespaces", false: "partial"}[r.Name == "full"]; r.Attestation.Mode != wantMode {
				t.Errorf("row %s: mode %q, want %q", r.Name, r.Attestation.Mode, wantMode)
			}
		case r.Name == "cli":
			if !maps.Equal(got, prev) {
				t.Errorf("cli: facts %v, want full's %v", keys(got), keys(prev))
			}
		case strings.HasPrefix(r.Name, "container-"):
			for _, f := range []string{"no_new_privs", "no-caps", "not-root", "seccomp", "net-verified"} {
				if !got[f] {
					t.Errorf("row %s: below the floor, lacks %s: %v", r.Name, f, keys(got))
				}
			}
		case r.Name == "ctr-run":
		case r.Name == "serve", r.Name == "serve-saturation":
			if r.Attestation == nil || r.Attestation.Mode != "namespaces" || r.Name == "serve" && !r.Attestation.Warm {
				t.Errorf("row %s: want a full attestation (warm, for serve): %+v", r.Name, r.Attestation)
			}
		default:
			t.Errorf("unexpected row %s", r.Name)
		}
		if ok := layerFacts[r.Name] != nil; ok {
			prev = got
		}
	}
	if testutil.InCI() && !slices.Contains(names, "container-containerd") {
		t.Fatalf("CI has containerd and the image, but the bench left its row out: %v", raw.Notes)
	}
}

// TestBenchPool: psych bench --pool 2 --runs 3 --json gives the pool rows
// in order with the documented fields; the pooled rows' runs were warm,
// the cold ones not, and the saturation rows carry executions per second.
// With the image, containerd's cold and pooled rows too. Timings are not
// checked.
func TestBenchPool(t *testing.T) {
	testutil.RequireRoot(t, "a pool needs a run cgroup and a range of outside ids")
	image := testutil.Image()
	out, errOut, code := cli(t, "", "bench", "--pool", "2", "--runs", "3", "--warmup", "0", "--json", "--python", testPython(), "--image", image, "--engines", "containerd")
	if code != 0 {
		t.Fatalf("psych bench --pool: exit %d\n%s", code, errOut)
	}
	var rep struct {
		Rows []struct {
			Name        string
			MedianMS    *float64 `json:"median_ms"`
			P90MS       *float64 `json:"p90_ms"`
			Ratio       *float64
			Increment   *float64 `json:"increment_ms"`
			ExecsPerS   float64  `json:"execs_per_s"`
			Attestation *sandbox.Isolation
		}
		Notes     []string
		ServeTool *struct {
			CallUS  float64 `json:"call_us"`
			FloorUS float64 `json:"floor_us"`
		} `json:"serve_tool"`
		ServeRSS *struct {
			IdleKiB   float64 `json:"idle_kib"`
			LoadedKiB float64 `json:"loaded_kib"`
			Queued    int
		} `json:"serve_rss"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("bench --json: %v\n%s", err, out)
	}
	if rep.ServeTool == nil || rep.ServeTool.CallUS <= 0 || rep.ServeTool.FloorUS <= 0 || rep.ServeRSS == nil || rep.ServeRSS.IdleKiB <= 0 || rep.ServeRSS.LoadedKiB <= 0 || rep.ServeRSS.Queued != 64 {
		t.Errorf("no client tool round trip or server RSS: %+v %+v", rep.ServeTool, rep.ServeRSS)
	}
	var names []string
	for _, r := range rep.Rows {
		names = append(names, r.Name)
		if r.MedianMS == nil || r.P90MS == nil || r.Ratio == nil || r.Increment == nil {
			t.Errorf("row %s lacks a documented field", r.Name)
		}
		sat := strings.HasSuffix(r.Name, "-saturation")
		switch {
		case r.Name == "python":
		case (strings.HasPrefix(r.Name, "pool-") || r.Name == "serve") && !sat:
			if r.Attestation == nil || !r.Attestation.Warm {
				t.Errorf("row %s: its run was not warm: %+v", r.Name, r.Attestation)
			}
		case sat:
			if r.ExecsPerS <= 0 {
				t.Errorf("row %s: no executions per second", r.Name)
			}
		default:
			if r.Attestation == nil || r.Attestation.Warm {
				t.Errorf("row %s: want a cold run's attestation: %+v", r.Name, r.Attestation)
			}
		}
	}
	want := []string{"python", "full", "pool-2-saturation", "pool-2"}
	if testutil.InCI() {
		want = append(want, "container-containerd", "pool-2-container-containerd-saturation", "pool-2-container-containerd")
	}
	if !slices.Equal(names[:min(len(names), len(want))], want) {
		t.Fatalf("rows %v, want %v first (notes %v)", names, want, rep.Notes)
	}
	// The rows through psych serve come last.
	if got := names[max(len(names)-2, 0):]; !slices.Equal(got, []string{"serve-saturation", "serve"}) {
		t.Fatalf("rows %v, want serve-saturation and serve last (notes %v)", names, rep.Notes)
	}
}
