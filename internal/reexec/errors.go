package reexec

import (
	"errors"
	"fmt"
	"syscall"
)

var (
	// ErrInvalidPlan: the plan cannot be encoded (uid 0, no interpreter,
	// a target outside the root, too large).
	ErrInvalidPlan = errors.New("invalid plan")
	// ErrSetupTimeout: the init did not finish its setup in time.
	ErrSetupTimeout = errors.New("init setup timed out")
	// ErrProtocol: the init sent a message out of order or malformed.
	ErrProtocol = errors.New("init sync protocol violation")
	// ErrRunIDs: a process cannot take the run's outer ids here (not
	// mapped in this user namespace, or not a non-root host's own).
	ErrRunIDs = errors.New("the run ids cannot be taken here")
)

// InitError is the init's own report of the setup step that failed.
type InitError struct {
	Step    string
	Errno   syscall.Errno
	Message string
}

func (e *InitError) Error() string {
	return fmt.Sprintf("init failed at %s: %s: %v", e.Step, e.Message, e.Errno)
}

func (e *InitError) Unwrap() error { return e.Errno }
