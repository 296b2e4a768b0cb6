package psych

import "errors"

// Sentinel errors. Other errors wrap them with %w; test with errors.Is.
var (
	// ErrReservedName: a Spec claimed run_code (or another name the sandbox
	// owns: BindingError, __dunder__ names).
	ErrReservedName = errors.New("reserved tool name")
	// ErrDuplicate: a Spec's name is already registered.
	ErrDuplicate = errors.New("tool already registered")
	// ErrBadName: a Spec's name is not a Python identifier, or is a keyword.
	ErrBadName = errors.New("bad tool name")
	// ErrBadSchema: a Spec's parameters are not a JSON Schema object, or the
	// Spec is otherwise malformed (no handler, a bad Params list).
	ErrBadSchema = errors.New("bad tool parameters")
	// ErrNoModel: Turn was called on a Runtime without a Model.
	ErrNoModel = errors.New("no model configured")
	// ErrStepLimit: the model did not answer within Config.MaxSteps steps.
	ErrStepLimit = errors.New("model step limit reached")
	// ErrNotFound: the store holds no such execution.
	ErrNotFound = errors.New("not found")
	// ErrFinished: AbortExecution of an execution that has a result.
	ErrFinished = errors.New("execution already finished")
	// ErrDuplicateID: an execution with that id is already recorded.
	ErrDuplicateID = errors.New("duplicate execution id")
	// ErrNoStore: Replay was called on a Runtime that records nothing.
	ErrNoStore = errors.New("no store configured")
	// ErrNoSandbox: run_code or Replay needs a Sandbox and none is
	// configured.
	ErrNoSandbox = errors.New("no sandbox configured")
	// ErrCannotFreeze: Config.RequireFreeze was set and the Sandbox cannot
	// freeze a run while a person decides.
	ErrCannotFreeze = errors.New("sandbox cannot freeze a run")
	// ErrClosed: the Store was closed.
	ErrClosed = errors.New("store closed")
	// ErrInvalidConfig: a Config field cannot work.
	ErrInvalidConfig = errors.New("invalid psych configuration")
)
