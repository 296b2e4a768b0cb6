//go:build !linux

package host

func rootMountID() (string, bool) { return "", false }
