//go:build linux && cgo

package seccomp

import (
	"slices"
	"syscall"
	"testing"

	"github.com/opencontainers/runtime-spec/specs-go"
	libseccomp "github.com/seccomp/libseccomp-golang"
	"golang.org/x/sys/unix"
)

// fromOCI reads a rendered profile back into a Policy, as an engine's
// libseccomp would take it.
func fromOCI(t *testing.T, s *specs.LinuxSeccomp) *Policy {
	t.Helper()
	ops := map[specs.LinuxSeccompOperator]Op{
		specs.OpEqualTo: OpEqual, specs.OpNotEqual: OpNotEqual, specs.OpLessThan: OpLess,
		specs.OpLessEqual: OpLessOrEqual, specs.OpGreaterThan: OpGreater, specs.OpGreaterEqual: OpGreaterOrEqual,
		specs.OpMaskedEqual: OpMaskedEqual,
	}
	p := &Policy{DeniedErrno: syscall.Errno(*s.DefaultErrnoRet), UnknownErrno: unix.ENOSYS, Override: map[string]syscall.Errno{}, BadArch: ActKillProcess}
	for _, sc := range s.Syscalls {
		switch sc.Action {
		case specs.ActErrno:
			if len(sc.Args) != 0 {
				t.Fatalf("errno rule with conditions %+v", sc)
			}
			for _, n := range sc.Names {
				p.Override[n] = syscall.Errno(*sc.ErrnoRet)
			}
		case specs.ActAllow:
			r := Rule{Names: sc.Names}
			for _, a := range sc.Args {
				c := Cond{Arg: a.Index, Op: ops[a.Op], Value: a.Value}
				if a.Op == specs.OpMaskedEqual {
					c.Mask, c.Value = a.Value, a.ValueTwo
				}
				r.Conds = append(r.Conds, c)
			}
			p.Allow = append(p.Allow, r)
		default:
			t.Fatalf("rule of action %s", sc.Action)
		}
	}
	return p
}

// renderedFilter compiles p as an engine loads it: rendered (OCI) and read
// back (fromOCI).
func renderedFilter(t *testing.T, p *Policy) *Filter {
	t.Helper()
	s, err := p.OCI()
	if err != nil {
		t.Fatal(err)
	}
	f, err := fromOCI(t, s).Compile()
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestOCIRuleByRule compares the rendered profile with the policy: the same
// default, one errno rule per override with its errno, one allow rule per
// allow rule with the same names and conditions, and nothing else.
func TestOCIRuleByRule(t *testing.T) {
	p := Default()
	s, err := p.OCI()
	if err != nil {
		t.Fatal(err)
	}
	if s.DefaultAction != specs.ActErrno || *s.DefaultErrnoRet != uint(p.DeniedErrno) || !slices.Equal(s.Architectures, []specs.Arch{specs.ArchX86_64}) {
		t.Fatalf("default %s/%d, architectures %v", s.DefaultAction, *s.DefaultErrnoRet, s.Architectures)
	}
	back := fromOCI(t, s)
	if len(back.Override) != len(p.Override) {
		t.Errorf("%d errno rules, want %d overrides", len(back.Override), len(p.Override))
	}
	for n, e := range p.Override {
		if back.Override[n] != e {
			t.Errorf("override %s: rendered %v, want %v", n, back.Override[n], e)
		}
	}
	if len(back.Allow) != len(p.Allow) {
		t.Fatalf("%d allow rules, want %d", len(back.Allow), len(p.Allow))
	}
	for i, r := range p.Allow {
		got := back.Allow[i]
		if !slices.Equal(got.Names, r.Names) || !slices.Equal(got.Conds, r.Conds) {
			t.Errorf("allow rule %d: rendered %+v, want %+v", i, got, r)
		}
	}
}

// TestOCIDeniesTheSame compiles the rendered profile and holds every
// native number, with the arguments the policy's rules look at, to the same
// answer as Default's own filter, but for the Deny rules (which the init's
// filter, stacked on the engine's, enforces): there the rendered filter may
// only be more permissive, never stricter.
func TestOCIDeniesTheSame(t *testing.T) {
	p := Default()
	rendered := renderedFilter(t, p)
	own := mustDefaultFilter(t)
	denyArgs := map[string]bool{}
	for _, r := range p.Deny {
		for _, n := range r.Names {
			denyArgs[n] = true
		}
	}
	// Each number with plain arguments, and with every value a rule of the
	// policy compares, in the argument it compares.
	probes := map[int][]Data{}
	for n := 0; n < tableScan; n++ {
		probes[n] = []Data{native(uintptr(n))}
	}
	for _, r := range append(append([]Rule{}, p.Allow...), p.Deny...) {
		for _, name := range r.Names {
			nr, err := libseccomp.GetSyscallFromNameByArch(name, libseccomp.ArchAMD64)
			if err != nil || nr < 0 {
				continue
			}
			for _, c := range r.Conds {
				for _, v := range []uint64{c.Value, c.Value + 1, c.Value | 1<<32} {
					d := native(uintptr(nr))
					d.Args[c.Arg] = v
					probes[int(nr)] = append(probes[int(nr)], d)
				}
			}
		}
	}
	checked := 0
	for n, ds := range probes {
		name, _ := libseccomp.ScmpSyscall(n).GetNameByArch(libseccomp.ArchAMD64)
		for _, d := range ds {
			want, _ := own.Evaluate(d)
			got, _ := rendered.Evaluate(d)
			checked++
			if got == want {
				continue
			}
			if denyArgs[name] && got == uint32(ActAllow) {
				continue // a Deny rule: the init's own filter refuses it
			}
			t.Errorf("%d (%s) args %x: rendered %s, own %s", n, name, d.Args, FormatReturn(got), FormatReturn(want))
		}
	}
	if checked < tableScan {
		t.Fatalf("checked %d calls", checked)
	}
	t.Logf("%d calls compared", checked)
}

// TestOCIEveryOp: each comparison renders as the runtime spec names it
// (read back by fromOCI's own table), Docker's form of it reads back as the
// same Cond, and an operator psych does not know is refused.
func TestOCIEveryOp(t *testing.T) {
	p := Default()
	p.Allow = nil
	for op := OpEqual; op <= OpMaskedEqual; op++ {
		c := Cond{Arg: 1, Op: op, Value: 3}
		if op == OpMaskedEqual {
			c.Mask = 0xff
		}
		p.Allow = append(p.Allow, Rule{Names: []string{"fcntl"}, Conds: []Cond{c}})
	}
	s, err := p.OCI()
	if err != nil {
		t.Fatal(err)
	}
	back := fromOCI(t, s)
	if len(back.Allow) != len(p.Allow) {
		t.Fatalf("%d allow rules, want %d", len(back.Allow), len(p.Allow))
	}
	for i, r := range p.Allow {
		c := r.Conds[0]
		if got := back.Allow[i].Conds; !slices.Equal(got, r.Conds) {
			t.Errorf("%s: rendered %+v, want %+v", c.Op, got, r.Conds)
		}
		if got, ok := dockerCond(ociArg(c)); !ok || got != c {
			t.Errorf("%s: Docker's form reads back as %+v, %v", c.Op, got, ok)
		}
	}
	for _, op := range []specs.LinuxSeccompOperator{"", "SCMP_CMP_UNKNOWN"} {
		if c, ok := dockerCond(specs.LinuxSeccompArg{Op: op}); ok {
			t.Errorf("operator %q read as %+v", op, c)
		}
	}
}
