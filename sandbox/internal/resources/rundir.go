package resources

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/psych-runtime/psych/cgroups"
)

// PrepareBase makes sure base exists, is a directory owned by hostUID and
// writable by nobody else, creating it 0711 when absent.
func PrepareBase(base string, hostUID int) error {
	if err := os.MkdirAll(base, 0o711); err != nil {
		return fmt.Errorf("create tmp base %s: %w", base, err)
	}
	fi, err := os.Lstat(base)
	if err != nil {
		return fmt.Errorf("stat tmp base %s: %w", base, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("tmp base %s is not a directory", base)
	}
	uid, ok := fileOwner(fi)
	if !ok || uid != hostUID || fi.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("tmp base %s must be owned by uid %d and writable by no one else (owner %d, mode %04o)", base, hostUID, uid, fi.Mode().Perm())
	}
	return nil
}

// UserBase is the default base of a non-root host user's run directories:
// psych under XDG_RUNTIME_DIR where that is a directory of uid's own that
// no one else may enter (0700, as the XDG spec makes it), else psych/runs
// under the user's cache directory (XDG_CACHE_HOME or ~/.cache) where the
// nearest existing directory on its way is uid's own and writable by no one
// else. Never a fixed name in a shared directory such as /tmp, which
// another local user could make first and so stop this user's runs.
func UserBase(uid int) (string, error) {
	if d := os.Getenv("XDG_RUNTIME_DIR"); filepath.IsAbs(d) && ownedPrivately(d, uid, 0o077) {
		return filepath.Join(d, "psych"), nil
	}
	cache, err := os.UserCacheDir()
	if err != nil || !filepath.IsAbs(cache) {
		return "", fmt.Errorf("no private directory for run directories: no XDG_RUNTIME_DIR of uid %d's own and no cache directory (%v); set the backend's TmpBase", uid, err)
	}
	for d := filepath.Clean(cache); ; d = filepath.Dir(d) {
		if _, err := os.Lstat(d); err == nil {
			if !ownedPrivately(d, uid, 0o022) {
				return "", fmt.Errorf("no private directory for run directories: %s is not uid %d's own, or others may write to it; set XDG_RUNTIME_DIR or the backend's TmpBase", d, uid)
			}
			break
		}
		if d == filepath.Dir(d) {
			break
		}
	}
	return filepath.Join(cache, "psych", "runs"), nil
}

// ownedPrivately says dir is a directory (not a link) owned by uid with
// none of the permission bits in deny.
func ownedPrivately(dir string, uid int, deny os.FileMode) bool {
	fi, err := os.Lstat(dir)
	if err != nil || !fi.IsDir() {
		return false
	}
	owner, ok := fileOwner(fi)
	return ok && owner == uid && fi.Mode().Perm()&deny == 0
}

// NewRunDir creates a fresh directory for one run under base with mode
// perm, named "OWNER-RANDOM" after owner so that a later host can tell a
// dead host's leftovers (RemoveStale). When chown is set it is given to
// uid:gid.
func NewRunDir(base string, owner cgroups.Owner, perm os.FileMode, chown bool, uid, gid uint32) (string, error) {
	var rnd [6]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return "", fmt.Errorf("create run dir: %w", err)
	}
	dir := filepath.Join(base, owner.String()+"-"+hex.EncodeToString(rnd[:]))
	if err := os.Mkdir(dir, perm); err != nil {
		return "", fmt.Errorf("create run dir: %w", err)
	}
	if err := os.Chmod(dir, perm); err != nil { // past the umask
		os.Remove(dir)
		return "", fmt.Errorf("create run dir: %w", err)
	}
	if chown {
		if err := os.Chown(dir, int(uid), int(gid)); err != nil {
			os.Remove(dir)
			return "", fmt.Errorf("chown run dir: %w", err)
		}
	}
	return dir, nil
}

// RemoveAll removes dir even where the program left directories without
// write or search permission (which stops RemoveAll for a non-root host),
// and where a file system is still mounted below it (unmounted first).
func RemoveAll(dir string) error {
	if err := os.RemoveAll(dir); err == nil {
		return nil
	}
	unmountUnder(dir)
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if d != nil && d.IsDir() {
			os.Chmod(p, 0o700)
		}
		return nil
	})
	if err := os.RemoveAll(dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove run dir: %w", err)
	}
	return nil
}

// OwnerOf reads the owner from a run directory's name; ok is false for any
// name NewRunDir does not make.
func OwnerOf(name string) (cgroups.Owner, bool) {
	head, rnd, ok := strings.Cut(name, "-")
	if !ok || len(rnd) != 12 {
		return cgroups.Owner{}, false
	}
	if _, err := hex.DecodeString(rnd); err != nil {
		return cgroups.Owner{}, false
	}
	return cgroups.ParseOwner(head)
}

// RemoveStale removes the run directories under base whose owner is dead
// (cgroups.Owner.Dead: when in doubt, an owner is alive). It returns the
// names it removed.
func RemoveStale(base string) []string {
	entries, err := os.ReadDir(base)
	if err != nil {
		return nil
	}
	var removed []string
	for _, e := range entries {
		if owner, ok := OwnerOf(e.Name()); ok && owner.Dead() {
			if RemoveAll(filepath.Join(base, e.Name())) == nil {
				removed = append(removed, e.Name())
			}
		}
	}
	return removed
}
