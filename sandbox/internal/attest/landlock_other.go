//go:build !linux

package attest

// LandlockScopes is zero where there is no Landlock.
func LandlockScopes() uint64 { return 0 }

// ScopeNames names no scopes here.
func ScopeNames(uint64) []string { return []string{} }

// LandlockABI is 0 where there is no Landlock.
func LandlockABI() int { return 0 }
