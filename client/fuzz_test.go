package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"testing"

	"github.com/psych-runtime/psych/api"
	"github.com/psych-runtime/psych/sandbox"
)

// canned answers every request with one response: status, content type
// and body as the fuzzer made them; answers to calls get 200.
type canned struct {
	status int
	ctype  string
	body   []byte
}

func (c canned) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		r.Body.Close()
	}
	if r.URL.Path != "/v1/runs" {
		return &http.Response{StatusCode: 200, Header: http.Header{}, Body: io.NopCloser(bytes.NewReader(nil)), Request: r}, nil
	}
	h := http.Header{"Content-Type": {c.ctype}, "Retry-After": {strconv.Itoa(c.status)}}
	return &http.Response{StatusCode: c.status, Header: h, Body: io.NopCloser(bytes.NewReader(c.body)), Request: r}, nil
}

// FuzzStream: whatever a server answers, Sandbox.Run returns a Result only
// when the stream ended with a result event, and an error otherwise; it
// never panics or hangs, and a refusal is an *api.Error with the
// response's status.
func FuzzStream(f *testing.F) {
	f.Add(200, api.MediaNDJSON, []byte(`{"event":"started","id":"a"}`+"\n"+`{"event":"call","call_id":"1","tool":"t","args":{}}`+"\n"+`{"event":"result","result":{"id":"a","value":1}}`+"\n"))
	f.Add(200, api.MediaNDJSON, []byte(`{"event":"stdout","data":"x"}`+"\n"))
	f.Add(200, api.MediaNDJSON+"; charset=utf-8", []byte(`{"event":"error","error":{"code":"cancelled"}}`))
	f.Add(429, "application/json", []byte(`{"error":{"code":"capacity_exhausted","message":"full","retryable":true}}`))
	f.Add(500, "text/html", []byte(`<html>`))
	f.Fuzz(func(t *testing.T, status int, ctype string, body []byte) {
		if status < 100 || status > 999 {
			return
		}
		c, err := New("unix:///nonexistent", Options{MaxEventBytes: 4096, transport: canned{status, ctype, body}})
		if err != nil {
			t.Fatal(err)
		}
		b := bindings{call: func(ctx context.Context, name string, args json.RawMessage) (json.RawMessage, error) {
			return args, nil
		}}
		res, err := c.Sandbox().Run(context.Background(), sandbox.Request{Code: "1", Bindings: b})
		if (res == nil) == (err == nil) {
			t.Fatalf("Run = %v, %v", res, err)
		}
		if res != nil && (status/100 != 2 || !bytes.Contains(body, []byte(`"result"`))) {
			t.Fatalf("a Result from status %d and %q", status, body)
		}
		var ae *api.Error
		if status/100 != 2 && (!errors.As(err, &ae) || ae.Status != status) {
			t.Fatalf("status %d: %v", status, err)
		}
	})
}
