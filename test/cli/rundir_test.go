package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestRunDirNotPreClaimed: a non-root user's runs keep their directories
// where no other local user can make them first. Another user (1001) makes
// /tmp/psych-1000 before user 1000's first run, in a shared sticky temp
// dir of the test's own: the run still works, its directory under the
// user's own home (no XDG_RUNTIME_DIR), or under XDG_RUNTIME_DIR where
// that is set.
func TestRunDirNotPreClaimed(t *testing.T) {
	requireRoot(t, "to run psych as uid 1000 beside a directory of uid 1001")
	dir, bin := publicBins(t)
	mk := func(path string, mode os.FileMode, uid int) string {
		t.Helper()
		if err := os.Mkdir(path, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, mode); err != nil { // past the umask
			t.Fatal(err)
		}
		if err := os.Chown(path, uid, uid); err != nil {
			t.Fatal(err)
		}
		return path
	}
	shared := mk(filepath.Join(dir, "tmp"), 0o777|os.ModeSticky, 0)
	mk(filepath.Join(shared, "psych-1000"), 0o755, 1001) // the other user's, first
	home := mk(filepath.Join(dir, "home"), 0o700, 1000)
	xdg := mk(filepath.Join(dir, "xdg"), 0o700, 1000)
	runAs := func(extraEnv ...string) {
		t.Helper()
		cmd := exec.Command(bin, "run", "--json", "--python", testPython(), "-")
		cmd.Dir = dir
		cmd.Stdin = strings.NewReader("import os\nos.getuid() >= 0")
		cmd.Env = append([]string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + home, "TMPDIR=" + shared}, extraEnv...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 1000, Gid: 1000, Groups: []uint32{}}}
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), `"value":true`) {
			t.Fatalf("psych run as uid 1000 (%v) with %s/psych-1000 made by uid 1001: %v\n%s", extraEnv, shared, err, out)
		}
	}
	runAs()
	if _, err := os.Stat(filepath.Join(home, ".cache", "psych", "runs")); err != nil {
		t.Errorf("without XDG_RUNTIME_DIR the runs' base is not under the user's home: %v", err)
	}
	runAs("XDG_RUNTIME_DIR=" + xdg)
	if _, err := os.Stat(filepath.Join(xdg, "psych")); err != nil {
		t.Errorf("with XDG_RUNTIME_DIR the runs' base is not under it: %v", err)
	}
	// An XDG_RUNTIME_DIR that is not the user's own private directory is
	// not taken: the home's is.
	os.RemoveAll(filepath.Join(home, ".cache"))
	runAs("XDG_RUNTIME_DIR=" + shared)
	if _, err := os.Stat(filepath.Join(shared, "psych")); err == nil {
		t.Errorf("a shared XDG_RUNTIME_DIR was taken")
	}
	if _, err := os.Stat(filepath.Join(home, ".cache", "psych", "runs")); err != nil {
		t.Errorf("with a shared XDG_RUNTIME_DIR the runs' base is not under the user's home: %v", err)
	}
}
