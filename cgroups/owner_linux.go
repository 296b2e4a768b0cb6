package cgroups

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
)

// owner names a host process by pid and start time (clock ticks after
// boot, field 22 of /proc/PID/stat), so a recycled pid is not taken for
// the same process.
type owner struct {
	pid   int
	start uint64
}

func (o owner) String() string { return fmt.Sprintf("%d.%d", o.pid, o.start) }

func selfOwner() (owner, error) {
	pid := os.Getpid()
	start, err := startTime(pid)
	if err != nil {
		return owner{}, fmt.Errorf("read own start time: %w", err)
	}
	return owner{pid, start}, nil
}

// parseRunName reads the owner from a run cgroup's name, "PID.START-RUNID".
// Any other name is not a run cgroup.
func parseRunName(name string) (owner, bool) {
	head, id, ok := strings.Cut(name, "-")
	if !ok || validRunID(id) != nil {
		return owner{}, false
	}
	p, s, ok := strings.Cut(head, ".")
	if !ok {
		return owner{}, false
	}
	pid, err1 := strconv.Atoi(p)
	start, err2 := strconv.ParseUint(s, 10, 64)
	if err1 != nil || err2 != nil || pid <= 0 || strconv.Itoa(pid) != p {
		return owner{}, false
	}
	return owner{pid, start}, true
}

// dead reports whether the owner is known to be gone: no such pid, or a
// pid now held by a later process. When in doubt (an unreadable stat), it
// says no, so a live owner's runs are never touched.
func (o owner) dead() bool {
	start, err := startTime(o.pid)
	if err != nil {
		return errors.Is(err, fs.ErrNotExist)
	}
	return start != o.start
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
