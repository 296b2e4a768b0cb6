//go:build !linux

package doctor

import (
	"context"
	"runtime"
)

// run reports the one thing there is to say off Linux.
func run(context.Context, Options) Report {
	return Report{Checks: []Check{{
		Name:   "kernel",
		Status: Fail,
		Found:  "not Linux (" + runtime.GOOS + "/" + runtime.GOARCH + "): the subprocess backend needs Linux's namespaces, seccomp and cgroups",
		Fix:    "run psych on Linux 5.12 or later",
	}}}
}
