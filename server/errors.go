package server

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"

	"github.com/psych-runtime/psych/api"
)

// Errors of New, Start and Serve.
var (
	// ErrInvalidConfig: a Config New refuses.
	ErrInvalidConfig = errors.New("invalid server config")
	// ErrSelfCheck: the run Start makes was not what a run must be.
	ErrSelfCheck = errors.New("self-check failed")
	// ErrDoctor: a check of Config.Doctor FAILed; the server stays unready.
	ErrDoctor = errors.New("doctor check failed")
	// ErrNotReady: Start has not succeeded.
	ErrNotReady = errors.New("server not ready")
	// ErrClosed: Serve after Shutdown.
	ErrClosed = errors.New("server closed")
)

// writeJSON writes v as a JSON body with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// writeError writes e as the API's error body with its status (and
// Retry-After for 429 and 503).
func writeError(w http.ResponseWriter, e *api.Error) {
	e.Retryable = api.Retryable(e.Code)
	if e.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(e.RetryAfter))
	}
	writeJSON(w, statusOf(e), api.ErrorBody{Error: e})
}

// statusOf is the HTTP status e goes with: its own, else its code's.
func statusOf(e *api.Error) int {
	if e.Status != 0 {
		return e.Status
	}
	return api.StatusOf(e.Code)
}
