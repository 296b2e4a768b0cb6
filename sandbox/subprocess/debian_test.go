//go:build linux && cgo

package subprocess

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/psych-runtime/psych/sandbox"

	"github.com/psych-runtime/psych/internal/testutil"
)

// importExceptions are the modules of Debian's Python packages that are
// not expected to import in a run though they import on the host, each
// with the reason. A module is here only for what a run is meant not to
// give, never for something the view lacks by mistake.
var importExceptions = map[string]string{
	// Importing it opens a web browser: never run on the host by a test.
	"antigravity": "opens a web browser when imported",
}

// importProgram imports each module of MODULES in a forked child of its
// own (one module's import, state or crash is not the next one's), with
// its output discarded and an alarm of 20 s, and leaves in out what each
// failed with; a module that imported is not in out.
const importProgram = `import os, signal
out = {}
for m in MODULES:
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(r)
            null = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(null, fd)
            signal.alarm(20)
            __import__(m)
            msg = b''
        except BaseException as e:
            msg = ('%s: %s' % (type(e).__name__, e)).encode('utf-8', 'replace')[:300] or b'?'
        os.write(w, msg)
        os._exit(0)
    os.close(w)
    msg = b''
    while True:
        chunk = os.read(r, 4096)
        if not chunk:
            break
        msg += chunk
    os.close(r)
    _, status = os.waitpid(pid, 0)
    if msg or status:
        out[m] = msg.decode('utf-8', 'replace') or 'wait status %d' % status
`

// debianModules lists the top-level modules of the Debian packages that
// own files in python's sys.path directories, found by package
// ownership (dpkg -S, dpkg -L), not by what the directories hold.
func debianModules(t *testing.T, python string) []string {
	t.Helper()
	if _, err := exec.LookPath("dpkg"); err != nil {
		testutil.Unavailable(t, "no dpkg: this host has no Debian packages")
	}
	out, err := exec.Command(python, "-I", "-c", "import json, sys; print(json.dumps(sys.path))").Output()
	if err != nil {
		t.Fatalf("%s: sys.path: %v", python, err)
	}
	var path []string
	if err := json.Unmarshal(out, &path); err != nil {
		t.Fatal(err)
	}
	var dirs []string
	for _, d := range path {
		if fi, err := os.Stat(d); err == nil && fi.IsDir() {
			dirs = append(dirs, filepath.Clean(d))
		}
	}
	out, _ = exec.Command("dpkg", append([]string{"-S"}, dirs...)...).Output() // exits 1 for a directory no package owns
	pkgs := map[string]bool{}
	for _, line := range strings.Split(string(out), "\n") {
		names, _, ok := strings.Cut(line, ": ")
		if !ok || strings.HasPrefix(line, "diversion ") {
			continue
		}
		for _, p := range strings.Split(names, ", ") {
			pkgs[p] = true
		}
	}
	if len(pkgs) == 0 {
		testutil.Unavailable(t, "no Debian package owns %s's module directories %v: not Debian's interpreter", python, dirs)
	}
	args := []string{"-L"}
	for p := range pkgs {
		args = append(args, p)
	}
	sort.Strings(args[1:])
	out, err = exec.Command("dpkg", args...).Output()
	if err != nil {
		t.Fatalf("dpkg -L: %v", err)
	}
	mods := map[string]bool{}
	for _, p := range strings.Split(string(out), "\n") {
		for _, d := range dirs {
			rel, ok := strings.CutPrefix(p, d+"/")
			if !ok || rel == "" {
				continue
			}
			first, rest, sub := strings.Cut(rel, "/")
			name := ""
			switch {
			case sub && rest == "__init__.py":
				name = first // a regular package
			case !sub && strings.HasSuffix(first, ".py"):
				name = strings.TrimSuffix(first, ".py")
			case !sub && strings.HasSuffix(first, ".so"):
				name, _, _ = strings.Cut(first, ".")
			}
			if identifier(name) && name != "__main__" {
				mods[name] = true
			}
		}
	}
	var list []string
	for m := range mods {
		list = append(list, m)
	}
	sort.Strings(list)
	return list
}

func identifier(s string) bool {
	for i, c := range s {
		if c != '_' && (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') && (i == 0 || c < '0' || c > '9') {
			return false
		}
	}
	return s != ""
}

// TestDebianModulesImportInRun: every top-level module of Debian's Python
// packages on the host that imports under python3 -I imports in a run too,
// under the default limits, but for importExceptions. The view must give
// every library what it needs of the host: the alternatives of BLAS and
// LAPACK, the settings under /etc that Debian's Python packages ship.
func TestDebianModulesImportInRun(t *testing.T) {
	if testutil.HostLaneOnly(t, "a few hundred imports under the default limits are too slow under emulation") {
		return
	}
	python := testPython()
	mods := debianModules(t, python)
	var candidates []string
	for _, m := range mods {
		if _, ok := importExceptions[m]; !ok {
			candidates = append(candidates, m)
		}
	}
	// The host's imports and the runs' go on side by side, and the runs
	// two at a time, in batches that each fit the default limits (10 CPU
	// seconds, 30 s): the whole costs about what the imports cost.
	s := newTestSandbox(t, Config{})
	defer s.Close()
	start := time.Now()
	var hostFailed map[string]string
	var hostErr error
	hostDone := make(chan struct{})
	go func() {
		defer close(hostDone)
		modules, _ := json.Marshal(candidates)
		prog := "MODULES = " + string(modules) + "\n" + importProgram + "import json\nprint(json.dumps(out))\n"
		out, err := exec.Command(python, "-I", "-B", "-c", prog).Output()
		if err == nil {
			err = json.Unmarshal(out, &hostFailed)
		}
		hostErr = err
	}()
	// Batch i holds every n-th module from the i-th, so that the heavy
	// ones (numpy's users sort together) spread over the batches.
	const batch = 20
	n := (len(candidates) + batch - 1) / batch
	batches := make([][]string, n)
	for i, m := range candidates {
		batches[i%n] = append(batches[i%n], m)
	}
	type ran struct {
		failed map[string]string
		err    string
	}
	runs := make([]ran, n)
	var wg sync.WaitGroup
	slots := make(chan struct{}, 2)
	for i := range runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			slots <- struct{}{}
			defer func() { <-slots }()
			b := batches[i]
			modules, _ := json.Marshal(b)
			res, err := s.Run(context.Background(), sandbox.Request{Code: "MODULES = " + string(modules) + "\n" + importProgram + "out\n"})
			switch {
			case err != nil:
				runs[i].err = err.Error()
			case res.Failure != nil:
				runs[i].err = fmt.Sprintf("the batch of %v failed: %+v\nstderr: %s", b, *res.Failure, res.Stderr)
			default:
				if err := json.Unmarshal(res.Value, &runs[i].failed); err != nil {
					runs[i].err = fmt.Sprintf("value %s: %v", res.Value, err)
				}
			}
		}()
	}
	wg.Wait()
	<-hostDone
	if hostErr != nil {
		t.Fatalf("the imports on the host: %v", hostErr)
	}
	imported := 0
	for i, r := range runs {
		if r.err != "" {
			t.Error(r.err)
			continue
		}
		for _, m := range batches[i] {
			if _, failed := hostFailed[m]; failed {
				continue
			}
			imported++
			if why, bad := r.failed[m]; bad {
				t.Errorf("%s imports on the host, not in a run: %.300s", m, why)
			}
		}
	}
	t.Logf("%d modules of Debian's packages, %d import on the host; %v", len(mods), imported, time.Since(start).Round(time.Millisecond))
	if imported == 0 {
		t.Fatal("no module imports on the host")
	}
}
