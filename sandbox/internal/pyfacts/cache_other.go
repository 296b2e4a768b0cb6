//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package pyfacts

import (
	"fmt"
	"os"
	"runtime"
)

// load has no cache here: the trust checks need owners, modes and
// openat(O_NOFOLLOW). The facts are computed every time.
func load(abs, dir string) (Facts, outcome, error) {
	if _, err := os.Stat(abs); err != nil {
		return Facts{}, outcome{}, fmt.Errorf("stat interpreter %s: %w", abs, err)
	}
	f, err := compute(abs)
	reason := reasonOff
	if dir != NoCache {
		reason = "no interpreter cache on " + runtime.GOOS
	}
	return f, outcome{bypassed: true, reason: reason}, err
}

// SelfID fails here: there is no cache to key.
func SelfID() (string, error) {
	return "", fmt.Errorf("%w: no cache on %s", ErrNoExecutable, runtime.GOOS)
}
