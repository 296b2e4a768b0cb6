package seccomp

import (
	"fmt"
	"maps"
	"slices"

	"github.com/opencontainers/runtime-spec/specs-go"
)

// OCI renders the policy as the OCI runtime spec's LinuxSeccomp, for a
// container engine to load (runc compiles it with libseccomp); it is also
// the JSON that podman's and docker's --security-opt seccomp= read.
//
// What is rendered, rule by rule: the default action is DeniedErrno; only
// the native architecture is listed, so the engine's libseccomp refuses the
// other ABIs; each Override is an errno rule; each Allow rule is an allow
// rule with its conditions (names in Override left out of it). A number
// newer than the engine's table gets ENOSYS from runc itself, as
// UnknownErrno says.
//
// What is not: the Deny rules. libseccomp cannot give one syscall rules of
// two actions whose outcome it specifies, nor compare one argument twice in
// a rule, so "allow ioctl unless TIOCSTI" has no faithful OCI form. The
// engine's filter then allows those calls; the filter Compile builds, which
// psych's own init loads on top of it in every container, refuses them, and
// of two stacked filters the stricter answer wins. Deny lists them.
func (p *Policy) OCI() (*specs.LinuxSeccomp, error) {
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("render seccomp policy: %w", err)
	}
	errno := uint(p.DeniedErrno)
	s := &specs.LinuxSeccomp{
		DefaultAction:   specs.ActErrno,
		DefaultErrnoRet: &errno,
		Architectures:   []specs.Arch{specs.ArchX86_64},
	}
	for _, name := range slices.Sorted(maps.Keys(p.Override)) {
		e := uint(p.Override[name])
		s.Syscalls = append(s.Syscalls, specs.LinuxSyscall{Names: []string{name}, Action: specs.ActErrno, ErrnoRet: &e})
	}
	for _, r := range p.Allow {
		names := slices.DeleteFunc(slices.Clone(r.Names), func(n string) bool { _, over := p.Override[n]; return over })
		if len(names) == 0 {
			continue
		}
		sc := specs.LinuxSyscall{Names: names, Action: specs.ActAllow}
		for _, c := range r.Conds {
			sc.Args = append(sc.Args, ociArg(c))
		}
		s.Syscalls = append(s.Syscalls, sc)
	}
	return s, nil
}

// ociOps is each Op's name in the runtime spec, indexed by Op: the one
// table both directions read (ociArg, dockerCond). Index 0, no Op, is empty.
var ociOps = [...]specs.LinuxSeccompOperator{
	OpEqual:          specs.OpEqualTo,
	OpNotEqual:       specs.OpNotEqual,
	OpLess:           specs.OpLessThan,
	OpLessOrEqual:    specs.OpLessEqual,
	OpGreater:        specs.OpGreaterThan,
	OpGreaterOrEqual: specs.OpGreaterEqual,
	OpMaskedEqual:    specs.OpMaskedEqual,
}

// ociArg is a Cond as OCI writes it; for a masked comparison Value is the
// mask and ValueTwo the value, as libseccomp takes them. An unknown Op is
// left empty.
func ociArg(c Cond) specs.LinuxSeccompArg {
	a := specs.LinuxSeccompArg{Index: c.Arg, Value: c.Value}
	if int(c.Op) < len(ociOps) {
		a.Op = ociOps[c.Op]
	}
	if c.Op == OpMaskedEqual {
		a.Value, a.ValueTwo = c.Mask, c.Value
	}
	return a
}
