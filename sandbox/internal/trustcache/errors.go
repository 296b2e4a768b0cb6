package trustcache

import "errors"

// Sentinel errors. Others are wrapped with %w; test with errors.Is.
var (
	// ErrUntrusted: an entry looked tampered with (a symlink, a foreign
	// owner, another mode or link count, not a regular file).
	ErrUntrusted = errors.New("untrusted cache entry")
	// ErrUnsupported: there is no trusted-file cache on this system.
	ErrUnsupported = errors.New("no trusted-file cache on this system")
)
