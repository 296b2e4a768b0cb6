package eventstream

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/psych-runtime/psych/api"
)

// TestStdioAnswers: each answer line reaches the call or approval waiting
// for it; a malformed line, one that answers nothing waiting, an answer
// with two kinds, and an overlong line are reported and dropped without
// disturbing the calls; once the answers end, a waiting call and every
// later one fail with ErrNoAnswers.
func TestStdioAnswers(t *testing.T) {
	st := NewStdio(1<<20, func() {})
	r, w := io.Pipe()
	var mu sync.Mutex
	var warnings []string
	done := make(chan struct{})
	go func() {
		st.ReadAnswers(bufio.NewReaderSize(r, 4096), func(s string) { mu.Lock(); warnings = append(warnings, s); mu.Unlock() })
		close(done)
	}()
	ctx := context.Background()
	type got struct {
		v   json.RawMessage
		ok  bool
		err error
	}
	call := make(chan got, 1)
	go func() {
		v, err := st.Call(ctx, "c1", "greet", json.RawMessage(`{}`))
		call <- got{v: v, err: err}
	}()
	appr := make(chan got, 1)
	go func() {
		ok, _, err := st.Approve(ctx, "c1", "greet", nil)
		appr <- got{ok: ok, err: err}
	}()
	waitPending(t, st, 2)
	io.WriteString(w, "not json\n{\"call_id\":\"nobody\",\"value\":1}\n{\"call_id\":\"c1\",\"value\":1,\"error\":\"x\"}\n"+
		"{\"call_id\":\"c1\",\"value\":\""+strings.Repeat("x", MaxAnswerBytes)+"\"}\n"+
		"{\"call_id\":\"c1\",\"approve\":true}\n{\"call_id\":\"c1\",\"value\":\"hi\"}\n")
	if g := <-appr; g.err != nil || !g.ok {
		t.Fatalf("approval: %+v", g)
	}
	if g := <-call; g.err != nil || string(g.v) != `"hi"` {
		t.Fatalf("call: %+v", g)
	}
	mu.Lock()
	n := len(warnings)
	mu.Unlock()
	if n != 4 {
		t.Fatalf("warnings %q, want 4 (malformed, nobody waits, two kinds, too long)", warnings)
	}

	go func() {
		_, err := st.Call(ctx, "c2", "greet", nil)
		call <- got{err: err}
	}()
	waitPending(t, st, 1)
	w.Close()
	<-done
	select {
	case g := <-call:
		if !errors.Is(g.err, ErrNoAnswers) {
			t.Fatalf("a call waiting as stdin ends: %v, want ErrNoAnswers", g.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a call waiting as stdin ends still waits")
	}
	if _, err := st.Call(ctx, "c3", "greet", nil); !errors.Is(err, ErrNoAnswers) {
		t.Fatalf("a call after stdin ended: %v, want ErrNoAnswers", err)
	}
	// The events went out on the stream: two calls and an approval, none
	// for the call made after stdin ended.
	st.End(api.Event{Event: api.EventError, Error: &api.Error{Code: api.CodeCancelled}})
	count := map[string]int{}
	if err := st.Serve(func(b []byte) error {
		var ev api.Event
		json.Unmarshal(b, &ev)
		count[ev.Event+":"+ev.CallID]++
		return nil
	}, time.Hour); err != nil {
		t.Fatal(err)
	}
	if count["call:c1"] != 1 || count["approval:c1"] != 1 || count["call:c2"] != 1 || count["call:c3"] != 0 || count["error:"] != 1 {
		t.Fatalf("events %v", count)
	}
}

func waitPending(t *testing.T, st *Stdio, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		st.mu.Lock()
		k := len(st.pending)
		st.mu.Unlock()
		if k == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d calls pending, want %d", k, n)
		}
		time.Sleep(time.Millisecond)
	}
}
