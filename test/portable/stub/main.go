// Command stub calls every backend's constructor in a build without cgo,
// for TestStubsRefuse.
package main

import (
	"errors"
	"fmt"

	"github.com/psych-runtime/psych/sandbox"
	"github.com/psych-runtime/psych/sandbox/container"
	"github.com/psych-runtime/psych/sandbox/subprocess"
)

func main() {
	report("subprocess", func() error { _, err := subprocess.New(subprocess.Config{}); return err })
	report("container", func() error { _, err := container.New(container.Config{}); return err })
}

func report(name string, construct func() error) {
	err := construct()
	switch {
	case err == nil:
		fmt.Printf("%s: constructed\n", name)
	case errors.Is(err, sandbox.ErrInvalidConfig):
		fmt.Printf("%s: refused: %v\n", name, err)
	default:
		fmt.Printf("%s: other error: %v\n", name, err)
	}
}
