//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package pyfacts

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLoadBlob: a blob is built once and then served; another key, bytes
// check refuses, a corrupted or untrusted entry and NoCache each build
// again, and the run still gets the right bytes.
func TestLoadBlob(t *testing.T) {
	dir := cacheDir(t)
	builds := 0
	want := []byte("program-1")
	build := func() ([]byte, error) { builds++; return bytes.Clone(want), nil }
	accept := func([]byte) error { return nil }
	load := func(key string, check func([]byte) error, wantHit bool) {
		t.Helper()
		n := builds
		b, hit, err := LoadBlob(Options{Dir: dir}, "seccomp-test", key, build, check)
		if err != nil || !bytes.Equal(b, want) || hit != wantHit || (builds > n) == wantHit {
			t.Fatalf("LoadBlob(%s) = %q, hit %v, %v (built %d times); want %q, hit %v", key, b, hit, err, builds-n, want, wantHit)
		}
	}
	load("k1", accept, false)
	load("k1", accept, true)
	want = []byte("program-2")
	load("k2", accept, false) // another key
	load("k2", accept, true)
	load("k2", func([]byte) error { return errors.New("refused") }, false)
	entry := filepath.Join(dir, blobEntryName("seccomp-test"))
	data, err := os.ReadFile(entry)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 1
	if err := os.WriteFile(entry, data, 0o600); err != nil {
		t.Fatal(err)
	}
	load("k2", accept, false) // corrupted
	if err := os.Chmod(entry, 0o644); err != nil {
		t.Fatal(err)
	}
	load("k2", accept, false) // untrusted mode: replaced
	load("k2", accept, true)
	n := builds
	for i := 0; i < 2; i++ {
		if b, hit, err := LoadBlob(Options{Dir: NoCache}, "seccomp-test", "k2", build, accept); err != nil || hit || !bytes.Equal(b, want) {
			t.Fatalf("NoCache: %q, %v, %v", b, hit, err)
		}
	}
	if builds != n+2 {
		t.Fatalf("NoCache built %d times in 2 loads", builds-n)
	}
	if _, _, err := LoadBlob(Options{Dir: dir}, "../x", "k", build, accept); !errors.Is(err, ErrInvalidOptions) {
		t.Fatalf("a bad name: %v", err)
	}
	if _, _, err := LoadBlob(Options{Dir: dir}, "seccomp-test", "k3", func() ([]byte, error) { return nil, errors.New("no compiler") }, accept); err == nil {
		t.Fatal("build's error was lost")
	}
}

// TestLoadExeBlob: two executables keep an entry each (neither takes the
// other's, in turns or not); a rebuilt one replaces its own; one whose path
// is gone loses its entry when another writes.
func TestLoadExeBlob(t *testing.T) {
	dir := cacheDir(t)
	exes := t.TempDir()
	a, b := filepath.Join(exes, "a"), filepath.Join(exes, "b")
	for _, p := range []string{a, b} {
		if err := os.WriteFile(p, []byte(p), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	builds := 0
	load := func(exe, id, key string, wantHit bool) {
		t.Helper()
		want := []byte(exe + id + key)
		n := builds
		got, o, err := loadExeBlob(Options{Dir: dir}, "seccomp-test", exe, id, key,
			func() ([]byte, error) { builds++; return bytes.Clone(want), nil }, func([]byte) error { return nil })
		if err != nil || !bytes.Equal(got, want) || o.hit != wantHit || (builds > n) == wantHit || o.writeErr != nil {
			t.Fatalf("loadExeBlob(%s, %s, %s) = %q, %+v, %v; want hit %v", exe, id, key, got, o, err, wantHit)
		}
	}
	entry := func(exe string) string { return filepath.Join(dir, blobEntryName(exeBlobName("seccomp-test", exe))) }
	load(a, "id-a1", "k", false)
	load(b, "id-b1", "k", false)
	for range 2 {
		load(a, "id-a1", "k", true)
		load(b, "id-b1", "k", true)
	}
	load(a, "id-a2", "k", false) // rebuilt: its own entry, replaced
	load(a, "id-a2", "k", true)
	load(b, "id-b1", "k", true)
	if err := os.Remove(a); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(entry(a)); err != nil {
		t.Fatalf("a's entry went before anyone wrote: %v", err)
	}
	load(b, "id-b1", "k2", false) // a write: a's entry, its path gone, is pruned
	if _, err := os.Stat(entry(a)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a's entry outlived its executable: %v", err)
	}
	if _, err := os.Stat(entry(b)); err != nil {
		t.Fatalf("b's own entry: %v", err)
	}
	if _, _, err := loadExeBlob(Options{Dir: dir}, strings.Repeat("x", 48), b, "id", "k", nil, nil); !errors.Is(err, ErrInvalidOptions) {
		t.Fatalf("a name too long for the suffix: %v", err)
	}
}
