//go:build !linux

package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "pause: a Linux pod's process only")
	os.Exit(1)
}
