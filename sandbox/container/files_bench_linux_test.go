//go:build linux && cgo

package container

import (
	"testing"

	"github.com/psych-runtime/psych/test/contract"
)

// BenchmarkFiles is the subprocess backend's BenchmarkFiles on containerd:
// one run with 100 files of 100 KiB in and out, beside the same run
// without files.
func BenchmarkFiles(b *testing.B) {
	s, err := New(Config{Engine: Containerd, Image: testImage()})
	if err != nil {
		b.Skipf("containerd: %v", err)
	}
	b.Cleanup(func() { s.Close() })
	contract.BenchFiles(b, s, nil)
}

// BenchmarkFigures is the subprocess backend's BenchmarkFigures on
// containerd.
func BenchmarkFigures(b *testing.B) {
	s, err := New(Config{Engine: Containerd, Image: testImage()})
	if err != nil {
		b.Skipf("containerd: %v", err)
	}
	b.Cleanup(func() { s.Close() })
	contract.BenchFigures(b, s, nil)
}
