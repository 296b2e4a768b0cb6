package server

import (
	"encoding/json"
	"testing"

	"github.com/psych-runtime/psych/api"
	"github.com/psych-runtime/psych/sandbox"
)

// FuzzDecodeRunRequest: whatever body a client sends, decoding and
// checking it returns a request or a 400, never panics, and a request it
// accepts holds: limits within the caps and valid once merged, env names
// on the allowlist, no network, at most MaxTools tools with valid names
// and schemas within MaxSchemaBytes.
func FuzzDecodeRunRequest(f *testing.F) {
	for _, s := range []string{
		`{"code":"1"}`,
		`{"id":"a-1","code":"print(1)","limits":{"cpu_seconds":2,"wall_seconds":5,"stack_bytes":4194304},"env":{"LANG":"C"}}`,
		`{"code":"1","bindings":[{"name":"f","parameters":{"type":"object"},"params":["a"],"destructive":true}]}`,
		`{"code":"1","code":"2"}`, `{"code":"1","limits":{"cpu_seconds":-1}}`, `{"network":true}`,
		"{\"code\":\"\xff\"}", `[]`, `{"code":"1"} x`, `{"limits":{"memory_bytes":1e308}}`,
	} {
		f.Add([]byte(s))
	}
	caps := sandbox.Limits{CPUSeconds: 60, WallSeconds: 120}.Merge(sandbox.DefaultLimits())
	c := limitsCheck{defaults: sandbox.DefaultLimits(), caps: caps, envAllowlist: []string{"LANG"}}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, e := decodeRunRequest(body, c)
		if (req == nil) == (e == nil) {
			t.Fatalf("request %v and error %v", req, e)
		}
		if e != nil {
			if e.Code != api.CodeInvalidRequest || e.Message == "" || api.StatusOf(e.Code) != 400 {
				t.Fatalf("refusal %+v: want a 400 with a message", e)
			}
			return
		}
		if n := req.Limits.Above(caps); n != "" && n != "stack_bytes" {
			t.Fatalf("accepted %s above its cap: %+v", n, req.Limits)
		}
		if req.Limits.WallSeconds > caps.WallSeconds || req.Limits.StackBytes > caps.StackBytes {
			t.Fatalf("accepted limits above the caps: %+v", req.Limits)
		}
		if err := req.Limits.Merge(c.defaults).Validate(); err != nil {
			t.Fatalf("accepted limits the contract refuses: %v", err)
		}
		for name := range req.Env {
			if name != "LANG" {
				t.Fatalf("accepted env %q", name)
			}
		}
		if req.Network || len(req.Bindings) > api.MaxTools {
			t.Fatalf("accepted network %v, %d tools", req.Network, len(req.Bindings))
		}
		for _, tool := range req.Bindings {
			if sandbox.CheckName(tool.Name) != nil || len(tool.Parameters) > api.MaxSchemaBytes {
				t.Fatalf("accepted tool %.64q with a %d-byte schema", tool.Name, len(tool.Parameters))
			}
			if tool.Parameters != nil && !json.Valid(tool.Parameters) {
				t.Fatalf("accepted a schema that is not JSON: %q", tool.Parameters)
			}
		}
		if req.ID != "" && sandbox.CheckID(req.ID) != nil {
			t.Fatalf("accepted id %q", req.ID)
		}
	})
}
