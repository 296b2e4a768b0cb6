//go:build !linux || !cgo

package seccomp

import "fmt"

// Compile needs libseccomp through cgo on Linux; elsewhere it fails with
// ErrUnsupported.
func (p *Policy) Compile() (*Filter, error) {
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("compile seccomp policy: %w", err)
	}
	return nil, fmt.Errorf("compile seccomp policy: %w: needs Linux and cgo (libseccomp)", ErrUnsupported)
}

// DefaultFilter fails with ErrUnsupported off Linux or without cgo.
func DefaultFilter() (*Filter, error) { return Default().Compile() }

// Fingerprint fails with ErrUnsupported off Linux or without cgo.
func (p *Policy) Fingerprint() (string, error) {
	return "", fmt.Errorf("seccomp fingerprint: %w", ErrUnsupported)
}

// Restore fails with ErrUnsupported off Linux or without cgo.
func (p *Policy) Restore(raw []byte, unresolved []string) (*Filter, error) {
	return nil, fmt.Errorf("restore seccomp program: %w", ErrUnsupported)
}

// CompilerFingerprint fails with ErrUnsupported off Linux or without cgo.
func CompilerFingerprint() (string, error) {
	return "", fmt.Errorf("seccomp fingerprint: %w", ErrUnsupported)
}
