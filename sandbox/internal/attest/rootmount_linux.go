package attest

import (
	"strconv"

	"golang.org/x/sys/unix"
)

// rootMountID is the mount id of "/" (the first field of its mountinfo
// line), in one statx instead of a read of the whole mount table.
func rootMountID() (string, bool) {
	var st unix.Statx_t
	if unix.Statx(unix.AT_FDCWD, "/", unix.AT_STATX_DONT_SYNC, unix.STATX_MNT_ID, &st) != nil || st.Mask&unix.STATX_MNT_ID == 0 {
		return "", false
	}
	return strconv.FormatUint(st.Mnt_id, 10), true
}
