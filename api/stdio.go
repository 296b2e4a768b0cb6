package api

import "encoding/json"

// Answer is one line a client writes on the embedded transport's stdin
// (psych run --events, psych call --events) after the request: the answer
// to a call event ({"call_id", "value"} or {"call_id", "error"}, as a
// CallAnswer) or to an approval event ({"call_id", "approve", "reason"},
// as an ApprovalAnswer). Exactly one of Value, Error and Approve is set.
type Answer struct {
	CallID  string          `json:"call_id"`
	Value   json.RawMessage `json:"value,omitempty"`
	Error   *string         `json:"error,omitempty"`
	Approve *bool           `json:"approve,omitempty"`
	Reason  string          `json:"reason,omitempty"`
}

// CodeRefused is the error event's code, on the embedded transport, for a
// run the sandbox refused: a Require… option the host cannot meet
// (sandbox.ErrRefused; psych run's exit 3).
const CodeRefused = "refused"

// MaxStdioRequestBytes bounds the request line the embedded transport
// reads: the server's default body cap (16 MiB) with room for files.
const MaxStdioRequestBytes = 128 << 20
