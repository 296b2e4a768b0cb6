package psych

import (
	"context"
	"encoding/json"
)

// RunCode is the name of the tool that runs a program in the Sandbox. No
// Spec may claim it.
const RunCode = "run_code"

// Via says how a call reached the tool path.
type Via string

const (
	// ViaModel: the model called the tool directly.
	ViaModel Via = "model"
	// ViaRunCode: a program called it as a binding, from run_code.
	ViaRunCode Via = "run_code"
	// ViaClient: a program called a client's tool (Spec.Client) as a
	// binding. Call sets it from the tool: a binding call is Via client
	// exactly when its tool is a client's, whatever the caller said.
	ViaClient Via = "client"
)

// Call is one call of a tool.
type Call struct {
	// Tool is the tool's name.
	Tool string `json:"tool"`
	// Args is a JSON object. Past the schema check (in the Policy, the
	// Approver, the handler and the record) it is the canonical form of
	// what the caller sent: compact, keys sorted, no key twice.
	Args json.RawMessage `json:"args"`
	// ID identifies the call; the Runtime makes one when empty.
	ID string `json:"id"`
	// Via is how it came; empty means ViaModel.
	Via Via `json:"via"`
	// Execution is the id of the run a binding call came from; empty for a
	// direct call.
	Execution string `json:"execution,omitempty"`
}

// Handler runs a tool. Its value is encoded as JSON; an error is the tool's
// failure, reported to the caller as data.
type Handler func(ctx context.Context, c Call) (any, error)

// Spec declares one tool.
type Spec struct {
	// Name is a Python identifier (it becomes a binding's function name),
	// not a keyword and not reserved.
	Name        string `json:"name"`
	Description string `json:"description"`
	// Parameters is a JSON Schema (draft 2020-12) object for the arguments;
	// nil means {} (anything).
	Parameters json.RawMessage `json:"parameters"`
	// Params gives the positional order of the parameters for a binding
	// call; nil takes the schema's properties in sorted order.
	Params []string `json:"params"`
	// MaxArgsBytes bounds the text of one call's arguments; zero is
	// DefaultMaxArgsBytes (1 MiB). The transport's frame cap is apart
	// from it. Larger arguments, and arguments nested deeper than
	// MaxArgsDepth or holding more than MaxArgsElements, are refused
	// before they are decoded.
	MaxArgsBytes int `json:"max_args_bytes,omitempty"`
	// Destructive tools ask for approval under the default Policy.
	Destructive bool `json:"destructive"`
	// Client marks a tool a client declared for one request
	// (Runtime.WithTools sets it; Register refuses it), so that a Policy
	// can tell it from an operator's tool.
	Client bool `json:"client,omitempty"`
	// Handler runs the tool.
	Handler Handler `json:"-"`
}
