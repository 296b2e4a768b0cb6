//go:build linux && cgo

package subprocess

import (
	"testing"

	"github.com/psych-runtime/psych/test/contract"
)

// BenchmarkFiles measures the files goal (docs/files-and-figures.md): one
// run with 100 files of 100 KiB in, each read and appended to so that all 100
// come out, beside the same run without files, and the copy rate of those bytes
// in memory (copy-MB/s): the goal is files ≤ 2× none plus one copy.
func BenchmarkFiles(b *testing.B) {
	s, err := New(Config{PythonBin: testPython()})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	contract.BenchFiles(b, s, s.Settle)
	b.Run("copy", func(b *testing.B) {
		src, dst := make([]byte, 2*100*100<<10), make([]byte, 2*100*100<<10)
		b.SetBytes(int64(len(src)))
		for b.Loop() {
			copy(dst, src)
		}
	})
}

// BenchmarkFigures: one line chart's cost over the same run without
// matplotlib (contract.BenchFigures).
func BenchmarkFigures(b *testing.B) {
	s, err := New(Config{PythonBin: testPython()})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	contract.BenchFigures(b, s, s.Settle)
}
