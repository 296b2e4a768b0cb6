//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package pyfacts

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/psych-runtime/psych/internal/testutil"
	"github.com/psych-runtime/psych/sandbox/internal/trustcache"
)

// matplotlibPython is the test interpreter and its prefixes, where it has
// matplotlib (Debian's does, CI's; pyenv's builds do not and are skipped).
func matplotlibPython(t *testing.T) (string, []string) {
	t.Helper()
	py := testPython(t)
	testutil.RequireMatplotlib(t, py)
	f, _, err := Load(py, Options{Dir: NoCache})
	if err != nil {
		t.Fatal(err)
	}
	return py, f.Prefixes
}

// TestFontList: the font list is built by the probe, checked, cached and
// then served from the cache; it names matplotlib's own DejaVu fonts; a
// corrupted entry, or one whose list fails the checks, is built again and
// replaced, never served.
func TestFontList(t *testing.T) {
	py, prefixes := matplotlibPython(t)
	dir := cacheDir(t)
	opts := Options{Dir: dir}
	fl, hit, err := LoadFontList(py, prefixes, opts)
	if err != nil || hit {
		t.Fatalf("first load: hit %v, %v", hit, err)
	}
	if !fontListName.MatchString(fl.Name) || !json.Valid(fl.Data) || len(fl.Fonts) == 0 {
		t.Fatalf("list %q of %d bytes, %d fonts", fl.Name, len(fl.Data), len(fl.Fonts))
	}
	dejavu := false
	for _, f := range fl.Fonts {
		dejavu = dejavu || strings.HasSuffix(f, "/DejaVuSans.ttf")
		if !filepath.IsAbs(f) {
			t.Errorf("font %q is not absolute", f)
		}
	}
	if !dejavu {
		t.Errorf("no DejaVuSans.ttf among %v", fl.Fonts)
	}
	again, hit, err := LoadFontList(py, prefixes, opts)
	if err != nil || !hit || !bytes.Equal(again.Data, fl.Data) || again.Name != fl.Name || len(again.Fonts) != len(fl.Fonts) {
		t.Fatalf("second load: hit %v, %v; same list: %v", hit, err, bytes.Equal(again.Data, fl.Data))
	}

	name, key, err := fontListKey(py, prefixes)
	if err != nil {
		t.Fatal(err)
	}
	entry := filepath.Join(dir, blobEntryName(name))
	data, err := os.ReadFile(entry)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)-10] ^= 1 // the checksum fails
	if err := os.WriteFile(entry, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if got, hit, err := LoadFontList(py, prefixes, opts); err != nil || hit || !sameFonts(got, fl) {
		t.Fatalf("corrupted entry: hit %v, %v", hit, err)
	}

	// A well-formed entry for this very key whose list names a font
	// outside matplotlib's data path: refused, rebuilt.
	bad := fl
	bad.Data = []byte(`{"_version": ` + strings.TrimSuffix(strings.TrimPrefix(fl.Name, "fontlist-v"), ".json") +
		`, "ttflist": [{"fname": "../../../../etc/shadow"}], "afmlist": []}`)
	raw, err := json.Marshal(bad)
	if err != nil {
		t.Fatal(err)
	}
	dfd, o := openCache(dir)
	if o.bypassed {
		t.Fatal(o.reason)
	}
	defer unix.Close(dfd)
	payload, _ := json.Marshal(blobPayload{Key: key})
	if err := trustcache.Write(dfd, blobEntryName(name), payload, raw); err != nil {
		t.Fatal(err)
	}
	if got, hit, err := LoadFontList(py, prefixes, opts); err != nil || hit || !sameFonts(got, fl) {
		t.Fatalf("entry with a bad list: hit %v, %v", hit, err)
	}
	if _, hit, err := LoadFontList(py, prefixes, opts); err != nil || !hit {
		t.Fatalf("after the rebuild: hit %v, %v", hit, err)
	}
}

// sameFonts: a and b are lists of the same name and fonts (matplotlib
// orders them differently from one build to the next).
func sameFonts(a, b FontList) bool {
	x, y := slices.Clone(a.Fonts), slices.Clone(b.Fonts)
	slices.Sort(x)
	slices.Sort(y)
	return a.Name == b.Name && slices.Equal(x, y)
}

// TestFontListNoMatplotlib: prefixes whose site directories hold no
// matplotlib get no list, and nothing is started.
func TestFontListNoMatplotlib(t *testing.T) {
	py := testPython(t)
	empty := t.TempDir()
	_, _, err := LoadFontList(py, []string{empty, empty, empty, empty}, Options{Dir: cacheDir(t)})
	if !errors.Is(err, ErrNoMatplotlib) {
		t.Fatalf("got %v, want ErrNoMatplotlib", err)
	}
}

// TestFontListCheck: what a font list must be to be served.
func TestFontListCheck(t *testing.T) {
	good := FontList{Name: "fontlist-v330.json", DataPath: "/usr/share/matplotlib/mpl-data",
		Data: []byte(`{"_version": 330, "ttflist": [{"fname": "fonts/ttf/DejaVuSans.ttf"}, {"fname": "/usr/share/fonts/a.ttf"}], "afmlist": []}`)}
	if err := good.check(); err != nil {
		t.Fatal(err)
	}
	want := []string{"/usr/share/matplotlib/mpl-data/fonts/ttf/DejaVuSans.ttf", "/usr/share/fonts/a.ttf"}
	if strings.Join(good.Fonts, " ") != strings.Join(want, " ") {
		t.Fatalf("fonts %v, want %v", good.Fonts, want)
	}
	for name, edit := range map[string]func(*FontList){
		"name":          func(f *FontList) { f.Name = "../fontlist-v330.json" },
		"version":       func(f *FontList) { f.Data = bytes.Replace(f.Data, []byte("330"), []byte("331"), 1) },
		"relative data": func(f *FontList) { f.DataPath = "mpl-data" },
		"not json":      func(f *FontList) { f.Data = f.Data[:20] },
		"trailing":      func(f *FontList) { f.Data = append(f.Data, " {}"...) },
		"dotdot": func(f *FontList) {
			f.Data = []byte(`{"_version": 330, "ttflist": [{"fname": "../x.ttf"}], "afmlist": []}`)
		},
		"unclean": func(f *FontList) {
			f.Data = []byte(`{"_version": 330, "ttflist": [{"fname": "/usr//x.ttf"}], "afmlist": []}`)
		},
		"no fname":         func(f *FontList) { f.Data = []byte(`{"_version": 330, "ttflist": [{}], "afmlist": []}`) },
		"list not a list":  func(f *FontList) { f.Data = []byte(`{"_version": 330, "ttflist": {}, "afmlist": []}`) },
		"over the cap":     func(f *FontList) { f.Data = append(f.Data, bytes.Repeat([]byte(" "), MaxFontListBytes)...) },
		"version a string": func(f *FontList) { f.Data = []byte(`{"_version": "330", "ttflist": [], "afmlist": []}`) },
	} {
		f := good
		f.Data = bytes.Clone(good.Data)
		edit(&f)
		if err := f.check(); !errors.Is(err, ErrBadFontList) {
			t.Errorf("%s: %v, want ErrBadFontList", name, err)
		}
	}
}
