package openai_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/psych-runtime/psych"
	"github.com/psych-runtime/psych/openai"
)

const testKey = "sk-test-0123456789abcdef"

// newClient starts a fake server running h and a Client pointed at it.
func newClient(t *testing.T, h http.HandlerFunc, mod func(*openai.Config)) *openai.Client {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	cfg := openai.Config{BaseURL: srv.URL + "/v1", APIKey: testKey, Model: "test-model"}
	if mod != nil {
		mod(&cfg)
	}
	c, err := openai.New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return c
}

// reply answers with a fixed status and body.
func reply(status int, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		io.WriteString(w, body)
	}
}

// checkNoKey fails when err is nil or mentions the API key.
func checkNoKey(t *testing.T, err error) {
	t.Helper()
	if err == nil {
		t.Fatal("no error")
	}
	if strings.Contains(err.Error(), testKey) {
		t.Errorf("error shows the API key: %v", err)
	}
}

// decodeRequest checks what every request must be and returns its body.
func decodeRequest(t *testing.T, r *http.Request) map[string]any {
	t.Helper()
	if r.Method != http.MethodPost {
		t.Errorf("method %s, want POST", r.Method)
	}
	if r.URL.Path != "/v1/chat/completions" {
		t.Errorf("path %s, want /v1/chat/completions", r.URL.Path)
	}
	if got := r.Header.Get("Authorization"); got != "Bearer "+testKey {
		t.Errorf("Authorization %q", got)
	}
	if got := r.Header.Get("Content-Type"); got != "application/json" {
		t.Errorf("Content-Type %q", got)
	}
	var body map[string]any
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		t.Errorf("decode request: %v", err)
	}
	if body["model"] != "test-model" {
		t.Errorf("model %v", body["model"])
	}
	return body
}

// asJSON re-encodes v compactly, for comparing decoded JSON.
func asJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Error(err)
	}
	return string(b)
}

func TestToolCallRoundTrip(t *testing.T) {
	var step atomic.Int32
	h := func(w http.ResponseWriter, r *http.Request) {
		body := decodeRequest(t, r)
		wantTools := `[{"function":{"description":"List a directory.","name":"list_dir","parameters":{"properties":{"path":{"type":"string"}},"type":"object"}},"type":"function"},` +
			`{"function":{"name":"now","parameters":{"properties":{},"type":"object"}},"type":"function"}]`
		if got := asJSON(t, body["tools"]); got != wantTools {
			t.Errorf("tools\n got %s\nwant %s", got, wantTools)
		}
		if body["tool_choice"] != "auto" {
			t.Errorf("tool_choice %v", body["tool_choice"])
		}
		if body["temperature"] != 0.0 || body["max_tokens"] != 256.0 {
			t.Errorf("temperature %v, max_tokens %v", body["temperature"], body["max_tokens"])
		}
		msgs, _ := body["messages"].([]any)
		switch step.Add(1) {
		case 1:
			want := `[{"content":"Be brief.","role":"system"},{"content":"What is in /etc?","role":"user"}]`
			if got := asJSON(t, msgs); got != want {
				t.Errorf("messages\n got %s\nwant %s", got, want)
			}
			io.WriteString(w, `{"id":"c1","choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant","content":null,
				"tool_calls":[{"id":"call_1","type":"function","function":{"name":"list_dir","arguments":"{\"path\": \"/etc\"}"}}]}}]}`)
		case 2:
			if len(msgs) != 4 {
				t.Errorf("%d messages, want 4", len(msgs))
				w.WriteHeader(http.StatusBadRequest)
				return
			}
			// The arguments go back as a string holding the JSON.
			want := `{"content":null,"role":"assistant","tool_calls":[{"function":{"arguments":"{\"path\":\"/etc\"}","name":"list_dir"},"id":"call_1","type":"function"}]}`
			if got := asJSON(t, msgs[2]); got != want {
				t.Errorf("assistant message\n got %s\nwant %s", got, want)
			}
			want = `{"content":"[\"hosts\"]","role":"tool","tool_call_id":"call_1"}`
			if got := asJSON(t, msgs[3]); got != want {
				t.Errorf("tool message\n got %s\nwant %s", got, want)
			}
			io.WriteString(w, `{"choices":[{"message":{"role":"assistant","content":"Just hosts."}}]}`)
		default:
			t.Errorf("unexpected request %d", step.Load())
			w.WriteHeader(http.StatusTeapot)
		}
	}
	temp := 0.0
	c := newClient(t, h, func(cfg *openai.Config) { cfg.Temperature = &temp; cfg.MaxTokens = 256 })
	tools := []psych.Spec{
		{Name: "list_dir", Description: "List a directory.", Parameters: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}}}`)},
		{Name: "now"},
	}
	transcript := []psych.Message{
		{Role: psych.RoleSystem, Content: "Be brief."},
		{Role: psych.RoleUser, Content: "What is in /etc?"},
	}

	m, err := c.Next(context.Background(), transcript, tools)
	if err != nil {
		t.Fatalf("Next 1: %v", err)
	}
	if m.Role != psych.RoleAssistant || m.Content != "" || len(m.ToolCalls) != 1 {
		t.Fatalf("message 1: %+v", m)
	}
	tc := m.ToolCalls[0]
	if tc.ID != "call_1" || tc.Name != "list_dir" || string(tc.Args) != `{"path": "/etc"}` {
		t.Errorf("tool call %+v (args %s)", tc, tc.Args)
	}

	transcript = append(transcript, m, psych.Message{Role: psych.RoleTool, ToolCallID: "call_1", Name: "list_dir", Content: `["hosts"]`})
	m, err = c.Next(context.Background(), transcript, tools)
	if err != nil {
		t.Fatalf("Next 2: %v", err)
	}
	if m.Role != psych.RoleAssistant || m.Content != "Just hosts." || len(m.ToolCalls) != 0 {
		t.Errorf("message 2: %+v", m)
	}
	if n := step.Load(); n != 2 {
		t.Errorf("%d requests, want 2", n)
	}
}

func TestNoTools(t *testing.T) {
	h := func(w http.ResponseWriter, r *http.Request) {
		body := decodeRequest(t, r)
		for _, k := range []string{"tools", "tool_choice", "temperature", "max_tokens"} {
			if _, ok := body[k]; ok {
				t.Errorf("request has %q", k)
			}
		}
		want := `[{"content":"hi","role":"user"},{"content":"hello","role":"assistant"},{"content":"","role":"user"}]`
		if got := asJSON(t, body["messages"]); got != want {
			t.Errorf("messages\n got %s\nwant %s", got, want)
		}
		io.WriteString(w, `{"choices":[{"message":{"role":"assistant","content":"ok"}}]}`)
	}
	c := newClient(t, h, nil)
	m, err := c.Next(context.Background(), []psych.Message{
		{Role: psych.RoleUser, Content: "hi"},
		{Role: psych.RoleAssistant, Content: "hello"},
		{Role: psych.RoleUser},
	}, nil)
	if err != nil || m.Content != "ok" {
		t.Fatalf("Next: %+v, %v", m, err)
	}
}

// TestArguments covers what a model may send as arguments and what goes
// back when the call is in a transcript.
func TestArguments(t *testing.T) {
	for _, tc := range []struct {
		name string
		sent string // the response's "arguments" value, as JSON
		args string // Args
		back string // the arguments string sent back
	}{
		{"empty", `""`, `{}`, `{}`},
		{"blank", `"  "`, `{}`, `{}`},
		{"null string", `"null"`, `{}`, `{}`},
		{"absent", `null`, `{}`, `{}`},
		{"object", `"{\"a\":[1,2]}"`, `{"a":[1,2]}`, `{"a":[1,2]}`},
		{"object unencoded", `{"a": 1}`, `{"a": 1}`, `{"a":1}`},
		{"not an object", `"[1]"`, `[1]`, `[1]`},
		{"not JSON", `"{\"a\": 1"`, `"{\"a\": 1"`, `{"a": 1`},
		{"python dict", `"{'a': 1}"`, `"{'a': 1}"`, `{'a': 1}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var step atomic.Int32
			h := func(w http.ResponseWriter, r *http.Request) {
				body := decodeRequest(t, r)
				if step.Add(1) == 1 {
					io.WriteString(w, `{"choices":[{"message":{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":`+tc.sent+`}}]}}]}`)
					return
				}
				msgs, _ := body["messages"].([]any)
				var got any
				if len(msgs) == 2 {
					calls, _ := msgs[1].(map[string]any)["tool_calls"].([]any)
					if len(calls) == 1 {
						fn, _ := calls[0].(map[string]any)["function"].(map[string]any)
						got = fn["arguments"]
					}
				}
				if s, ok := got.(string); !ok || s != tc.back {
					t.Errorf("arguments sent back %#v, want the string %q (messages %v)", got, tc.back, msgs)
				}
				io.WriteString(w, `{"choices":[{"message":{"content":"ok"}}]}`)
			}
			c := newClient(t, h, nil)
			tr := []psych.Message{{Role: psych.RoleUser, Content: "go"}}
			m, err := c.Next(context.Background(), tr, nil)
			if err != nil {
				t.Fatalf("Next: %v", err)
			}
			if len(m.ToolCalls) != 1 {
				t.Fatalf("message %+v", m)
			}
			args := m.ToolCalls[0].Args
			if string(args) != tc.args {
				t.Errorf("Args %s, want %s", args, tc.args)
			}
			if !json.Valid(args) {
				t.Errorf("Args %s not valid JSON", args)
			}
			if _, err := c.Next(context.Background(), append(tr, m), nil); err != nil {
				t.Fatalf("Next 2: %v", err)
			}
		})
	}
}

func TestHTTPStatus(t *testing.T) {
	long := strings.Repeat("é", 3000)
	for _, tc := range []struct {
		name, body, want string
		status           int
	}{
		{"openai", `{"error":{"message":"Rate limit reached for ` + testKey + `","type":"requests"}}`, "Rate limit reached for [redacted]", 429},
		{"string error", `{"error":"model not loaded"}`, "model not loaded", 503},
		{"vllm", `{"object":"error","message":"bad model","code":404}`, "bad model", 404},
		{"plain text", "upstream\nfailed\x00", "upstream failed", 502},
		{"long", `{"error":{"message":"` + long + `"}}`, "", 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newClient(t, reply(tc.status, tc.body), nil)
			_, err := c.Next(context.Background(), []psych.Message{{Role: psych.RoleUser, Content: "hi"}}, nil)
			checkNoKey(t, err)
			if !errors.Is(err, openai.ErrHTTPStatus) {
				t.Fatalf("error %v, want ErrHTTPStatus", err)
			}
			var se *openai.StatusError
			if !errors.As(err, &se) {
				t.Fatalf("error %v holds no StatusError", err)
			}
			if se.StatusCode != tc.status {
				t.Errorf("status %d, want %d", se.StatusCode, tc.status)
			}
			if len(se.Message) > 1024 {
				t.Errorf("message is %d bytes", len(se.Message))
			}
			if tc.want != "" && se.Message != tc.want {
				t.Errorf("message %q, want %q", se.Message, tc.want)
			}
			if tc.want == "" && (!strings.HasPrefix(se.Message, "éé") || !strings.HasSuffix(se.Message, "…")) {
				t.Errorf("long message not cut cleanly: %q", se.Message)
			}
		})
	}
}

func TestRedirectNotFollowed(t *testing.T) {
	var followed atomic.Bool
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/elsewhere", http.StatusTemporaryRedirect)
	})
	mux.HandleFunc("/elsewhere", func(w http.ResponseWriter, r *http.Request) { followed.Store(true) })
	c := newClient(t, mux.ServeHTTP, nil)
	_, err := c.Next(context.Background(), nil, nil)
	var se *openai.StatusError
	if !errors.As(err, &se) || se.StatusCode != http.StatusTemporaryRedirect {
		t.Errorf("error %v, want a 307 StatusError", err)
	}
	if followed.Load() {
		t.Error("redirect followed")
	}
}

func TestBadResponse(t *testing.T) {
	for _, tc := range []struct{ name, body, want string }{
		{"malformed", `{"choices":[`, ""},
		{"not JSON", `<html>oops</html>`, ""},
		{"no choices", `{"choices":[]}`, "no choices"},
		{"choices absent", `{"id":"x"}`, "no choices"},
		{"error with 200", `{"error":{"message":"overloaded"}}`, "overloaded"},
		{"content not a string", `{"choices":[{"message":{"content":[{"type":"text"}]}}]}`, ""},
		{"tool call type", `{"choices":[{"message":{"tool_calls":[{"id":"c","type":"retrieval","function":{"name":"f"}}]}}]}`, "retrieval"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newClient(t, reply(http.StatusOK, tc.body), nil)
			m, err := c.Next(context.Background(), nil, nil)
			checkNoKey(t, err)
			if !errors.Is(err, openai.ErrBadResponse) {
				t.Fatalf("error %v (message %+v), want ErrBadResponse", err, m)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v does not say %q", err, tc.want)
			}
		})
	}
}

func TestOversizeBody(t *testing.T) {
	// A valid completion padded with spaces to n bytes.
	body := func(n int) string {
		s := `{"choices":[{"message":{"content":"ok"}}]}`
		return s + strings.Repeat(" ", n-len(s))
	}
	t.Run("configured cap", func(t *testing.T) {
		for _, tc := range []struct {
			size int
			ok   bool
		}{{4096, true}, {4097, false}} {
			c := newClient(t, reply(http.StatusOK, body(tc.size)), func(cfg *openai.Config) { cfg.MaxResponseBytes = 4096 })
			m, err := c.Next(context.Background(), nil, nil)
			if tc.ok && (err != nil || m.Content != "ok") {
				t.Errorf("%d bytes: %+v, %v", tc.size, m, err)
			}
			if !tc.ok && !errors.Is(err, openai.ErrBadResponse) {
				t.Errorf("%d bytes: error %v, want ErrBadResponse", tc.size, err)
			}
		}
	})
	t.Run("default cap", func(t *testing.T) {
		c := newClient(t, reply(http.StatusOK, body(openai.DefaultMaxResponseBytes+1)), nil)
		_, err := c.Next(context.Background(), nil, nil)
		if !errors.Is(err, openai.ErrBadResponse) || !strings.Contains(err.Error(), "over") {
			t.Errorf("error %v, want ErrBadResponse for the size", err)
		}
	})
}

// hang answers only when the request's context ends (or after 10s, so a
// broken test cannot hang the server's Close).
func hang(w http.ResponseWriter, r *http.Request) {
	// The server watches for the client going away only once the body is
	// read.
	io.Copy(io.Discard, r.Body)
	select {
	case <-r.Context().Done():
	case <-time.After(10 * time.Second):
	}
}

func TestContext(t *testing.T) {
	t.Run("cancel", func(t *testing.T) {
		c := newClient(t, hang, nil)
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(50*time.Millisecond, cancel)
		start := time.Now()
		_, err := c.Next(ctx, nil, nil)
		checkNoKey(t, err)
		if !errors.Is(err, context.Canceled) {
			t.Errorf("error %v, want context.Canceled", err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("Next took %v after cancel", d)
		}
	})
	t.Run("cancelled during body", func(t *testing.T) {
		h := func(w http.ResponseWriter, r *http.Request) {
			io.WriteString(w, `{"choices":[`)
			w.(http.Flusher).Flush()
			hang(w, r)
		}
		c := newClient(t, h, nil)
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(50*time.Millisecond, cancel)
		_, err := c.Next(ctx, nil, nil)
		if !errors.Is(err, context.Canceled) {
			t.Errorf("error %v, want context.Canceled", err)
		}
	})
	t.Run("timeout", func(t *testing.T) {
		c := newClient(t, hang, func(cfg *openai.Config) { cfg.Timeout = 50 * time.Millisecond })
		_, err := c.Next(context.Background(), nil, nil)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("error %v, want context.DeadlineExceeded", err)
		}
	})
}

func TestBadTranscript(t *testing.T) {
	for _, tc := range []struct {
		name  string
		msgs  []psych.Message
		tools []psych.Spec
	}{
		{"unknown role", []psych.Message{{Role: "developer", Content: "x"}}, nil},
		{"empty role", []psych.Message{{Content: "x"}}, nil},
		{"tool without id", []psych.Message{{Role: psych.RoleTool, Content: "x"}}, nil},
		{"user with tool calls", []psych.Message{{Role: psych.RoleUser, ToolCalls: []psych.ToolCall{{ID: "c", Name: "f"}}}}, nil},
		{"bad args", []psych.Message{{Role: psych.RoleAssistant, ToolCalls: []psych.ToolCall{{ID: "c", Name: "f", Args: json.RawMessage(`{"a":`)}}}}, nil},
		{"bad parameters", nil, []psych.Spec{{Name: "f", Parameters: json.RawMessage(`{"type":`)}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var hits atomic.Int32
			c := newClient(t, func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }, nil)
			_, err := c.Next(context.Background(), tc.msgs, tc.tools)
			if !errors.Is(err, openai.ErrBadTranscript) {
				t.Errorf("error %v, want ErrBadTranscript", err)
			}
			if hits.Load() != 0 {
				t.Error("a request was sent")
			}
		})
	}
}

func TestInvalidConfig(t *testing.T) {
	nan, neg := math.NaN(), -0.5
	valid := openai.Config{BaseURL: "https://api.example.com/v1", APIKey: testKey, Model: "m"}
	for _, tc := range []struct {
		name string
		mod  func(*openai.Config)
	}{
		{"no base URL", func(c *openai.Config) { c.BaseURL = "" }},
		{"unparseable", func(c *openai.Config) { c.BaseURL = "http://[::1" }},
		{"scheme", func(c *openai.Config) { c.BaseURL = "ftp://api.example.com/v1" }},
		{"no scheme", func(c *openai.Config) { c.BaseURL = "api.example.com/v1" }},
		{"no host", func(c *openai.Config) { c.BaseURL = "https:///v1" }},
		{"credentials", func(c *openai.Config) { c.BaseURL = "https://user:" + testKey + "@api.example.com/v1" }},
		{"query", func(c *openai.Config) { c.BaseURL = "https://api.example.com/v1?key=1" }},
		{"fragment", func(c *openai.Config) { c.BaseURL = "https://api.example.com/v1#x" }},
		{"clear-text key", func(c *openai.Config) { c.BaseURL = "http://api.example.com/v1" }},
		{"no model", func(c *openai.Config) { c.Model = " " }},
		{"key with newline", func(c *openai.Config) { c.APIKey = "a\r\nX-Evil: 1" }},
		{"NaN temperature", func(c *openai.Config) { c.Temperature = &nan }},
		{"negative temperature", func(c *openai.Config) { c.Temperature = &neg }},
		{"negative max tokens", func(c *openai.Config) { c.MaxTokens = -1 }},
		{"negative timeout", func(c *openai.Config) { c.Timeout = -time.Second }},
		{"negative cap", func(c *openai.Config) { c.MaxResponseBytes = -1 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := valid
			tc.mod(&cfg)
			c, err := openai.New(cfg)
			checkNoKey(t, err)
			if !errors.Is(err, openai.ErrInvalidConfig) || !errors.Is(err, psych.ErrInvalidConfig) {
				t.Errorf("error %v, want ErrInvalidConfig", err)
			}
			if c != nil {
				t.Error("a Client came back")
			}
		})
	}
	for _, tc := range []struct {
		name string
		mod  func(*openai.Config)
	}{
		{"https", func(c *openai.Config) {}},
		{"loopback http", func(c *openai.Config) { c.BaseURL = "http://127.0.0.1:8000/v1/" }},
		{"localhost http", func(c *openai.Config) { c.BaseURL = "http://localhost:11434/v1" }},
		{"IPv6 loopback", func(c *openai.Config) { c.BaseURL = "http://[::1]:8000/v1" }},
		{"http without key", func(c *openai.Config) { c.BaseURL = "http://10.0.0.5/v1"; c.APIKey = "" }},
		{"http allowed", func(c *openai.Config) { c.BaseURL = "http://10.0.0.5/v1"; c.AllowInsecureHTTP = true }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := valid
			tc.mod(&cfg)
			if _, err := openai.New(cfg); err != nil {
				t.Errorf("New: %v", err)
			}
		})
	}
}

// TestTrailingSlash: a BaseURL ending in / reaches the same path.
func TestTrailingSlash(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		decodeRequest(t, r)
		io.WriteString(w, `{"choices":[{"message":{"content":"ok"}}]}`)
	}))
	defer srv.Close()
	c, err := openai.New(openai.Config{BaseURL: srv.URL + "/v1/", APIKey: testKey, Model: "test-model"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Next(context.Background(), nil, nil); err != nil {
		t.Fatal(err)
	}
}
