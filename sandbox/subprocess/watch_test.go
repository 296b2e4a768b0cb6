//go:build linux && cgo

package subprocess

import (
	"fmt"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/psych-runtime/psych/test/contract"
)

// TestWatchWithoutFilter runs the contract's WatchAcrossRuns with the
// filter off (a test-only control), where a program may have an
// unprivileged fanotify group: the run's own overlays, not the filter, keep
// another run's reads from its fanotify inode marks as from its inotify
// watches, and a mount or filesystem mark still takes a capability it
// lacks.
func TestWatchWithoutFilter(t *testing.T) {
	s := newTestSandbox(t, Config{})
	if !s.userns {
		t.Skip("no user namespace with capabilities can be had here, so no view")
	}
	s.hooks.noSeccomp = true
	w := contract.WatchAcrossRuns(t, s, s, time.Minute)
	if w.Fanotify != "ok" {
		// Unprivileged groups came with Linux 5.13.
		t.Skipf("fanotify_init without the filter: %s; inotify alone was checked", w.Fanotify)
	}
	if w.FanMarked == 0 {
		// An unprivileged group marks only files whose file system encodes
		// file handles; overlayfs does since Linux 6.5 (non-decodeable
		// handles). Before that the control is inotify's alone.
		if major, minor := kernelVersion(t); major < 6 || major == 6 && minor < 5 {
			t.Logf("fanotify: no inode mark on %d paths under Linux %d.%d (overlayfs encodes no handle for it before 6.5); inotify alone was checked", len(w.Watched), major, minor)
			return
		}
		t.Fatalf("fanotify: no inode mark on %d paths: the control proves nothing", len(w.Watched))
	}
}

// kernelVersion is the running kernel's major and minor version.
func kernelVersion(t *testing.T) (int, int) {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		t.Fatal(err)
	}
	var major, minor int
	fmt.Sscanf(unix.ByteSliceToString(u.Release[:]), "%d.%d", &major, &minor)
	return major, minor
}
