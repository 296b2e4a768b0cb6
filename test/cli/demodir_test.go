package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestDemoDirOfKilledCLI: a psych run --demo-tools killed by SIGKILL
// cannot remove its demo directory; the next run removes what the dead
// owner left, as run directories are, and its own on its way out.
func TestDemoDirOfKilledCLI(t *testing.T) {
	tmp := t.TempDir()
	demoDirs := func() []string {
		m, _ := filepath.Glob(filepath.Join(tmp, "psych-demo-*"))
		return m
	}
	cmd := exec.Command(psychBin, "run", "--demo-tools", "--python", testPython(), "-")
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	cmd.Stdin = strings.NewReader("sleep(seconds=30)")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for len(demoDirs()) == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	left := demoDirs()
	if len(left) != 1 {
		t.Fatalf("demo directories after SIGKILL: %v, want the killed CLI's one", left)
	}
	// Another user's directory of the same form is never touched.
	other := filepath.Join(tmp, "psych-demo-1.1-123")
	if err := os.Mkdir(other, 0o700); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		if err := os.Chown(other, 1000, 1000); err != nil {
			t.Fatal(err)
		}
	} else {
		other = ""
		os.Remove(filepath.Join(tmp, "psych-demo-1.1-123"))
	}

	c2 := exec.Command(psychBin, "run", "--json", "--demo-tools", "--python", testPython(), "-")
	c2.Env = append(os.Environ(), "TMPDIR="+tmp)
	c2.Stdin = strings.NewReader("echo(x=1)")
	if out, err := c2.CombinedOutput(); err != nil || !strings.Contains(string(out), `"value":{"x":1}`) {
		t.Fatalf("the next run: %v\n%s", err, out)
	}
	got := demoDirs()
	want := []string{}
	if other != "" {
		want = append(want, other)
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("demo directories after the next run: %v, want %v (the dead CLI's %s removed)", got, want, left[0])
	}
}
