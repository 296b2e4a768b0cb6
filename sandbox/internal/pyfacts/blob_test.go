//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package pyfacts

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
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
