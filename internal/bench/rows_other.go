//go:build !linux

package bench

import (
	"context"
	"errors"

	"github.com/psych-runtime/psych/sandbox"
)

func makeRows(Config) ([]*row, sandbox.Sandbox, []string, error) {
	return nil, nil, nil, errors.New("bench: the sandbox is Linux's")
}

func bindingFloor(context.Context, sandbox.Sandbox, string) (*Binding, error) {
	return nil, errors.New("bench: Linux only")
}

func throughput(context.Context, sandbox.Sandbox, Config) ([]Throughput, float64, error) {
	return nil, 0, errors.New("bench: Linux only")
}

func cgroupLayout() string { return "none" }

func makePoolRows(Config) ([]*row, sandbox.Sandbox, []string, error) {
	return nil, nil, nil, errors.New("bench: the sandbox is Linux's")
}
