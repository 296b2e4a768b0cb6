package contract

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/psych-runtime/psych/sandbox"
)

// filesCases are the cases of files in and out of /work.
func (s *suite) filesCases() []struct {
	name string
	fn   func(*testing.T)
} {
	return []struct {
		name string
		fn   func(*testing.T)
	}{
		{"FilesInOut", s.filesInOut},
		{"FilesRefused", s.filesRefused},
		{"FilesOutCaps", s.filesOutCaps},
		{"FilesHostile", s.filesHostile},
		{"FilesManyEmpty", s.filesManyEmpty},
		{"FilesOutAttested", s.filesOutAttested},
	}
}

// filesOutAttested: isolation.files_out tells the truth on every backend:
// a file the run writes in its working directory comes back where it says
// true, and where it says false (a host without a handle on the run's
// tmpfs) nothing comes back and nothing is listed.
func (s *suite) filesOutAttested(t *testing.T) {
	sb := s.b.New(t, Options{})
	// Where the working directory is not writable (the Landlock fallback's
	// is the run's read-only directory), nothing is written: false must
	// hold all the same.
	res := s.runReq(t, sb, sandbox.Request{Code: "try:\n    open('out.txt', 'w').write('x')\nexcept OSError:\n    pass\n1"})
	wantSuccess(t, res)
	if res.Isolation == nil {
		t.Fatal("no attestation")
	}
	got := len(res.Files) == 1 && res.Files[0].Path == "out.txt" && string(res.Files[0].Data) == "x"
	if res.Isolation.FilesOut != got || !res.Isolation.FilesOut && (len(res.Files) > 0 || len(res.FilesOmitted) > 0) {
		t.Fatalf("files_out %v, files %+v, omitted %+v: the attestation does not say what came back", res.Isolation.FilesOut, res.Files, res.FilesOmitted)
	}
	t.Logf("files_out %v", res.Isolation.FilesOut)
}

func sum(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

func outFiles(res *sandbox.Result) map[string]sandbox.OutFile {
	m := map[string]sandbox.OutFile{}
	for _, f := range res.Files {
		m[f.Path] = f
	}
	return m
}

// filesInOut: files come in owned by the run's user with their modes, in
// the working directory /work (HOME and TMPDIR stay /tmp); what the run
// created or changed comes out, what it left as it was and what it wrote
// to /tmp does not.
func (s *suite) filesInOut(t *testing.T) {
	sb := s.b.New(t, Options{})
	in := []sandbox.File{
		{Path: "data/in.csv", Data: []byte("a,b\n1,2\n3,4\n"), Mode: 0o640},
		{Path: "keep.txt", Data: []byte("as it was")},
		{Path: "change.txt", Data: []byte("before")},
		{Path: "run.sh", Data: []byte("#!/bin/sh\n"), Mode: 0o755},
	}
	code := `import os, stat
rows = open('data/in.csv').read().splitlines()
open('summary.txt', 'w').write('rows=%d\n' % (len(rows) - 1))
open('change.txt', 'w').write('after')
open('keep.txt', 'w').write('as it was')  # the same bytes: not changed
os.makedirs('out/deep', exist_ok=True)
open('out/deep/x.bin', 'wb').write(bytes(range(256)))
open(os.path.join(os.environ['TMPDIR'], 'scratch'), 'w').write('not collected')
st = os.stat('data/in.csv')
[os.getcwd(), os.environ['HOME'], os.environ['TMPDIR'], st.st_uid == os.getuid(), st.st_gid == os.getgid(),
 stat.S_IMODE(st.st_mode), stat.S_IMODE(os.stat('run.sh').st_mode), stat.S_IMODE(os.stat('keep.txt').st_mode)]`
	res := s.runReq(t, sb, sandbox.Request{Code: code, Files: in})
	wantSuccess(t, res)
	want := []any{sandbox.WorkDir, "/tmp", "/tmp", true, true, float64(0o640), float64(0o755), float64(0o644)}
	if got := mustJSON(t, res.Value); !reflect.DeepEqual(got, want) {
		t.Fatalf("[cwd, HOME, TMPDIR, owner uid, owner gid, modes] = %v, want %v", got, want)
	}
	if res.FilesTruncated || len(res.FilesOmitted) != 0 {
		t.Fatalf("files_truncated %v, omitted %+v: want none", res.FilesTruncated, res.FilesOmitted)
	}
	wantData := map[string][]byte{"summary.txt": []byte("rows=2\n"), "change.txt": []byte("after"), "out/deep/x.bin": func() []byte {
		b := make([]byte, 256)
		for i := range b {
			b[i] = byte(i)
		}
		return b
	}()}
	got := outFiles(res)
	if len(got) != len(wantData) {
		t.Fatalf("files %v, want exactly %d (created or changed; keep.txt, data/in.csv and /tmp not)", keys(got), len(wantData))
	}
	for p, data := range wantData {
		f, ok := got[p]
		if !ok || !bytes.Equal(f.Data, data) || f.Size != int64(len(data)) || f.SHA256 != sum(data) || f.Mode != 0o644 {
			t.Fatalf("file %q = %+v (present %v), want data %q, its size, sha256 and mode 0644", p, f, ok, data)
		}
	}
	for i := 1; i < len(res.Files); i++ {
		if res.Files[i-1].Path >= res.Files[i].Path {
			t.Fatalf("files not sorted by path: %v", keys(got))
		}
	}
	// A fresh /work on every run: the last run's files are gone.
	res = s.runReq(t, sb, sandbox.Request{Code: "import os\nsorted(os.listdir('.'))"})
	wantSuccess(t, res)
	if got := mustJSON(t, res.Value); !reflect.DeepEqual(got, []any{}) || len(res.Files) != 0 {
		t.Fatalf("the next run's /work holds %v, files %v; want nothing", got, res.Files)
	}
}

func keys(m map[string]sandbox.OutFile) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// filesRefused: a request whose files break a path rule or a cap is
// sandbox.ErrInvalidRequest, and nothing runs.
func (s *suite) filesRefused(t *testing.T) {
	sb := s.b.New(t, Options{})
	many := make([]sandbox.File, sandbox.DefaultFileCaps.InCount+1)
	for i := range many {
		many[i] = sandbox.File{Path: "f" + strings.Repeat("x", i)}
	}
	for _, tc := range []struct {
		name  string
		files []sandbox.File
	}{
		{"absolute", []sandbox.File{{Path: "/etc/passwd"}}},
		{"dotdot", []sandbox.File{{Path: "../escape"}}},
		{"unclean", []sandbox.File{{Path: "a//b"}}},
		{"nul", []sandbox.File{{Path: "a\x00b"}}},
		{"collide", []sandbox.File{{Path: "a"}, {Path: "a/b"}}},
		{"setuid", []sandbox.File{{Path: "a", Mode: 0o4755}}},
		{"count", many},
		{"bytes", []sandbox.File{{Path: "big", Data: make([]byte, sandbox.DefaultFileCaps.InBytes+1)}}},
	} {
		res, err := sb.Run(context.Background(), sandbox.Request{Code: "1", Files: tc.files})
		if !errors.Is(err, sandbox.ErrInvalidRequest) || res != nil {
			t.Fatalf("%s: Run = %v, %v; want sandbox.ErrInvalidRequest and no result", tc.name, res, err)
		}
	}
}

// filesOutCaps: a file past the per-file cap, and files past the total
// cap, are listed in files_omitted with their reasons, and nothing else
// is dropped.
func (s *suite) filesOutCaps(t *testing.T) {
	c := sandbox.DefaultFileCaps
	code := `import os
open('big', 'wb').truncate(` + itoa(c.OutFileBytes+1) + `)
for i in range(4):
    with open('part%d' % i, 'wb') as f:
        f.write(bytes([i]) * ` + itoa(c.OutBytes/4+1) + `)
`
	res := s.runReq(t, s.b.New(t, Options{}), sandbox.Request{Code: code, Limits: sandbox.Limits{FileSizeBytes: 2 * c.OutFileBytes}})
	wantSuccess(t, res)
	got := outFiles(res)
	if len(got) != 3 || !res.FilesTruncated {
		t.Fatalf("files %v, truncated %v; want part0 to part2 and files_truncated", keys(got), res.FilesTruncated)
	}
	want := []sandbox.Omitted{
		{Path: "big", Size: c.OutFileBytes + 1, Reason: sandbox.OmitTooLarge},
		{Path: "part3", Size: c.OutBytes/4 + 1, Reason: sandbox.OmitTotalCap},
	}
	if !reflect.DeepEqual(res.FilesOmitted, want) {
		t.Fatalf("files_omitted %+v, want %+v", res.FilesOmitted, want)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// filesHostile: what a program leaves in /work to trap the host is
// returned correctly or listed with its reason; the host follows no
// symlink, opens no FIFO, reads no sparse giant (4 GiB: as large as a
// server lets file_size_bytes be), and never blocks.
func (s *suite) filesHostile(t *testing.T) {
	code := `import os, subprocess, sys, time
open('out.txt', 'w').write('result')
os.remove('out.txt')
os.symlink('/etc/shadow', 'out.txt')
os.symlink('/', 'root')
os.mkfifo('fifo')
with open('sparse', 'wb') as f:
    f.truncate(4 << 30)
open('new\nline', 'w').write('newline')
open(b'bad\xff'.decode('utf-8', 'surrogateescape'), 'w').write('bad')
# A background process keeps growing a file as the run ends.
subprocess.Popen([sys.executable, '-c', "import time\nf = open('growing', 'ab', buffering=0)\nwhile True:\n    f.write(b'x' * 1024)\n    time.sleep(0.001)"],
                 start_new_session=True)
while not os.path.exists('growing') or os.path.getsize('growing') < 4096:
    time.sleep(0.01)
`
	res := s.runReq(t, s.b.New(t, Options{}), sandbox.Request{Code: code, Limits: sandbox.Limits{FileSizeBytes: 4 << 30}}) // a server's cap
	wantSuccess(t, res)
	got := outFiles(res)
	if f, ok := got["new\nline"]; !ok || string(f.Data) != "newline" {
		t.Fatalf("the file named with a newline: %+v (present %v)", f, ok)
	}
	if f, ok := got["growing"]; ok {
		if f.Size < 4096 || int64(len(f.Data)) != f.Size || f.SHA256 != sum(f.Data) || strings.Trim(string(f.Data), "x") != "" {
			t.Fatalf("the growing file came back inconsistent: size %d, %d bytes, sha256 %s", f.Size, len(f.Data), f.SHA256)
		}
	} else if !omittedAs(res, "growing", sandbox.OmitTooLarge) {
		t.Fatalf("the growing file is neither returned nor omitted as too_large: files %v, omitted %+v", keys(got), res.FilesOmitted)
	}
	for p, reason := range map[string]string{
		"out.txt": sandbox.OmitNotRegular, "root": sandbox.OmitNotRegular, "fifo": sandbox.OmitNotRegular,
		"sparse": sandbox.OmitTooLarge, "bad\uFFFD": sandbox.OmitUnreadable,
	} {
		if !omittedAs(res, p, reason) {
			t.Fatalf("%q not omitted as %s: files %v, omitted %+v", p, reason, keys(got), res.FilesOmitted)
		}
	}
	if len(got)+len(res.FilesOmitted) != 7 || !res.FilesTruncated {
		t.Fatalf("files %v and omitted %+v (truncated %v): want the 7 entries, each once, and files_truncated", keys(got), res.FilesOmitted, res.FilesTruncated)
	}
	for _, f := range res.Files {
		if strings.Contains(string(f.Data), "root:") {
			t.Fatalf("file %q holds what looks like the host's /etc/shadow", f.Path)
		}
	}
}

func omittedAs(res *sandbox.Result, path, reason string) bool {
	for _, o := range res.FilesOmitted {
		if o.Path == path {
			return o.Reason == reason
		}
	}
	return false
}

// filesManyEmpty: 10,000 empty files (as many as the tmpfs's inodes
// allow) come out up to the count cap; every other one is listed.
func (s *suite) filesManyEmpty(t *testing.T) {
	code := `made = 0
try:
    for i in range(10000):
        open('f%05d' % i, 'w').close()
        made += 1
except OSError:
    pass
made`
	res := s.runReq(t, s.b.New(t, Options{}), sandbox.Request{Code: code})
	wantSuccess(t, res)
	made, ok := mustJSON(t, res.Value).(float64)
	c := sandbox.DefaultFileCaps.OutCount
	if !ok || int(made) <= c {
		t.Fatalf("the program made %v files; want more than %d", res.Value, c)
	}
	if len(res.Files) != c || len(res.FilesOmitted) != int(made)-c || !res.FilesTruncated {
		t.Fatalf("%d files, %d omitted of %v made: want %d and the rest listed", len(res.Files), len(res.FilesOmitted), made, c)
	}
	for _, o := range res.FilesOmitted {
		if o.Reason != sandbox.OmitCountCap {
			t.Fatalf("omitted %+v: want count_cap", o)
		}
	}
}
