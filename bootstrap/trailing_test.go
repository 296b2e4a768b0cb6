package bootstrap_test

import (
	"os/exec"
	"strings"
	"testing"
)

// astValue is the program's value the AST's way (ast.parse: the last
// statement, if an expression, evaluated after the rest), as JSON, or "!"
// and the exception's type name.
func astValue(t *testing.T, code string) string {
	t.Helper()
	const ref = `import ast, io, json, sys
src = sys.stdin.read()
out, sys.stdout = sys.stdout, io.StringIO()
try:
    tree = ast.parse(src, "<program>")
    last = ast.Expression(tree.body.pop().value) if tree.body and isinstance(tree.body[-1], ast.Expr) else None
    ns = {"__name__": "__main__"}
    exec(compile(tree, "<program>", "exec"), ns)
    r = json.dumps(eval(compile(last, "<program>", "eval"), ns) if last else None)
except BaseException as e:
    r = "!" + type(e).__name__
out.write(r)
`
	cmd := exec.Command(python(t), "-I", "-B", "-W", "ignore", "-c", ref)
	cmd.Stdin = strings.NewReader(code)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("the AST's value: %v", err)
	}
	return string(out)
}

// TestTrailingExpression: a program's value is its last statement's when
// that is an expression, whichever way the bootstrap finds it (the last line
// compiled on its own, or the AST): each case against the AST's answer, and
// its output and warnings against python prog.py's.
func TestTrailingExpression(t *testing.T) {
	cases := map[string]string{
		"comments after":      "x = 1\nx  # the value\n\n   # more\n",
		"continued line":      "x = 1 + \\\n2",
		"continued in block":  "if True:\n    z = 1 + \\\n2",
		"call after def":      "def f():\n    return 5\nf()",
		"after a block":       "if True:\n    y = 3\ny",
		"bracket over lines":  "y = [1,\n2]",
		"closing bracket":     "x = 5\n(x\n)",
		"string concat":       "print('a')\n'b' 'c'",
		"triple quoted":       "s = '''\nx\n'''\ns",
		"docstring":           "'''doc'''\n__doc__",
		"semicolons":          "a = 1; a",
		"indented last":       "x = 1\n\tx",
		"future import":       "from __future__ import annotations\nx: int = 1\nx",
		"crlf":                "x = 1\r\nx\r\n",
		"form feed":           "x = 2\n\fx",
		"open paren before":   "x = (\n1\ny",
		"syntax error before": "x = 1 +\nx",
		"walrus":              "(w := 4)\nw * 2",
		"tuple":               "1, 2",
		"only comments":       "# nothing\n",
		"empty":               "",
		"lambda":              "f = lambda: 3\nf()",
		"raises":              "x = 1\n1 / 0",
		"is literal":          "x = 1\nx is 1",
		"warning before":      "y = 1 is 1\ny",
	}
	for name, code := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			want := astValue(t, code)
			o := run(t, program{code: code})
			if typ, ok := strings.CutPrefix(want, "!"); ok {
				if f := o.result.Failure; f == nil || f.Type != typ {
					t.Fatalf("result %s %+v; the AST's way raises %s", o.result.Value, f, typ)
				}
			} else {
				if f := o.result.Failure; f != nil {
					t.Fatalf("failure %s: %s; the AST's way gives %s", f.Type, f.Message, want)
				}
				jsonEqual(t, o.result.Value, want)
			}
			wantOut, wantErr, _ := asPython(t, code)
			if o.stdout != wantOut {
				t.Errorf("stdout %q, python prog.py %q", o.stdout, wantOut)
			}
			if got, want := strings.Count(o.stderr, "Warning"), strings.Count(wantErr, "Warning"); got != want {
				t.Errorf("%d warnings on stderr, python prog.py %d:\n%s\npython prog.py:\n%s", got, want, o.stderr, wantErr)
			}
		})
	}
}

// TestTrailingExpressionWithoutAST: a program ending in an expression line
// is run without the AST, whose module (0.7 ms of types on 3.11) python
// prog.py does not load either.
func TestTrailingExpressionWithoutAST(t *testing.T) {
	out, err := exec.Command(python(t), "-I", "-c", "import sys; print('_ast' in sys.modules, end='')").Output()
	if err != nil {
		t.Fatal(err)
	}
	o := mustSucceed(t, program{code: "import sys\n'_ast' in sys.modules"})
	jsonEqual(t, o.result.Value, map[string]string{"True": "true", "False": "false"}[string(out)])
	if string(out) == "True" {
		t.Log("this interpreter loads _ast at start-up: the check is moot")
	}
}
