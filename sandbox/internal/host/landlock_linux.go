package host

import "golang.org/x/sys/unix"

// Landlock scopes (ABI 6), which x/sys does not name yet.
const (
	landlockScopeAbstractUnix = 1 << 0
	landlockScopeSignal       = 1 << 1
)

// LandlockScopes returns the scopes every run's init confines it with:
// abstract Unix sockets and signals stay inside the run's own domain. Zero
// where the kernel lacks Landlock ABI 6. ScopeNames names them.
func LandlockScopes() uint64 {
	const createRulesetVersion = 1
	abi, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, createRulesetVersion)
	if errno != 0 || int(abi) < 6 {
		return 0
	}
	return landlockScopeAbstractUnix | landlockScopeSignal
}

// ScopeNames names the scopes for the attestation; never nil.
func ScopeNames(scopes uint64) []string {
	out := []string{}
	if scopes&landlockScopeAbstractUnix != 0 {
		out = append(out, "abstract_unix_socket")
	}
	if scopes&landlockScopeSignal != 0 {
		out = append(out, "signal")
	}
	return out
}
