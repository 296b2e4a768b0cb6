package openai

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/psych-runtime/psych"
)

// Sentinel errors. Other errors wrap them with %w; test with errors.Is.
var (
	// ErrInvalidConfig: a Config field cannot work. It wraps
	// psych.ErrInvalidConfig.
	ErrInvalidConfig = fmt.Errorf("invalid openai configuration: %w", psych.ErrInvalidConfig)
	// ErrBadTranscript: a transcript message or tool Spec cannot be put
	// into a request (an unknown role, a tool message without its call's
	// id, tool calls on a message that is not the assistant's, JSON that
	// is not valid). Nothing was sent.
	ErrBadTranscript = errors.New("transcript cannot be sent")
	// ErrHTTPStatus: the server answered with a status outside 2xx. The
	// error holds a *StatusError.
	ErrHTTPStatus = errors.New("unexpected HTTP status")
	// ErrBadResponse: a 2xx answer is not a usable chat completion
	// (malformed JSON, no choices, a body over the cap).
	ErrBadResponse = errors.New("bad chat completion response")
)

// StatusError is a non-2xx answer. It unwraps to ErrHTTPStatus; get it
// with errors.As to read the code (429 to back off, say).
type StatusError struct {
	StatusCode int
	// Message is the error message the body carried (the body itself when
	// it holds none), at most 1 KiB, control characters replaced and the
	// API key redacted.
	Message string
}

func (e *StatusError) Error() string {
	s := fmt.Sprintf("%s %d %s", ErrHTTPStatus, e.StatusCode, http.StatusText(e.StatusCode))
	if e.Message != "" {
		s += ": " + e.Message
	}
	return s
}

// Unwrap returns ErrHTTPStatus.
func (e *StatusError) Unwrap() error { return ErrHTTPStatus }
