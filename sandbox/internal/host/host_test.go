package host

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/psych-runtime/psych/sandbox"
	"github.com/psych-runtime/psych/sandbox/wire"
)

func TestCapture(t *testing.T) {
	c := Capture{Max: 10}
	c.Drain(io.MultiReader(strings.NewReader("hello "), strings.NewReader("world, and more")))
	if c.Text() != "hello worl" || !c.Truncated() {
		t.Fatalf("kept %q truncated=%v", c.Text(), c.Truncated())
	}
	d := Capture{Max: 10}
	d.Write([]byte("ab\xffc"))
	if d.Text() != "ab\uFFFDc" || d.Truncated() {
		t.Fatalf("kept %q truncated=%v", d.Text(), d.Truncated())
	}
	if n, err := d.Write(bytes.Repeat([]byte("x"), 100)); n != 100 || err != nil {
		t.Fatalf("write past the cap: %d, %v; want all of it taken", n, err)
	}
}

// TestRequestEnv: a request's variable takes the host's place, one off the
// allowlist or with a NUL is refused, and the start frame carries the env.
func TestRequestEnv(t *testing.T) {
	t.Setenv("PSYCH_HOST_TEST_A", "host")
	allow := []string{"PSYCH_HOST_TEST_A", "PSYCH_HOST_TEST_B"}
	env := Env("/tmp", "/usr/bin/python3", allow, map[string]string{"PSYCH_HOST_TEST_A": "req", "PSYCH_HOST_TEST_B": ""})
	if !slices.Contains(env, "PSYCH_HOST_TEST_A=req") || !slices.Contains(env, "PSYCH_HOST_TEST_B=") || slices.Contains(env, "PSYCH_HOST_TEST_A=host") {
		t.Fatalf("env %q: want the request's values over the host's", env)
	}
	for _, bad := range []map[string]string{{"PSYCH_HOST_TEST_C": "x"}, {"PSYCH_HOST_TEST_A": "a\x00b"}, {"PSYCH_HOST_TEST_A": "\xff"}} {
		if _, err := Prepare(sandbox.Request{Code: "1", Env: bad}, sandbox.DefaultLimits(), 4096, allow); !errors.Is(err, sandbox.ErrInvalidRequest) {
			t.Errorf("env %q: %v, want ErrInvalidRequest", bad, err)
		}
	}
	r, err := Prepare(sandbox.Request{Code: "1", Env: map[string]string{"PSYCH_HOST_TEST_B": "v"}}, sandbox.DefaultLimits(), 4096, allow)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.SetStart([]string{"PSYCH_HOST_TEST_B=v"}); err != nil {
		t.Fatal(err)
	}
	var st wire.Start
	if err := json.Unmarshal(r.Start, &st); err != nil || !slices.Equal(st.Env, []string{"PSYCH_HOST_TEST_B=v"}) {
		t.Fatalf("start %s (%v): want the env", r.Start, err)
	}
	if err := r.SetStart([]string{strings.Repeat("x", 5000)}); !errors.Is(err, sandbox.ErrInvalidRequest) {
		t.Fatalf("an env past the frame cap: %v, want ErrInvalidRequest", err)
	}
}

func TestEnv(t *testing.T) {
	t.Setenv("PSYCH_HOST_TEST_ALLOWED", "yes")
	t.Setenv("PSYCH_HOST_TEST_SECRET", "no")
	env := Env("/tmp", "/usr/bin/python3", []string{"PSYCH_HOST_TEST_ALLOWED", "PSYCH_HOST_TEST_UNSET"}, nil)
	var names []string
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		names = append(names, k)
	}
	want := append(SandboxEnv(), "PSYCH_HOST_TEST_ALLOWED")
	slices.Sort(names)
	slices.Sort(want)
	if !slices.Equal(names, want) {
		t.Fatalf("env %v, want exactly %v", names, want)
	}
	for _, bad := range [][]string{{"HOME"}, {"LC_ALL"}, {""}, {"A=B"}, {"A\x00"}} {
		if err := CheckAllowlist(bad); err == nil {
			t.Errorf("CheckAllowlist(%q) accepted", bad)
		}
	}
	if err := CheckAllowlist([]string{"LANG", "TZ"}); err != nil {
		t.Errorf("CheckAllowlist: %v", err)
	}
}

type echoBindings struct{ reply json.RawMessage }

func (echoBindings) List() []sandbox.Binding {
	return []sandbox.Binding{{Name: "echo"}}
}
func (b echoBindings) Call(ctx context.Context, name string, args json.RawMessage) (json.RawMessage, error) {
	if b.reply != nil {
		return b.reply, nil
	}
	if name == "echo" {
		return args, nil
	}
	return nil, errors.New("no such binding")
}

func TestPrepare(t *testing.T) {
	d := sandbox.DefaultLimits().Merge(sandbox.DefaultLimits())
	r, err := Prepare(sandbox.Request{Code: "1", Bindings: echoBindings{}, Limits: sandbox.Limits{WallSeconds: 2}}, d, 4096, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Limits.WallSeconds != 2 || r.Limits.CPUSeconds != 10 || len(r.Decls) != 1 {
		t.Fatalf("prepared %+v", r)
	}
	m, err := wire.Unmarshal(r.Start)
	if st, ok := m.(*wire.Start); err != nil || !ok || st.Code != "1" || st.MaxFrame != 4096 {
		t.Fatalf("start frame %s: %v", r.Start, err)
	}
	for name, req := range map[string]sandbox.Request{
		"bad utf-8":     {Code: "\xff"},
		"over the cap":  {Code: strings.Repeat("#", 5000)},
		"bad limit":     {Code: "1", Limits: sandbox.Limits{WallSeconds: -1}},
		"reserved name": {Code: "1", Bindings: reservedBindings{}},
	} {
		if _, err := Prepare(req, d, 4096, nil); !errors.Is(err, sandbox.ErrInvalidRequest) {
			t.Errorf("%s: %v, want ErrInvalidRequest", name, err)
		}
	}
}

type reservedBindings struct{ echoBindings }

func (reservedBindings) List() []sandbox.Binding { return []sandbox.Binding{{Name: "__spec__"}} }

// serve runs a Server against frames the test writes as the program.
func serve(t *testing.T, b sandbox.Bindings, program func(enc *wire.Encoder, dec *wire.Decoder, raw net.Conn)) *Server {
	t.Helper()
	req, err := Prepare(sandbox.Request{Code: "x", Bindings: b}, sandbox.DefaultLimits(), wire.DefaultMaxFrame, nil)
	if err != nil {
		t.Fatal(err)
	}
	hostEnd, child := net.Pipe()
	srv := NewServer(hostEnd, req, 4096)
	done := make(chan struct{})
	go func() { srv.Serve(context.Background()); close(done) }()
	dec, enc := wire.NewDecoder(child, 4096), wire.NewEncoder(child, 4096)
	if m, err := dec.Next(); err != nil {
		t.Fatalf("no start frame: %v", err)
	} else if _, ok := m.(*wire.Start); !ok {
		t.Fatalf("first frame %T", m)
	}
	program(enc, dec, child)
	child.Close()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return after the program's end")
	}
	return srv
}

func TestServer(t *testing.T) {
	srv := serve(t, echoBindings{}, func(enc *wire.Encoder, dec *wire.Decoder, _ net.Conn) {
		enc.Encode(&wire.Call{ID: 1, Name: "echo", Args: json.RawMessage(`{"a":1}`)})
		m, err := dec.Next()
		if r, ok := m.(*wire.Reply); err != nil || !ok || string(r.Value) != `{"a":1}` {
			t.Errorf("reply %#v, %v", m, err)
		}
		enc.Encode(&wire.Result{Value: json.RawMessage(`7`)})
	})
	if srv.ProtocolError() != nil || srv.Result() == nil || string(srv.Result().Value) != "7" {
		t.Fatalf("result %+v, protocol error %v", srv.Result(), srv.ProtocolError())
	}
	// A reply that is not JSON, or too big for a frame, reaches the program
	// as a BindingError.
	for _, reply := range []string{"{not json", `"` + strings.Repeat("x", 5000) + `"`} {
		serve(t, echoBindings{reply: json.RawMessage(reply)}, func(enc *wire.Encoder, dec *wire.Decoder, _ net.Conn) {
			enc.Encode(&wire.Call{ID: 1, Name: "echo"})
			m, err := dec.Next()
			if r, ok := m.(*wire.Reply); err != nil || !ok || r.Error == nil || r.Error.Type != "BindingError" {
				t.Errorf("reply %#v, %v; want a BindingError", m, err)
			}
		})
	}
}

// blockBindings' block waits until its context ends; echo counts its calls.
type blockBindings struct {
	entered, ended chan struct{}
	echoes         atomic.Int32
}

func newBlockBindings() *blockBindings {
	return &blockBindings{entered: make(chan struct{}), ended: make(chan struct{})}
}

func (*blockBindings) List() []sandbox.Binding {
	return []sandbox.Binding{{Name: "block"}, {Name: "echo"}}
}

func (b *blockBindings) Call(ctx context.Context, name string, args json.RawMessage) (json.RawMessage, error) {
	if name == "echo" {
		b.echoes.Add(1)
		return args, nil
	}
	close(b.entered)
	<-ctx.Done()
	close(b.ended)
	return nil, ctx.Err()
}

// TestServerResultCancelsCall: the result is taken while a call runs; it
// cancels that call, which is answered with a BindingError, and the call
// queued behind it is answered without running. The result stays whether
// or not the program reads those replies.
func TestServerResultCancelsCall(t *testing.T) {
	b := newBlockBindings()
	srv := serve(t, b, func(enc *wire.Encoder, dec *wire.Decoder, raw net.Conn) {
		raw.SetDeadline(time.Now().Add(5 * time.Second))
		enc.Encode(&wire.Call{ID: 1, Name: "block"})
		<-b.entered
		enc.Encode(&wire.Call{ID: 2, Name: "echo", Args: json.RawMessage(`{"a":1}`)})
		enc.Encode(&wire.Result{Value: json.RawMessage(`"done"`)})
		for id := uint64(1); id <= 2; id++ {
			m, err := dec.Next()
			if r, ok := m.(*wire.Reply); err != nil || !ok || r.ID != id || r.Error == nil || !strings.Contains(r.Error.Message, "the program has finished") {
				t.Errorf("reply %d: %+v, %v; want a BindingError saying the program has finished", id, m, err)
			}
		}
	})
	if srv.ProtocolError() != nil || srv.Result() == nil || string(srv.Result().Value) != `"done"` {
		t.Fatalf("result %+v, protocol error %v", srv.Result(), srv.ProtocolError())
	}
	select {
	case <-b.ended:
	default:
		t.Error("the call in flight was not cancelled")
	}
	if n := b.echoes.Load(); n != 0 {
		t.Errorf("echo ran %d times after the result", n)
	}

	// The program ends without reading the reply: the result is still taken.
	b = newBlockBindings()
	srv = serve(t, b, func(enc *wire.Encoder, _ *wire.Decoder, raw net.Conn) {
		raw.SetDeadline(time.Now().Add(5 * time.Second))
		enc.Encode(&wire.Call{ID: 1, Name: "block"})
		<-b.entered
		enc.Encode(&wire.Result{Value: json.RawMessage(`7`)})
	})
	if srv.ProtocolError() != nil || srv.Result() == nil || string(srv.Result().Value) != "7" {
		t.Fatalf("result %+v, protocol error %v; want the result sent while the call ran", srv.Result(), srv.ProtocolError())
	}
}

// sleepBindings' nap sleeps for {"us": N} µs and returns its args.
type sleepBindings struct{}

func (sleepBindings) List() []sandbox.Binding { return []sandbox.Binding{{Name: "nap"}} }

func (sleepBindings) Call(_ context.Context, _ string, args json.RawMessage) (json.RawMessage, error) {
	var a struct{ US int }
	if err := json.Unmarshal(args, &a); err != nil {
		return nil, err
	}
	time.Sleep(time.Duration(a.US) * time.Microsecond)
	return args, nil
}

// TestServerCallsAroundSlowCall: calls that take about slowCall, so the
// one timer fires as a call ends, or late, while the next one runs: every
// call is answered once, in order, whichever goroutine reads it, and Serve
// still returns (the race detector watches the hand-offs).
func TestServerCallsAroundSlowCall(t *testing.T) {
	srv := serve(t, sleepBindings{}, func(enc *wire.Encoder, dec *wire.Decoder, raw net.Conn) {
		raw.SetDeadline(time.Now().Add(20 * time.Second))
		for id := uint64(1); id <= 300; id++ {
			us := int(slowCall/time.Microsecond) - 200 + int(id*37%400) // slowCall ± 200 µs
			if id%3 == 0 {
				us = 0 // a quick call right after a slow one
			}
			args := fmt.Sprintf(`{"us":%d}`, us)
			enc.Encode(&wire.Call{ID: id, Name: "nap", Args: json.RawMessage(args)})
			m, err := dec.Next()
			if r, ok := m.(*wire.Reply); err != nil || !ok || r.ID != id || r.Error != nil || string(r.Value) != args {
				t.Fatalf("call %d: reply %+v, %v", id, m, err)
			}
		}
		enc.Encode(&wire.Result{Value: json.RawMessage(`1`)})
	})
	if srv.ProtocolError() != nil || srv.Result() == nil {
		t.Fatalf("result %+v, protocol error %v", srv.Result(), srv.ProtocolError())
	}
}

func TestServerHostile(t *testing.T) {
	cases := map[string]func(enc *wire.Encoder, dec *wire.Decoder, raw net.Conn){
		"oversized": func(_ *wire.Encoder, _ *wire.Decoder, raw net.Conn) { raw.Write([]byte{0, 0, 0xff, 0xff}) },
		"not json":  func(_ *wire.Encoder, _ *wire.Decoder, raw net.Conn) { raw.Write([]byte("\x00\x00\x00\x02hi")) },
		"truncated": func(_ *wire.Encoder, _ *wire.Decoder, raw net.Conn) { raw.Write([]byte("\x00\x00\x00\x09{\"ty")) },
		"reply":     func(enc *wire.Encoder, _ *wire.Decoder, _ net.Conn) { enc.Encode(&wire.Reply{ID: 1}) },
		"undeclared": func(enc *wire.Encoder, _ *wire.Decoder, _ net.Conn) {
			enc.Encode(&wire.Call{ID: 1, Name: "run_code"})
		},
		"id goes back": func(enc *wire.Encoder, dec *wire.Decoder, _ net.Conn) {
			enc.Encode(&wire.Call{ID: 5, Name: "echo"})
			dec.Next()
			enc.Encode(&wire.Call{ID: 5, Name: "echo"})
		},
		"second result": func(enc *wire.Encoder, _ *wire.Decoder, _ net.Conn) {
			enc.Encode(&wire.Result{})
			enc.Encode(&wire.Result{})
		},
		"call after result": func(enc *wire.Encoder, _ *wire.Decoder, _ net.Conn) {
			enc.Encode(&wire.Result{})
			enc.Encode(&wire.Call{ID: 1, Name: "echo"})
		},
	}
	for name, program := range cases {
		srv := serve(t, echoBindings{}, program)
		if srv.ProtocolError() == nil || srv.Result() != nil {
			t.Errorf("%s: protocol error %v, result %+v; want a violation and no result", name, srv.ProtocolError(), srv.Result())
		}
		select {
		case <-srv.Violation():
		default:
			t.Errorf("%s: Violation not closed", name)
		}
	}
}
