package wire

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/psych-runtime/psych/sandbox"
)

func frame(body string) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(len(body)))
	return append(b, body...)
}

func TestRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	enc := NewEncoder(&buf, 0)
	msgs := []any{
		&Start{V: Version, Code: "1+1", Bindings: []sandbox.Binding{{Name: "echo", Params: []string{"a"}, Doc: "d"}}, MaxFrame: 99},
		&Call{ID: 7, Name: "echo", Args: json.RawMessage(`{"a":1}`)},
		&Reply{ID: 7, Value: json.RawMessage(`[1,2]`)},
		&Reply{ID: 8, Error: &ReplyError{Type: "BindingError", Message: "no"}},
		&Result{Value: json.RawMessage(`{"k":"v"}`)},
		&Result{Failure: &Failure{Type: "OSError", Message: "m", Traceback: "tb", Errno: 27}},
	}
	for _, m := range msgs {
		if err := enc.Encode(m); err != nil {
			t.Fatal(err)
		}
	}
	dec := NewDecoder(&buf, 0)
	for i, want := range msgs {
		got, err := dec.Next()
		if err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		gb, _ := json.Marshal(got)
		wb, _ := json.Marshal(want)
		if !bytes.Equal(gb, wb) {
			t.Errorf("frame %d: got %s want %s", i, gb, wb)
		}
	}
	if _, err := dec.Next(); err != io.EOF {
		t.Fatalf("after last frame: %v, want io.EOF", err)
	}
}

func TestMarshalHasType(t *testing.T) {
	b, err := Marshal(&Reply{ID: 1})
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != `{"type":"reply","id":1,"value":null}` {
		t.Fatalf("got %s", b)
	}
}

func TestDecodeErrors(t *testing.T) {
	huge := binary.BigEndian.AppendUint32(nil, 1<<31)
	cases := []struct {
		name string
		in   []byte
		max  int
		want error
	}{
		{"oversized", huge, 0, ErrFrameTooLarge},
		{"over small cap", frame(`{"type":"call","id":1,"name":"x"}`), 10, ErrFrameTooLarge},
		{"zero length", frame(""), 0, ErrFrameTooLarge},
		{"short header", []byte{0, 0}, 0, ErrTruncated},
		{"short body", frame(`{"type":"result"}`)[:8], 0, ErrTruncated},
		{"not json", frame(`hello`), 0, ErrMalformed},
		{"json array", frame(`[1]`), 0, ErrMalformed},
		{"no type", frame(`{"id":1}`), 0, ErrMalformed},
		{"type not string", frame(`{"type":5}`), 0, ErrMalformed},
		{"unknown type", frame(`{"type":"exec"}`), 0, ErrUnknownType},
		{"negative id", frame(`{"type":"call","id":-1,"name":"x"}`), 0, ErrMalformed},
		{"float id", frame(`{"type":"call","id":1.5,"name":"x"}`), 0, ErrMalformed},
		{"call no name", frame(`{"type":"call","id":1}`), 0, ErrMalformed},
		{"args not object", frame(`{"type":"call","id":1,"name":"x","args":[1]}`), 0, ErrMalformed},
		{"failure no type", frame(`{"type":"result","failure":{"message":"m"}}`), 0, ErrMalformed},
		{"reply both", frame(`{"type":"reply","id":1,"value":1,"error":{"type":"E","message":"m"}}`), 0, ErrMalformed},
		{"trailing garbage", frame(`{"type":"result"} x`), 0, ErrMalformed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := NewDecoder(bytes.NewReader(c.in), c.max).Next()
			if !errors.Is(err, c.want) {
				t.Fatalf("got %v, want %v", err, c.want)
			}
		})
	}
}

func TestDecodeNormalizes(t *testing.T) {
	m, err := NewDecoder(bytes.NewReader(frame(`{"type":"call","id":3,"name":"echo"}`)), 0).Next()
	if err != nil {
		t.Fatal(err)
	}
	if c := m.(*Call); string(c.Args) != "{}" {
		t.Fatalf("absent args decoded as %q, want {}", c.Args)
	}
	m, err = NewDecoder(bytes.NewReader(frame(`{"type":"result","value":null,"failure":null}`)), 0).Next()
	if err != nil {
		t.Fatal(err)
	}
	if r := m.(*Result); r.Value != nil || r.Failure != nil {
		t.Fatalf("null result decoded as %+v", r)
	}
}

// TestValidStrings: what the decoder passes on as raw JSON holds valid
// UTF-8 and no lone surrogate, and is otherwise what was sent.
func TestValidStrings(t *testing.T) {
	cases := []struct{ in, want string }{
		{`"plain é"`, `"plain é"`},
		{`"\udcff"`, `"\ufffd"`},
		{`"x\uDCFFy"`, `"x\ufffdy"`},
		{`"\ud83d\ude00"`, `"\ud83d\ude00"`}, // a pair is a character
		{`"\ud83d"`, `"\ufffd"`},
		{`"\ud83d\u0041"`, `"\ufffd\u0041"`},
		{`"\ude00\ud83d"`, `"\ufffd\ufffd"`},
		{`"\\udcff"`, `"\\udcff"`}, // an escaped backslash, then text
		{`"\\\udcff"`, `"\\\ufffd"`},
		{"\"a\xffb\xfe\xfdc\"", "\"a\uFFFDb\uFFFDc\""},
		{"{\"\\udcfe\":[\"\xed\xb3\xbf\",\"\\udcff\"]}", "{\"\\ufffd\":[\"\uFFFD\",\"\\ufffd\"]}"},
	}
	for _, c := range cases {
		in := json.RawMessage(c.in)
		got := ValidStrings(in)
		if string(got) != c.want || !json.Valid(got) {
			t.Errorf("ValidStrings(%q) = %q, want %q", c.in, got, c.want)
		}
		if c.in == c.want && &got[0] != &in[0] {
			t.Errorf("ValidStrings(%q) copied a text it did not change", c.in)
		}
		if c.in != c.want && string(in) != c.in {
			t.Errorf("ValidStrings(%q) changed its argument", c.in)
		}
	}
	m, err := NewDecoder(bytes.NewReader(frame(`{"type":"result","value":{"k\udcff":"\udcfe"},"failure":null}`)), 0).Next()
	if err != nil || string(m.(*Result).Value) != `{"k\ufffd":"\ufffd"}` {
		t.Fatalf("result value %s, %v", m.(*Result).Value, err)
	}
}

func TestEncodeRefusesOversize(t *testing.T) {
	var buf bytes.Buffer
	err := NewEncoder(&buf, 64).Encode(&Result{Value: json.RawMessage(`"` + strings.Repeat("x", 100) + `"`)})
	if !errors.Is(err, ErrFrameTooLarge) || buf.Len() != 0 {
		t.Fatalf("err %v, wrote %d bytes", err, buf.Len())
	}
}

// FuzzDecoder feeds arbitrary bytes to the host decoder: it must return
// frames or errors, never panic, and every frame it accepts must survive a
// re-encode and decode unchanged in type.
func FuzzDecoder(f *testing.F) {
	seeds := []string{
		`{"type":"call","id":1,"name":"echo","args":{"a":1}}`,
		`{"type":"result","value":[1,{"a":null}],"failure":null}`,
		`{"type":"result","value":null,"failure":{"type":"E","message":"m","traceback":"t","errno":2}}`,
		`{"type":"reply","id":2,"error":{"type":"BindingError","message":"x"}}`,
		`{"type":"start","v":1,"code":"1","bindings":[{"name":"a","params":["x"],"doc":""}],"max_frame":5}`,
		`{"type":"call","id":18446744073709551615,"name":"\u0000"}`,
		`{"type":"result","isolation":{"seccomp":0}}`,
		`{"type":"result","value":["\udcff","\ud83d\ude00","\\udcff"],"failure":null}`,
		`{"type":"call","id":1,"name":"echo","args":{"\ud800":"` + "\xff\xfe" + `"}}`,
	}
	for _, s := range seeds {
		f.Add(frame(s))
		f.Add(append(frame(s), frame(s)...))
	}
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{0, 0, 0, 1, '{'})
	f.Fuzz(func(t *testing.T, data []byte) {
		dec := NewDecoder(bytes.NewReader(data), 1<<16)
		for {
			m, err := dec.Next()
			if err != nil {
				if err != io.EOF && !errors.Is(err, ErrFrameTooLarge) && !errors.Is(err, ErrTruncated) &&
					!errors.Is(err, ErrMalformed) && !errors.Is(err, ErrUnknownType) {
					t.Fatalf("untyped error %v", err)
				}
				return
			}
			var raw json.RawMessage
			switch m := m.(type) {
			case *Call:
				raw = m.Args
			case *Result:
				raw = m.Value
			}
			if !utf8.Valid(raw) || loneSurrogates(raw, false) {
				t.Fatalf("%T passed on %q: not valid UTF-8, or a lone surrogate", m, raw)
			}
			body, err := Marshal(m)
			if err != nil {
				t.Fatalf("re-encode %T: %v", m, err)
			}
			again, err := Unmarshal(body)
			if err != nil {
				t.Fatalf("re-decode %s: %v", body, err)
			}
			if tm, _ := typeOf(m); func() string { s, _ := typeOf(again); return s }() != tm {
				t.Fatalf("type changed: %T → %T", m, again)
			}
		}
	})
}

// The decoder's and the encoder's fast paths must give exactly what the
// general ones give, for every input they take.
var fastSeeds = []string{
	`{"type":"call","id":1,"name":"echo","args":{"a":1}}`,
	`{"type":"call","id":0,"name":"x","args":{}}`,
	`{"type":"call","id":18446744073709551615,"name":"x","args":{}}`,
	`{"type":"call","id":18446744073709551616,"name":"x","args":{}}`,
	`{"type":"call","id":01,"name":"x","args":{}}`,
	`{"type":"call","id":1,"name":"x","args":{"a":1},"id":2}`,
	`{"type":"call","id":1,"name":"x","args":{"a":1} }`,
	`{"type":"call","id":1,"name":"x","args":{"a":"<&\u2028>"}}`,
	`{"type":"call","id":1,"name":"x","args":{"a":[1, 2]}}`,
	`{"type":"call","id":1,"name":"x","args":[1]}`,
	`{"type":"call","id":1,"name":"x","args":null}`,
	`{"type":"call","id":1,"name":"","args":{}}`,
	`{"type":"call","id":1,"name":"a\"b","args":{}}`,
	`{"type":"call","id":1,"name":"é","args":{}}`,
	`{"type":"call","id":1,"name":"x","args":{"a":"` + "\xff" + `"}}`,
	`{"type":"call","id":1.5,"name":"x","args":{}}`,
	`{"type":"call","id":1,"name":"x","args":{}}}`,
	`{"type":"call","id":1,"name":"x","args":{"a":{}}`,
	`{"type":"call","id":1,"name":"x","args":{"\udcff":"\ud83d\ude00\ud800"}}`,
}

func TestBootstrapCallMatchesUnmarshal(t *testing.T) {
	for _, s := range fastSeeds {
		checkBootstrapCall(t, []byte(s))
	}
	if c := bootstrapCall([]byte(fastSeeds[0])); c == nil || c.ID != 1 || c.Name != "echo" || string(c.Args) != `{"a":1}` {
		t.Fatalf("the bootstrap's own call frame is not on the fast path: %+v", c)
	}
}

func checkBootstrapCall(t *testing.T, body []byte) {
	t.Helper()
	c := bootstrapCall(body)
	if c == nil {
		return
	}
	m, err := Unmarshal(body)
	if err != nil {
		t.Fatalf("%q: fast path took %+v, Unmarshal: %v", body, c, err)
	}
	if u, ok := m.(*Call); !ok || u.ID != c.ID || u.Name != c.Name || !bytes.Equal(u.Args, c.Args) {
		t.Fatalf("%q: fast path %+v (%s), Unmarshal %+v", body, c, c.Args, m)
	}
}

func TestReplyFastPathMatchesMarshal(t *testing.T) {
	values := []string{"", "null", `{"i":1}`, `{"i": 1}`, `"<"`, `"a&b"`, `"` + "\u2028" + `"`, `"` + "\u2029" + `"`,
		"\"\xe2\x80\"", `[1,2,{"a":[]}]`, `{"a":}`, "\"\xff\"", `1e5`, `-0`, `"\u00e9"`}
	for _, v := range values {
		checkReply(t, &Reply{ID: 42, Value: json.RawMessage(v)})
	}
	checkReply(t, &Reply{ID: 1})
	checkReply(t, &Reply{ID: 1, Value: json.RawMessage{}})
}

func checkReply(t *testing.T, r *Reply) {
	t.Helper()
	var fast bytes.Buffer
	fastErr := NewEncoder(&fast, 0).Encode(r)
	body, err := Marshal(r)
	var slow bytes.Buffer
	if err == nil {
		err = NewEncoder(&slow, 0).WriteBody(body)
	}
	if (fastErr == nil) != (err == nil) || !bytes.Equal(fast.Bytes(), slow.Bytes()) {
		t.Fatalf("value %q: Encode %q (%v), Marshal %q (%v)", r.Value, fast.Bytes(), fastErr, slow.Bytes(), err)
	}
}

func TestReplyFastPathCap(t *testing.T) {
	var buf bytes.Buffer
	err := NewEncoder(&buf, 40).Encode(&Reply{ID: 1, Value: json.RawMessage(`"` + strings.Repeat("x", 20) + `"`)})
	if !errors.Is(err, ErrFrameTooLarge) || buf.Len() != 0 {
		t.Fatalf("err %v, wrote %d bytes", err, buf.Len())
	}
	if err := NewEncoder(&buf, 40).Encode(&Reply{ID: 1, Value: json.RawMessage(`"x"`)}); err != nil {
		t.Fatal(err)
	}
}

func FuzzFastPaths(f *testing.F) {
	for _, s := range fastSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkBootstrapCall(t, data)
		if i := bytes.Index(data, []byte(`"args":`)); i >= 0 {
			checkReply(t, &Reply{ID: uint64(len(data)), Value: json.RawMessage(data[i+7:])})
		}
		checkReply(t, &Reply{ID: 7, Value: json.RawMessage(data)})
	})
}
