//go:build !linux

package resources

func unmountUnder(string) {}
