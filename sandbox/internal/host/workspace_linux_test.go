package host

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"

	"github.com/psych-runtime/psych/internal/testutil"
	"github.com/psych-runtime/psych/sandbox"
)

func newWorkspace(t *testing.T) (*Workspace, string) {
	t.Helper()
	testutil.RequireRoot(t, "to mount a run's workspace")
	w, err := NewWorkspace(filepath.Join(t.TempDir(), "ws"), 8<<20, 1024, 12345, 12346)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return w, w.Path(WorkspaceWork)
}

// TestWorkspaceUnchangedInput: a file that came in is returned only once
// its content changed, whatever its size or mtime; an unchanged one past
// the per-file cap is not listed at all.
func TestWorkspaceUnchangedInput(t *testing.T) {
	w, work := newWorkspace(t)
	big := make([]byte, 2048)
	if err := w.Write([]sandbox.File{{Path: "d/same", Data: []byte("x")}, {Path: "big", Data: big}, {Path: "edit", Data: []byte("ab"), Mode: 0o600}}); err != nil {
		t.Fatal(err)
	}
	var st os.FileInfo
	st, err := os.Stat(filepath.Join(work, "edit"))
	if err != nil || st.Mode().Perm() != 0o600 || st.Sys().(*syscall.Stat_t).Uid != 12345 {
		t.Fatalf("written file: %v, %v", st, err)
	}
	// Same bytes rewritten (a new mtime), and one changed to the same size.
	if err := os.WriteFile(filepath.Join(work, "d/same"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(work, "edit"), []byte("ba"), 0o600); err != nil {
		t.Fatal(err)
	}
	files, omitted := w.Collect(sandbox.FileCaps{OutFileBytes: 1024}.Merge())
	if len(files) != 1 || files[0].Path != "edit" || string(files[0].Data) != "ba" || files[0].Mode != 0o600 || len(omitted) != 0 {
		t.Fatalf("files %+v, omitted %+v: want only edit", files, omitted)
	}
}

// TestWorkspaceTimeCap: past the collection's time, every entry left is
// listed as time_cap, a directory not walked as one entry.
func TestWorkspaceTimeCap(t *testing.T) {
	w, work := newWorkspace(t)
	os.MkdirAll(filepath.Join(work, "dir"), 0o755)
	os.WriteFile(filepath.Join(work, "dir", "x"), []byte("x"), 0o644)
	os.WriteFile(filepath.Join(work, "a"), []byte("abc"), 0o644)
	files, omitted := w.Collect(sandbox.FileCaps{CollectTime: 1}.Merge())
	want := []sandbox.Omitted{{Path: "a", Size: 3, Reason: sandbox.OmitTimeCap}, {Path: "dir", Reason: sandbox.OmitTimeCap}}
	if len(files) != 0 || !reflect.DeepEqual(omitted, want) {
		t.Fatalf("files %+v, omitted %+v; want none and %+v", files, omitted, want)
	}
}

// TestWorkspaceDepth: a directory deeper than sandbox.MaxOutDepth is
// listed, not walked.
func TestWorkspaceDepth(t *testing.T) {
	w, work := newWorkspace(t)
	deep := strings.Repeat("d/", sandbox.MaxOutDepth+1)
	if err := os.MkdirAll(filepath.Join(work, deep), 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(work, deep, "x"), []byte("x"), 0o644)
	files, omitted := w.Collect(sandbox.DefaultFileCaps)
	if len(files) != 0 || len(omitted) != 1 || omitted[0].Reason != sandbox.OmitUnreadable || omitted[0].Path != strings.TrimSuffix(deep, "/") {
		t.Fatalf("files %+v, omitted %+v", files, omitted)
	}
}

// TestWorkspaceClosed: once closed, nothing of the workspace is mounted.
func TestWorkspaceClosed(t *testing.T) {
	w, _ := newWorkspace(t)
	mnt := w.mnt
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile("/proc/self/mountinfo"); strings.Contains(string(b), mnt) {
		t.Fatalf("%s still mounted after Close", mnt)
	}
	if _, err := os.Stat(mnt); !os.IsNotExist(err) {
		t.Fatalf("mount point left: %v", err)
	}
}

// TestWorkspaceRootPrivate: while the workspace is mounted on the host, its
// root keeps other local users out of the run's directories.
func TestWorkspaceRootPrivate(t *testing.T) {
	w, _ := newWorkspace(t)
	fi, err := os.Stat(w.mnt)
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("the workspace's root: %v, %v; want mode 0700", fi, err)
	}
}

// TestWorkspaceArtifacts: valid PNGs named as figures come back with their
// own sides, sorted by name; anything else in the figures directory is
// listed with why, read only when it could be taken.
func TestWorkspaceArtifacts(t *testing.T) {
	w, _ := newWorkspace(t)
	if arts, omitted := w.Artifacts(sandbox.DefaultFileCaps); arts != nil || omitted != nil {
		t.Fatalf("no figures directory: %+v, %+v; want nothing", arts, omitted)
	}
	dir := filepath.Join(w.Path(WorkspaceTmp), WorkspaceFigures)
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	put := func(name string, data []byte) {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	a, b := testPNG(t, 4, 2), testPNG(t, 3, 9)
	put("figure-1.png", a)
	put("figure-1-2.png", b)
	put("figure-3.png", []byte("\x89PNG\r\n\x1a\nforged"))
	put("notes.txt", a)
	put("figure-4.png", make([]byte, 100)) // past the cap below
	os.Symlink("/etc/shadow", filepath.Join(dir, "figure-5.png"))
	arts, omitted := w.Artifacts(sandbox.FileCaps{ArtifactFileBytes: 99}.Merge())
	if len(arts) != 2 || arts[0].Name != "figure-1-2.png" || arts[1].Name != "figure-1.png" {
		t.Fatalf("artifacts %+v: want figure-1-2.png and figure-1.png", arts)
	}
	for i, want := range []struct {
		data []byte
		w, h int
	}{{b, 3, 9}, {a, 4, 2}} {
		got := arts[i]
		if !bytes.Equal(got.Data, want.data) || got.Width != want.w || got.Height != want.h || got.MIME != "image/png" || got.Size != int64(len(want.data)) || got.SHA256 != sum(want.data) {
			t.Errorf("artifact %s = %dx%d %s size %d sha %s; want %dx%d", got.Name, got.Width, got.Height, got.MIME, got.Size, got.SHA256, want.w, want.h)
		}
	}
	wantOmitted := []sandbox.Omitted{
		{Path: "figure-3.png", Size: 14, Reason: sandbox.OmitInvalid},
		{Path: "figure-4.png", Size: 100, Reason: sandbox.OmitTooLarge},
		{Path: "figure-5.png", Size: int64(len("/etc/shadow")), Reason: sandbox.OmitNotRegular},
		{Path: "notes.txt", Size: int64(len(a)), Reason: sandbox.OmitInvalid},
	}
	if !reflect.DeepEqual(omitted, wantOmitted) {
		t.Fatalf("omitted %+v\nwant %+v", omitted, wantOmitted)
	}
	// The count and total caps.
	arts, omitted = w.Artifacts(sandbox.FileCaps{ArtifactCount: 1}.Merge())
	if len(arts) != 1 || len(omitted) != 5 || omitted[0].Reason != sandbox.OmitCountCap {
		t.Fatalf("count cap 1: %d artifacts, omitted %+v", len(arts), omitted)
	}
	arts, omitted = w.Artifacts(sandbox.FileCaps{ArtifactBytes: int64(len(b) + 1)}.Merge())
	if len(arts) != 1 || omitted[0].Path != "figure-1.png" || omitted[0].Reason != sandbox.OmitTotalCap {
		t.Fatalf("total cap: %d artifacts, omitted %+v", len(arts), omitted)
	}
	// The directory replaced by a symlink: never followed.
	os.RemoveAll(dir)
	os.Symlink(w.Path(WorkspaceWork), dir)
	if arts, omitted := w.Artifacts(sandbox.DefaultFileCaps); len(arts) != 0 || len(omitted) != 1 || omitted[0].Reason != sandbox.OmitNotRegular {
		t.Fatalf("figures directory a symlink: %+v, %+v", arts, omitted)
	}
}

func sum(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}
