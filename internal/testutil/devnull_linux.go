package testutil

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// NullDeviceIntact says whether path (the host's /dev/null) is still the
// null character device (1, 3), mode 0666, owned by root. A sandbox host's
// tests run programs as outside ids; a host file replaced or handed to one
// of them is a fault of the code under test, however it came about.
func NullDeviceIntact(path string) error {
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFCHR || unix.Major(uint64(st.Rdev)) != 1 || unix.Minor(uint64(st.Rdev)) != 3 {
		return fmt.Errorf("%s is no longer the null device: mode %#o, rdev %d:%d, owner %d:%d",
			path, st.Mode, unix.Major(uint64(st.Rdev)), unix.Minor(uint64(st.Rdev)), st.Uid, st.Gid)
	}
	if st.Uid != 0 || st.Mode&0o777 != 0o666 {
		return fmt.Errorf("%s changed hands: mode %#o, owner %d:%d", path, st.Mode&0o7777, st.Uid, st.Gid)
	}
	return nil
}
