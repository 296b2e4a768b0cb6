// Package funclen holds the module to issue 29's bound on function length:
// no function outside tests is over maxLines lines, Go or C, but for those
// named in over, which may only shrink.
//
// What it counts. Go: every function and method declared in a .go file
// that is not a _test.go file, in every directory of the module but those
// the go tool skips (testdata, vendor, names starting with . or _), whatever
// its build constraints, and not in another module (a directory with a
// go.mod of its own); its length is the lines from the line of its func
// keyword to the line of its closing brace, both counted (the doc comment
// is not). Function literals count as part of the declaration that holds
// them. C: every function defined in a .c or .h file of the module; its
// length is the lines from the line of its name to the line of its closing
// brace, both counted. The C reader is a brace counter that passes over
// comments, string and character literals and preprocessor lines (it does
// not evaluate #if: a brace in a branch left out would count). A function
// declared once per build is as long as its longest declaration.
package funclen

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
)

// maxLines is the longest a function may be.
const maxLines = 100

// over lists the functions still longer than maxLines, each with its length
// when it was listed; issue 29 emptied it. The list only shrinks: a function listed here that is now maxLines or shorter (or gone)
// fails the test until its line is removed, one that grew past its number
// fails it too, and so does any function over maxLines not listed. A key
// is the function's directory in the module, a dot, and its name, a
// method's with its receiver type: "sandbox/container.(*run).start".
var over = map[string]int{}

// fn is one function found.
type fn struct {
	key   string // as over's keys
	pos   string // file:line, for messages
	lines int
}

// TestFunctionLength checks the module's functions against maxLines and
// over.
func TestFunctionLength(t *testing.T) {
	found, err := scan("../..")
	if err != nil {
		t.Fatal(err)
	}
	if len(found) < 500 {
		t.Fatalf("found only %d functions in the module: is the walk from its root?", len(found))
	}
	for _, p := range check(found, over) {
		t.Error(p)
	}
	t.Logf("%d functions over %d lines are allowlisted (of %d functions)", len(over), maxLines, len(found))
}

// check returns what is wrong with found against allow: a function over
// maxLines that allow does not name or that grew past its number, and a
// name in allow whose function is now maxLines or shorter, or gone. A
// function declared once per build (New in x_linux.go and x_other.go) is
// as long as its longest declaration.
func check(found []fn, allow map[string]int) []string {
	longest := map[string]fn{}
	for _, f := range found {
		if l, ok := longest[f.key]; !ok || f.lines > l.lines {
			longest[f.key] = f
		}
	}
	var problems []string
	for _, f := range longest {
		n, listed := allow[f.key]
		switch {
		case f.lines > maxLines && !listed:
			problems = append(problems, fmt.Sprintf("%s (%s) is %d lines, over %d: split it by phase", f.key, f.pos, f.lines, maxLines))
		case f.lines > n && listed:
			problems = append(problems, fmt.Sprintf("%s (%s) is %d lines, longer than the %d it is listed with: split it rather than raise the number", f.key, f.pos, f.lines, n))
		case f.lines <= maxLines && listed:
			problems = append(problems, fmt.Sprintf("%s (%s) is %d lines now, within %d: remove it from the list", f.key, f.pos, f.lines, maxLines))
		}
	}
	for k := range allow {
		if _, ok := longest[k]; !ok {
			problems = append(problems, fmt.Sprintf("%s is listed but not found: remove it from the list", k))
		}
	}
	sort.Strings(problems)
	return problems
}

// scan walks the module at root and returns its functions, Go and C.
func scan(root string) ([]fn, error) {
	var found []fn
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path == root {
				return nil
			}
			if name == "testdata" || name == "vendor" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
				return filepath.SkipDir // another module
			}
			return nil
		}
		rel, err := filepath.Rel(root, filepath.Dir(path))
		if err != nil {
			return err
		}
		dir := filepath.ToSlash(rel)
		switch {
		case strings.HasSuffix(name, ".go") && !strings.HasSuffix(name, "_test.go"):
			fs, err := goFuncs(path, dir)
			found = append(found, fs...)
			return err
		case strings.HasSuffix(name, ".c") || strings.HasSuffix(name, ".h"):
			src, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			cs, err := cFuncs(string(src))
			if err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
			for _, c := range cs {
				found = append(found, fn{key: dir + "." + c.name, pos: fmt.Sprintf("%s:%d", path, c.line), lines: c.lines})
			}
		}
		return nil
	})
	return found, err
}

// goFuncs returns the functions declared in the Go file at path, keyed
// under dir.
func goFuncs(path, dir string) ([]fn, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	var fns []fn
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || fd.Body == nil {
			continue
		}
		name := fd.Name.Name
		if fd.Recv != nil && len(fd.Recv.List) == 1 {
			name = "(" + recvType(fd.Recv.List[0].Type) + ")." + name
		}
		start, end := fset.Position(fd.Pos()), fset.Position(fd.End())
		fns = append(fns, fn{key: dir + "." + name, pos: fmt.Sprintf("%s:%d", path, start.Line), lines: end.Line - start.Line + 1})
	}
	return fns, nil
}

// recvType renders a receiver's type without its type parameters: T, *T.
func recvType(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.StarExpr:
		return "*" + recvType(e.X)
	case *ast.Ident:
		return e.Name
	case *ast.IndexExpr:
		return recvType(e.X)
	case *ast.IndexListExpr:
		return recvType(e.X)
	case *ast.ParenExpr:
		return recvType(e.X)
	}
	return "?"
}

// cfunc is one C function definition: its name, the line of its name and
// its length in lines.
type cfunc struct {
	name        string
	line, lines int
}

// cFuncs finds the function definitions in C source by counting braces. A
// brace that opens at file level after a header ending in a parenthesised
// list opens a function, named by the identifier before that list (so
// __attribute__((...)) before the name is passed over); any other (a
// struct, an initialiser) is counted but opens none. Comments, string and
// character literals and preprocessor lines (with their continuations) are
// passed over.
func cFuncs(src string) ([]cfunc, error) {
	type ch struct {
		c    byte
		line int
	}
	var (
		fns    []cfunc
		header []ch // the code at file level since the last ';' or '}'
		depth  int
		open   *cfunc // the function whose body is open
		line   = 1
		bol    = true // only white space so far on this line
	)
	for i := 0; i < len(src); i++ {
		c := src[i]
		switch {
		case c == '\n':
			line++
			bol = true
			continue
		case c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v':
			if depth == 0 {
				header = append(header, ch{' ', line})
			}
			continue
		case c == '#' && bol:
			for ; i < len(src) && (src[i] != '\n' || src[i-1] == '\\'); i++ {
				if src[i] == '\n' {
					line++
				}
			}
			i-- // the newline is counted above
			continue
		case strings.HasPrefix(src[i:], "//"):
			for i < len(src) && src[i] != '\n' {
				i++
			}
			i--
			continue
		case strings.HasPrefix(src[i:], "/*"):
			end := strings.Index(src[i+2:], "*/")
			if end < 0 {
				return nil, fmt.Errorf("line %d: unterminated comment", line)
			}
			line += strings.Count(src[i:i+2+end], "\n")
			i += 2 + end + 1
			bol = false
			continue
		case c == '"' || c == '\'':
			j := i + 1
			for ; j < len(src) && src[j] != c; j++ {
				if src[j] == '\\' {
					j++
				} else if src[j] == '\n' {
					return nil, fmt.Errorf("line %d: unterminated literal", line)
				}
			}
			if j >= len(src) {
				return nil, fmt.Errorf("line %d: unterminated literal", line)
			}
			if depth == 0 {
				header = append(header, ch{'0', line}) // a literal, neither name nor bracket
			}
			i = j
		}
		bol = false
		switch c {
		case '{':
			if depth == 0 {
				s := make([]byte, len(header))
				for k, h := range header {
					s[k] = h.c
				}
				if name, at, ok := funcName(string(s)); ok {
					open = &cfunc{name: name, line: header[at].line}
				}
				header = header[:0]
			}
			depth++
		case '}':
			depth--
			if depth < 0 {
				return nil, fmt.Errorf("line %d: unbalanced '}'", line)
			}
			if depth == 0 {
				if open != nil {
					open.lines = line - open.line + 1
					fns = append(fns, *open)
					open = nil
				}
				header = header[:0]
			}
		case ';':
			if depth == 0 {
				header = header[:0]
			}
		case '"', '\'':
		default:
			if depth == 0 {
				header = append(header, ch{c, line})
			}
		}
	}
	if depth != 0 {
		return nil, fmt.Errorf("%d braces left open at the end", depth)
	}
	return fns, nil
}

// funcName reads a function definition's header: the text before its
// body's brace must end with ')', and the identifier just before the '('
// matching it is the name (at is its index). ok is false for anything else.
func funcName(h string) (name string, at int, ok bool) {
	h = strings.TrimRight(h, " ")
	if !strings.HasSuffix(h, ")") {
		return "", 0, false
	}
	level := 0
	i := len(h) - 1
	for ; i >= 0; i-- {
		if h[i] == ')' {
			level++
		} else if h[i] == '(' {
			level--
			if level == 0 {
				break
			}
		}
	}
	if i < 0 {
		return "", 0, false
	}
	end := i
	for end > 0 && h[end-1] == ' ' {
		end--
	}
	start := end
	for start > 0 && isIdent(h[start-1]) {
		start--
	}
	if start == end || (h[start] >= '0' && h[start] <= '9') || slices.Contains([]string{"if", "for", "while", "switch", "sizeof", "return"}, h[start:end]) {
		return "", 0, false
	}
	return h[start:end], start, true
}

func isIdent(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}
