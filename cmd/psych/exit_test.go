package main

// The documented exit codes (internal/cli's package doc), as the tests
// expect them of the built command.
const (
	exitOK          = 0
	exitHostFault   = 1
	exitUsage       = 2
	exitRefused     = 3
	exitDiverged    = 1
	exitReplayFault = 4
	exitInterrupted = 130
)
