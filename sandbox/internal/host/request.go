package host

import (
	"fmt"
	"unicode/utf8"

	"github.com/oklog/ulid/v2"

	"github.com/psych-runtime/psych/sandbox"
	"github.com/psych-runtime/psych/sandbox/wire"
)

// Request is a validated execution, ready for a backend.
type Request struct {
	// ID is the caller's id, or a ULID made here.
	ID       string
	Code     string
	Network  bool
	Bindings sandbox.Bindings
	// Limits are the request's merged with the backend's defaults, validated.
	Limits sandbox.Limits
	// Decls are the bindings the program is offered, validated.
	Decls []sandbox.Binding
	// Start is the start frame's body.
	Start []byte
}

// Prepare validates req against a backend's merged defaults and frame cap.
// Every error wraps sandbox.ErrInvalidRequest.
func Prepare(req sandbox.Request, defaults sandbox.Limits, maxFrame int) (*Request, error) {
	r := &Request{ID: req.ID, Code: req.Code, Network: req.Network, Bindings: req.Bindings, Limits: req.Limits.Merge(defaults)}
	if err := r.Limits.Validate(); err != nil {
		return nil, err
	}
	if r.ID == "" {
		r.ID = ulid.Make().String()
	} else if err := sandbox.CheckID(r.ID); err != nil {
		return nil, err
	}
	if !utf8.ValidString(req.Code) {
		return nil, fmt.Errorf("code is not valid UTF-8: %w", sandbox.ErrInvalidRequest)
	}
	if req.Bindings != nil {
		r.Decls = req.Bindings.List()
		if err := sandbox.ValidateBindings(r.Decls); err != nil {
			return nil, err
		}
	}
	start, err := wire.Marshal(&wire.Start{V: wire.Version, Code: req.Code, Bindings: r.Decls, MaxFrame: maxFrame})
	if err != nil || len(start) > maxFrame {
		return nil, fmt.Errorf("code and bindings exceed the %d-byte frame cap: %w", maxFrame, sandbox.ErrInvalidRequest)
	}
	r.Start = start
	return r, nil
}
