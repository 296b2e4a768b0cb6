package host

import (
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/psych-runtime/psych/internal/eintr"
)

// WatchTmpfs opens each of TmpfsDirs as the process pid sees it (through
// /proc/PID/root, resolved inside that root without following symlinks)
// and keeps those that are a size-capped tmpfs. Call it while pid is alive
// and before the program runs, for a run that has a root of its own (its
// /tmp and /dev/shm are then its own tmpfs, not the host's). What cannot be
// opened is not watched: a watch that cannot be had attributes nothing.
func WatchTmpfs(pid int) *TmpfsWatch {
	if pid <= 0 {
		return nil
	}
	root, err := unix.Open("/proc/"+strconv.Itoa(pid)+"/root", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	defer unix.Close(root)
	w := &TmpfsWatch{}
	for _, dir := range TmpfsDirs {
		fd, err := unix.Openat2(root, strings.TrimPrefix(dir, "/"), &unix.OpenHow{
			Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
			Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
		})
		if err != nil {
			continue
		}
		var st unix.Statfs_t
		if unix.Fstatfs(fd, &st) != nil || st.Type != unix.TMPFS_MAGIC || st.Blocks == 0 {
			unix.Close(fd)
			continue
		}
		w.fds = append(w.fds, fd)
	}
	return w
}

// tmpfsBlocks reads a tmpfs's size and free space, in blocks.
func tmpfsBlocks(fd int) (blocks, free uint64, ok bool) {
	var st unix.Statfs_t
	if eintr.Fstatfs(fd, &st) != nil {
		return 0, 0, false
	}
	return st.Blocks, st.Bfree, true
}

func closeFD(fd int) { unix.Close(fd) }
