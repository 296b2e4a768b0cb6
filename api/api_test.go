package api

import (
	"errors"
	"io"
	"strings"
	"testing"
)

func TestDecodeStrict(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		ok         bool
	}{
		{"plain", `{"code":"1","limits":{"cpu_seconds":2},"env":{"A":"b"}}`, true},
		{"unknown field", `{"code":"1","cod":2}`, false},
		{"duplicate key", `{"code":"1","code":"2"}`, false},
		{"duplicate nested", `{"code":"1","env":{"A":"x","A":"y"}}`, false},
		{"case fold", `{"code":"1","Code":"2"}`, false},
		{"case fold nested", `{"code":"1","bindings":[{"name":"a","NAME":"b"}]}`, false},
		// encoding/json matches names by Unicode simple folding: U+017F (long s)
		// folds with "s", U+212A (Kelvin) with "k"; strings.ToLower misses the first.
		{"fold long s", `{"code":"1","limits":{"cpu_seconds":1,"cpu_ſeconds":100}}`, false},
		{"fold long s alone", `{"code":"1","limits":{"cpu_ſeconds":1}}`, true},
		{"fold kelvin", `{"code":"1","network":false,"networ\u212a":true}`, false},
		{"same key in two objects", `{"code":"1","bindings":[{"name":"a"},{"name":"b"}]}`, true},
		{"trailing", `{"code":"1"} {}`, false},
		{"not json", `code=1`, false},
		{"invalid utf8", "{\"code\":\"\xff\"}", false},
		{"deep", `{"code":"1","bindings":[{"name":"a","parameters":` + strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth) + `}]}`, false},
		{"wrong type", `{"code":1}`, false},
	} {
		var req RunRequest
		err := DecodeStrict([]byte(tc.body), &req)
		if (err == nil) != tc.ok {
			t.Errorf("%s: DecodeStrict(%.80s) = %v, want ok=%v", tc.name, tc.body, err, tc.ok)
		}
		if err != nil && !errors.Is(err, ErrBadRequest) {
			t.Errorf("%s: %v does not wrap ErrBadRequest", tc.name, err)
		}
	}
}

func TestEventReader(t *testing.T) {
	stream := `{"event":"started","id":"r1","warm":true}` + "\n" +
		`{"event":"stdout","data":"hi\n"}` + "\n\n" +
		`{"event":"novel","x":1}` + "\n" +
		`{"event":"result","result":{"id":"r1","stdout":"hi\n","value":3}}` + "\n"
	er := NewEventReader(strings.NewReader(stream), 0)
	var names []string
	for {
		ev, err := er.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("after %v: %v", names, err)
		}
		names = append(names, ev.Event)
		if ev.Event == EventResult && (ev.Result.ID != "r1" || string(ev.Result.Value) != "3") {
			t.Errorf("result %+v", ev.Result)
		}
	}
	if got := strings.Join(names, ","); got != "started,stdout,novel,result" {
		t.Errorf("events %s", got)
	}
	for _, tc := range []struct {
		name, stream string
		want         error
	}{
		{"no terminal", `{"event":"stdout","data":"x"}` + "\n", ErrNoTerminal},
		{"cut line", `{"event":"stdout","da`, ErrBadEvent},
		{"empty", ``, ErrNoTerminal},
		{"result without payload", `{"event":"result"}` + "\n", ErrBadEvent},
		{"error without code", `{"event":"error","error":{}}` + "\n", ErrBadEvent},
		{"call without id", `{"event":"call","tool":"x"}` + "\n", ErrBadEvent},
		{"after terminal", `{"event":"error","error":{"code":"cancelled"}}` + "\n" + `{"event":"stdout"}` + "\n", ErrBadEvent},
		{"too long", `{"event":"stdout","data":"` + strings.Repeat("x", 200) + `"}` + "\n", ErrBadEvent},
	} {
		er := NewEventReader(strings.NewReader(tc.stream), 100)
		var err error
		for err == nil {
			_, err = er.Next()
		}
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
}

// FuzzEventReader: whatever a server sends, the reader returns events,
// io.EOF after exactly one terminal event, or an error; it never panics,
// never returns an event past a terminal one, and never holds a line past
// its cap.
func FuzzEventReader(f *testing.F) {
	f.Add([]byte(`{"event":"started","id":"a"}` + "\n" + `{"event":"result","result":{"id":"a"}}` + "\n"))
	f.Add([]byte(`{"event":"call","call_id":"1","tool":"t","args":{}}` + "\n" + `{"event":"error","error":{"code":"cancelled"}}`))
	f.Add([]byte("\n\n{\"event\":\"outcome\",\"outcome\":{\"call_id\":\"x\",\"outcome\":\"ok\"}}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		er := NewEventReader(strings.NewReader(string(data)), 256)
		terminal := 0
		for i := 0; i <= len(data); i++ {
			ev, err := er.Next()
			if err != nil {
				if err == io.EOF && terminal != 1 {
					t.Fatalf("io.EOF after %d terminal events", terminal)
				}
				return
			}
			if terminal > 0 {
				t.Fatalf("an event after the terminal one: %+v", ev)
			}
			if ev.Terminal() {
				terminal++
			}
		}
		t.Fatal("the reader returned more events than the stream has bytes")
	})
}

// TestDecodeRunRequest: a run's body is decoded strictly and its id and
// bindings checked; each refusal is an invalid_request saying what is
// wrong, and limits, env and network are left to the server.
func TestDecodeRunRequest(t *testing.T) {
	checkDecoder(t, DecodeRunRequest, []decodeCase{
		{"plain", `{"code":"1"}`, ""},
		{"server's to check", `{"id":"a-1","code":"1","limits":{"cpu_seconds":1e9},"env":{"ANY":"x"},"network":true}`, ""},
		{"a tool", `{"code":"1","bindings":[{"name":"f","params":["a"]}]}`, ""},
		{"strict", `{"code":"1","cod":2}`, ErrBadRequest.Error()},
		{"bad id", `{"id":"../x","code":"1"}`, "id: "},
		{"bad tool name", `{"code":"1","bindings":[{"name":"not a name"}]}`, "bindings: "},
		{"reserved tool", `{"code":"1","bindings":[{"name":"run_code"}]}`, "bindings: "},
		{"schema too large", `{"code":"1","bindings":[{"name":"f","parameters":"` + strings.Repeat("x", MaxSchemaBytes) + `"}]}`, "bindings: f: "},
	}, func(r *RunRequest) string { return r.Code })
}

// TestDecodeCallRequest: a direct call's body likewise, and it must name a
// tool; an empty id is left for the caller to assign.
func TestDecodeCallRequest(t *testing.T) {
	checkDecoder(t, DecodeCallRequest, []decodeCase{
		{"plain", `{"tool":"1","args":{"a":1}}`, ""},
		{"with id", `{"id":"c-1","tool":"1"}`, ""},
		{"strict", `{"tool":"echo","tol":1}`, ErrBadRequest.Error()},
		{"no tool", `{"id":"c-1"}`, "tool: required"},
		{"bad id", `{"id":"../x","tool":"echo"}`, "id: "},
		{"bad tool name", `{"tool":"echo","bindings":[{"name":"not a name"}]}`, "bindings: "},
	}, func(r *CallRequest) string { return r.Tool })
}

// decodeCase is a body and what a decoder says of it: refusal is the
// message's start, "" where the body is accepted.
type decodeCase struct{ name, body, refusal string }

// checkDecoder runs decode on each case: an accepted body decoded (its
// field is "1"), a refused one an invalid_request saying why.
func checkDecoder[T any](t *testing.T, decode func([]byte) (*T, *Error), cases []decodeCase, field func(*T) string) {
	t.Helper()
	for _, tc := range cases {
		req, e := decode([]byte(tc.body))
		switch {
		case (req == nil) == (e == nil):
			t.Errorf("%s: request %v and error %v", tc.name, req, e)
		case tc.refusal == "" && e != nil:
			t.Errorf("%s: refused: %v", tc.name, e)
		case tc.refusal != "" && e == nil:
			t.Errorf("%s: accepted: %+v", tc.name, *req)
		case e != nil && (e.Code != CodeInvalidRequest || !strings.HasPrefix(e.Message, tc.refusal)):
			t.Errorf("%s: %+v, want %s starting %q", tc.name, e, CodeInvalidRequest, tc.refusal)
		case e == nil && field(req) != "1":
			t.Errorf("%s: decoded %+v", tc.name, *req)
		}
	}
}

// TestCodeOf: a status and its code go both ways (a 503 without a body is
// not_ready, a status no code has is host_fault); a code only a stream
// carries is a 500.
func TestCodeOf(t *testing.T) {
	for code, status := range map[string]int{
		CodeInvalidRequest: 400, CodeUnauthorized: 401, CodeForbidden: 403, CodeNotFound: 404,
		CodeConflict: 409, CodeTooLarge: 413, CodeCapacityExhausted: 429, CodeNotReady: 503,
		CodeHostFault: 500,
	} {
		if got := StatusOf(code); got != status {
			t.Errorf("StatusOf(%s) = %d, want %d", code, got, status)
		}
		if got := CodeOf(status); got != code {
			t.Errorf("CodeOf(%d) = %s, want %s", status, got, code)
		}
	}
	for code, status := range map[string]int{CodeDraining: 503, CodeCancelled: 500, CodeSlowConsumer: 500, "no such code": 500} {
		if got := StatusOf(code); got != status {
			t.Errorf("StatusOf(%s) = %d, want %d", code, got, status)
		}
	}
	for _, status := range []int{200, 418, 502} {
		if got := CodeOf(status); got != CodeHostFault {
			t.Errorf("CodeOf(%d) = %s, want %s", status, got, CodeHostFault)
		}
	}
}
