//go:build linux

package subprocess

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckInterpreter: through a view's clones only the file's mode
// matters; by path every directory too (New's rule and psych doctor's).
func TestCheckInterpreter(t *testing.T) {
	dir := t.TempDir()
	os.Chmod(filepath.Dir(dir), 0o755) // testing's own, 0700
	os.Chmod(dir, 0o700)
	exe := filepath.Join(dir, "python3")
	os.WriteFile(exe, []byte("\x7fELF"), 0o755)
	if err := CheckInterpreter(exe, nobodyID, nobodyID, true); err != nil {
		t.Errorf("through open_tree clones, only the file's mode matters: %v", err)
	}
	if err := CheckInterpreter(exe, nobodyID, nobodyID, false); err == nil || !strings.Contains(err.Error(), "cannot search directory "+dir) {
		t.Errorf("by path through a 0700 directory: %v", err)
	}
	os.Chmod(exe, 0o750)
	if err := CheckInterpreter(exe, nobodyID, nobodyID, true); err == nil {
		t.Error("a file not executable by others: no error")
	}
	os.Chmod(dir, 0o755)
	if err := CheckInterpreter(exe, nobodyID, nobodyID, false); err == nil || !strings.Contains(err.Error(), "cannot execute "+exe) {
		t.Errorf("by path, not executable by others: %v", err)
	}
}
