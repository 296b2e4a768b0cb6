package psych

import (
	"context"
	"encoding/json"
	"time"
)

// Verdict is a Policy's answer for one call.
type Verdict string

const (
	Allow Verdict = "allow"
	Deny  Verdict = "deny"
	Ask   Verdict = "ask" // the Approver decides
)

// Decision is a Policy's verdict with its reason.
type Decision struct {
	Verdict Verdict `json:"verdict"`
	Reason  string  `json:"reason,omitempty"`
}

// Policy decides whether a call may run. It sees a direct call and a binding
// call of the same tool alike; only Call.Via and Call.Execution differ. A
// client's tool (WithTools) has Spec.Client set.
type Policy interface {
	Decide(ctx context.Context, spec Spec, c Call) Decision
}

// PolicyFunc adapts a function to Policy.
type PolicyFunc func(ctx context.Context, spec Spec, c Call) Decision

// Decide calls f.
func (f PolicyFunc) Decide(ctx context.Context, spec Spec, c Call) Decision { return f(ctx, spec, c) }

// DefaultPolicy allows every tool but a destructive one, which asks.
var DefaultPolicy Policy = PolicyFunc(func(_ context.Context, spec Spec, _ Call) Decision {
	if spec.Destructive {
		return Decision{Verdict: Ask, Reason: "destructive tool"}
	}
	return Decision{Verdict: Allow}
})

// ApprovalRequest is what an Approver is shown.
type ApprovalRequest struct {
	Spec     Spec
	Call     Call
	Decision Decision
}

// Approval is an Approver's answer. By names who decided ("tty", a user
// name); Reason is shown to the caller on a denial.
type Approval struct {
	Approved bool
	By       string
	Reason   string
}

// Approver answers the calls a Policy asks about. It should return when ctx
// ends. An error denies the call with the error's text.
type Approver interface {
	Approve(ctx context.Context, req ApprovalRequest) (Approval, error)
}

// ApproverFunc adapts a function to Approver.
type ApproverFunc func(ctx context.Context, req ApprovalRequest) (Approval, error)

// Approve calls f.
func (f ApproverFunc) Approve(ctx context.Context, req ApprovalRequest) (Approval, error) {
	return f(ctx, req)
}

// DefaultApprovalTimeout bounds an Approver's wait when Config sets none.
const DefaultApprovalTimeout = 5 * time.Minute

// Outcome is what a call through Runtime.Call produced. A tool's failure,
// a denial and a bad argument are all data here, never a Go error.
type Outcome struct {
	// CallID is the call's id (made by the Runtime when the Call had none).
	CallID string `json:"call_id"`
	// Value is the handler's value as JSON, set when Error is empty.
	Value json.RawMessage `json:"value,omitempty"`
	// Kind is one of the Outcome… constants.
	Kind string `json:"outcome"`
	// Error says why the call failed ("denied by policy: …", a schema
	// violation, the handler's error).
	Error    string   `json:"error,omitempty"`
	Decision Decision `json:"decision"`
}
