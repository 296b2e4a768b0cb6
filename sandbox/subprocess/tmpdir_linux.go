package subprocess

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// prepareTmpBase makes sure base exists, is a directory owned by the host
// user and writable by nobody else, creating it 0711 when absent.
func prepareTmpBase(base string, hostUID int) error {
	if err := os.MkdirAll(base, 0o711); err != nil {
		return fmt.Errorf("create tmp base %s: %w", base, err)
	}
	var st syscall.Stat_t
	if err := syscall.Lstat(base, &st); err != nil {
		return fmt.Errorf("stat tmp base %s: %w", base, err)
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFDIR {
		return fmt.Errorf("tmp base %s is not a directory", base)
	}
	if int(st.Uid) != hostUID || st.Mode&0o022 != 0 {
		return fmt.Errorf("tmp base %s must be owned by uid %d and writable by no one else (owner %d, mode %04o)", base, hostUID, st.Uid, st.Mode&07777)
	}
	return nil
}

// newRunDir creates a fresh 0700 directory for one run under base, owned by
// uid:gid, named after its owner so a later host can find stale ones.
func newRunDir(base string, owner ownerID, uid, gid uint32, chown bool) (string, error) {
	var rnd [6]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return "", fmt.Errorf("create run dir: %w", err)
	}
	dir := filepath.Join(base, owner.String()+"-"+hex.EncodeToString(rnd[:]))
	if err := os.Mkdir(dir, 0o700); err != nil {
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

// removeAll removes dir even where the program left directories without
// write or search permission (which stops RemoveAll for a non-root host).
func removeAll(dir string) error {
	if err := os.RemoveAll(dir); err == nil {
		return nil
	}
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

// removeStale removes the run directories under base whose owner is dead.
func removeStale(base string) {
	entries, err := os.ReadDir(base)
	if err != nil {
		return
	}
	for _, e := range entries {
		if owner, ok := parseOwner(e.Name()); ok && !owner.alive() {
			removeAll(filepath.Join(base, e.Name()))
		}
	}
}
