package resources

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"

	"github.com/psych-runtime/psych/internal/testutil"
)

// TestRemoveAllUnmounts: a run directory with file systems still mounted
// below it, nested and with a space in a mount point's name (escaped in
// mountinfo), is removed whole, and nothing stays mounted.
func TestRemoveAllUnmounts(t *testing.T) {
	testutil.RequireRoot(t, "mounting a tmpfs needs root")
	dir := filepath.Join(t.TempDir(), "run")
	outer := filepath.Join(dir, "a tmp")
	inner := filepath.Join(outer, "deeper")
	if err := os.MkdirAll(outer, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", outer, "tmpfs", 0, "size=1m"); err != nil {
		if testutil.InCI() {
			t.Fatalf("CI's root mounts a tmpfs: %v", err)
		}
		t.Skipf("no tmpfs mount here: %v", err)
	}
	t.Cleanup(func() { unix.Unmount(inner, unix.MNT_DETACH); unix.Unmount(outer, unix.MNT_DETACH) })
	if err := os.Mkdir(inner, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", inner, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(inner, "f"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := RemoveAll(dir); err != nil {
		t.Fatalf("RemoveAll: %v", err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the run directory is still there: %v", err)
	}
	left, err := mountinfo.GetMounts(mountinfo.PrefixFilter(dir))
	if err != nil || len(left) != 0 {
		t.Fatalf("still mounted under %s: %v, %v", dir, left, err)
	}
}
