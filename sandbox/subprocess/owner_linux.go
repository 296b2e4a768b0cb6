package subprocess

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// ownerID names a host process by pid and start time (clock ticks since
// boot), so a recycled pid is not mistaken for the same owner.
type ownerID struct {
	pid   int
	start uint64
}

func (o ownerID) String() string { return fmt.Sprintf("%d.%d", o.pid, o.start) }

// selfOwner identifies this process.
func selfOwner() (ownerID, error) {
	pid := os.Getpid()
	start, err := startTime(pid)
	if err != nil {
		return ownerID{}, fmt.Errorf("read own start time: %w", err)
	}
	return ownerID{pid, start}, nil
}

// parseOwner reads the owner from a name "PID.START-…".
func parseOwner(name string) (ownerID, bool) {
	head, _, _ := strings.Cut(name, "-")
	p, s, ok := strings.Cut(head, ".")
	if !ok {
		return ownerID{}, false
	}
	pid, err1 := strconv.Atoi(p)
	start, err2 := strconv.ParseUint(s, 10, 64)
	if err1 != nil || err2 != nil || pid <= 0 {
		return ownerID{}, false
	}
	return ownerID{pid, start}, true
}

// alive reports whether the owner process still runs.
func (o ownerID) alive() bool {
	start, err := startTime(o.pid)
	return err == nil && start == o.start
}

// startTime reads field 22 of /proc/PID/stat.
func startTime(pid int) (uint64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name may hold spaces and parentheses: split after the last ')'.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, fmt.Errorf("parse /proc/%d/stat", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return 0, fmt.Errorf("parse /proc/%d/stat", pid)
	}
	return strconv.ParseUint(f[19], 10, 64)
}
