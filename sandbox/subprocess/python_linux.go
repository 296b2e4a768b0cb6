//go:build linux && cgo

package subprocess

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/psych-runtime/psych/sandbox/internal/pyfacts"
)

// resolvePython asks python3 on PATH for sys.executable, once.
func resolvePython() (string, error) {
	shim, err := exec.LookPath("python3")
	if err != nil {
		return "", fmt.Errorf("find python3 on PATH (set PythonBin): %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, shim, "-I", "-c", "import sys; print(sys.executable)").Output()
	if err != nil {
		return "", fmt.Errorf("ask %s for sys.executable (set PythonBin): %w", shim, err)
	}
	exe := string(bytes.TrimSpace(out))
	if !filepath.IsAbs(exe) {
		return "", fmt.Errorf("%s reports sys.executable %q, not an absolute path (set PythonBin)", shim, exe)
	}
	return exe, nil
}

// learnPython returns what New needs to know about python (its prefixes
// and the bootstrap compiled by it), from the interpreter cache in cacheDir
// when it holds a trusted entry for this very interpreter file and
// bootstrap, else from one start of python (package pyfacts). A cache that
// cannot be used is bypassed and logged, never an error.
func learnPython(python, cacheDir string, log *slog.Logger) (pyfacts.Facts, error) {
	f, hit, err := pyfacts.Load(python, pyfacts.Options{Dir: cacheDir, Logger: log})
	if err != nil {
		return pyfacts.Facts{}, err
	}
	log.Debug("psych: interpreter facts", "python", python, "version", f.Version, "cached", hit)
	return f, nil
}

// checkExecutable reports whether uid/gid (with no supplementary groups)
// can execute path: every directory on the way searchable, the file a
// regular, executable file. The error names the component in the way.
func checkExecutable(path string, uid, gid uint32) error {
	return checkReach(path, uid, gid, true)
}

// checkSearchable reports whether uid/gid can search (enter) the directory
// path and every directory above it.
func checkSearchable(path string, uid, gid uint32) error {
	return checkReach(path, uid, gid, false)
}

// checkReach walks path, resolved, from the root: each directory must be
// searchable by uid/gid, and the last component an executable regular file
// (file) or a searchable directory (!file).
func checkReach(path string, uid, gid uint32, file bool) error {
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return fmt.Errorf("resolve %s: %w", path, err)
	}
	if real, err = filepath.Abs(real); err != nil {
		return err
	}
	parts := strings.Split(real, "/")
	dir := "/"
	for i, p := range parts {
		if p == "" {
			continue
		}
		cur := filepath.Join(dir, p)
		last := i == len(parts)-1
		var st syscall.Stat_t
		if err := syscall.Stat(cur, &st); err != nil {
			return fmt.Errorf("stat %s: %w", cur, err)
		}
		isFile := st.Mode&syscall.S_IFMT == syscall.S_IFREG
		if last && isFile != file {
			return fmt.Errorf("%s is not a %s", cur, map[bool]string{true: "regular file", false: "directory"}[file])
		}
		if !permits(&st, uid, gid, 1) {
			what := "search directory"
			if last && file {
				what = "execute"
			}
			return fmt.Errorf("uid %d cannot %s %s (mode %04o, owner %d:%d)", uid, what, cur, st.Mode&07777, st.Uid, st.Gid)
		}
		dir = cur
	}
	return nil
}

// permits applies the owner/group/other bits for bit (1 = x, 2 = w, 4 = r).
func permits(st *syscall.Stat_t, uid, gid uint32, bit uint32) bool {
	switch {
	case st.Uid == uid:
		return st.Mode>>6&bit != 0
	case st.Gid == gid:
		return st.Mode>>3&bit != 0
	default:
		return st.Mode&bit != 0
	}
}

// interpreterError explains how to fix an interpreter the run user cannot use.
func interpreterError(python string, uid uint32, err error) error {
	return fmt.Errorf("interpreter %s cannot be used by run uid %d: %v; "+
		"set PythonBin (psych run --python) to an interpreter that uid can execute, "+
		"such as /usr/bin/python3, or install one outside private home directories", python, uid, err)
}
