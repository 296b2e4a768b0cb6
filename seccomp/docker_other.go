//go:build !linux

package seccomp

import "syscall"

// dockerProfile is empty off Linux, where Docker's profile is not defined.
// Default is then a policy that allows nothing; nothing compiles it there.
func dockerProfile() (allow []Rule, override map[string]syscall.Errno) {
	return nil, nil
}
