package server

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/psych-runtime/psych/api"
)

// writeError writes e as the API's error body with its status (and
// Retry-After for 429 and 503).
func writeError(w http.ResponseWriter, e *api.Error) {
	status := e.Status
	if status == 0 {
		status = api.StatusOf(e.Code)
	}
	e.Retryable = api.Retryable(e.Code)
	if e.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(e.RetryAfter))
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(api.ErrorBody{Error: e})
}
