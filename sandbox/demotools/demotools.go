// Package demotools offers three demonstration bindings, for `psych run
// --demo-tools` and the contract suite: echo(**kw) returns kw, sleep(seconds)
// sleeps on the host and returns seconds, and fail(message) makes the host
// return an error. They reach nothing outside the process.
package demotools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/psych-runtime/psych/sandbox"
)

// MaxSleep bounds the sleep binding.
const MaxSleep = 60 * time.Second

// Bindings implements sandbox.Bindings.
type Bindings struct{}

var _ sandbox.Bindings = Bindings{}

// List declares echo, sleep and fail.
func (Bindings) List() []sandbox.Binding {
	return []sandbox.Binding{
		{Name: "echo", Doc: "Return the keyword arguments as a dict."},
		{Name: "sleep", Params: []string{"seconds"}, Doc: "Sleep on the host, then return seconds."},
		{Name: "fail", Params: []string{"message"}, Doc: "Make the host fail with message."},
	}
}

// Call runs one demo binding.
func (Bindings) Call(ctx context.Context, name string, args json.RawMessage) (json.RawMessage, error) {
	switch name {
	case "echo":
		return args, nil
	case "sleep":
		var a struct {
			Seconds *float64 `json:"seconds"`
		}
		if err := json.Unmarshal(args, &a); err != nil || a.Seconds == nil || *a.Seconds < 0 {
			return nil, errors.New("sleep(seconds): seconds must be a non-negative number")
		}
		d := time.Duration(*a.Seconds * float64(time.Second))
		if d > MaxSleep {
			return nil, fmt.Errorf("sleep(seconds): at most %v", MaxSleep)
		}
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return json.Marshal(*a.Seconds)
	case "fail":
		var a struct {
			Message string `json:"message"`
		}
		json.Unmarshal(args, &a)
		return nil, errors.New(a.Message)
	}
	return nil, fmt.Errorf("no binding %q", name)
}
