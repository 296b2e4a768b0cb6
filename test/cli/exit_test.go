package cli

// The documented exit codes (internal/cli's package doc), as the tests
// expect them of the built command: written out, not cli.Exit…, so that a
// change of the codes fails here.
const (
	exitOK          = 0
	exitHostFault   = 1
	exitUsage       = 2
	exitRefused     = 3
	exitDiverged    = 1
	exitReplayFault = 4
	exitInterrupted = 130
)
