//go:build !linux

package subprocess

import "fmt"

// CheckInterpreter refuses: the run user's reach is checked on Linux only.
func CheckInterpreter(python string, uid, gid uint32, viaTrees bool) error {
	return fmt.Errorf("check interpreter %s: %w", python, errUnsupported)
}
