//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package pyfacts

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/psych-runtime/psych/internal/testutil"
	"github.com/psych-runtime/psych/sandbox/internal/trustcache"
)

func testPython(t *testing.T) string {
	t.Helper()
	return testutil.RequirePython(t)
}

func requireRoot(t *testing.T) {
	t.Helper()
	testutil.RequireRoot(t, "gives a file to another uid")
}

// counter is a wrapper interpreter that counts its starts in a file.
type counter struct {
	path, count string
}

func newCounter(t *testing.T, dir string) *counter {
	t.Helper()
	c := &counter{path: filepath.Join(dir, "python"), count: filepath.Join(dir, "count")}
	c.write(t, "")
	return c
}

// write (re)places the wrapper with a new file; extra varies its content.
func (c *counter) write(t *testing.T, extra string) {
	t.Helper()
	script := fmt.Sprintf("#!/bin/sh\n%secho x >> '%s'\nexec '%s' \"$@\"\n", extra, c.count, testPython(t))
	tmp := c.path + ".new"
	if err := os.WriteFile(tmp, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, c.path); err != nil {
		t.Fatal(err)
	}
}

// wantStarts fails unless the interpreter was started n times in all.
func (c *counter) wantStarts(t *testing.T, n int) {
	t.Helper()
	if got := c.starts(t); got != n {
		t.Fatalf("%d starts, want %d", got, n)
	}
}

// missTwice calls get twice and wants each time a miss that ok (if not
// nil) accepts, with the interpreter's own facts, and so two starts in all.
func (c *counter) missTwice(t *testing.T, get func() (Facts, outcome, error), ok func(outcome) bool) {
	t.Helper()
	for range 2 {
		f, o, err := get()
		if err != nil || o.hit || ok != nil && !ok(o) {
			t.Fatalf("outcome %+v, err %v", o, err)
		}
		checkFacts(t, f)
	}
	c.wantStarts(t, 2)
}

func (c *counter) starts(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile(c.count)
	if errors.Is(err, os.ErrNotExist) {
		return 0
	} else if err != nil {
		t.Fatal(err)
	}
	return bytes.Count(b, []byte("x\n"))
}

// want is what the test interpreter itself says, asked directly.
var want struct {
	once     sync.Once
	prefixes []string
	version  string
	err      error
}

// checkFacts holds f to the interpreter's own answer, and its bootstrap to
// a code object that interpreter loads.
func checkFacts(t *testing.T, f Facts) {
	t.Helper()
	py := testPython(t)
	want.once.Do(func() {
		out, err := exec.Command(py, "-I", "-S", "-c",
			"import sys,json;print(json.dumps([[sys.prefix,sys.base_prefix,sys.exec_prefix,sys.base_exec_prefix],'%d.%d.%d'%sys.version_info[:3]]))").Output()
		if err != nil {
			want.err = err
			return
		}
		var v []json.RawMessage
		if want.err = json.Unmarshal(out, &v); want.err == nil {
			want.err = errors.Join(json.Unmarshal(v[0], &want.prefixes), json.Unmarshal(v[1], &want.version))
		}
	})
	if want.err != nil {
		t.Fatalf("ask %s: %v", py, want.err)
	}
	if !reflect.DeepEqual(f.Prefixes, want.prefixes) || f.Version != want.version {
		t.Fatalf("facts %q %q, want %q %q", f.Prefixes, f.Version, want.prefixes, want.version)
	}
	if f.Bootstrap != "" {
		t.Fatal("facts with the bootstrap in base64 too; Code holds it")
	}
	cmd := exec.Command(py, "-I", "-S", "-c",
		"import marshal,sys;c=marshal.loads(sys.stdin.buffer.read());print(type(c).__name__,c.co_filename)")
	cmd.Stdin = bytes.NewReader(f.Code)
	out, err := cmd.Output()
	if err != nil || string(out) != "code <psych-bootstrap>\n" {
		t.Fatalf("the bootstrap does not load as its code object: %v %q", err, out)
	}
}

// mustLoad is load that must succeed with the given hit.
func mustLoad(t *testing.T, python, dir string, hit bool) (Facts, outcome) {
	t.Helper()
	f, o, err := load(python, dir)
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	if o.hit != hit {
		t.Fatalf("hit %v, want %v (%+v)", o.hit, hit, o)
	}
	return f, o
}

// cacheDir is a fresh 0700 cache directory.
func cacheDir(t *testing.T) string {
	t.Helper()
	d := filepath.Join(t.TempDir(), "cache")
	if err := os.Mkdir(d, 0o700); err != nil {
		t.Fatal(err)
	}
	return d
}

func TestCacheHit(t *testing.T) {
	c := newCounter(t, t.TempDir())
	dir := cacheDir(t)
	f1, hit, err := Load(c.path, Options{Dir: dir})
	if err != nil || hit {
		t.Fatalf("first Load: hit %v, err %v", hit, err)
	}
	if n := c.starts(t); n != 1 {
		t.Fatalf("a miss started the interpreter %d times, want once", n)
	}
	checkFacts(t, f1)
	f2, hit, err := Load(c.path, Options{Dir: dir})
	if err != nil || !hit {
		t.Fatalf("second Load: hit %v, err %v", hit, err)
	}
	if n := c.starts(t); n != 1 {
		t.Fatalf("a hit started the interpreter (%d starts in all)", n-1)
	}
	if !reflect.DeepEqual(f1, f2) {
		t.Fatalf("the hit's facts differ from the miss's")
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 || entries[0].Name() != entryName(c.path) {
		t.Fatalf("cache holds %v, want the one entry %s", entries, entryName(c.path))
	}
	fi, err := os.Lstat(filepath.Join(dir, entryName(c.path)))
	if err != nil || fi.Mode() != 0o600 {
		t.Fatalf("entry mode %v, err %v", fi.Mode(), err)
	}
}

func TestCacheCreatesDir(t *testing.T) {
	c := newCounter(t, t.TempDir())
	dir := filepath.Join(t.TempDir(), "a", "b", "psych")
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	mustLoad(t, c.path, dir, false)
	fi, err := os.Lstat(dir)
	if err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
		t.Fatalf("created cache directory: %v, err %v", fi.Mode(), err)
	}
	mustLoad(t, c.path, dir, true)
}

func TestCacheTwoInterpreters(t *testing.T) {
	a, b := newCounter(t, t.TempDir()), newCounter(t, t.TempDir())
	dir := cacheDir(t)
	mustLoad(t, a.path, dir, false)
	mustLoad(t, b.path, dir, false)
	mustLoad(t, a.path, dir, true)
	mustLoad(t, b.path, dir, true)
	if entries, _ := os.ReadDir(dir); len(entries) != 2 {
		t.Fatalf("two interpreters, %d entries", len(entries))
	}
}

func TestCacheChangedInterpreter(t *testing.T) {
	c := newCounter(t, t.TempDir())
	dir := cacheDir(t)
	mustLoad(t, c.path, dir, false)
	// Another file at the same path: new inode, size and mtime.
	c.write(t, "# another interpreter\n")
	f, o := mustLoad(t, c.path, dir, false)
	if !strings.Contains(o.reason, "another interpreter file") {
		t.Errorf("miss reason %q", o.reason)
	}
	checkFacts(t, f)
	if n := c.starts(t); n != 2 {
		t.Fatalf("%d starts, want 2 (the change recomputed once)", n)
	}
	mustLoad(t, c.path, dir, true)

	// The same file rewritten in place, same size, its mtime put back: the
	// ctime still tells.
	fi, err := os.Stat(c.path)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := os.ReadFile(c.path)
	body = bytes.Replace(body, []byte("# another"), []byte("# ANOTHER"), 1)
	time.Sleep(10 * time.Millisecond)
	if err := os.WriteFile(c.path, body, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(c.path, fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
	f, _ = mustLoad(t, c.path, dir, false)
	checkFacts(t, f)
	mustLoad(t, c.path, dir, true)

	// A symlink at the path retargeted to another interpreter file.
	link := filepath.Join(t.TempDir(), "python3")
	if err := os.Symlink(c.path, link); err != nil {
		t.Fatal(err)
	}
	mustLoad(t, link, dir, false)
	mustLoad(t, link, dir, true)
	other := newCounter(t, t.TempDir())
	os.Remove(link)
	if err := os.Symlink(other.path, link); err != nil {
		t.Fatal(err)
	}
	mustLoad(t, link, dir, false)
	if other.starts(t) != 1 {
		t.Fatalf("the retargeted link did not start its new interpreter")
	}
}

func TestCacheVenvConfigChange(t *testing.T) {
	root := t.TempDir()
	bin := filepath.Join(root, "bin")
	os.Mkdir(bin, 0o755)
	c := newCounter(t, bin)
	dir := cacheDir(t)
	mustLoad(t, c.path, dir, false)
	mustLoad(t, c.path, dir, true)
	if err := os.WriteFile(filepath.Join(root, "pyvenv.cfg"), []byte("home = /usr/bin\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	mustLoad(t, c.path, dir, false)
	mustLoad(t, c.path, dir, true)
}

// primed is a case's start (as root where root says): a counter
// interpreter and a cache directory that holds its valid entry.
func primed(t *testing.T, root bool) (*counter, string) {
	t.Helper()
	if root {
		requireRoot(t)
	}
	c := newCounter(t, t.TempDir())
	dir := cacheDir(t)
	mustLoad(t, c.path, dir, false)
	return c, dir
}

// entryOf reads the valid entry of python in dir.
func entryOf(t *testing.T, dir, python string) (string, []byte) {
	t.Helper()
	p := filepath.Join(dir, entryName(python))
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return p, b
}

// split cuts an entry into its envelope (decoded), its payload's bytes and
// its tail (the compiled bootstrap).
func split(t *testing.T, data []byte) (entry, []byte, []byte) {
	t.Helper()
	header, tail, ok := bytes.Cut(data, []byte("\n"))
	if !ok {
		t.Fatal("no header line")
	}
	var e entry
	if err := json.Unmarshal(header, &e); err != nil {
		t.Fatal(err)
	}
	return e, e.Payload, tail
}

// resum rewrites an entry's payload with edit and a matching checksum.
func resum(t *testing.T, data []byte, edit func(*payload)) []byte {
	t.Helper()
	_, body, tail := split(t, data)
	var p payload
	if err := json.Unmarshal(body, &p); err != nil {
		t.Fatal(err)
	}
	edit(&p)
	body, _ = json.Marshal(p)
	return trustcache.Seal(body, tail)
}

func TestCacheCorruptEntry(t *testing.T) {
	cases := []struct {
		name    string
		corrupt func(data []byte) []byte
	}{
		{"flipped bytes", func(b []byte) []byte {
			b = bytes.Clone(b)
			for _, i := range []int{len(b) / 3, len(b) / 2, len(b) - 10} {
				b[i] ^= 0x01
			}
			return b
		}},
		{"flipped byte in the code", func(b []byte) []byte {
			b = bytes.Clone(b)
			b[len(b)-100] ^= 0x20
			return b
		}},
		{"no code, checksum matches", func(b []byte) []byte {
			_, body, _ := split(t, b)
			return trustcache.Seal(body, nil)
		}},
		{"code in the payload too, checksum matches", func(b []byte) []byte {
			_, _, tail := split(t, b)
			return resum(t, b, func(p *payload) { p.Facts.Bootstrap = base64.StdEncoding.EncodeToString(tail) })
		}},
		{"truncated", func(b []byte) []byte { return b[:len(b)/2] }},
		{"empty", func(b []byte) []byte { return nil }},
		{"wrong checksum", func(b []byte) []byte {
			e, _, tail := split(t, b)
			e.SHA256 = strings.Repeat("0", 64)
			out, _ := json.Marshal(e)
			return append(append(out, '\n'), tail...)
		}},
		{"identity mismatch, checksum matches", func(b []byte) []byte {
			return resum(t, b, func(p *payload) { p.Key.File.Ino++ })
		}},
		{"bootstrap hash mismatch, checksum matches", func(b []byte) []byte {
			return resum(t, b, func(p *payload) { p.Key.Bootstrap = strings.Repeat("a", 64) })
		}},
		{"relative prefix, checksum matches", func(b []byte) []byte {
			return resum(t, b, func(p *payload) { p.Facts.Prefixes[0] = "usr" })
		}},
		{"oversized code, checksum matches", func(b []byte) []byte {
			_, body, _ := split(t, b)
			return trustcache.Seal(body, bytes.Repeat([]byte("A"), 200<<10))
		}},
		{"another format", func(b []byte) []byte {
			return bytes.Replace(b, []byte(fmt.Sprintf(`{"format":%d,`, formatVersion)), []byte(`{"format":99,`), 1)
		}},
		{"unknown field", func(b []byte) []byte {
			f := fmt.Sprintf(`{"format":%d,`, formatVersion)
			return bytes.Replace(b, []byte(f), []byte(f+`"extra":1,`), 1)
		}},
		{"trailing data", func(b []byte) []byte { return append(bytes.Clone(b), "{}"...) }},
		{"oversized", func(b []byte) []byte {
			return append(bytes.Clone(b), bytes.Repeat([]byte(" "), trustcache.MaxEntryBytes)...)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, dir := primed(t, false)
			p, good := entryOf(t, dir, c.path)
			if err := os.WriteFile(p, tc.corrupt(good), 0o600); err != nil {
				t.Fatal(err)
			}
			f, o := mustLoad(t, c.path, dir, false)
			if o.untrusted || o.bypassed || o.writeErr != nil {
				t.Fatalf("outcome %+v", o)
			}
			t.Logf("miss: %s", o.reason)
			checkFacts(t, f)
			c.wantStarts(t, 2)
			f2, _ := mustLoad(t, c.path, dir, true) // rebuilt
			if !reflect.DeepEqual(f, f2) {
				t.Fatal("the rebuilt entry holds other facts")
			}
		})
	}
}

func TestCacheHostileEntry(t *testing.T) {
	cases := []struct {
		name  string
		root  bool
		plant func(t *testing.T, p string, good []byte)
	}{
		{"symlink to a valid entry", false, func(t *testing.T, p string, good []byte) {
			elsewhere := filepath.Join(t.TempDir(), "entry")
			os.WriteFile(elsewhere, good, 0o600)
			os.Remove(p)
			if err := os.Symlink(elsewhere, p); err != nil {
				t.Fatal(err)
			}
		}},
		{"mode 0644", false, func(t *testing.T, p string, good []byte) {
			if err := os.Chmod(p, 0o644); err != nil {
				t.Fatal(err)
			}
		}},
		{"mode 0700", false, func(t *testing.T, p string, good []byte) { os.Chmod(p, 0o700) }},
		{"hard link", false, func(t *testing.T, p string, good []byte) {
			if err := os.Link(p, p+".link"); err != nil {
				t.Fatal(err)
			}
		}},
		{"fifo", false, func(t *testing.T, p string, good []byte) {
			os.Remove(p)
			if err := syscall.Mkfifo(p, 0o600); err != nil {
				t.Fatal(err)
			}
		}},
		{"owned by another uid", true, func(t *testing.T, p string, good []byte) {
			if err := os.Chown(p, 65534, 65534); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, dir := primed(t, tc.root)
			p, good := entryOf(t, dir, c.path)
			tc.plant(t, p, good)
			var log bytes.Buffer
			f, hit, err := Load(c.path, Options{Dir: dir, Logger: slog.New(slog.NewTextHandler(&log, nil))})
			if err != nil || hit {
				t.Fatalf("Load after planting: hit %v, err %v", hit, err)
			}
			if !strings.Contains(log.String(), "level=WARN") {
				t.Errorf("an untrusted entry was not warned about: %q", log.String())
			}
			checkFacts(t, f)
			c.wantStarts(t, 2)
			// Replaced by a trusted entry of our own.
			var st syscall.Stat_t
			if err := syscall.Lstat(p, &st); err != nil {
				t.Fatal(err)
			}
			if st.Mode&syscall.S_IFMT != syscall.S_IFREG || st.Mode&0o7777 != 0o600 || int(st.Uid) != os.Geteuid() || st.Nlink != 1 {
				t.Fatalf("entry not replaced: mode %o uid %d nlink %d", st.Mode, st.Uid, st.Nlink)
			}
			mustLoad(t, c.path, dir, true)
		})
	}
}

func TestCacheHostileDir(t *testing.T) {
	cases := []struct {
		name  string
		root  bool
		plant func(t *testing.T, dir string) string // returns the Dir to use
	}{
		{"mode 0755", false, func(t *testing.T, dir string) string { os.Chmod(dir, 0o755); return dir }},
		{"mode 0770", false, func(t *testing.T, dir string) string { os.Chmod(dir, 0o770); return dir }},
		{"mode 0500", false, func(t *testing.T, dir string) string { os.Chmod(dir, 0o500); return dir }},
		{"symlink to a valid cache", false, func(t *testing.T, dir string) string {
			link := filepath.Join(t.TempDir(), "cache")
			if err := os.Symlink(dir, link); err != nil {
				t.Fatal(err)
			}
			return link
		}},
		{"owned by another uid", true, func(t *testing.T, dir string) string {
			if err := os.Chown(dir, 65534, 65534); err != nil {
				t.Fatal(err)
			}
			return dir
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, dir := primed(t, tc.root)
			use := tc.plant(t, dir)
			t.Cleanup(func() { os.Chmod(dir, 0o700) })
			before := testutil.CountFDs()
			f, o := mustLoad(t, c.path, use, false)
			if !o.bypassed || !o.untrusted {
				t.Fatalf("outcome %+v, want an untrusted, bypassed cache", o)
			}
			// A refused directory is closed, not left open per load (the
			// refusals once closed the result's -1 instead).
			if after := testutil.CountFDs(); after != before {
				t.Errorf("%d open descriptors after the refused load, %d before", after, before)
			}
			t.Logf("bypassed: %s", o.reason)
			checkFacts(t, f)
			c.wantStarts(t, 2)
			var st syscall.Stat_t
			syscall.Lstat(dir, &st)
			if tc.name == "mode 0755" && st.Mode&0o7777 != 0o755 {
				t.Errorf("the cache directory's mode was changed to %o", st.Mode&0o7777)
			}
		})
	}
}

func TestCacheUnusableDir(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	os.WriteFile(file, nil, 0o600)
	for _, dir := range []string{filepath.Join(file, "psych"), filepath.Join(file, "a", "psych"), "/proc/psych-no-such-dir"} {
		t.Run(dir, func(t *testing.T) {
			c := newCounter(t, t.TempDir())
			c.missTwice(t, func() (Facts, outcome, error) { return load(c.path, dir) },
				func(o outcome) bool { return o.bypassed && o.unusable })
		})
	}
}

func TestCacheEntryUnwritable(t *testing.T) {
	// A directory in place of the entry cannot be replaced: the facts
	// still come back, and the failure to write is reported.
	c := newCounter(t, t.TempDir())
	dir := cacheDir(t)
	if err := os.Mkdir(filepath.Join(dir, entryName(c.path)), 0o700); err != nil {
		t.Fatal(err)
	}
	c.missTwice(t, func() (Facts, outcome, error) { return load(c.path, dir) },
		func(o outcome) bool { return o.untrusted && o.writeErr != nil })
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("temporary files left behind: %v", entries)
	}
}

func TestCacheOff(t *testing.T) {
	c := newCounter(t, t.TempDir())
	c.missTwice(t, func() (Facts, outcome, error) {
		f, hit, err := Load(c.path, Options{Dir: NoCache})
		return f, outcome{hit: hit}, err
	}, nil)
}

func TestCacheConcurrentLoads(t *testing.T) {
	c := newCounter(t, t.TempDir())
	dir := cacheDir(t)
	var wg sync.WaitGroup
	results := make([]Facts, 6)
	errs := make([]error, len(results))
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], _, errs[i] = Load(c.path, Options{Dir: dir})
		}()
	}
	wg.Wait()
	for i := range results {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		checkFacts(t, results[i])
	}
	mustLoad(t, c.path, dir, true)
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Fatalf("entries %v", entries)
	}
}

func TestCacheDefaultDir(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", "/x/cache")
	if d := defaultDir(); d != "/x/cache/psych" {
		t.Fatalf("XDG_CACHE_HOME=/x/cache: %q", d)
	}
	t.Setenv("XDG_CACHE_HOME", "relative")
	t.Setenv("HOME", "/home/u")
	wantDir := "/home/u/.cache/psych"
	if os.Geteuid() == 0 {
		wantDir = "/var/cache/psych"
	}
	if d := defaultDir(); d != wantDir {
		t.Fatalf("relative XDG_CACHE_HOME: %q, want %q", d, wantDir)
	}
}

func TestFactsRelativeDir(t *testing.T) {
	if _, _, err := Load(testPython(t), Options{Dir: "cache"}); !errors.Is(err, ErrInvalidOptions) {
		t.Fatalf("relative Dir: %v", err)
	}
}

func TestFactsBadInterpreter(t *testing.T) {
	bad := map[string]string{
		"relative prefix": `{"prefixes":["usr","/usr","/usr","/usr"],"version":"3.11.2","bootstrap":"YQ=="}`,
		"three prefixes":  `{"prefixes":["/usr","/usr","/usr"],"version":"3.11.2","bootstrap":"YQ=="}`,
		"no code":         `{"prefixes":["/usr","/usr","/usr","/usr"],"version":"3.11.2","bootstrap":""}`,
		"not base64":      `{"prefixes":["/usr","/usr","/usr","/usr"],"version":"3.11.2","bootstrap":"a b"}`,
		"bad version":     `{"prefixes":["/usr","/usr","/usr","/usr"],"version":"3; rm","bootstrap":"YQ=="}`,
		"not JSON":        `hello`,
	}
	for name, out := range bad {
		t.Run(name, func(t *testing.T) {
			py := filepath.Join(t.TempDir(), "python")
			os.WriteFile(py, []byte("#!/bin/sh\ncat >/dev/null\necho '"+out+"'\n"), 0o755)
			dir := cacheDir(t)
			if _, _, err := Load(py, Options{Dir: dir}); !errors.Is(err, ErrBadFacts) {
				t.Fatalf("Load: %v, want ErrBadFacts", err)
			}
			if entries, _ := os.ReadDir(dir); len(entries) != 0 {
				t.Fatalf("bad facts were cached: %v", entries)
			}
		})
	}
	py := filepath.Join(t.TempDir(), "python")
	os.WriteFile(py, []byte("#!/bin/sh\necho broken >&2\nexit 1\n"), 0o755)
	if _, _, err := Load(py, Options{Dir: cacheDir(t)}); err == nil || !strings.Contains(err.Error(), "broken") {
		t.Fatalf("failing interpreter: %v", err)
	}
	if _, _, err := Load("/nonexistent/python3", Options{Dir: cacheDir(t)}); err == nil {
		t.Fatal("missing interpreter: no error")
	}
}

func TestCachePrunesDeadEntries(t *testing.T) {
	dir := cacheDir(t)
	gone := newCounter(t, t.TempDir())
	mustLoad(t, gone.path, dir, false)
	kept := newCounter(t, t.TempDir())
	mustLoad(t, kept.path, dir, false)
	os.Remove(gone.path)
	oldTmp := filepath.Join(dir, "x.json.tmp-0123")
	newTmp := filepath.Join(dir, "y.json.tmp-4567")
	other := filepath.Join(dir, "0000.json")
	for _, p := range []string{oldTmp, newTmp} {
		os.WriteFile(p, nil, 0o600)
	}
	os.WriteFile(other, []byte(`{"format":2}`), 0o600)
	long := time.Now().Add(-2 * staleTemp)
	os.Chtimes(oldTmp, long, long)

	c := newCounter(t, t.TempDir())
	mustLoad(t, c.path, dir, false) // a miss written: prunes
	for p, want := range map[string]bool{
		filepath.Join(dir, entryName(gone.path)): false,
		filepath.Join(dir, entryName(kept.path)): true,
		filepath.Join(dir, entryName(c.path)):    true,
		oldTmp:                                   false,
		newTmp:                                   true,
		other:                                    true,
	} {
		if _, err := os.Lstat(p); (err == nil) != want {
			t.Errorf("%s: present %v, want %v", filepath.Base(p), err == nil, want)
		}
	}
	mustLoad(t, kept.path, dir, true)
}

// TestUnsupportedPython: an interpreter older than MinPython, or one that
// takes no -I, is refused with ErrUnsupportedPython, naming the version.
func TestUnsupportedPython(t *testing.T) {
	dir := t.TempDir()
	old := filepath.Join(dir, "python3.7")
	script := "#!/bin/sh\ncat >/dev/null\nprintf '%s' '{\"prefixes\":[\"/usr\",\"/usr\",\"/usr\",\"/usr\"],\"version\":\"3.7.16\",\"bootstrap\":\"\"}'\n"
	if err := os.WriteFile(old, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Load(old, Options{Dir: NoCache}); !errors.Is(err, ErrUnsupportedPython) || !strings.Contains(err.Error(), "3.7.16") || !strings.Contains(err.Error(), MinPython) {
		t.Fatalf("Python 3.7: %v", err)
	}
	py2 := filepath.Join(dir, "python2")
	if err := os.WriteFile(py2, []byte("#!/bin/sh\necho 'Unknown option: -I' >&2\nexit 2\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Load(py2, Options{Dir: NoCache}); !errors.Is(err, ErrUnsupportedPython) {
		t.Fatalf("an interpreter without -I: %v", err)
	}
}
