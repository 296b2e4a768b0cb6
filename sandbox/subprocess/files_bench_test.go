//go:build linux && cgo

package subprocess

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/psych-runtime/psych/sandbox"
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
	in := make([]sandbox.File, 100)
	for i := range in {
		in[i] = sandbox.File{Path: fmt.Sprintf("in/f%03d", i), Data: bytes.Repeat([]byte{byte(i)}, 100<<10)}
	}
	code := "import os\nfor n in sorted(os.listdir('in') if os.path.isdir('in') else []):\n    d = open('in/' + n, 'rb').read()\n    open('in/' + n, 'ab').write(b'!')\n"
	for _, tc := range []struct {
		name  string
		files []sandbox.File
		want  int
	}{{"none", nil, 0}, {"100x100KiB", in, 100}} {
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				res, err := s.Run(context.Background(), sandbox.Request{Code: code, Files: tc.files})
				if err != nil || res.Failure != nil || len(res.Files) != tc.want {
					b.Fatalf("%v, failure %v, %d files, want %d", err, res.Failure, len(res.Files), tc.want)
				}
			}
			s.Settle()
		})
	}
	b.Run("copy", func(b *testing.B) {
		src, dst := make([]byte, 2*100*100<<10), make([]byte, 2*100*100<<10)
		b.SetBytes(int64(len(src)))
		for b.Loop() {
			copy(dst, src)
		}
	})
}
