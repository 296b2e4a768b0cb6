//go:build linux && cgo

package container

import "context"

func newCLI(ctx context.Context, cfg *Config, name Engine, python string) (engine, error) {
	return nil, ErrEngineUnreachable
}
