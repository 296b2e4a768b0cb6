//go:build unix

package full

import (
	"io/fs"
	"syscall"
)

// fileUID is the uid that owns fi.
func fileUID(fi fs.FileInfo) (int, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return int(st.Uid), true
}
