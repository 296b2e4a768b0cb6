// Package docs holds the README and docs/ to their rules: the README is a
// front page (at most 350 lines, make demo and make test in its first 80),
// every relative link in README.md and docs/ resolves (file and heading),
// every Go snippet is an example function the compiler checks, and no Go or
// C source names the design document, which is not in the repository.
package docs

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

const (
	root          = "../.."
	readmeMax     = 350 // lines
	firstScreen   = 80  // lines
	readmeRelPath = "README.md"
)

// markdownFiles is README.md and every .md file under docs/.
func markdownFiles(t *testing.T) []string {
	t.Helper()
	files := []string{readmeRelPath}
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(p, ".md") {
			rel, err := filepath.Rel(root, p)
			if err != nil {
				return err
			}
			files = append(files, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("walk docs/: %v", err)
	}
	if len(files) < 2 {
		t.Fatalf("no markdown under docs/: %v", files)
	}
	return files
}

func read(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		t.Fatalf("read %s: %v", rel, err)
	}
	return string(b)
}

// prose returns the text's lines with those of fenced code blocks blanked
// (so line numbers hold), and the fenced blocks whose info string is lang.
func prose(text, lang string) (lines []string, blocks []string) {
	var fence, block []string
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, "```") {
			lines = append(lines, "")
			if fence == nil {
				fence, block = []string{strings.TrimPrefix(l, "```")}, nil
				continue
			}
			if fence[0] == lang {
				blocks = append(blocks, strings.Join(block, "\n")+"\n")
			}
			fence = nil
			continue
		}
		if fence != nil {
			lines = append(lines, "")
			block = append(block, l)
			continue
		}
		lines = append(lines, l)
	}
	return lines, blocks
}

var (
	linkRE   = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	codeRE   = regexp.MustCompile("`[^`]*`")
	headRE   = regexp.MustCompile(`^#{1,6} (.*)$`)
	slugDrop = regexp.MustCompile(`[^\p{L}\p{N} _-]`)
)

// slug is a heading's anchor as GitHub makes it: lower case, punctuation
// dropped, spaces to hyphens.
func slug(heading string) string {
	s := strings.ToLower(strings.TrimSpace(heading))
	s = slugDrop.ReplaceAllString(s, "")
	return strings.ReplaceAll(s, " ", "-")
}

func anchors(t *testing.T, rel string) map[string]bool {
	t.Helper()
	lines, _ := prose(read(t, rel), "go")
	a := map[string]bool{}
	for _, l := range lines {
		if m := headRE.FindStringSubmatch(l); m != nil {
			a[slug(m[1])] = true
		}
	}
	return a
}

// TestLinksResolve: every relative link of README.md and docs/ names a file
// or directory that exists, and a #fragment names a heading of its target.
func TestLinksResolve(t *testing.T) {
	checked := 0
	for _, rel := range markdownFiles(t) {
		lines, _ := prose(read(t, rel), "")
		for n, l := range lines {
			for _, m := range linkRE.FindAllStringSubmatch(codeRE.ReplaceAllString(l, ""), -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				checked++
				file, frag, _ := strings.Cut(target, "#")
				dest := rel
				if file != "" {
					dest = filepath.Join(filepath.Dir(rel), file)
					if _, err := os.Stat(filepath.Join(root, dest)); err != nil {
						t.Errorf("%s:%d: link %q: %v", rel, n+1, target, err)
						continue
					}
				}
				if frag != "" {
					if !strings.HasSuffix(dest, ".md") {
						t.Errorf("%s: link %q: a fragment on a file that is not markdown", rel, target)
					} else if !anchors(t, dest)[frag] {
						t.Errorf("%s: link %q: %s has no heading #%s", rel, target, dest, frag)
					}
				}
			}
		}
	}
	if checked == 0 {
		t.Fatal("no relative link found: the parser is broken")
	}
}

// TestReadmeIsAFrontPage: at most 350 lines, both commands in the first 80,
// and every file of docs/ reachable from it, directly or through a page it
// links.
func TestReadmeIsAFrontPage(t *testing.T) {
	readme := read(t, readmeRelPath)
	lines := strings.Split(strings.TrimRight(readme, "\n"), "\n")
	if len(lines) > readmeMax {
		t.Errorf("README.md has %d lines, more than %d: a new capability gets its section in docs/ and at most ten lines in the README", len(lines), readmeMax)
	}
	screen := strings.Join(lines[:min(firstScreen, len(lines))], "\n")
	for _, cmd := range []string{"make demo", "make test"} {
		if !strings.Contains(screen, cmd) {
			t.Errorf("README.md: %q is not in its first %d lines", cmd, firstScreen)
		}
	}
	// Reachability: follow links from the README through docs/.
	reached := map[string]bool{}
	var visit func(rel string)
	visit = func(rel string) {
		if reached[rel] {
			return
		}
		reached[rel] = true
		lines, _ := prose(read(t, rel), "")
		for _, l := range lines {
			for _, m := range linkRE.FindAllStringSubmatch(codeRE.ReplaceAllString(l, ""), -1) {
				file, _, _ := strings.Cut(m[1], "#")
				if file == "" || strings.Contains(file, "://") {
					continue
				}
				dest := filepath.Join(filepath.Dir(rel), file)
				if fi, err := os.Stat(filepath.Join(root, dest)); err == nil && fi.IsDir() {
					dest = filepath.Join(dest, "README.md")
				}
				if strings.HasSuffix(dest, ".md") && strings.HasPrefix(dest, "docs"+string(filepath.Separator)) {
					if _, err := os.Stat(filepath.Join(root, dest)); err == nil {
						visit(dest)
					}
				}
			}
		}
	}
	visit(readmeRelPath)
	for _, rel := range markdownFiles(t) {
		if !reached[rel] {
			t.Errorf("%s is not reachable from README.md", rel)
		}
	}
}

// TestGoSnippetsAreExamples: every Go block of README.md and docs/ is, byte
// for byte, a function of an example_test.go file, so the compiler checks
// what the documentation shows.
func TestGoSnippetsAreExamples(t *testing.T) {
	var examples []string
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(p, "example_test.go") {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			examples = append(examples, string(b))
		}
		return nil
	})
	if err != nil {
		t.Fatalf("walk: %v", err)
	}
	n := 0
	for _, rel := range markdownFiles(t) {
		_, blocks := prose(read(t, rel), "go")
		for _, b := range blocks {
			n++
			found := false
			for _, e := range examples {
				if strings.HasPrefix(b, "func Example") && strings.Contains(e, "\n"+b) {
					found = true
					break
				}
			}
			if !found {
				t.Errorf("%s: a Go block that is not an example function of an example_test.go file:\n%s", rel, b)
			}
		}
	}
	if n == 0 {
		t.Fatal("no Go block found: the README's first example is gone, or the parser is broken")
	}
}

// TestNoDesignFileCited: no Go, C or header file names the design document,
// which is not in the repository; a comment states the rule itself.
func TestNoDesignFileCited(t *testing.T) {
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == ".git" {
			return filepath.SkipDir
		}
		switch filepath.Ext(p) {
		case ".go", ".c", ".h":
		default:
			return nil
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
		for n := 1; sc.Scan(); n++ {
			if strings.Contains(sc.Text(), "DESIGN"+".md") {
				t.Errorf("%s:%d names DESIGN"+".md: state the rule in the comment (sandbox/doc.go holds the contract)", p, n)
			}
		}
		return sc.Err()
	})
	if err != nil {
		t.Fatalf("walk: %v", err)
	}
}
