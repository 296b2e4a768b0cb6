package server

import (
	"bufio"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/psych-runtime/psych/api"
	"github.com/psych-runtime/psych/sandbox"
)

// TestBadInput: every malformed or refused body is a 400 naming what is
// wrong, and runs nothing.
func TestBadInput(t *testing.T) {
	ts := newTestServer(t, serverOpts{cfg: func(c *Config) {
		c.Caps = sandbox.Limits{WallSeconds: 60}
		c.Info.EnvAllowlist = []string{"LANG"}
	}})
	many := make([]api.Tool, 10000)
	for i := range many {
		many[i] = api.Tool{Name: fmt.Sprintf("t%d", i)}
	}
	big := `{"type":"object","description":"` + strings.Repeat("x", api.MaxSchemaBytes) + `"}`
	for _, tc := range []struct{ name, body, want string }{
		{"unknown field", `{"code":"1","cod":"2"}`, "unknown field"},
		{"duplicate key", `{"code":"1","code":"2"}`, "code"},
		{"case-fold key", `{"code":"1","Code":"2"}`, "code"},
		{"not JSON", `print(1)`, "invalid character"},
		{"invalid UTF-8", "{\"code\":\"\xff\"}", "UTF-8"},
		{"trailing data", `{"code":"1"} {}`, "after"},
		{"negative limit", `{"code":"1","limits":{"cpu_seconds":-1}}`, "limits.cpu_seconds"},
		{"limit above the cap", `{"code":"1","limits":{"wall_seconds":61}}`, "limits.wall_seconds: 61 is above"},
		{"huge limit", `{"code":"1","limits":{"memory_bytes":1e300}}`, "memory_bytes"},
		{"limits the contract refuses", `{"code":"1","limits":{"stack_bytes":1024}}`, "stack_bytes"},
		{"env not allowed", `{"code":"1","env":{"PATH":"/x"}}`, "allowlist"},
		{"network not allowed", `{"code":"1","network":true}`, "network"},
		{"bad id", `{"id":"../x","code":"1"}`, "id"},
		{"10,000 bindings", jsonString(api.RunRequest{Code: "1", Bindings: many}), "at most 256"},
		{"schema too large", `{"code":"1","bindings":[{"name":"f","parameters":` + big + `}]}`, "at most 65536"},
		{"reserved name", `{"code":"1","bindings":[{"name":"run_code"}]}`, "reserved"},
		{"keyword name", `{"code":"1","bindings":[{"name":"class"}]}`, "identifier"},
		{"a name twice", `{"code":"1","bindings":[{"name":"f"},{"name":"f"}]}`, "twice"},
		{"bad schema", `{"code":"1","bindings":[{"name":"f","parameters":{"type":3}}]}`, "f"},
		{"bad params", `{"code":"1","bindings":[{"name":"f","params":["a","a"]}]}`, "parameter"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, b := ts.do(t, "POST", "/v1/runs", "", tc.body)
			e := wantError(t, resp, b, http.StatusBadRequest, api.CodeInvalidRequest)
			if !strings.Contains(e.Message, tc.want) {
				t.Errorf("message %q does not say %q", e.Message, tc.want)
			}
		})
	}
	if execs, _ := ts.store.Executions(context.Background()); len(execs) != 0 {
		t.Fatalf("refused requests ran %d programs", len(execs))
	}
}

// TestBodyCap: a body whose Content-Length is past the cap is 413 before
// any of it is read; a chunked one is 413 once it passes the cap, never
// read whole.
func TestBodyCap(t *testing.T) {
	ts := newTestServer(t, serverOpts{cfg: func(c *Config) { c.MaxRequestBytes = 64 << 10 }})
	for _, chunked := range []bool{false, true} {
		pr, pw := io.Pipe()
		req, _ := http.NewRequest("POST", "http://psych/v1/runs", pr)
		if !chunked {
			req.ContentLength = 1 << 30
		}
		sent := make(chan int64, 1)
		go func() {
			// Write what the server reads, 4 KiB at a time, until it stops.
			var n int64
			buf := []byte(strings.Repeat(" ", 4<<10))
			for n < 1<<30 {
				if _, err := pw.Write(buf); err != nil {
					break
				}
				n += int64(len(buf))
			}
			sent <- n
		}()
		resp, err := ts.c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		pr.CloseWithError(io.ErrClosedPipe)
		wantError(t, resp, b, http.StatusRequestEntityTooLarge, api.CodeTooLarge)
		if n := <-sent; n > 16<<20 {
			t.Fatalf("chunked %v: %d bytes sent before the 413: read whole", chunked, n)
		}
	}
}

// TestSlowHeader: a header sent one byte a second is closed within the
// header timeout, and holds no slot meanwhile (a run with MaxRuns 1 and no
// queue goes through).
func TestSlowHeader(t *testing.T) {
	ts := newTestServer(t, serverOpts{cfg: func(c *Config) {
		c.HeaderTimeout = 2 * time.Second
		c.MaxRuns, c.Queue = 1, QueueNone
	}})
	c, err := net.Dial("unix", ts.sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	closed := make(chan time.Time, 1)
	start := time.Now()
	go func() {
		defer func() { closed <- time.Now() }()
		for _, b := range []byte("POST /v1/runs HTTP/1.1\r\nHost: psych\r\nContent-Length: 12\r\n\r\n{\"code\":\"1\"}") {
			if _, err := c.Write([]byte{b}); err != nil {
				return
			}
			time.Sleep(time.Second)
		}
	}()
	go func() {
		io.Copy(io.Discard, bufio.NewReader(c)) // returns when the server closes
		c.Close()
	}()
	ts.run(t, `{"code":"1"}`) // the slow client holds no slot
	at := <-closed
	if d := at.Sub(start); d > 6*time.Second {
		t.Fatalf("the slow header's connection lived %v; want it closed within the 2 s header timeout", d)
	}
}

// TestBodyCapFollowsFiles: the default body cap holds a request with the
// files cap's worth of files, in base64, beside a program.
func TestBodyCapFollowsFiles(t *testing.T) {
	need := int64(base64.StdEncoding.EncodedLen(int(sandbox.DefaultFileCaps.InBytes)))
	if DefaultMaxRequestBytes < need+1<<20 {
		t.Fatalf("DefaultMaxRequestBytes %d cannot hold %d bytes of files in base64 (%d) and a program", DefaultMaxRequestBytes, sandbox.DefaultFileCaps.InBytes, need)
	}
}
