//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package pyfacts

import (
	"runtime"
)

// loadBlob has no cache here (see load): build runs every time.
func loadBlob(opts Options, name, key string, build func() ([]byte, error), check func([]byte) error) ([]byte, outcome, error) {
	b, err := build()
	return b, outcome{bypassed: true, reason: "no cache on " + runtime.GOOS}, err
}

func loadExeBlob(opts Options, name, exe, id, key string, build func() ([]byte, error), check func([]byte) error) ([]byte, outcome, error) {
	return loadBlob(opts, name, key, build, check)
}
