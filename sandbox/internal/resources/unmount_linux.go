package resources

import (
	"slices"

	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"
)

// unmountUnder lazily unmounts every mount at or below dir in this
// process's mount namespace, deepest first: a run's tmpfs that a killed
// host left mounted must not stop its directory's removal. It is off the
// per-run path (only where a removal failed), so it reads the mount table
// with moby/sys/mountinfo.
func unmountUnder(dir string) {
	mounts, err := mountinfo.GetMounts(mountinfo.PrefixFilter(dir))
	if err != nil {
		return
	}
	points := make([]string, 0, len(mounts))
	for _, m := range mounts {
		points = append(points, m.Mountpoint)
	}
	slices.SortFunc(points, func(a, b string) int { return len(b) - len(a) })
	for _, p := range points {
		unix.Unmount(p, unix.MNT_DETACH)
	}
}
