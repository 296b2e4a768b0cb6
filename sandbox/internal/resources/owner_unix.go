//go:build unix

package resources

import (
	"os"
	"syscall"
)

// fileOwner is the uid owning fi's file.
func fileOwner(fi os.FileInfo) (int, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return -1, false
	}
	return int(st.Uid), true
}
