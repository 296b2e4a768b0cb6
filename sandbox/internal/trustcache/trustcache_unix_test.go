//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package trustcache

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/psych-runtime/psych/internal/testutil"
	"golang.org/x/sys/unix"
)

// openTemp opens a fresh cache directory, closed when the test ends.
func openTemp(t *testing.T) (string, int) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "cache")
	fd, untrusted, err := OpenDir(dir)
	if err != nil || untrusted || fd < 0 {
		t.Fatalf("OpenDir: fd %d, untrusted %v, %v", fd, untrusted, err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return dir, fd
}

// nextFD is the descriptor the next open gets: the lowest free one.
func nextFD(t *testing.T) int {
	t.Helper()
	fd, err := unix.Open("/", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	unix.Close(fd)
	return fd
}

// TestWriteRead: what Write wrote, Read serves as it was, in Seal's exact
// bytes, as the one 0600 file of one link; a second Write replaces it and
// leaves no temporary file.
func TestWriteRead(t *testing.T) {
	dir, fd := openTemp(t)
	if fi, err := os.Lstat(dir); err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
		t.Fatalf("created directory: %v, %v", fi.Mode(), err)
	}
	body := []byte(`{"key":"k"}`)
	for _, tail := range [][]byte{[]byte("any\nbytes\x00\xff"), nil} {
		if err := Write(fd, "e.json", body, tail); err != nil {
			t.Fatal(err)
		}
		gotBody, gotTail, err := Read(fd, "e.json")
		if err != nil || !bytes.Equal(gotBody, body) || !bytes.Equal(gotTail, tail) {
			t.Fatalf("Read: %q %q %v, want %q %q", gotBody, gotTail, err, body, tail)
		}
		raw, err := os.ReadFile(filepath.Join(dir, "e.json"))
		if err != nil || !bytes.Equal(raw, Seal(body, tail)) {
			t.Fatalf("the entry is not Seal's bytes: %q %v", raw, err)
		}
	}
	ents, err := Entries(fd)
	if err != nil || len(ents) != 1 || ents[0].Name() != "e.json" {
		t.Fatalf("Entries: %v %v, want e.json alone", ents, err)
	}
	var st unix.Stat_t
	if err := unix.Lstat(filepath.Join(dir, "e.json"), &st); err != nil || st.Mode&0o7777 != 0o600 || st.Nlink != 1 {
		t.Fatalf("entry mode %o, %d links, %v", st.Mode&0o7777, st.Nlink, err)
	}
}

// TestReadRefuses: an entry that looks tampered with is ErrUntrusted; a
// missing, broken or oversized one is refused, but not as untrusted.
func TestReadRefuses(t *testing.T) {
	good := Seal([]byte(`{}`), []byte("tail"))
	rewrite := func(b []byte) func(*testing.T, string) {
		return func(t *testing.T, p string) {
			if err := os.WriteFile(p, b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	flipped := bytes.Clone(good)
	flipped[len(flipped)-1] ^= 1
	cases := []struct {
		name      string
		root      bool
		plant     func(*testing.T, string)
		untrusted bool
	}{
		{"missing", false, func(t *testing.T, p string) { os.Remove(p) }, false},
		{"checksum", false, rewrite(flipped), false},
		{"another format", false, rewrite(bytes.Replace(good, fmt.Appendf(nil, `{"format":%d,`, Format), fmt.Appendf(nil, `{"format":%d,`, Format+1), 1)), false},
		{"no header line", false, rewrite([]byte(`{}`)), false},
		{"oversized", false, rewrite(append(bytes.Clone(good), make([]byte, MaxEntryBytes)...)), false},
		{"symlink", false, func(t *testing.T, p string) {
			target := filepath.Join(t.TempDir(), "entry")
			rewrite(good)(t, target)
			os.Remove(p)
			if err := os.Symlink(target, p); err != nil {
				t.Fatal(err)
			}
		}, true},
		{"mode 0640", false, func(t *testing.T, p string) { os.Chmod(p, 0o640) }, true},
		{"two links", false, func(t *testing.T, p string) { os.Link(p, p+"2") }, true},
		{"fifo", false, func(t *testing.T, p string) { os.Remove(p); syscall.Mkfifo(p, 0o600) }, true},
		{"directory", false, func(t *testing.T, p string) { os.Remove(p); os.Mkdir(p, 0o600) }, true},
		{"another owner", true, func(t *testing.T, p string) { os.Chown(p, 65534, 65534) }, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.root {
				testutil.RequireRoot(t, "gives an entry to another uid")
			}
			dir, fd := openTemp(t)
			if err := Write(fd, "e", []byte(`{}`), []byte("tail")); err != nil {
				t.Fatal(err)
			}
			if _, _, err := Read(fd, "e"); err != nil {
				t.Fatalf("the good entry: %v", err)
			}
			tc.plant(t, filepath.Join(dir, "e"))
			body, tail, err := Read(fd, "e")
			if err == nil || body != nil || tail != nil {
				t.Fatalf("Read served %q %q, %v", body, tail, err)
			}
			if errors.Is(err, ErrUntrusted) != tc.untrusted {
				t.Fatalf("Read: %v; untrusted %v, want %v", err, errors.Is(err, ErrUntrusted), tc.untrusted)
			}
		})
	}
}

// TestOpenDirRefuses: a directory another could have written to is
// untrusted, one that cannot be made is not; neither leaves a descriptor
// open, nor has its mode changed.
func TestOpenDirRefuses(t *testing.T) {
	cases := []struct {
		name      string
		root      bool
		plant     func(t *testing.T, dir string) string // the path to open
		untrusted bool
	}{
		{"mode 0750", false, func(t *testing.T, dir string) string { os.Chmod(dir, 0o750); return dir }, true},
		{"symlink", false, func(t *testing.T, dir string) string {
			link := filepath.Join(t.TempDir(), "link")
			os.Symlink(dir, link)
			return link
		}, true},
		{"a file", false, func(t *testing.T, dir string) string {
			p := filepath.Join(t.TempDir(), "file")
			os.WriteFile(p, nil, 0o700)
			return p
		}, true},
		{"under a file", false, func(t *testing.T, dir string) string {
			p := filepath.Join(t.TempDir(), "file")
			os.WriteFile(p, nil, 0o600)
			return filepath.Join(p, "cache")
		}, false},
		{"another owner", true, func(t *testing.T, dir string) string { os.Chown(dir, 65534, 65534); return dir }, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.root {
				testutil.RequireRoot(t, "gives a directory to another uid")
			}
			dir := filepath.Join(t.TempDir(), "cache")
			if err := os.Mkdir(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			open := tc.plant(t, dir)
			var before unix.Stat_t
			unix.Stat(dir, &before)
			next := nextFD(t)
			fd, untrusted, err := OpenDir(open)
			if err == nil || fd != -1 || untrusted != tc.untrusted {
				t.Fatalf("OpenDir: fd %d, untrusted %v (want %v), %v", fd, untrusted, tc.untrusted, err)
			}
			if _, err := unix.FcntlInt(uintptr(next), unix.F_GETFD, 0); err == nil {
				t.Errorf("descriptor %d, the one OpenDir opened, is still open after the refusal", next)
			}
			var after unix.Stat_t
			if unix.Stat(dir, &after); after.Mode != before.Mode {
				t.Errorf("the refused directory's mode went from %o to %o", before.Mode, after.Mode)
			}
		})
	}
}
