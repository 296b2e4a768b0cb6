package testutil

import (
	"os"
	"path/filepath"
)

// CountFDs is how many descriptors this process has open, as leak checks
// compare them; OpenFDs lists them, each "N -> target", where a check
// names what leaked. A process that cannot read /proc/self/fd cannot check
// for leaks at all: both panic rather than answer what would make every
// check pass.
func CountFDs() int { return len(fdEntries()) }

// OpenFDs lists this process's open descriptors (see CountFDs).
func OpenFDs() []string {
	ents := fdEntries()
	out := make([]string, 0, len(ents))
	for _, e := range ents {
		target, _ := os.Readlink(filepath.Join("/proc/self/fd", e.Name()))
		out = append(out, e.Name()+" -> "+target)
	}
	return out
}

func fdEntries() []os.DirEntry {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		panic("testutil: read /proc/self/fd: " + err.Error())
	}
	return ents
}
