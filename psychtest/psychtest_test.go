package psychtest_test

import (
	"context"
	"testing"

	"github.com/psych-runtime/psych"
	"github.com/psych-runtime/psych/psychtest"
)

// Scripted plays its steps in order, each seeing the transcript, and
// fails past the last.
func TestScripted(t *testing.T) {
	s := &psychtest.Scripted{Steps: []func([]psych.Message) psych.Message{
		func(tr []psych.Message) psych.Message { return psych.Message{Content: "one:" + tr[0].Content} },
		func([]psych.Message) psych.Message { return psych.Message{Content: "two"} },
	}}
	tr := []psych.Message{{Role: psych.RoleUser, Content: "hi"}}
	for _, want := range []string{"one:hi", "two"} {
		m, err := s.Next(context.Background(), tr, nil)
		if err != nil || m.Content != want {
			t.Fatalf("Next: %+v, %v; want %q", m, err, want)
		}
	}
	if _, err := s.Next(context.Background(), tr, nil); err == nil {
		t.Fatal("Next past the last step did not fail")
	}
}
