//go:build !linux

package attest

func rootMountID() (string, bool) { return "", false }

// parseRootMount has no mount table to read here.
func parseRootMount([]byte) string { return "" }
