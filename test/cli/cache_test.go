package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/psych-runtime/psych/sandbox"
)

// cacheHost is a counting wrapper interpreter and a fresh interpreter cache
// for the CLI. The wrapper lives in a 0755 directory outside /tmp (which
// the sandbox builds from nothing, so an interpreter there is refused); the
// count file is beside that directory, outside the view.
type cacheHost struct {
	root, wrapper, count, xdg string
}

func newCacheHost(t *testing.T) *cacheHost {
	t.Helper()
	root, err := os.MkdirTemp("/var/tmp", "psych-cache-test-")
	if err != nil {
		t.Skipf("needs a directory outside /tmp for the wrapper interpreter: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	h := &cacheHost{
		root:    root,
		wrapper: filepath.Join(root, "bin", "python3"),
		count:   filepath.Join(root, "count"),
		xdg:     filepath.Join(t.TempDir(), "xdg"),
	}
	// bin/w is a directory anyone may write to, inside the view: only a
	// read-only mount keeps the program from writing there.
	for _, d := range []struct {
		path string
		mode os.FileMode
	}{{root, 0o755}, {filepath.Join(root, "bin"), 0o755}, {filepath.Join(root, "bin", "w"), 0o777}, {h.xdg, 0o700}} {
		if err := os.Mkdir(d.path, d.mode); err != nil && !os.IsExist(err) {
			t.Fatal(err)
		}
		if err := os.Chmod(d.path, d.mode); err != nil { // past the umask
			t.Fatal(err)
		}
	}
	h.writeWrapper(t, "")
	return h
}

// writeWrapper puts a new wrapper file at the wrapper's path. It counts a
// start only where it can write the count file: on the host. Inside the
// sandbox COUNT is unset (or, passed on, unreachable), and the failed write
// is silent so that it does not change the program's stderr.
func (h *cacheHost) writeWrapper(t *testing.T, extra string) {
	t.Helper()
	script := fmt.Sprintf("#!/bin/sh\n%s{ echo x >> \"$COUNT\"; } 2>/dev/null || true\nexec %s \"$@\"\n", extra, testPython())
	tmp := h.wrapper + ".new"
	if err := os.WriteFile(tmp, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chmod(tmp, 0o755)
	if err := os.Rename(tmp, h.wrapper); err != nil {
		t.Fatal(err)
	}
}

func (h *cacheHost) starts(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile(h.count)
	if os.IsNotExist(err) {
		return 0
	} else if err != nil {
		t.Fatal(err)
	}
	return bytes.Count(b, []byte("x\n"))
}

// run is `psych run --json --python WRAPPER [args] -` with the cache and
// the count file in its environment. It returns the host starts it took.
func (h *cacheHost) run(t *testing.T, program string, args ...string) (*sandbox.Result, int) {
	t.Helper()
	before := h.starts(t)
	cmd := exec.Command(psychBin, append(append([]string{"run", "--json", "--python", h.wrapper}, args...), "-")...)
	cmd.Env = append(os.Environ(), "XDG_CACHE_HOME="+h.xdg, "COUNT="+h.count)
	cmd.Stdin = strings.NewReader(program)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	if err := cmd.Run(); err != nil {
		t.Fatalf("psych run: %v\nstderr: %s", err, e.String())
	}
	var res sandbox.Result
	if err := json.Unmarshal(o.Bytes(), &res); err != nil {
		t.Fatalf("--json output is not a Result: %v\n%s", err, o.String())
	}
	if res.Isolation.Mode == "fallback" {
		t.Skip("needs user namespaces: the fallback runs without a view and compiles the bootstrap uncached")
	}
	return &res, h.starts(t) - before
}

func (h *cacheHost) want42(t *testing.T, what string, wantStarts int) {
	t.Helper()
	res, n := h.run(t, "6*7")
	if res.Failure != nil || string(res.Value) != "42" || res.Stderr != "" {
		t.Fatalf("%s: value %s, failure %+v, stderr %q", what, res.Value, res.Failure, res.Stderr)
	}
	if wantStarts >= 0 && n != wantStarts {
		t.Fatalf("%s: the interpreter started %d times on the host, want %d", what, n, wantStarts)
	}
	if wantStarts < 0 && n < 1 {
		t.Fatalf("%s: the interpreter never started on the host (a stale hit?)", what)
	}
}

// TestCacheHitCLI: the second `psych run` of an interpreter starts it on
// the host not at all (the first starts it once, to learn its facts).
func TestCacheHitCLI(t *testing.T) {
	h := newCacheHost(t)
	h.want42(t, "first run (cold cache)", -1)
	h.want42(t, "second run (warm cache)", 0)
	// The interpreter's entry, psych's own compiled seccomp filter and,
	// where the interpreter has matplotlib, its font list (built once, on
	// the first run: the second started nothing).
	entries, err := os.ReadDir(filepath.Join(h.xdg, "psych"))
	has := func(prefix string) bool {
		return slices.ContainsFunc(entries, func(e os.DirEntry) bool {
			return strings.HasPrefix(e.Name(), prefix) && strings.HasSuffix(e.Name(), ".json")
		})
	}
	want := 2
	mpl := exec.Command(testPython(), "-I", "-c", "import matplotlib").Run() == nil
	if mpl {
		want++
	}
	if err != nil || len(entries) != want || !has("blob-seccomp-confined-") || mpl != has("blob-matplotlib-fonts-") {
		t.Fatalf("cache %s (matplotlib %v): %v, %v", filepath.Join(h.xdg, "psych"), mpl, entries, err)
	}

	// The assumption the count rests on: the in-sandbox start cannot write
	// the count file, even with COUNT passed in; the wrapper's own tree is
	// read-only there, even a directory anyone may write to.
	probe := fmt.Sprintf("import os, errno\n"+
		"try:\n    open(%q, 'w')\n    w = 'written'\nexcept OSError as e:\n    w = errno.errorcode.get(e.errno)\n"+
		"[os.path.exists(os.environ['COUNT']), os.path.exists(%q), w]",
		filepath.Join(h.root, "bin", "w", "probe"), h.wrapper)
	res, n := h.run(t, probe, "--env", "COUNT")
	if string(res.Value) != `[false,true,"EROFS"]` || n != 0 {
		t.Fatalf("in the sandbox [count file reachable, wrapper reachable, write]: %s (failure %+v), host starts %d", res.Value, res.Failure, n)
	}
}

// TestCacheChangedInterpreterCLI: another file at the wrapper's path, and
// then a corrupted entry, each make the next run ask the interpreter again,
// and the runs stay correct.
func TestCacheChangedInterpreterCLI(t *testing.T) {
	h := newCacheHost(t)
	h.want42(t, "first run", -1)
	h.want42(t, "warm run", 0)
	h.writeWrapper(t, "# another interpreter file\n")
	h.want42(t, "after the swap", 1)
	h.want42(t, "warm again", 0)

	entries, err := filepath.Glob(filepath.Join(h.xdg, "psych", "*.json"))
	entries = slices.DeleteFunc(entries, func(p string) bool { return strings.HasPrefix(filepath.Base(p), "blob-") })
	if err != nil || len(entries) != 1 {
		t.Fatalf("entries %v %v", entries, err)
	}
	b, err := os.ReadFile(entries[0])
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0x01
	if err := os.WriteFile(entries[0], b, 0o600); err != nil {
		t.Fatal(err)
	}
	h.want42(t, "after the corruption", 1)
	h.want42(t, "rebuilt", 0)
}
