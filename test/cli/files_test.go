package cli

import (
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/psych-runtime/psych/internal/testutil"
	"github.com/psych-runtime/psych/sandbox"
)

// TestRunFilesOut: --file hands local files in as /work/PATH, --out writes
// what the run created or changed into DIR (made if missing) without exec
// or setuid bits, refuses to overwrite without --force, and escapes a name
// with control characters when it tells what it wrote.
func TestRunFilesOut(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "sales.csv")
	if err := os.WriteFile(in, []byte("day,amount\nmon,3\ntue,4\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out", "new")
	program := `import csv, os, stat
rows = list(csv.DictReader(open('data/s.csv')))
open('total.txt', 'w').write(str(sum(int(r['amount']) for r in rows)))
os.makedirs('sub', exist_ok=True)
open('sub/run.sh', 'w').write('#!/bin/sh\n')
os.chmod('sub/run.sh', 0o755)
open('bad\nname', 'w').write('x')
[stat.S_IMODE(os.stat('data/s.csv').st_mode), sorted(os.listdir('.'))]`
	args := []string{"run", "--python", testPython(), "--file", in + ":data/s.csv", "--out", out, "-"}
	stdout, stderr, code := cli(t, program, args...)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(stdout, `[384,["bad\nname","data","sub","total.txt"]]`) {
		t.Fatalf("the program saw: %s", stdout)
	}
	if b, err := os.ReadFile(filepath.Join(out, "total.txt")); err != nil || string(b) != "7" {
		t.Fatalf("total.txt: %q, %v", b, err)
	}
	fi, err := os.Stat(filepath.Join(out, "sub", "run.sh"))
	if err != nil || fi.Mode().Perm() != 0o644 {
		t.Fatalf("sub/run.sh: %v, %v; want mode 0644 (exec bits dropped)", fi, err)
	}
	if _, err := os.Stat(filepath.Join(out, "data", "s.csv")); !os.IsNotExist(err) {
		t.Fatalf("the unchanged input came out: %v", err)
	}
	if !strings.Contains(stderr, `"`+out+`/bad\nname"`) || strings.Contains(stderr, "bad\nname") {
		t.Fatalf("stderr does not escape the newline in a name:\n%s", stderr)
	}
	// Again into the same DIR: refused for the files there, unless --force.
	_, stderr, code = cli(t, program, args...)
	if code != exitHostFault || !strings.Contains(stderr, "already there") {
		t.Fatalf("a second run into the same --out: exit %d, %s; want %d and already there", code, stderr, exitHostFault)
	}
	os.WriteFile(filepath.Join(out, "total.txt"), []byte("old"), 0o600)
	if _, stderr, code = cli(t, program, append(args[:len(args)-1], "--force", "-")...); code != exitOK {
		t.Fatalf("--force: exit %d, %s", code, stderr)
	}
	if b, _ := os.ReadFile(filepath.Join(out, "total.txt")); string(b) != "7" {
		t.Fatalf("--force left total.txt %q", b)
	}
	// A bad path is the request's error: nothing runs.
	if _, stderr, code = cli(t, "open('ran', 'w')", "run", "--python", testPython(), "--file", in+":../x", "--out", out, "-"); code != exitUsage {
		t.Fatalf("--file LOCAL:../x: exit %d, %s; want %d", code, stderr, exitUsage)
	}
	if _, err := os.Stat(filepath.Join(out, "ran")); !os.IsNotExist(err) {
		t.Fatal("a refused request ran")
	}
}

// TestRunArtifactsOut: --out writes each figure as DIR/artifacts/NAME,
// refuses to overwrite one without --force, and tells what it wrote and
// what the run left out.
func TestRunArtifactsOut(t *testing.T) {
	if err := exec.Command(testPython(), "-c", "import matplotlib").Run(); err != nil {
		testutil.Unavailable(t, "the interpreter has no matplotlib: %v", err)
	}
	out := filepath.Join(t.TempDir(), "out")
	program := `import os, matplotlib.pyplot as plt
plt.plot([1, 2]); plt.show()
plt.figure(figsize=(2, 1), dpi=100)
open('` + sandbox.FiguresDir + `/figure-9.png', 'wb').write(b'not a png')`
	args := []string{"run", "--python", testPython(), "--out", out, "-"}
	_, stderr, code := cli(t, program, args...)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for name, width := range map[string]int{"figure-1.png": 640, "figure-1-2.png": 200} {
		f, err := os.Open(filepath.Join(out, "artifacts", name))
		if err != nil {
			t.Fatalf("%s: %v; stderr:\n%s", name, err, stderr)
		}
		cfg, err := png.DecodeConfig(f)
		f.Close()
		if err != nil || cfg.Width != width {
			t.Errorf("%s: %+v, %v; want %d pixels wide", name, cfg, err, width)
		}
		if !strings.Contains(stderr, "wrote "+filepath.Join(out, "artifacts", name)) {
			t.Errorf("stderr does not tell %s was written:\n%s", name, stderr)
		}
	}
	if !strings.Contains(stderr, "left out artifact figure-9.png (9 bytes): invalid") {
		t.Errorf("stderr does not tell figure-9.png was left out:\n%s", stderr)
	}
	if _, stderr, code = cli(t, program, args...); code != exitHostFault || !strings.Contains(stderr, "artifact figure-1.png: already there") {
		t.Fatalf("a second run into the same --out: exit %d, %s; want %d and already there", code, stderr, exitHostFault)
	}
}
