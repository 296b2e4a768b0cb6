//go:build linux && cgo

package seccomp

import (
	"encoding/binary"
	"errors"
	"slices"
	"testing"
)

// TestRestore: a compiled program read back is the same filter; one whose
// architecture check or override was changed is refused; the fingerprint
// follows the policy.
func TestRestore(t *testing.T) {
	p := Default()
	f, err := p.Compile()
	if err != nil {
		t.Fatal(err)
	}
	g, err := p.Restore(f.Bytes(), f.Unresolved())
	if err != nil {
		t.Fatal(err)
	}
	if g.Digest() != f.Digest() || !slices.Equal(g.Unresolved(), f.Unresolved()) {
		t.Fatalf("restored %s %v, compiled %s %v", g.Digest(), g.Unresolved(), f.Digest(), f.Unresolved())
	}
	// Every return value the self-check sees is a k of a RET instruction:
	// rewriting each in turn must be caught, or the check sees nothing.
	raw := f.Bytes()
	caught, tried := 0, 0
	for i := 0; i+8 <= len(raw); i += 8 {
		if code := binary.NativeEndian.Uint16(raw[i:]); code != 0x06 { // BPF_RET|BPF_K
			continue
		}
		bad := slices.Clone(raw)
		binary.NativeEndian.PutUint32(bad[i+4:], uint32(ActAllow))
		if binary.NativeEndian.Uint32(raw[i+4:]) == uint32(ActAllow) {
			continue
		}
		tried++
		if _, err := p.Restore(bad, f.Unresolved()); errors.Is(err, ErrInvalidProgram) {
			caught++
		}
	}
	if tried == 0 || caught == 0 {
		t.Fatalf("of %d rewritten returns, Restore refused %d", tried, caught)
	}
	if _, err := p.Restore(raw[:len(raw)-3], nil); err == nil {
		t.Fatal("a truncated program was restored")
	}
	fp1, err := p.Fingerprint()
	if err != nil {
		t.Fatal(err)
	}
	if fp2, _ := Default().Fingerprint(); fp2 != fp1 {
		t.Fatalf("the same policy has two fingerprints: %s, %s", fp1, fp2)
	}
	q := Default()
	q.ConfineIDs(1000, 1000)
	if fq, _ := q.Fingerprint(); fq == fp1 {
		t.Fatal("a changed policy kept its fingerprint")
	}
}
