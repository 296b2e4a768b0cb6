//go:build linux

package full

import (
	"context"
	"encoding/json"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/psych-runtime/psych"
)

func askReq() psych.ApprovalRequest {
	return psych.ApprovalRequest{Spec: psych.Spec{Name: "send"}, Call: psych.Call{Via: "python", Args: json.RawMessage(`{}`)}}
}

// prompts signals each prompt written.
type prompts chan struct{}

func (p prompts) Write(b []byte) (int, error) {
	select {
	case p <- struct{}{}:
	default:
	}
	return len(b), nil
}

// unread is how many bytes wait in the pipe r.
func unread(t *testing.T, r *os.File) int {
	n, err := unix.IoctlGetInt(int(r.Fd()), unix.TIOCINQ)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// answer asks a with a 5 s bound and returns its answer.
func answer(t *testing.T, a *ttyApprover) (psych.Approval, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return a.Approve(ctx, askReq())
}

// TestTTYApproverAfterGivenUp: a prompt whose context ended leaves no
// reader behind: the next prompt gets the next line typed.
func TestTTYApproverAfterGivenUp(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	shown := make(prompts, 1)
	a := newTTYApprover(r, shown)
	defer a.close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := a.Approve(ctx, askReq()); err == nil {
		t.Fatal("a prompt with no answer before its context ended was answered")
	}
	done := make(chan struct{})
	var got psych.Approval
	var gerr error
	<-shown // the given-up prompt
	go func() { defer close(done); got, gerr = answer(t, a) }()
	<-shown // the prompt is open
	w.WriteString("y\n")
	<-done
	if gerr != nil || !got.Approved {
		t.Fatalf("the prompt after a given-up one: %+v, %v; want approved", got, gerr)
	}
}

// TestTTYApproverStaleLine: a line typed while no question is open answers
// none; a closed terminal is no answer, not an approval.
func TestTTYApproverStaleLine(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	shown := make(prompts, 1)
	a := newTTYApprover(r, shown)
	defer a.close()
	w.WriteString("y\n")
	// The reader has taken the line from the pipe, and is offering it.
	for end := time.Now().Add(5 * time.Second); unread(t, r) > 0; time.Sleep(time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal("the reader did not take the line")
		}
	}
	time.Sleep(10 * time.Millisecond)
	done := make(chan struct{})
	var got psych.Approval
	var gerr error
	go func() { defer close(done); got, gerr = answer(t, a) }()
	<-shown
	w.WriteString("n\n")
	<-done
	if gerr != nil || got.Approved {
		t.Fatalf("after a stale yes, answered no: %+v, %v; want refused", got, gerr)
	}
	w.Close()
	if got, err := answer(t, a); err == nil || got.Approved {
		t.Fatalf("a closed terminal: %+v, %v; want an error", got, err)
	}
}
