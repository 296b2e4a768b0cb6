//go:build !linux

package attest

func rootMountID() (string, bool) { return "", false }
