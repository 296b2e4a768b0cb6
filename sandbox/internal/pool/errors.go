package pool

import "errors"

// Sentinel errors. Others are wrapped with %w; test with errors.Is.
var (
	// ErrInvalidConfig: the Config cannot work.
	ErrInvalidConfig = errors.New("invalid pool configuration")
	// ErrClosed: the pool is closed.
	ErrClosed = errors.New("pool closed")
	// ErrPreload: a pooled sandbox could not import a module it preloads;
	// the message says which and why.
	ErrPreload = errors.New("module import failed")
)
