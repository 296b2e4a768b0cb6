package contract

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/psych-runtime/psych/sandbox"
)

// BenchFiles is each backend's BenchmarkFiles (the files goal,
// docs/files-and-figures.md): a run with 100 files of 100 KiB in, each read
// and appended to so that all 100 come out, beside the same run without
// files. settle, when set, runs after each (a backend's cleanup to finish).
func BenchFiles(b *testing.B, sb sandbox.Sandbox, settle func()) {
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
				res, err := sb.Run(context.Background(), sandbox.Request{Code: code, Files: tc.files})
				if err != nil || res.Failure != nil || len(res.Files) != tc.want {
					b.Fatalf("%v, failure %v, %d files, want %d", err, res.Failure, len(res.Files), tc.want)
				}
			}
			if settle != nil {
				settle()
			}
		})
	}
}

// BenchFigures is each backend's BenchmarkFigures (the figure goal,
// docs/files-and-figures.md): the same small computation as "none", with
// pyplot imported and no figure ("import"), and with one line chart of its
// result, which comes back as one artifact ("line"). settle as BenchFiles.
func BenchFigures(b *testing.B, sb sandbox.Sandbox, settle func()) {
	work := "ys = [(i * 7919) % 101 for i in range(200)]\n"
	for _, tc := range []struct {
		name, code string
		want       int
	}{
		{"none", work, 0},
		{"import", work + "import matplotlib.pyplot as plt\n", 0},
		{"line", work + "import matplotlib.pyplot as plt\nplt.plot(ys)\n", 1},
	} {
		b.Run(tc.name, func(b *testing.B) {
			var cpu float64 // the runs' own, from their cgroups: less shaken by a loaded host than the wall clock
			for b.Loop() {
				res, err := sb.Run(context.Background(), sandbox.Request{Code: tc.code})
				if err != nil || res.Failure != nil || len(res.Artifacts) != tc.want {
					b.Fatalf("%v, failure %v, %d artifacts, want %d", err, res.Failure, len(res.Artifacts), tc.want)
				}
				if res.Usage != nil {
					cpu += res.Usage.CPUSeconds
				}
			}
			b.ReportMetric(cpu/float64(b.N), "cpu-s/op")
			if settle != nil {
				settle()
			}
		})
	}
}
