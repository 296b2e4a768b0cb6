package cpython

import (
	"bufio"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
)

// allowRow is one line of differences.txt.
type allowRow struct {
	Line     int
	Backends []string // "*" or backend names
	Module   string
	Kind     string // fail, pass, skip, run or *
	Pattern  string
	Reason   string
	re       *regexp.Regexp
	used     bool
}

var backendNames = map[string]bool{"subprocess": true, "containerd": true}

// parseAllowlist reads differences.txt: "backends | module | kind | test id
// pattern | reason" per line, # comments and blank lines ignored.
func parseAllowlist(text string) ([]*allowRow, error) {
	var rows []*allowRow
	sc := bufio.NewScanner(strings.NewReader(text))
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.SplitN(line, " | ", 5)
		if len(f) != 5 {
			return nil, fmt.Errorf("differences.txt:%d: want 5 fields separated by \" | \", got %d", n, len(f))
		}
		for i := range f {
			f[i] = strings.TrimSpace(f[i])
		}
		r := &allowRow{Line: n, Module: f[1], Kind: f[2], Pattern: f[3], Reason: f[4]}
		for _, b := range strings.Split(f[0], ",") {
			b = strings.TrimSpace(b)
			if b != "*" && !backendNames[b] {
				return nil, fmt.Errorf("differences.txt:%d: backend %q: want *, subprocess or containerd", n, b)
			}
			r.Backends = append(r.Backends, b)
		}
		switch r.Kind {
		case kindFail, kindPass, kindSkip, kindRun, "*":
		default:
			return nil, fmt.Errorf("differences.txt:%d: kind %q: want fail, pass, skip, run or *", n, r.Kind)
		}
		if !strings.HasPrefix(r.Module, "test_") {
			return nil, fmt.Errorf("differences.txt:%d: module %q", n, r.Module)
		}
		if len(r.Reason) < 20 {
			return nil, fmt.Errorf("differences.txt:%d: give the precise reason (%q is too short)", n, r.Reason)
		}
		r.re = globRegexp(r.Pattern)
		rows = append(rows, r)
	}
	return rows, sc.Err()
}

// globRegexp compiles a test id glob: * is any run of characters (dots and
// spaces included), ? one character, everything else literal.
func globRegexp(glob string) *regexp.Regexp {
	var b strings.Builder
	b.WriteString("^")
	for _, c := range glob {
		switch c {
		case '*':
			b.WriteString(".*")
		case '?':
			b.WriteString(".")
		default:
			b.WriteString(regexp.QuoteMeta(string(c)))
		}
	}
	b.WriteString("$")
	return regexp.MustCompile(b.String())
}

func (r *allowRow) matches(backend, module string, d *difference) bool {
	okB := false
	for _, b := range r.Backends {
		okB = okB || b == "*" || b == backend
	}
	return okB && r.Module == module && (r.Kind == "*" || r.Kind == d.Kind) && r.re.MatchString(d.ID)
}

// explain finds the row that allows d, marking it used.
func explain(rows []*allowRow, backend, module string, d *difference) *allowRow {
	for _, r := range rows {
		if r.matches(backend, module, d) {
			r.used = true
			return r
		}
	}
	return nil
}

func loadAllowlist(t *testing.T) []*allowRow {
	t.Helper()
	b, err := os.ReadFile("differences.txt")
	if err != nil {
		t.Fatal(err)
	}
	rows, err := parseAllowlist(string(b))
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

const (
	readmeBegin = "<!-- differences.txt: begin (generated; PSYCH_CPYTHON_WRITE_README=1 go test -run TestReadmeMirrorsDifferences ./test/cpython) -->"
	readmeEnd   = "<!-- differences.txt: end -->"
)

// readmeTable renders differences.txt as README.md's table.
func readmeTable(rows []*allowRow) string {
	var b strings.Builder
	b.WriteString("| backends | module | kind | test ids | reason |\n|---|---|---|---|---|\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| %s | %s | %s | `%s` | %s |\n", strings.Join(r.Backends, ", "), r.Module, r.Kind,
			strings.ReplaceAll(r.Pattern, "|", `\|`), strings.ReplaceAll(r.Reason, "|", `\|`))
	}
	if len(rows) == 0 {
		b.WriteString("| | | | | (none) |\n")
	}
	return b.String()
}

// TestReadmeMirrorsDifferences holds README.md's table to differences.txt;
// PSYCH_CPYTHON_WRITE_README=1 rewrites the table instead.
func TestReadmeMirrorsDifferences(t *testing.T) {
	rows := loadAllowlist(t)
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(readme)
	i, j := strings.Index(text, readmeBegin), strings.Index(text, readmeEnd)
	if i < 0 || j < i {
		t.Fatalf("README.md lacks the generated block (%q ... %q)", readmeBegin, readmeEnd)
	}
	want := text[:i] + readmeBegin + "\n" + readmeTable(rows) + text[j:]
	if want == text {
		return
	}
	if os.Getenv("PSYCH_CPYTHON_WRITE_README") != "" {
		if err := os.WriteFile("README.md", []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Fatal("README.md's table does not mirror differences.txt; rerun with PSYCH_CPYTHON_WRITE_README=1")
}

func TestAllowlistSyntax(t *testing.T) {
	rows, err := parseAllowlist("# c\n\nsubprocess, containerd | test_x | fail | test.test_x.A.test_* | no network: the run's namespace has only lo\n")
	if err != nil || len(rows) != 1 {
		t.Fatalf("parse: %v %v", rows, err)
	}
	d := &difference{ID: "test.test_x.A.test_b", Kind: kindFail}
	if !rows[0].matches("containerd", "test_x", d) || rows[0].matches("containerd", "test_y", d) {
		t.Fatal("match")
	}
	if rows[0].matches("subprocess", "test_x", &difference{ID: "test.test_x.B.test_b", Kind: kindFail}) {
		t.Fatal("pattern matched another class")
	}
	for _, bad := range []string{"x | test_x | fail | a\n", "podman | test_x | fail | a | a reason long enough to pass\n", "* | test_x | maybe | a | a reason long enough to pass\n", "* | test_x | fail | a | short\n"} {
		if _, err := parseAllowlist(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
	loadAllowlist(t)
}
