package bootstrap_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/psych-runtime/psych/bootstrap"
	"github.com/psych-runtime/psych/internal/testutil"
)

// requireMatplotlib ends the test where the interpreter has no matplotlib
// (testutil.RequireMatplotlib): pyenv's skip, since the race pass ran these
// tests on Debian's.
func requireMatplotlib(t *testing.T) {
	t.Helper()
	testutil.RequireMatplotlib(t, python(t))
}

func figureNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// TestFigures: with a figures directory, matplotlib uses Agg without a
// trace in the environment; show() writes every open figure and closes
// it, a repeated number gets a counter, a figure closed by the program is
// not written, and the figures still open at the end are, each once.
func TestFigures(t *testing.T) {
	requireMatplotlib(t)
	dir := filepath.Join(t.TempDir(), "figures")
	o := mustSucceed(t, program{figures: dir, code: `import os, matplotlib
import matplotlib.pyplot as plt
plt.plot([1, 2]); plt.figure(); plt.plot([2, 1])
plt.show()
after_show = plt.get_fignums()
plt.plot([3, 3]); plt.show()
plt.figure(5); closed = plt.figure(6); plt.close(closed)
[matplotlib.get_backend().lower(), 'MPLBACKEND' in os.environ, after_show]`})
	jsonEqual(t, o.result.Value, `["agg", false, []]`)
	want := []string{"figure-1-2.png", "figure-1.png", "figure-2.png", "figure-5.png"}
	if got := figureNames(t, dir); !slices.Equal(got, want) {
		t.Fatalf("figures %v, want %v; stderr:\n%s", got, want, o.stderr)
	}
	for _, n := range want {
		b, _ := os.ReadFile(filepath.Join(dir, n))
		if !strings.HasPrefix(string(b), "\x89PNG\r\n\x1a\n") {
			t.Errorf("%s is not a PNG", n)
		}
	}
}

// TestFiguresOff: without a figures directory the bootstrap leaves
// matplotlib alone (show() is pyplot's own) and adds no import hook; with
// one, a program that never imports matplotlib loads none of it.
func TestFiguresOff(t *testing.T) {
	requireMatplotlib(t)
	o := mustSucceed(t, program{code: `import sys
hooks = [type(f).__name__ for f in sys.meta_path]
import matplotlib.pyplot as plt
[hooks.count('Figures'), plt.show.__module__]`})
	jsonEqual(t, o.result.Value, `[0, "matplotlib.pyplot"]`)
	dir := filepath.Join(t.TempDir(), "figures")
	o = mustSucceed(t, program{figures: dir, code: `import sys
[[type(f).__name__ for f in sys.meta_path].count('Figures'), [m for m in sys.modules if m.startswith('matplotlib')]]`})
	jsonEqual(t, o.result.Value, `[1, []]`)
	if names := figureNames(t, dir); len(names) != 0 {
		t.Errorf("figures %v from a program without matplotlib", names)
	}
}

// TestFiguresMissing: a program whose matplotlib cannot be imported gets
// the ImportError it would get anyway, and nothing is written.
func TestFiguresMissing(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "figures")
	o := mustSucceed(t, program{figures: dir, code: `import sys
sys.modules['matplotlib'] = None
try:
    import matplotlib.pyplot
    r = 'imported'
except ImportError as e:
    r = 'ImportError'
r`})
	jsonEqual(t, o.result.Value, `"ImportError"`)
	if names := figureNames(t, dir); len(names) != 0 {
		t.Errorf("figures %v", names)
	}
}

// TestFiguresPreloaded: in an interpreter that preloaded pyplot (a pool's),
// the start frame's figures directory still makes show() capture, with
// Agg as the backend.
func TestFiguresPreloaded(t *testing.T) {
	requireMatplotlib(t)
	hostEnd, childEnd := socketpair(t)
	hostEnd.SetDeadline(time.Now().Add(60 * time.Second))
	c := startChild(t, append(launchArgs(t), bootstrap.PreloadArgs([]string{"matplotlib.pyplot"})...), childEnd)
	if p := readPreloaded(t, hostEnd); p.Error != nil {
		t.Fatalf("preload: %s", *p.Error)
	}
	dir := filepath.Join(t.TempDir(), "figures")
	o := converse(t, hostEnd, program{figures: dir, code: "import matplotlib.pyplot as plt\nplt.plot([1]); plt.show()\n[plt.get_backend().lower(), plt.get_fignums()]"})
	c.wait(t, o)
	if o.result == nil || o.result.Failure != nil {
		t.Fatalf("result %+v, stderr %q", o.result, o.stderr)
	}
	jsonEqual(t, o.result.Value, `["agg", []]`)
	if got := figureNames(t, dir); !slices.Equal(got, []string{"figure-1.png"}) {
		t.Fatalf("figures %v, want figure-1.png; stderr:\n%s", got, o.stderr)
	}
}

// TestFontsDir: the bootstrap looks for the host's font lists where the
// backends put them (FontsDir).
func TestFontsDir(t *testing.T) {
	if want := "FONTS_DIR = \"" + bootstrap.FontsDir + "\"\n"; !strings.Contains(bootstrap.Source, want) {
		t.Fatalf("bootstrap.py has no %q", want)
	}
}
