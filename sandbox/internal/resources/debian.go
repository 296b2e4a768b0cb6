package resources

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// DpkgStatus is Debian's database of installed packages.
const DpkgStatus = "/var/lib/dpkg/status"

// maxDpkgStatus bounds what DebianPythonEtc reads of the database: a few
// thousand packages take a few MiB.
const maxDpkgStatus = 64 << 20

// DebianPythonEtc are the settings files under /etc of the host's Debian
// Python packages, which a root built from nothing binds read-only beside
// HostEtc: the configuration files (dpkg's conffiles) of every installed
// package of Debian's python section, such as /etc/matplotlibrc and the
// interpreter's /etc/python3.X/sitecustomize.py. Only what every local
// user may read is listed (the file and each directory above it readable
// by others, checked on every call), never a file EtcFiles builds; a host
// without dpkg's database gives none. The database is read again only
// once it has changed.
func DebianPythonEtc() []string { return debianPythonEtc(DpkgStatus) }

func debianPythonEtc(status string) []string {
	var out []string
	for _, p := range pythonConffilesOf(status) {
		if public(p) && !slices.ContainsFunc(EtcFiles(), func(e EtcFile) bool { return e.Path == p }) {
			out = append(out, p)
		}
	}
	return out
}

// parsed is the last database pythonConffilesOf read: a process parses it
// again only once dpkg has changed it (dpkg replaces it whole).
var parsed struct {
	sync.Mutex
	path  string
	size  int64
	mtime time.Time
	files []string
}

// pythonConffilesOf is pythonConffiles of the database at path.
func pythonConffilesOf(path string) []string {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil
	}
	parsed.Lock()
	defer parsed.Unlock()
	if parsed.path == path && parsed.size == fi.Size() && parsed.mtime.Equal(fi.ModTime()) {
		return parsed.files
	}
	db, err := io.ReadAll(io.LimitReader(f, maxDpkgStatus))
	if err != nil {
		return nil
	}
	parsed.path, parsed.size, parsed.mtime, parsed.files = path, fi.Size(), fi.ModTime(), pythonConffiles(db)
	return parsed.files
}

// pythonConffiles reads a dpkg status database and returns the conffiles
// under /etc of the installed packages whose section is python (also as
// contrib/python, non-free/python), in the database's order. Only the
// few stanzas with conffiles are parsed.
func pythonConffiles(db []byte) []string {
	var out []string
	for len(db) > 0 {
		stanza, rest, _ := bytes.Cut(db, []byte("\n\n"))
		db = rest
		if !bytes.Contains(stanza, []byte("\nConffiles:")) && !bytes.HasPrefix(stanza, []byte("Conffiles:")) {
			continue
		}
		var files []string
		var installed, python, inConffiles bool
		for _, line := range bytes.Split(stanza, []byte("\n")) {
			if len(line) == 0 {
				continue
			}
			if line[0] == ' ' || line[0] == '\t' {
				// " /etc/x <md5> [obsolete|remove-on-upgrade]"
				if f := strings.Fields(string(line)); inConffiles && len(f) == 2 {
					if p := filepath.Clean(f[0]); strings.HasPrefix(p, "/etc/") && p == f[0] {
						files = append(files, p)
					}
				}
				continue
			}
			name, value, _ := bytes.Cut(line, []byte(":"))
			value = bytes.TrimSpace(value)
			inConffiles = string(name) == "Conffiles"
			switch string(name) {
			case "Status":
				installed = bytes.HasSuffix(value, []byte(" installed"))
			case "Section":
				s := string(value)
				python = s == "python" || strings.HasSuffix(s, "/python")
			}
		}
		if installed && python {
			out = append(out, files...)
		}
	}
	return out
}

// public reports whether p is a regular file (through symlinks) that any
// local user can read: it and every directory above it open to others.
func public(p string) bool {
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return false
	}
	fi, err := os.Stat(real)
	if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o004 == 0 {
		return false
	}
	for d := filepath.Dir(real); ; d = filepath.Dir(d) {
		di, err := os.Stat(d)
		if err != nil || di.Mode().Perm()&0o001 == 0 {
			return false
		}
		if d == "/" {
			return true
		}
	}
}
