//go:build linux

package subprocess

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// CheckInterpreter reports why the run user uid/gid (with no supplementary
// groups) cannot execute the interpreter python, or nil: New's rule, which
// psych doctor applies too. viaTrees is a root host's run through a view,
// which hands the interpreter's trees over as open_tree clones, so only the
// file's own mode matters: a regular file executable by others. Otherwise
// the run user reaches it by path: every directory on the way searchable,
// the file a regular, executable file, by the owner, group or other bits
// that apply. The error names the component in the way.
func CheckInterpreter(python string, uid, gid uint32, viaTrees bool) error {
	if viaTrees {
		return checkOthersExec(python)
	}
	return checkExecutable(python, uid, gid)
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

// checkOthersExec checks that the interpreter file is executable by anyone,
// which a view needs: inside, the sandbox user owns nothing of the host.
func checkOthersExec(python string) error {
	real, err := filepath.EvalSymlinks(python)
	if err != nil {
		return fmt.Errorf("resolve %s: %w", python, err)
	}
	fi, err := os.Stat(real)
	if err != nil {
		return fmt.Errorf("stat %s: %w", real, err)
	}
	if fi.IsDir() {
		return fmt.Errorf("interpreter %s is a directory, not the interpreter's file", python)
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o001 == 0 {
		return fmt.Errorf("interpreter %s (mode %v) is not executable by others, as the sandbox user needs", real, fi.Mode())
	}
	return nil
}
