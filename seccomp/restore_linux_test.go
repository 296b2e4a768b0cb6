//go:build linux && cgo

package seccomp

import (
	"encoding/binary"
	"errors"
	"slices"
	"strings"
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

// TestCompiled: a compiled program taken back is the same filter; one the
// kernel would refuse (cut short, a jump out of it) is refused; the
// compiler's fingerprint names libseccomp's version.
func TestCompiled(t *testing.T) {
	f, err := Default().Compile()
	if err != nil {
		t.Fatal(err)
	}
	g, err := Compiled(f.Bytes(), f.Unresolved())
	if err != nil {
		t.Fatal(err)
	}
	if g.Digest() != f.Digest() || !slices.Equal(g.Unresolved(), f.Unresolved()) {
		t.Fatalf("taken back %s %v, compiled %s %v", g.Digest(), g.Unresolved(), f.Digest(), f.Unresolved())
	}
	raw := f.Bytes()
	if _, err := Compiled(raw[:len(raw)-3], nil); !errors.Is(err, ErrInvalidProgram) {
		t.Fatalf("a program cut mid-instruction: %v", err)
	}
	noret := slices.Clone(raw)
	binary.NativeEndian.PutUint16(noret[len(noret)-8:], 0x20) // BPF_LD|BPF_W|BPF_ABS
	if _, err := Compiled(noret, nil); !errors.Is(err, ErrInvalidProgram) {
		t.Fatalf("a program that ends without a return: %v", err)
	}
	// The last conditional jump (BPF_JMP, not JA) sent 255 ahead leaves
	// the program.
	jump := slices.Clone(raw)
	for i := len(jump) - 8; i >= 0; i -= 8 {
		if code := binary.NativeEndian.Uint16(jump[i:]); code&0x07 == 0x05 && code != 0x05 {
			jump[i+2] = 0xff
			break
		}
	}
	if _, err := Compiled(jump, nil); !errors.Is(err, ErrInvalidProgram) {
		t.Fatalf("a jump past the end: %v", err)
	}
	cf, err := CompilerFingerprint()
	if err != nil || !strings.Contains(cf, "libseccomp/"+libseccompVersion()) {
		t.Fatalf("compiler fingerprint %q, %v", cf, err)
	}
}
