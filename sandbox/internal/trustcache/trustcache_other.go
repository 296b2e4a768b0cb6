//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package trustcache

import (
	"fmt"
	"runtime"
)

// OpenDir fails here: the trust checks need owners, modes and
// openat(O_NOFOLLOW).
func OpenDir(dir string) (fd int, untrusted bool, err error) {
	return -1, false, fmt.Errorf("open cache directory %s: %w (%s)", dir, ErrUnsupported, runtime.GOOS)
}
