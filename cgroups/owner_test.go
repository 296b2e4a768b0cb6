package cgroups

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"syscall"
	"testing"
)

// TestOwnerRule is the one rule for what a dead host left behind, on every
// case it decides: only a missing pid or a later process's start time is
// dead; any other failure to read the stat keeps the owner alive.
func TestOwnerRule(t *testing.T) {
	o := Owner{PID: 4242, Start: 1000}
	cases := []struct {
		name  string
		start uint64
		err   error
		dead  bool
	}{
		{"same process", 1000, nil, false},
		{"pid recycled", 2000, nil, true},
		{"no such pid", 0, fs.ErrNotExist, true},
		{"no such pid, wrapped", 0, &fs.PathError{Op: "open", Path: "/proc/4242/stat", Err: syscall.ENOENT}, true},
		{"stat unreadable", 0, &fs.PathError{Op: "open", Path: "/proc/4242/stat", Err: syscall.EACCES}, false},
		{"stat unparsable", 0, errors.New("parse /proc/4242/stat: 3 fields"), false},
		{"i/o error", 0, syscall.EIO, false},
	}
	for _, c := range cases {
		got := o.deadBy(func(pid int) (uint64, error) {
			if pid != o.PID {
				t.Fatalf("read pid %d, want %d", pid, o.PID)
			}
			return c.start, c.err
		})
		if got != c.dead {
			t.Errorf("%s: Dead = %v, want %v", c.name, got, c.dead)
		}
	}
}

// TestOwnerLive runs the rule on real processes: this one, a reaped child,
// and this pid with another start time.
func TestOwnerLive(t *testing.T) {
	self, err := SelfOwner()
	if err != nil {
		t.Skipf("no /proc here: %v", err)
	}
	if self.Dead() {
		t.Fatal("this process counts as dead")
	}
	if !(Owner{self.PID, self.Start + 1}).Dead() {
		t.Error("a recycled pid counts as the same owner")
	}
	cmd := exec.Command("/bin/true")
	if err := cmd.Run(); err != nil {
		t.Skipf("cannot start /bin/true: %v", err)
	}
	if !(Owner{cmd.Process.Pid, 1}).Dead() {
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", cmd.Process.Pid)); err != nil {
			t.Error("a reaped child counts as alive")
		}
	}
}

func TestParseOwner(t *testing.T) {
	for s, want := range map[string]bool{
		"123.456": true, "1.0": true,
		"0.5": false, "-1.5": false, "+1.5": false, "01.5": false, "1.05": false, "1.": false, ".5": false,
		"1.5.6": false, "1": false, "": false, "x.5": false, "1.x": false,
	} {
		o, ok := ParseOwner(s)
		if ok != want {
			t.Errorf("ParseOwner(%q) ok=%v, want %v", s, ok, want)
		}
		if ok && o.String() != s {
			t.Errorf("ParseOwner(%q).String() = %q", s, o.String())
		}
	}
}
