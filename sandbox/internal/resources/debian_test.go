package resources

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const dpkgStatus = `Package: python3-x
Status: install ok installed
Section: python
Conffiles:
 /etc/xrc 4eb99e1644511491db92307b0e9cb34c
 /etc/old 4eb99e1644511491db92307b0e9cb34c obsolete
 /usr/lib/not-etc 4eb99e1644511491db92307b0e9cb34c
 /etc/../root/x 4eb99e1644511491db92307b0e9cb34c
Description: x
 Conffiles: /etc/in-description 0

Package: openssh-server
Status: install ok installed
Section: net
Conffiles:
 /etc/ssh/sshd_config 4eb99e1644511491db92307b0e9cb34c

Package: python3-removed
Status: deinstall ok config-files
Section: python
Conffiles:
 /etc/removedrc 4eb99e1644511491db92307b0e9cb34c

Package: python3-contrib
Conffiles:
 /etc/contribrc 4eb99e1644511491db92307b0e9cb34c
Section: contrib/python
Status: install ok installed
`

// TestPythonConffiles: the conffiles of installed packages of the python
// section only, each a clean path under /etc, none obsolete.
func TestPythonConffiles(t *testing.T) {
	got := pythonConffiles([]byte(dpkgStatus))
	if want := []string{"/etc/xrc", "/etc/contribrc"}; !slices.Equal(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
}

// TestPublic: a file is listed only where every local user can read it.
func TestPublic(t *testing.T) {
	dir, err := os.MkdirTemp("", "psych-public-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if !publicDir(filepath.Dir(dir)) {
		t.Skipf("the temporary directory %s is not open to others", filepath.Dir(dir))
	}
	open, closed := filepath.Join(dir, "open"), filepath.Join(dir, "closed")
	for p, mode := range map[string]os.FileMode{open: 0o755, closed: 0o700} {
		if err := os.Mkdir(p, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(p string, mode os.FileMode) string {
		if err := os.WriteFile(p, nil, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	if !public(write(filepath.Join(open, "rc"), 0o644)) {
		t.Error("a 0644 file in open directories is not public")
	}
	link := filepath.Join(open, "link")
	if err := os.Symlink(filepath.Join(closed, "rc"), link); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{write(filepath.Join(open, "key"), 0o600), write(filepath.Join(closed, "rc"), 0o644), link, open, filepath.Join(open, "absent")} {
		if public(p) {
			t.Errorf("%s is public", p)
		}
	}
}

// TestDebianPythonEtc: on this host, only public files under /etc.
func TestDebianPythonEtc(t *testing.T) {
	for _, p := range DebianPythonEtc() {
		if filepath.Clean(p) != p || !strings.HasPrefix(p, "/etc/") || !public(p) {
			t.Errorf("%q: want a public file under /etc", p)
		}
		if slices.ContainsFunc(EtcFiles(), func(f EtcFile) bool { return f.Path == p }) {
			t.Errorf("%q is both built and bound", p)
		}
	}
}

func publicDir(d string) bool {
	for ; ; d = filepath.Dir(d) {
		if fi, err := os.Stat(d); err != nil || fi.Mode().Perm()&0o001 == 0 {
			return false
		}
		if d == "/" {
			return true
		}
	}
}

// TestPythonConffilesOfRereads: the database is parsed again once it has
// changed.
func TestPythonConffilesOfRereads(t *testing.T) {
	path := filepath.Join(t.TempDir(), "status")
	if err := os.WriteFile(path, []byte(dpkgStatus), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := pythonConffilesOf(path); !slices.Equal(got, []string{"/etc/xrc", "/etc/contribrc"}) {
		t.Fatalf("got %q", got)
	}
	changed := strings.Replace(dpkgStatus, "Section: net", "Section: python", 1)
	if err := os.WriteFile(path, []byte(changed), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := pythonConffilesOf(path); !slices.Equal(got, []string{"/etc/xrc", "/etc/ssh/sshd_config", "/etc/contribrc"}) {
		t.Fatalf("after a change: got %q", got)
	}
}
