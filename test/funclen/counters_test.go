package funclen

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// cSource has what the brace counter must not be fooled by: braces in
// comments, strings, characters and preprocessor lines, struct bodies and
// initialisers, attributes before a name, a brace on the header's line.
const cSource = `#define OPEN { /* a brace in a macro */ \
	}
// a comment {
struct attr {
	int a; /* { */
};

static const char *s = "{";

__attribute__((noreturn, format(printf, 2, 3))) static void fail(int err, const char *fmt, ...)
{
	char c = '{';
	if (err) {
		puts("}}}");
	}
}

static int two(void) {
	struct attr a = {1};
	return a.a;
}
#include <x.h> /* } */
int main(int argc,
	 char **argv)
{
	return two();
}
`

func TestCFuncs(t *testing.T) {
	got, err := cFuncs(cSource)
	if err != nil {
		t.Fatal(err)
	}
	want := []cfunc{{"fail", 10, 7}, {"two", 18, 4}, {"main", 23, 5}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("cFuncs = %+v, want %+v", got, want)
	}
	for _, bad := range []string{"static void f(void)\n{\n", "}\n", "/* open", "static char c = '\n';\n"} {
		if fns, err := cFuncs(bad); err == nil {
			t.Errorf("cFuncs(%q) = %+v, want an error", bad, fns)
		}
	}
}

func TestGoFuncs(t *testing.T) {
	src := `package p

// F is documented: its doc comment does not count.
func F() {
	_ = func() {
	}
}

type T[K any] struct{}

func (t *T[K]) M() {}

func (T[K]) N() {
}

func external()
`
	path := filepath.Join(t.TempDir(), "p.go")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := goFuncs(path, "a/p")
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, f := range got {
		keys = append(keys, f.key+":"+strings.Repeat("|", f.lines))
	}
	want := []string{"a/p.F:" + strings.Repeat("|", 4), "a/p.(*T).M:|", "a/p.(T).N:||"}
	if !slices.Equal(keys, want) {
		t.Errorf("goFuncs = %q, want %q", keys, want)
	}
}

func TestCheck(t *testing.T) {
	found := []fn{
		{"ok", "a.go:1", maxLines},          // within: fine
		{"new", "b.go:1", maxLines + 1},     // over, not listed
		{"listed", "c.go:1", maxLines + 5},  // over, listed at its length
		{"shorter", "d.go:1", maxLines + 2}, // over, shorter than listed: fine
		{"grown", "e.go:1", maxLines + 9},   // over, longer than listed
		{"fixed", "f.go:1", maxLines},       // listed, now within
		{"twice", "g_linux.go:1", maxLines + 4},
		{"twice", "g_other.go:1", 1}, // another build's: the longest counts
	}
	allow := map[string]int{"listed": maxLines + 5, "shorter": maxLines + 3, "grown": maxLines + 8, "fixed": maxLines + 1, "gone": maxLines + 1, "twice": maxLines + 4}
	got := check(found, allow)
	var names []string
	for _, p := range got {
		names = append(names, strings.Fields(p)[0])
	}
	if want := []string{"fixed", "gone", "grown", "new"}; !slices.Equal(names, want) {
		t.Errorf("check found problems with %q, want %q:\n%s", names, want, strings.Join(got, "\n"))
	}
}

// TestScan: the walk counts the module's own files, Go and C, and leaves
// out tests, testdata, vendor, hidden directories and other modules.
func TestScan(t *testing.T) {
	root := t.TempDir()
	long := "package p\n\nfunc F() {\n" + strings.Repeat("\t_ = 0\n", maxLines) + "}\n"
	files := map[string]string{
		"go.mod":             "module m\n",
		"a/a.go":             long,
		"a/a_test.go":        long,
		"a/testdata/t.go":    long,
		"vendor/v/v.go":      long,
		".hidden/h.go":       long,
		"_skip/s.go":         long,
		"other/go.mod":       "module other\n",
		"other/o.go":         long,
		"c/c.c":              "int f(void)\n{\n" + strings.Repeat("\tx();\n", maxLines) + "}\n",
		"c/c.h":              "static inline int g(void) { return 0; }\n",
		"c/testdata/skip.c":  "int h(void)\n{\n}\n",
		"a/a_other_build.go": "//go:build never\n\npackage p\n\nfunc G() {}\n",
	}
	for name, src := range files {
		path := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	found, err := scan(root)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range found {
		got = append(got, fmt.Sprintf("%s %d", f.key, f.lines))
	}
	slices.Sort(got)
	want := []string{fmt.Sprintf("a.F %d", maxLines+2), "a.G 1", fmt.Sprintf("c.f %d", maxLines+3), "c.g 1"}
	if !slices.Equal(got, want) {
		t.Errorf("scan found %q, want %q", got, want)
	}
}
