package resources

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/psych-runtime/psych/cgroups"
)

func TestRunDirs(t *testing.T) {
	base := t.TempDir()
	if err := PrepareBase(base, os.Geteuid()); err != nil {
		t.Fatal(err)
	}
	self, err := cgroups.SelfOwner()
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	mine, err := NewRunDir(base, self, 0o711, false, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(mine); err != nil || fi.Mode().Perm() != 0o711 {
		t.Fatalf("run dir %v: %v", fi, err)
	}
	recycled, _ := NewRunDir(base, cgroups.Owner{PID: self.PID, Start: self.Start + 1}, 0o700, false, 0, 0)
	// A directory the program left unwritable is removed all the same.
	locked := filepath.Join(recycled, "locked")
	os.MkdirAll(filepath.Join(locked, "deep"), 0o700)
	os.Chmod(locked, 0o500)
	foreign := filepath.Join(base, "not-a-run-dir")
	os.Mkdir(foreign, 0o700)
	removed := RemoveStale(base)
	if len(removed) != 1 || removed[0] != filepath.Base(recycled) {
		t.Fatalf("removed %v, want only the recycled pid's %s", removed, filepath.Base(recycled))
	}
	for _, keep := range []string{mine, foreign} {
		if _, err := os.Stat(keep); err != nil {
			t.Errorf("%s was removed", keep)
		}
	}
	if _, ok := OwnerOf(filepath.Base(mine)); !ok {
		t.Errorf("OwnerOf(%s) refused a name NewRunDir made", filepath.Base(mine))
	}
	for _, bad := range []string{"1.2-zz", "1.2-abc", "1.2", "x.2-0123456789ab"} {
		if _, ok := OwnerOf(bad); ok {
			t.Errorf("OwnerOf(%q) accepted", bad)
		}
	}
}
