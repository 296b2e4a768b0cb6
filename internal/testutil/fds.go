package testutil

import (
	"os"
	"path/filepath"
)

// OpenFDs lists this process's open descriptors, each "N -> target", as
// leak checks compare them (len for a count). A process that cannot read
// /proc/self/fd cannot check for leaks at all: it panics rather than
// return a list that would make every check pass.
func OpenFDs() []string {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		panic("testutil.OpenFDs: " + err.Error())
	}
	out := make([]string, 0, len(ents))
	for _, e := range ents {
		target, _ := os.Readlink(filepath.Join("/proc/self/fd", e.Name()))
		out = append(out, e.Name()+" -> "+target)
	}
	return out
}
