// Package psychtest offers test doubles for programs that use psych, as
// net/http/httptest does for net/http. Nothing in it runs a program.
package psychtest

import (
	"context"
	"fmt"

	"github.com/psych-runtime/psych"
)

// Scripted is a psych.Model that plays back its steps in order, for tests
// and demos. Each step sees the transcript so far (to read a tool's
// result). Past its last step it fails.
type Scripted struct {
	Steps []func(transcript []psych.Message) psych.Message
	next  int
}

// Next returns the next step's message.
func (s *Scripted) Next(_ context.Context, transcript []psych.Message, _ []psych.Spec) (psych.Message, error) {
	if s.next >= len(s.Steps) {
		return psych.Message{}, fmt.Errorf("scripted model: no step %d", s.next+1)
	}
	step := s.Steps[s.next]
	s.next++
	return step(transcript), nil
}

var _ psych.Model = (*Scripted)(nil)
