//go:build linux && cgo

package subprocess

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/psych-runtime/psych/sandbox"
	"github.com/psych-runtime/psych/sandbox/internal/pyfacts"
	"github.com/psych-runtime/psych/seccomp"
)

// TestFilterCache: the compiled filter is kept in the cache directory and
// read back by a new process (here: with the process's copy forgotten); a
// corrupted entry is rebuilt, and a run still loads the right filter.
func TestFilterCache(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cache")
	forget := func() {
		confined.Lock()
		confined.f = nil
		confined.Unlock()
	}
	inode := func() uint64 {
		t.Helper()
		st, err := os.Stat(filepath.Join(dir, "blob-seccomp-confined.json"))
		if err != nil {
			t.Fatal(err)
		}
		return st.Sys().(*syscall.Stat_t).Ino
	}
	defer forget()
	forget()
	f1, err := confinedFilter(dir, slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	ino := inode()
	forget()
	f2, err := confinedFilter(dir, slog.Default())
	if err != nil || f2.Digest() != f1.Digest() || inode() != ino {
		t.Fatalf("second load: %v, digest %s (compiled %s), entry rewritten %v", err, f2.Digest(), f1.Digest(), inode() != ino)
	}
	// An entry another executable wrote (another key, another program) is
	// not taken: it is rebuilt.
	other, err := seccomp.DefaultFilter()
	if err != nil {
		t.Fatal(err)
	}
	foreign := func() ([]byte, error) {
		return json.Marshal(cachedFilter{BPF: other.Bytes(), Unresolved: other.Unresolved()})
	}
	if _, _, err := pyfacts.LoadBlob(pyfacts.Options{Dir: dir}, "seccomp-confined", "exe of another build", foreign, func([]byte) error { return errors.New("never a hit") }); err != nil {
		t.Fatal(err)
	}
	foreignIno := inode()
	forget()
	f3, err := confinedFilter(dir, slog.Default())
	if err != nil || f3.Digest() != f1.Digest() || inode() == foreignIno {
		t.Fatalf("after another build's entry: %v, digest %s (compiled %s), rebuilt %v", err, f3.Digest(), f1.Digest(), inode() != foreignIno)
	}
	ino = inode()
	entry := filepath.Join(dir, "blob-seccomp-confined.json")
	data, err := os.ReadFile(entry)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0x01
	if err := os.WriteFile(entry, data, 0o600); err != nil {
		t.Fatal(err)
	}
	forget()
	s, err := New(Config{PythonBin: testPython(), CacheDir: dir, AllowSameUID: os.Geteuid() != 0})
	if err != nil {
		t.Fatal(err)
	}
	if inode() == ino {
		t.Fatal("a corrupted entry was not rebuilt")
	}
	res, err := s.Run(context.Background(), sandbox.Request{Code: "import os\nos.setuid(0)"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Isolation == nil || res.Isolation.SeccompDigest != f1.Digest() || res.Failure == nil || res.Failure.Type != "PermissionError" {
		t.Fatalf("run after a rebuilt entry: isolation %+v, failure %+v", res.Isolation, res.Failure)
	}
}
