package contract

import (
	"reflect"
	"strings"
	"testing"

	"github.com/psych-runtime/psych/sandbox"
)

// sourceForms: a program saved with a UTF-8 byte-order mark, or with CRLF
// line ends, runs as `python3 prog.py` runs it, and its traceback quotes
// and marks its lines as there.
func (s *suite) sourceForms(t *testing.T) {
	sb := s.b.New(t, Options{})
	res := s.runWith(t, sb, "\ufeffx = 40\r\nx + 2\r\n", sandbox.Limits{}, nil)
	wantSuccess(t, res)
	if got := mustJSON(t, res.Value); got != 42.0 {
		t.Errorf("a program with a byte-order mark and CRLF: value %#v, want 42", got)
	}
	res = s.runWith(t, sb, "\ufeffa = 1\r\nb = 0\r\nc = a / b\r\n", sandbox.Limits{}, nil)
	f := wantFailure(t, res, "ZeroDivisionError")
	lines := strings.Split(f.Traceback, "\n")
	for i, l := range lines {
		if l != "    c = a / b" {
			continue
		}
		// Python 3.11 on marks the operation; its ^ stands under the /.
		if i+1 < len(lines) && strings.Contains(lines[i+1], "^") && strings.Index(lines[i+1], "^") != strings.Index(l, "/") {
			t.Errorf("the caret is not under the /:\n%s", f.Traceback)
		}
		if !strings.Contains(f.Traceback, `File "<program>", line 3, in <module>`) {
			t.Errorf("traceback lacks line 3:\n%s", f.Traceback)
		}
		return
	}
	t.Errorf("traceback lacks the line's text:\n%s", f.Traceback)
}

// subclassValues: a list or tuple subclass is converted through its
// contents, never through the program's __iter__, and an element that
// cannot be converted is its own repr, not its siblings' loss.
func (s *suite) subclassValues(t *testing.T) {
	code := "class L(list):\n    def __iter__(self):\n        raise RuntimeError('no')\n" +
		"class T(tuple):\n    def __iter__(self):\n        return iter(['lie'])\n" +
		"class B:\n    __class__ = property(lambda self: 1/0)\n    def __repr__(self):\n        return 'B!'\n" +
		"[L([1, 2]), T((3, 4)), B(), 'sibling']"
	var got any
	s.value(t, code, &got)
	want := []any{[]any{1.0, 2.0}, []any{3.0, 4.0}, "B!", "sibling"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("value %#v, want %#v", got, want)
	}
}
