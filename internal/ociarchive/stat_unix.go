//go:build unix

package ociarchive

import (
	"os"
	"syscall"
)

type stat struct {
	uid, gid        int
	dev, ino, nlink uint64
}

func statOf(fi os.FileInfo) (stat, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return stat{}, false
	}
	return stat{int(st.Uid), int(st.Gid), uint64(st.Dev), uint64(st.Ino), uint64(st.Nlink)}, true
}
