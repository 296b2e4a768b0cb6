package subprocess

import (
	"testing"
	"time"

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
		t.Fatalf("fanotify: no inode mark on %d paths: the control proves nothing", len(w.Watched))
	}
}
