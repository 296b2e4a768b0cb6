package cgroups

import (
	"errors"
	"os"
	"testing"
	"time"

	"github.com/psych-runtime/psych/internal/testutil"
)

// TestOpen: a Run opened over the cgroups a process is in (as an engine
// makes them) reads, kills and removes like the one that made them, but
// leaves the directories to their maker; the host's own cgroup is refused.
func TestOpen(t *testing.T) {
	forEachManager(t, func(t *testing.T, m *Manager) {
		made := newRun(t, m, Limits{MemoryBytes: 128 << 20, Pids: 16})
		p := startSpinner(t, made)
		r, err := Open(p.cmd.Process.Pid)
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		if r.Mode() != made.Mode() {
			t.Errorf("mode %s, want the maker's %s", r.Mode(), made.Mode())
		}
		want, got := made.Paths(), r.Paths()
		for key, dir := range got {
			if want[key] != dir {
				t.Errorf("%s: opened %s, made %s", key, dir, want[key])
			}
		}
		if got[unifiedKey] != want[unifiedKey] {
			t.Errorf("unified: opened %q, made %q", got[unifiedKey], want[unifiedKey])
		}
		p.release(t)
		var st Stats
		testutil.WaitFor(t, testutil.Scaled(10*time.Second), "CPU through the opened run", func() bool {
			st, err = r.Stats()
			return err == nil && st.CPUKnown && st.CPU > 20*time.Millisecond
		})
		if mst := mustStats(t, made); st.PidsCurrent != 1 || mst.PidsCurrent != 1 || st.MemoryPeakKnown != mst.MemoryPeakKnown {
			t.Errorf("stats through the opened run %+v, through the maker %+v; want the spinner's one task in both", st, mst)
		}
		if err := r.Attach(os.Getpid()); !errors.Is(err, ErrInvalid) {
			t.Errorf("Attach to an opened run: %v, want ErrInvalid", err)
		}
		if err := r.Kill(); err != nil {
			t.Fatal(err)
		}
		p.cmd.Wait()
		if err := r.Remove(); err != nil {
			t.Fatal(err)
		}
		for key, dir := range want {
			if _, err := os.Stat(dir); err != nil {
				t.Errorf("%s: Remove of an opened run removed %s", key, dir)
			}
		}
	})
	if _, err := Open(os.Getpid()); !errors.Is(err, ErrInvalid) {
		t.Fatalf("Open of this process's own cgroup: %v, want ErrInvalid", err)
	}
}
