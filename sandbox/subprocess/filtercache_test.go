//go:build linux && cgo

package subprocess

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/psych-runtime/psych/sandbox"
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
	// This executable's own entry (pyfacts.LoadExeBlob).
	entryPath := func() string {
		t.Helper()
		m, _ := filepath.Glob(filepath.Join(dir, "blob-seccomp-confined-*.json"))
		if len(m) != 1 {
			t.Fatalf("entries %v; want this executable's one", m)
		}
		return m[0]
	}
	inode := func() uint64 {
		t.Helper()
		st, err := os.Stat(entryPath())
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
	// The entry holds this executable's identity: rewritten as another
	// build's (another identity, another program), it is not taken but
	// rebuilt.
	other, err := seccomp.DefaultFilter()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(cachedFilter{BPF: other.Bytes(), Unresolved: other.Unresolved()})
	if err != nil {
		t.Fatal(err)
	}
	// A control: forged under this executable's own identity, the same
	// bytes are taken, so only the identity turns the forgery away below.
	self := forgeAs(t, entryPath(), "", raw)
	forget()
	if g, err := confinedFilter(dir, slog.Default()); err != nil || g.Digest() != other.Digest() {
		t.Fatalf("a well-formed entry under this executable's identity was not taken: %v", err)
	}
	forgeAs(t, entryPath(), "exe 1 2 3 755 4 5", raw)
	if self == "exe 1 2 3 755 4 5" {
		t.Fatal("the forged identity is this executable's")
	}
	foreignIno := inode()
	forget()
	f3, err := confinedFilter(dir, slog.Default())
	if err != nil || f3.Digest() != f1.Digest() || inode() == foreignIno {
		t.Fatalf("after another build's entry: %v, digest %s (compiled %s), rebuilt %v", err, f3.Digest(), f1.Digest(), inode() != foreignIno)
	}
	ino = inode()
	entry := entryPath()
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

// forgeAs rewrites the blob entry at path as if the executable with
// identity id (empty: the entry's own) had written tail there: the same
// layout and a valid checksum, so that only the key tells it apart. It
// returns the entry's identity before.
func forgeAs(t *testing.T, path, id string, tail []byte) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	header, _, _ := bytes.Cut(data, []byte("\n"))
	var env struct {
		Payload struct {
			Key   string `json:"key"`
			Owner string `json:"owner"`
		} `json:"payload"`
	}
	if err := json.Unmarshal(header, &env); err != nil {
		t.Fatal(err)
	}
	was, rest, ok := strings.Cut(env.Payload.Key, "; ")
	if !ok {
		t.Fatalf("key %q holds no identity", env.Payload.Key)
	}
	if id == "" {
		id = was
	}
	env.Payload.Key = id + "; " + rest
	body, err := json.Marshal(env.Payload)
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	h.Write(body)
	h.Write([]byte("\n"))
	h.Write(tail)
	forged := fmt.Sprintf(`{"format":2,"sha256":"%x","payload":%s}`+"\n", h.Sum(nil), body)
	if err := os.WriteFile(path, append([]byte(forged), tail...), 0o600); err != nil {
		t.Fatal(err)
	}
	return was
}
