//go:build unix

package sqlite

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/psych-runtime/psych"
)

// TestFileModes: a new store, its -wal and its -shm are 0600 whatever the
// umask.
func TestFileModes(t *testing.T) {
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	path := filepath.Join(t.TempDir(), "psych.db")
	s := open(t, path)
	defer s.Close()
	if err := s.BeginExecution(ctx, &psych.Execution{ID: "a", Started: time.Now()}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s is %v; want 0600", filepath.Base(p), fi.Mode().Perm())
		}
	}
}
