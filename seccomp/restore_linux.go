//go:build linux && cgo

package seccomp

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"runtime"
	"slices"

	libseccomp "github.com/seccomp/libseccomp-golang"
)

// restoreFormat changes whenever Compile's output for the same inputs may.
const restoreFormat = 1

// Fingerprint names everything Compile's output depends on: the policy
// (every field), libseccomp's version and API level, the architecture and
// this package's compiler. Two policies with one fingerprint compile to the
// same program, so a cache of compiled programs can key on it.
func (p *Policy) Fingerprint() (string, error) {
	api, err := libseccomp.GetAPI()
	if err != nil {
		return "", fmt.Errorf("seccomp fingerprint: %w: %w", ErrUnsupported, err)
	}
	body, err := json.Marshal(struct {
		Format     int
		Libseccomp string
		API        uint
		Arch       string
		Policy     *Policy
	}{restoreFormat, libseccompVersion(), api, runtime.GOARCH, p})
	if err != nil {
		return "", fmt.Errorf("seccomp fingerprint: %w", err)
	}
	sum := sha256.Sum256(body)
	return hex.EncodeToString(sum[:]), nil
}

// CompilerFingerprint names what Compile's output depends on besides the
// policy: libseccomp's version and API level, the architecture and this
// package's compiler. With the identity of the executable whose code
// builds the policy, it keys a cache of compiled programs without building
// or encoding the policy (Fingerprint's cost on every start).
func CompilerFingerprint() (string, error) {
	api, err := libseccomp.GetAPI()
	if err != nil {
		return "", fmt.Errorf("seccomp fingerprint: %w: %w", ErrUnsupported, err)
	}
	return fmt.Sprintf("psych-seccomp/%d libseccomp/%s api/%d %s", restoreFormat, libseccompVersion(), api, runtime.GOARCH), nil
}

// Restore takes back a program Compile made for this policy (Bytes, and
// Unresolved as it was), as a cache returns it. It refuses a program the
// kernel would not load or that fails the self-check Compile applies (the
// other ABIs, the numbers above and between libseccomp's table, each
// override); it cannot tell a rule changed inside the program, so the
// bytes must come from a store only this host can write.
func (p *Policy) Restore(raw []byte, unresolved []string) (*Filter, error) {
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("restore seccomp program: %w", err)
	}
	c, err := newCompiler()
	if err != nil {
		return nil, fmt.Errorf("restore seccomp program: %w", err)
	}
	f := newFilter(slices.Clone(raw))
	if f.err != nil {
		return nil, fmt.Errorf("restore seccomp program: %w", f.err)
	}
	f.unresolved = slices.Sorted(slices.Values(unresolved))
	if err := selfCheck(f, p, c); err != nil {
		return nil, fmt.Errorf("restore seccomp program: %w: %w", ErrInvalidProgram, err)
	}
	return f, nil
}
