//go:build !linux

package netns

import (
	"fmt"
	"time"
)

func verify(int, time.Duration) (Check, error) {
	return Check{}, fmt.Errorf("verify network namespace: %w", ErrUnsupported)
}

func addDummy(int, string, time.Duration) error {
	return fmt.Errorf("add dummy link: %w", ErrUnsupported)
}
