//go:build !linux

package host

func unmountUnder(string) {}
