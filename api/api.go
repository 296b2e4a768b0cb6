package api

import (
	"encoding/json"
	"time"

	"github.com/psych-runtime/psych/sandbox"
)

// Version is the API's version: its routes live under "/" + Version.
const Version = "v1"

// MediaNDJSON is the media type of an event stream.
const MediaNDJSON = "application/x-ndjson"

// Caps on a request's tool declarations.
const (
	// MaxTools is the most tools one request may declare.
	MaxTools = 256
	// MaxSchemaBytes bounds one tool's parameters schema.
	MaxSchemaBytes = 64 << 10
)

// RunRequest is the body of POST /v1/runs.
type RunRequest struct {
	// ID names the run (sandbox.CheckID); the server makes one when empty.
	// An id in flight or in the ledger is 409.
	ID string `json:"id,omitempty"`
	// Code is the Python program.
	Code string `json:"code"`
	// Limits override the server's defaults field by field; a field above
	// the server's cap is 400, never clamped.
	Limits sandbox.Limits `json:"limits,omitzero"`
	// Env sets variables of the program's environment (NAME: VALUE); each
	// name must be on the server's allowlist.
	Env map[string]string `json:"env,omitempty"`
	// Network asks for network access; the server grants it only when it
	// was started with --allow-network.
	Network bool `json:"network,omitempty"`
	// Bindings are tools the client declares for this run: the program
	// calls them as functions, the server routes each call through its
	// tool path and then to the client (a call event).
	Bindings []Tool `json:"bindings,omitempty"`
	// Files are written into the run's /work before its first line
	// (sandbox.Request.Files); data is base64.
	Files []sandbox.File `json:"files,omitempty"`
}

// Tool is a tool a client declares. Its calls go through the server's tool
// path (schema, Policy, approval, recording with via "client") and are
// answered by the client.
type Tool struct {
	// Name is a Python identifier, not reserved, and not a name the
	// server's own tools have (a clash is 400).
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// Parameters is a JSON Schema object; absent means any object.
	Parameters json.RawMessage `json:"parameters,omitempty"`
	// Params is the positional order of the parameters.
	Params []string `json:"params,omitempty"`
	// Destructive tools ask for approval: the client answers an approval
	// event.
	Destructive bool `json:"destructive,omitempty"`
}

// CallRequest is the body of POST /v1/calls: one direct call of a tool (the
// server's or one declared in Bindings) through the tool path, via model.
type CallRequest struct {
	// ID names the call; the server makes one when empty.
	ID   string          `json:"id,omitempty"`
	Tool string          `json:"tool"`
	Args json.RawMessage `json:"args,omitempty"`
	// Bindings declares client tools, as a RunRequest does.
	Bindings []Tool `json:"bindings,omitempty"`
}

// CallAnswer is the body of POST /v1/runs/{id}/calls/{call_id}, where id
// is the run's id or, for a direct call (POST /v1/calls), the call's id as
// its started event gives it: exactly one of Value (any JSON, null
// included) and Error.
type CallAnswer struct {
	Value json.RawMessage `json:"value,omitempty"`
	Error *string         `json:"error,omitempty"`
}

// ApprovalAnswer is the body of POST /v1/runs/{id}/approvals/{call_id}.
type ApprovalAnswer struct {
	Approve bool   `json:"approve"`
	Reason  string `json:"reason,omitempty"`
}

// Decision is a Policy's verdict on a call ("allow", "deny", "ask").
type Decision struct {
	Verdict string `json:"verdict"`
	Reason  string `json:"reason,omitempty"`
}

// Outcome is what a direct call produced (the root package's Outcome, as
// JSON): a bad argument, a denial and a tool's failure are all data.
type Outcome struct {
	CallID   string          `json:"call_id"`
	Value    json.RawMessage `json:"value,omitempty"`
	Kind     string          `json:"outcome"` // ok, error, denied, invalid
	Error    string          `json:"error,omitempty"`
	Decision Decision        `json:"decision"`
}

// Run statuses, as the ledger records them.
const (
	StatusIncomplete = "incomplete" // begun, no end recorded: running, or its host died
	StatusFinished   = "finished"   // a Result
	StatusCancelled  = "cancelled"  // its client went away, a DELETE, a drain
	StatusFailed     = "failed"     // the sandbox could not run it
)

// Run is one run as GET /v1/runs/{id} reads it from the ledger. The list
// (GET /v1/runs) leaves out Code and Result.
type Run struct {
	ID       string            `json:"id"`
	Status   string            `json:"status"`
	Started  time.Time         `json:"started"`
	Finished time.Time         `json:"finished,omitzero"`
	Code     string            `json:"code,omitempty"`
	Limits   sandbox.Limits    `json:"limits"`
	Network  bool              `json:"network"`
	Bindings []sandbox.Binding `json:"bindings"`
	Result   *sandbox.Result   `json:"result,omitempty"`
}

// RunList is the body of GET /v1/runs: the peer's own runs, oldest first.
type RunList struct {
	Runs []Run `json:"runs"`
}

// Info is the body of GET /v1/info. A client checks APIVersion here.
type Info struct {
	APIVersion  string `json:"api_version"`
	Version     string `json:"version"`
	Backend     string `json:"backend"`
	Engine      string `json:"engine,omitempty"`
	Interpreter string `json:"interpreter,omitempty"`
	// Defaults are the limits a request gets for a zero field; Caps the
	// most it may ask (above them is 400).
	Defaults sandbox.Limits `json:"defaults"`
	Caps     sandbox.Limits `json:"caps"`
	// Pool is the warm pool: its size and how many sandboxes are ready.
	Pool Pool `json:"pool"`
	// MaxRuns and Queue are the admission bounds.
	MaxRuns int `json:"max_runs"`
	Queue   int `json:"queue"`
	// AllowNetwork says whether a run may ask for the network.
	AllowNetwork bool `json:"allow_network"`
	// EnvAllowlist names the variables a request may set.
	EnvAllowlist []string `json:"env_allowlist"`
	// Tools are the server's own tools a program may call.
	Tools []Tool `json:"tools"`
	// SelfCheck is the attestation of the run the server made at start.
	SelfCheck *sandbox.Isolation `json:"self_check"`
	// Doctor is the report of `psych doctor`'s checks the server ran
	// before it became ready (psych serve --doctor); nil without them.
	Doctor *Doctor `json:"doctor"`
	// Draining is true once the server stopped taking runs.
	Draining bool `json:"draining"`
}

// Doctor is a report of `psych doctor`'s checks of the server's host: a
// check that FAILs keeps the server from becoming ready.
type Doctor struct {
	// Failed says a check FAILed: the server refused to become ready.
	Failed bool `json:"failed"`
	// Checks are the checks in the doctor's order, each as `psych doctor
	// --json` prints it.
	Checks []DoctorCheck `json:"checks"`
}

// DoctorCheck is one check of a Doctor report.
type DoctorCheck struct {
	Name   string `json:"name"`
	Status string `json:"status"` // OK, WARN or FAIL
	Found  string `json:"found"`
	Fix    string `json:"fix"`
}

// Pool describes a server's warm pool.
type Pool struct {
	Size  int `json:"size"`
	Ready int `json:"ready"`
}
