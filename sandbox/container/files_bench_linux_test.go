//go:build linux && cgo

package container

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/psych-runtime/psych/sandbox"
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
		})
	}
}
