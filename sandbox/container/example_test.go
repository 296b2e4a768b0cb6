package container_test

import (
	"context"
	"fmt"
	"log"

	"github.com/psych-runtime/psych/sandbox"
	"github.com/psych-runtime/psych/sandbox/container"
)

// This example is docs/go-api.md's container snippet, checked by the
// compiler. It has no Output line, so go test compiles it without running
// it: an example cannot skip on a host without an engine or the image.

// ExampleNew runs one program in a fresh container: the same
// sandbox.Sandbox as the subprocess backend.
func ExampleNew() {
	ctx := context.Background()
	sb, err := container.New(container.Config{
		Engine: container.Containerd,          // or Podman, Docker; "" takes the first reachable
		Image:  "localhost/psych-python:3.11", // never pulled: ErrImageNotFound at New if absent
	})
	if err != nil {
		log.Fatal(err)
	}
	defer sb.Close() // waits for background removals
	res, err := sb.Run(ctx, sandbox.Request{Code: "6 * 7"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(string(res.Value)) // 42
}
