package api

import (
	"fmt"
	"net/http"
)

// Error codes, each with the HTTP status it comes with.
const (
	CodeInvalidRequest    = "invalid_request"    // 400: unknown field, duplicate key, bad limits, a refused name
	CodeUnauthorized      = "unauthorized"       // 401: no token, or a wrong one
	CodeForbidden         = "forbidden"          // 403: a peer not allowed
	CodeNotFound          = "not_found"          // 404: no such route, run or call (another peer's is not found)
	CodeConflict          = "conflict"           // 409: an id in use, a second answer
	CodeTooLarge          = "too_large"          // 413: a body past the cap
	CodeCapacityExhausted = "capacity_exhausted" // 429: runs and queue full; Retry-After
	CodeDraining          = "draining"           // 503: the server is stopping (or its drain cut the run); Retry-After
	CodeNotReady          = "not_ready"          // 503: the server is starting; Retry-After
	CodeHostFault         = "host_fault"         // 500: the sandbox could not run it
	// In a stream only (the error event):
	CodeCancelled    = "cancelled"     // DELETE, the client went away
	CodeSlowConsumer = "slow_consumer" // the client fell behind by more than the output cap
)

// Error is the API's error, the body of every refusal
// ({"error": {...}}) and of a stream's error event.
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	// Retryable says the same request may succeed later (429, 503).
	Retryable bool `json:"retryable"`
	// Status is the HTTP status it came with (not in its JSON); zero in
	// a stream's error event.
	Status int `json:"-"`
	// RetryAfter is the Retry-After header's seconds, for 429 and 503.
	RetryAfter int `json:"-"`
}

func (e *Error) Error() string {
	if e.Status != 0 {
		return fmt.Sprintf("psych serve: %d %s: %s", e.Status, e.Code, e.Message)
	}
	return fmt.Sprintf("psych serve: %s: %s", e.Code, e.Message)
}

// ErrorBody is an error's JSON body.
type ErrorBody struct {
	Error *Error `json:"error"`
}

// statuses are the refusals' codes with their HTTP statuses; of two codes
// with one status, the first is the one CodeOf gives.
var statuses = []struct {
	code   string
	status int
}{
	{CodeInvalidRequest, http.StatusBadRequest},
	{CodeUnauthorized, http.StatusUnauthorized},
	{CodeForbidden, http.StatusForbidden},
	{CodeNotFound, http.StatusNotFound},
	{CodeConflict, http.StatusConflict},
	{CodeTooLarge, http.StatusRequestEntityTooLarge},
	{CodeCapacityExhausted, http.StatusTooManyRequests},
	{CodeNotReady, http.StatusServiceUnavailable},
	{CodeDraining, http.StatusServiceUnavailable},
}

// StatusOf is the HTTP status of an error code (500 for one it does not
// know).
func StatusOf(code string) int {
	for _, s := range statuses {
		if s.code == code {
			return s.status
		}
	}
	return http.StatusInternalServerError
}

// CodeOf is the error code an HTTP status comes with, for a refusal whose
// body says none: not_ready for 503, host_fault for a status no code has.
func CodeOf(status int) string {
	for _, s := range statuses {
		if s.status == status {
			return s.code
		}
	}
	return CodeHostFault
}

// Retryable reports whether a code is one a client may retry (429, 503).
func Retryable(code string) bool {
	return code == CodeCapacityExhausted || code == CodeDraining || code == CodeNotReady
}
