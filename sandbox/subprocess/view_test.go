//go:build linux && cgo

package subprocess

import (
	"context"
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/psych-runtime/psych/internal/testutil"
	"github.com/psych-runtime/psych/sandbox"
)

// TestViewStatfsIsTheHosts: a tree seen through the run's read-only overlay
// reports the host file system's size and use (shutil.disk_usage), not
// those of the empty layer's tmpfs: overlayfs without an upper layer
// answers statfs from its top layer, so the host's tree must be that one.
func TestViewStatfsIsTheHosts(t *testing.T) {
	s := newTestSandbox(t, Config{})
	defer s.Close()
	if !s.userns {
		if testutil.InCI() {
			t.Fatal("CI's machine has user namespaces, but the probe found none")
		}
		t.Skip("no user namespace with capabilities can be had here, so no view")
	}
	res, err := s.Run(context.Background(), sandbox.Request{Code: `
import os, sys, json
st = os.statvfs(sys.base_prefix)
print(json.dumps({"prefix": sys.base_prefix, "bsize": st.f_frsize, "blocks": st.f_blocks, "free": st.f_bfree, "files": st.f_files}))
`})
	if err != nil {
		t.Fatal(err)
	}
	if res.Failure != nil {
		t.Fatalf("program failed: %+v\n%s", res.Failure, res.Stderr)
	}
	var in struct {
		Prefix                     string
		Bsize, Blocks, Free, Files uint64
	}
	if err := json.Unmarshal([]byte(strings.TrimSpace(res.Stdout)), &in); err != nil {
		t.Fatalf("%v: %q", err, res.Stdout)
	}
	var host unix.Statfs_t
	if err := unix.Statfs(in.Prefix, &host); err != nil {
		t.Fatal(err)
	}
	if in.Bsize != uint64(host.Frsize) || in.Blocks != host.Blocks || in.Files != host.Files {
		t.Fatalf("statvfs(%s) in the run: %d blocks of %d, %d inodes; on the host %d of %d, %d inodes", in.Prefix, in.Blocks, in.Bsize, in.Files, host.Blocks, host.Frsize, host.Files)
	}
	if in.Blocks == in.Free {
		t.Fatalf("statvfs(%s) in the run: nothing used of %d blocks", in.Prefix, in.Blocks)
	}
}

// TestViewHandsInEachEtcFileOnce: a settings file that lies in a directory
// the view hands in already (the trust store, the alternatives), or is
// handed in already, is not bound again: a bind below a read-only
// directory bound before it would fail every run.
func TestViewHandsInEachEtcFileOnce(t *testing.T) {
	var extra []string
	for _, p := range []string{"/etc/ssl/certs/ca-certificates.crt", "/etc/services"} {
		if _, err := os.Stat(p); err == nil {
			extra = append(extra, p)
		}
	}
	if len(extra) == 0 {
		testutil.Unavailable(t, "this host has neither a trust store nor /etc/services")
	}
	saved := debianPythonEtc
	debianPythonEtc = func() []string { return append(extra, saved()...) }
	defer func() { debianPythonEtc = saved }()
	v, err := resolveView(testPython(), []string{"/usr"})
	if err != nil {
		t.Fatal(err)
	}
	for i, f := range v.files {
		for _, g := range v.files[:i] {
			if within(f.path, g.path) {
				t.Errorf("%s is handed in, and again below or as %s", g.path, f.path)
			}
		}
	}
}

// TestHostMountPoints: the view's list of the host's mount points has the
// root and a mount whose path the kernel escapes (a space), unescaped, in
// order.
func TestHostMountPoints(t *testing.T) {
	testutil.RequireRoot(t, "mounts a tmpfs")
	dir := t.TempDir() + "/with space"
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatal(err)
	}
	defer unix.Unmount(dir, unix.MNT_DETACH)
	points, err := hostMountPoints()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(points, "/") || !slices.Contains(points, dir) || !slices.IsSorted(points) {
		t.Errorf("host mount points %q: want / and %q, sorted", points, dir)
	}
}
