package contract

import (
	"bytes"
	"encoding/json"
	"image/png"
	"reflect"
	"strings"
	"testing"

	"github.com/psych-runtime/psych/bootstrap"
	"github.com/psych-runtime/psych/internal/testutil"
	"github.com/psych-runtime/psych/sandbox"
)

// figuresCases are the cases of matplotlib's figures as Result.Artifacts.
func (s *suite) figuresCases() []struct {
	name string
	fn   func(*testing.T)
} {
	return []struct {
		name string
		fn   func(*testing.T)
	}{
		{"FiguresTwo", s.figuresTwo},
		{"FiguresShowTwice", s.figuresShowTwice},
		{"FiguresClosed", s.figuresClosed},
		{"FiguresOverCap", s.figuresOverCap},
		{"FiguresMissing", s.figuresMissing},
		{"FiguresForged", s.figuresForged},
		{"FiguresFontCache", s.figuresFontCache},
	}
}

// needMatplotlib reports whether the run's interpreter has matplotlib
// (CI's host and psych's image have it); where it has not, the test ends
// (a skip, or in the VM lane, whose rootfs has none, a pass named as the
// host lane's) and the caller returns.
func (s *suite) needMatplotlib(t *testing.T, sb sandbox.Sandbox) bool {
	t.Helper()
	res := s.runReq(t, sb, sandbox.Request{Code: "import importlib.util\nimportlib.util.find_spec('matplotlib') is not None"})
	wantSuccess(t, res)
	if string(res.Value) == "true" {
		return true
	}
	if testutil.InCI() {
		t.Fatal("CI's interpreter lacks matplotlib (scripts/deps.sh and image.sh install it)")
	}
	if testutil.HostLaneOnly(t, "the VM's rootfs has no matplotlib") {
		return false
	}
	t.Skip("the interpreter has no matplotlib")
	return false
}

// wantArtifacts checks res's artifacts are exactly names, each a PNG of
// w×h whose size, sha256 and sides the host read from its data, and that
// none was left out.
func wantArtifacts(t *testing.T, res *sandbox.Result, w, h int, names ...string) {
	t.Helper()
	var got []string
	for _, a := range res.Artifacts {
		got = append(got, a.Name)
		cfg, err := png.DecodeConfig(bytes.NewReader(a.Data))
		if err != nil || cfg.Width != w || cfg.Height != h || a.Width != w || a.Height != h ||
			a.MIME != "image/png" || a.Size != int64(len(a.Data)) || a.SHA256 != sum(a.Data) {
			t.Errorf("artifact %s: %dx%d %s, size %d of %d, decodes as %+v (%v); want a %dx%d PNG, its size and sha256",
				a.Name, a.Width, a.Height, a.MIME, a.Size, len(a.Data), cfg, err, w, h)
		}
	}
	if !reflect.DeepEqual(got, names) {
		t.Fatalf("artifacts %v, want %v; stderr:\n%s", got, names, res.Stderr)
	}
	if len(res.ArtifactsOmitted) != 0 {
		t.Fatalf("artifacts omitted: %+v", res.ArtifactsOmitted)
	}
}

// figuresTwo: two figures still open at the end are two artifacts, named
// by their numbers, at matplotlib's default 640×480, through Agg whatever
// the program's environment says.
func (s *suite) figuresTwo(t *testing.T) {
	sb := s.b.New(t, Options{})
	if !s.needMatplotlib(t, sb) {
		return
	}
	res := s.runReq(t, sb, sandbox.Request{Code: `import matplotlib.pyplot as plt
plt.plot([1, 2, 3])
plt.figure()
plt.bar(['a', 'b'], [3, 4])
plt.get_backend().lower()`})
	wantSuccess(t, res)
	if string(res.Value) != `"agg"` {
		t.Errorf("backend %s, want agg", res.Value)
	}
	wantArtifacts(t, res, 640, 480, "figure-1.png", "figure-2.png")
}

// figuresShowTwice: each plt.show() captures the open figures and closes
// them (nothing is left at the end); a number shown again gets a counter.
func (s *suite) figuresShowTwice(t *testing.T) {
	sb := s.b.New(t, Options{})
	if !s.needMatplotlib(t, sb) {
		return
	}
	res := s.runReq(t, sb, sandbox.Request{Code: `import matplotlib.pyplot as plt
plt.plot([1, 2]); plt.show()
plt.plot([2, 1]); plt.show()
plt.get_fignums()`})
	wantSuccess(t, res)
	if string(res.Value) != "[]" {
		t.Errorf("figures open after show(): %s, want none", res.Value)
	}
	wantArtifacts(t, res, 640, 480, "figure-1-2.png", "figure-1.png")
}

// figuresClosed: a figure the program closed is not captured; one shown
// is captured once, not again at the end; one open at the end is, at its
// own size.
func (s *suite) figuresClosed(t *testing.T) {
	sb := s.b.New(t, Options{})
	if !s.needMatplotlib(t, sb) {
		return
	}
	res := s.runReq(t, sb, sandbox.Request{Code: `import matplotlib.pyplot as plt
shown = plt.figure(figsize=(3, 2), dpi=100); plt.plot([1, 2])
plt.show()
gone = plt.figure(figsize=(3, 2), dpi=100); plt.plot([5, 5]); plt.close(gone)
kept = plt.figure(7, figsize=(3, 2), dpi=100); plt.plot([2, 2])`})
	wantSuccess(t, res)
	wantArtifacts(t, res, 300, 200, "figure-1.png", "figure-7.png")
}

// figuresOverCap: a figure past the 8 MiB cap (a 1800×1800 image of noise,
// under the 10 MiB file size limit) is listed with its size, not
// returned; a small one beside it is.
func (s *suite) figuresOverCap(t *testing.T) {
	sb := s.b.New(t, Options{})
	if !s.needMatplotlib(t, sb) {
		return
	}
	res := s.runReq(t, sb, sandbox.Request{Code: `import os, numpy as np, matplotlib.pyplot as plt
big = plt.figure(figsize=(18, 18), dpi=100)
big.figimage(np.frombuffer(os.urandom(1800 * 1800 * 3), dtype=np.uint8).reshape(1800, 1800, 3))
small = plt.figure(figsize=(2, 1), dpi=100)`, Limits: sandbox.Limits{CPUSeconds: 60, WallSeconds: 120}})
	wantSuccess(t, res)
	if len(res.Artifacts) != 1 || res.Artifacts[0].Name != "figure-2.png" || res.Artifacts[0].Width != 200 {
		t.Fatalf("artifacts %+v: want figure-2.png alone; stderr:\n%s", res.Artifacts, res.Stderr)
	}
	o := res.ArtifactsOmitted
	if len(o) != 1 || o[0].Path != "figure-1.png" || o[0].Reason != sandbox.OmitTooLarge || o[0].Size <= sandbox.DefaultFileCaps.ArtifactFileBytes {
		t.Fatalf("omitted %+v: want figure-1.png, too_large, past %d bytes", o, sandbox.DefaultFileCaps.ArtifactFileBytes)
	}
}

// figuresMissing: a program whose matplotlib cannot be imported runs as it
// would anyway, with no artifact and nothing left out.
func (s *suite) figuresMissing(t *testing.T) {
	sb := s.b.New(t, Options{})
	res := s.runReq(t, sb, sandbox.Request{Code: `import sys
sys.modules['matplotlib'] = None
try:
    import matplotlib.pyplot as plt
    plt.plot([1])
    out = 'imported'
except ImportError:
    out = 'ImportError'
out`})
	wantSuccess(t, res)
	if string(res.Value) != `"ImportError"` || len(res.Artifacts) != 0 || len(res.ArtifactsOmitted) != 0 {
		t.Fatalf("value %s, artifacts %d, omitted %+v: want ImportError and nothing", res.Value, len(res.Artifacts), res.ArtifactsOmitted)
	}
}

// figuresForged: what the program itself puts in the figures directory is
// taken only as a valid PNG named as a figure: a forged PNG, a symlink, a
// FIFO and a stray name are listed with why, a real figure beside them
// returned.
func (s *suite) figuresForged(t *testing.T) {
	sb := s.b.New(t, Options{})
	if !s.needMatplotlib(t, sb) {
		return
	}
	res := s.runReq(t, sb, sandbox.Request{Code: `import os, matplotlib.pyplot as plt
d = '` + sandbox.FiguresDir + `'
os.makedirs(d, exist_ok=True)
open(d + '/figure-90.png', 'wb').write(b'\x89PNG\r\n\x1a\n' + b'\0' * 100)
os.symlink('/etc/passwd', d + '/figure-91.png')
os.mkfifo(d + '/figure-92.png')
plt.figure(figsize=(1, 1), dpi=100)
plt.savefig(d + '/chart.png')`})
	wantSuccess(t, res)
	wantOmitted := []sandbox.Omitted{
		{Path: "chart.png", Size: -1, Reason: sandbox.OmitInvalid},
		{Path: "figure-90.png", Size: 108, Reason: sandbox.OmitInvalid},
		{Path: "figure-91.png", Size: int64(len("/etc/passwd")), Reason: sandbox.OmitNotRegular},
		{Path: "figure-92.png", Size: 0, Reason: sandbox.OmitNotRegular},
	}
	if len(res.ArtifactsOmitted) == 4 {
		wantOmitted[0].Size = res.ArtifactsOmitted[0].Size // chart.png: matplotlib's own size
	}
	if !reflect.DeepEqual(res.ArtifactsOmitted, wantOmitted) {
		t.Fatalf("omitted %+v\nwant %+v", res.ArtifactsOmitted, wantOmitted)
	}
	if len(res.Artifacts) != 1 || res.Artifacts[0].Name != "figure-1.png" || res.Artifacts[0].Width != 100 {
		t.Fatalf("artifacts %+v: want figure-1.png, 100 pixels wide", res.Artifacts)
	}
}

// figuresFontCache: a run that plots does not build matplotlib's font list:
// font_manager loads the one the backend gave the run (the host built it,
// or the image holds it), copied into the run's own cache directory; the
// run cannot change what it was given (bootstrap.FontsDir is read-only).
func (s *suite) figuresFontCache(t *testing.T) {
	sb := s.b.New(t, Options{})
	if !s.needMatplotlib(t, sb) {
		return
	}
	res := s.runReq(t, sb, sandbox.Request{Code: `import errno, logging, os
said = []
class Said(logging.Handler):
    def emit(self, record):
        said.append(record.getMessage())
log = logging.getLogger('matplotlib.font_manager')
log.setLevel(logging.DEBUG)
log.addHandler(Said())
import matplotlib.pyplot as plt
plt.plot([1, 2]); plt.title('fonts')
plt.savefig('/tmp/chart.png')
d = '` + bootstrap.FontsDir + `'
given = sorted(os.listdir(d))
refused = []
for name in given:
    for how in (lambda: open(d + '/' + name, 'r+b'), lambda: os.unlink(d + '/' + name), lambda: open(d + '/x.json', 'w')):
        try:
            how()
            refused.append('written')
        except OSError as e:
            refused.append(errno.errorcode.get(e.errno, str(e.errno)))
[m for m in said if 'fontManager' in m or 'Rebuilding' in m], given, refused`})
	wantSuccess(t, res)
	var got struct {
		Said, Given, Refused []string
	}
	var raw []json.RawMessage
	if err := json.Unmarshal(res.Value, &raw); err != nil || len(raw) != 3 ||
		json.Unmarshal(raw[0], &got.Said) != nil || json.Unmarshal(raw[1], &got.Given) != nil || json.Unmarshal(raw[2], &got.Refused) != nil {
		t.Fatalf("value %s: %v", res.Value, err)
	}
	if len(got.Given) != 1 || !strings.HasPrefix(got.Given[0], "fontlist-v") {
		t.Fatalf("%s holds %q, want one font list; stderr:\n%s", bootstrap.FontsDir, got.Given, res.Stderr)
	}
	if len(got.Said) != 1 || !strings.HasPrefix(got.Said[0], "Using fontManager instance from /tmp/.cache/matplotlib/"+got.Given[0]) {
		t.Fatalf("font_manager said %q, want only that it used the list in the run's cache; stderr:\n%s", got.Said, res.Stderr)
	}
	for _, r := range got.Refused {
		if r != "EROFS" && r != "EACCES" && r != "EPERM" {
			t.Errorf("writing the given font list: %q, want each refused (EROFS, EACCES or EPERM)", got.Refused)
			break
		}
	}
}
