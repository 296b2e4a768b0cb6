package seccomp

import (
	"errors"
	"slices"
	"syscall"
	"testing"
)

func TestValidateRefuses(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*Policy)
	}{
		{"denied errno 0", func(p *Policy) { p.DeniedErrno = 0 }},
		{"unknown errno 0", func(p *Policy) { p.UnknownErrno = 0 }},
		{"errno above MAX_ERRNO", func(p *Policy) { p.DeniedErrno = 4096 }},
		{"override errno 0", func(p *Policy) { p.Override["getpid"] = 0 }},
		{"override empty name", func(p *Policy) { p.Override[""] = 1 }},
		{"bad-arch allow", func(p *Policy) { p.BadArch = ActAllow }},
		{"bad-arch errno", func(p *Policy) { p.BadArch = ActErrno }},
		{"rule without names", func(p *Policy) { p.Allow = append(p.Allow, Rule{}) }},
		{"rule with empty name", func(p *Policy) { p.Allow = append(p.Allow, Rule{Names: []string{""}}) }},
		{"unconditional deny", func(p *Policy) { p.Deny = append(p.Deny, Rule{Names: []string{"read"}}) }},
		{"argument 6", func(p *Policy) {
			p.Allow = append(p.Allow, Rule{Names: []string{"read"}, Conds: []Cond{{Arg: 6, Op: OpEqual}}})
		}},
		{"argument compared twice", func(p *Policy) {
			p.Allow = append(p.Allow, Rule{Names: []string{"read"}, Conds: []Cond{{Arg: 0, Op: OpEqual}, {Arg: 0, Op: OpNotEqual, Value: 1}}})
		}},
		{"unknown operator", func(p *Policy) {
			p.Allow = append(p.Allow, Rule{Names: []string{"read"}, Conds: []Cond{{Arg: 0, Op: 0}}})
		}},
		{"masked value outside mask", func(p *Policy) {
			p.Deny = append(p.Deny, Rule{Names: []string{"read"}, Conds: []Cond{{Arg: 0, Op: OpMaskedEqual, Mask: 0xf, Value: 0x10}}})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := Default()
			if err := p.Validate(); err != nil {
				t.Fatalf("Default does not validate: %v", err)
			}
			tc.mutate(p)
			if err := p.Validate(); !errors.Is(err, ErrInvalidPolicy) {
				t.Fatalf("got %v, want ErrInvalidPolicy", err)
			}
		})
	}
}

func TestDefaultIsFresh(t *testing.T) {
	a, b := Default(), Default()
	a.Override["read"] = 5
	a.Deny[0].Names[0] = "changed"
	if _, ok := b.Override["read"]; ok || b.Deny[0].Names[0] == "changed" {
		t.Fatal("Default values share memory")
	}
}

func TestDefaultTightening(t *testing.T) {
	p := Default()
	if p.DeniedErrno != syscall.Errno(1) || p.UnknownErrno != syscall.Errno(38) || p.BadArch != ActKillProcess {
		t.Fatalf("got denied %d, unknown %d, bad arch %s", p.DeniedErrno, p.UnknownErrno, p.BadArch)
	}
	if got := p.Override["clone3"]; got != linuxENOSYS {
		t.Errorf("clone3 override %d, want ENOSYS", got)
	}
	for _, name := range alwaysDenied {
		if got := p.Override[name]; got != linuxEPERM {
			t.Errorf("%s override %d, want EPERM", name, got)
		}
	}
	// The overrides win anyway; Default keeps its Allow list truthful too.
	for _, r := range p.Allow {
		for _, name := range r.Names {
			if _, over := p.Override[name]; over {
				t.Errorf("%s is both overridden and in Allow (%s)", name, r.Comment)
			}
			if slices.Contains(replaced, name) && len(r.Conds) == 0 {
				t.Errorf("%s allowed without conditions", name)
			}
		}
	}
}
