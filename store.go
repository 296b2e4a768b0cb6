package psych

import (
	"context"
	"encoding/json"
	"time"

	"github.com/psych-runtime/psych/sandbox"
)

// Store records what a Runtime did: every execution and every tool call,
// in order. Implementations are safe for concurrent use.
//
// A Store never holds secrets: an execution records its environment's
// names, never their values.
type Store interface {
	// BeginExecution records an execution before it runs. It returns an
	// error wrapping ErrDuplicateID when rec.ID is already recorded.
	BeginExecution(ctx context.Context, rec *Execution) error
	// FinishExecution records an execution's result, and takes Backend,
	// Engine, Interpreter, Image and EnvKeys from its attestation
	// (Execution.Attest). Its Status becomes ExecutionFinished and its
	// Reason empty.
	FinishExecution(ctx context.Context, id string, res *sandbox.Result) error
	// AbortExecution records that an execution ended without a result:
	// status is ExecutionCancelled or ExecutionFailed (any other is an
	// error) and reason a short text saying why, such as the error; it
	// sets Finished. It returns an error wrapping ErrNotFound for an
	// unknown id and ErrFinished for an execution that has a result,
	// which it leaves as it is.
	AbortExecution(ctx context.Context, id string, status ExecutionStatus, reason string) error
	// RecordCall records one tool call and sets rec.Seq, the call's place
	// in the store's order (strictly increasing across all calls).
	RecordCall(ctx context.Context, rec *CallRecord) error
	// Execution returns one execution (ErrNotFound if none).
	Execution(ctx context.Context, id string) (*Execution, error)
	// Executions lists every execution, oldest first.
	Executions(ctx context.Context) ([]Execution, error)
	// Calls lists the calls whose parent is the execution id, in order;
	// id "" lists the direct calls (Via model).
	Calls(ctx context.Context, execution string) ([]CallRecord, error)
	// Close flushes what is pending and releases the store.
	Close() error
}

// FileRecord is a file as the ledger records it: never its data.
type FileRecord struct {
	Path   string `json:"path"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// Execution is one recorded run of run_code.
type Execution struct {
	ID string `json:"id"`
	// CallID is the run_code call that started it.
	CallID string `json:"call_id"`
	// Owner is who asked for the run, as the Runtime that ran it was told
	// (WithOwner): psych serve keeps the peer here, so that a peer reads
	// its own runs only, after a restart too. Empty when none was told.
	Owner   string    `json:"owner,omitempty"`
	Started time.Time `json:"started"`
	Code    string    `json:"code"`
	// Limits are the request's own (zero fields meant the sandbox's
	// defaults); Result.Isolation holds what the run had.
	Limits  sandbox.Limits `json:"limits"`
	Network bool           `json:"network"`
	// Bindings are the bindings the program was offered, as it saw them.
	Bindings []sandbox.Binding `json:"bindings"`
	// Files are the files the request handed in (sandbox.Request.Files),
	// each by path, size and SHA-256, never its data; the Result's files
	// are recorded the same way.
	Files []FileRecord `json:"files,omitempty"`
	// What a replay needs to know it runs the same way, from the result's
	// attestation: the backend, the engine, the interpreter or image
	// digest, and the environment's names (never its values).
	Backend     string   `json:"backend"`
	Engine      string   `json:"engine,omitempty"`
	Interpreter string   `json:"interpreter,omitempty"`
	Image       string   `json:"image,omitempty"`
	EnvKeys     []string `json:"env_keys"`
	// Result is nil while the execution is incomplete: still running, or
	// its host died before it finished; and when it ended without one
	// (Status cancelled or failed).
	Result *sandbox.Result `json:"result"`
	// Finished is when the result, or the end without one, was recorded.
	Finished time.Time `json:"finished,omitzero"`
	// Status is where the execution stands. A Store sets it from what it
	// recorded: ExecutionFinished with a Result; without one,
	// ExecutionCancelled or ExecutionFailed as given (BeginExecution,
	// AbortExecution), else ExecutionIncomplete. A record read from older
	// JSON may hold "": see Incomplete.
	Status ExecutionStatus `json:"status"`
	// Reason says why an execution was cancelled or failed: a short text,
	// such as the Sandbox's error.
	Reason string `json:"reason,omitempty"`
}

// ExecutionStatus is where a recorded execution stands.
type ExecutionStatus string

const (
	// ExecutionIncomplete: begun, no end recorded: still running, or its
	// host died.
	ExecutionIncomplete ExecutionStatus = "incomplete"
	// ExecutionFinished: it has a Result (whatever the program did).
	ExecutionFinished ExecutionStatus = "finished"
	// ExecutionCancelled: its context ended before a Result: a client went
	// away, a DELETE, a drain.
	ExecutionCancelled ExecutionStatus = "cancelled"
	// ExecutionFailed: the Sandbox could not run it (its error is the
	// Reason).
	ExecutionFailed ExecutionStatus = "failed"
)

// Aborted reports whether s is an end without a result: cancelled or
// failed.
func (s ExecutionStatus) Aborted() bool { return s == ExecutionCancelled || s == ExecutionFailed }

// Attest sets res as the result (Status finished, no Reason), with what a
// replay needs to know from its attestation: the backend, engine,
// interpreter, image digest and the environment's names.
func (e *Execution) Attest(res *sandbox.Result) {
	e.Result, e.Status, e.Reason = res, ExecutionFinished, ""
	if iso := res.Isolation; iso != nil {
		e.Backend, e.Engine, e.Interpreter = iso.Backend, iso.Engine, iso.PythonPath
		e.EnvKeys = append([]string(nil), iso.EnvKeys...)
		if iso.Image != nil {
			e.Image = iso.Image.Digest
		}
	}
}

// Incomplete reports whether the execution has no result: still running,
// its host gone, or ended without one (Status says which).
func (e *Execution) Incomplete() bool { return e.Result == nil }

// Outcomes of a recorded call.
const (
	OutcomeOK      = "ok"      // the handler returned a value
	OutcomeError   = "error"   // the handler returned an error
	OutcomeDenied  = "denied"  // the Policy or the Approver refused it
	OutcomeInvalid = "invalid" // the arguments failed the schema, or no such tool
)

// CallRecord is one recorded tool call.
type CallRecord struct {
	// Seq is the call's place in the store's order, set by RecordCall.
	Seq int64 `json:"seq"`
	// ID is the call's id; Parent the execution it came from ("" for a
	// direct call).
	ID     string          `json:"id"`
	Parent string          `json:"parent"`
	Tool   string          `json:"tool"`
	Args   json.RawMessage `json:"args"`
	Via    Via             `json:"via"`
	// Decision is the Policy's verdict; Reason its reason.
	Decision Verdict `json:"decision"`
	Reason   string  `json:"reason,omitempty"`
	// Approver and Approved are set when the Policy asked; DecisionTime is
	// how long the Approver took.
	Approver     string        `json:"approver,omitempty"`
	Approved     *bool         `json:"approved,omitempty"`
	DecisionTime time.Duration `json:"decision_time"`
	Started      time.Time     `json:"started"`
	Duration     time.Duration `json:"duration"`
	// Outcome is one of the Outcome… constants; Value the handler's value
	// (JSON) and Error the error's text.
	Outcome string          `json:"outcome"`
	Value   json.RawMessage `json:"value,omitempty"`
	Error   string          `json:"error,omitempty"`
	// BytesIn and BytesOut are the sizes of the arguments (their canonical
	// form, once they passed the schema) and of the value and error.
	BytesIn  int `json:"bytes_in"`
	BytesOut int `json:"bytes_out"`
	// ArgsTruncated and ValueTruncated say that Args or Value was past the
	// Runtime's record caps (Config.RecordArgsBytes, RecordValueBytes,
	// RecordRunBytes): it then holds only the head of the JSON text, as a
	// JSON string, and ArgsSHA256 or ValueSHA256 the hex sha256 of the
	// whole text, whose size is BytesIn or BytesOut. An Error past the
	// cap ends by saying how much was not recorded.
	ArgsTruncated  bool   `json:"args_truncated,omitempty"`
	ArgsSHA256     string `json:"args_sha256,omitempty"`
	ValueTruncated bool   `json:"value_truncated,omitempty"`
	ValueSHA256    string `json:"value_sha256,omitempty"`
}
