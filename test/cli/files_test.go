package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
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
