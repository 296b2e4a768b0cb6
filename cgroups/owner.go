package cgroups

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
)

// Owner names a host process by pid and start time (clock ticks after boot,
// field 22 of /proc/PID/stat), so a recycled pid is not taken for the same
// process. Run cgroups are named after their owner, and so are the per-run
// directories of psych's backends: one rule decides for both whether what an
// earlier host left behind may be removed.
type Owner struct {
	PID   int
	Start uint64
}

// String is "PID.START", the prefix of every name an owner gives.
func (o Owner) String() string { return fmt.Sprintf("%d.%d", o.PID, o.Start) }

// SelfOwner names this process.
func SelfOwner() (Owner, error) {
	pid := os.Getpid()
	start, err := startTime(pid)
	if err != nil {
		return Owner{}, fmt.Errorf("read own start time: %w", err)
	}
	return Owner{pid, start}, nil
}

// ParseOwner reads an owner written by String. It refuses anything else: a
// sign, a leading zero, an empty or non-decimal part, pid 0.
func ParseOwner(s string) (Owner, bool) {
	p, st, ok := strings.Cut(s, ".")
	if !ok {
		return Owner{}, false
	}
	pid, err1 := strconv.Atoi(p)
	start, err2 := strconv.ParseUint(st, 10, 64)
	if err1 != nil || err2 != nil || pid <= 0 || strconv.Itoa(pid) != p || strconv.FormatUint(start, 10) != st {
		return Owner{}, false
	}
	return Owner{pid, start}, true
}

// Dead reports whether the owner is known to be gone: no such pid, or the pid
// now held by a later process. When in doubt (a stat that cannot be read or
// parsed for any other reason) it says no, so a live owner's leftovers are
// never removed.
func (o Owner) Dead() bool { return o.deadBy(startTime) }

func (o Owner) deadBy(read func(pid int) (uint64, error)) bool {
	start, err := read(o.PID)
	if err != nil {
		return errors.Is(err, fs.ErrNotExist)
	}
	return start != o.Start
}

// startTime reads field 22 of /proc/PID/stat.
func startTime(pid int) (uint64, error) {
	path := fmt.Sprintf("/proc/%d/stat", pid)
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	// The command name may hold spaces and parentheses: split after the last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("parse %s: no command name", path)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 {
		return 0, fmt.Errorf("parse %s: %d fields", path, len(f)+2)
	}
	n, err := strconv.ParseUint(f[19], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("parse %s: %w", path, err)
	}
	return n, nil
}
