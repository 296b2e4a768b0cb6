package seccomp

import (
	"slices"
	"syscall"

	moby "github.com/moby/profiles/seccomp"
	"github.com/opencontainers/runtime-spec/specs-go"
)

// minKernel is the oldest kernel psych runs on (mount_setattr, 5.12). A
// Docker rule that needs a newer kernel is dropped, so the policy does not
// depend on the host that builds it.
var minKernel = moby.KernelVersion{Kernel: 5, Major: 12}

// dockerProfile returns the rules of Docker's default profile that apply to
// a process with no capabilities on x86_64: its allow rules, conditions
// kept, and its errno rules as overrides.
func dockerProfile() (allow []Rule, override map[string]syscall.Errno) {
	override = map[string]syscall.Errno{}
	for _, s := range moby.DefaultProfile().Syscalls {
		if !dockerApplies(s) {
			continue
		}
		names := slices.Clone(s.Names)
		if s.Name != "" {
			names = append(names, s.Name)
		}
		switch {
		case s.Action == specs.ActAllow:
			conds := make([]Cond, 0, len(s.Args))
			ok := true
			for _, a := range s.Args {
				c, known := dockerCond(a)
				if !known {
					ok = false
					break
				}
				conds = append(conds, c)
			}
			if !ok {
				continue // a comparison psych cannot express: not allowed
			}
			allow = append(allow, Rule{Names: names, Conds: conds, Comment: "docker default profile"})
		case s.Action == specs.ActErrno && len(s.Args) == 0 && s.ErrnoRet != nil:
			for _, n := range names {
				override[n] = syscall.Errno(*s.ErrnoRet)
			}
		}
	}
	return allow, override
}

// dockerApplies reports whether a Docker rule applies to an x86_64 process
// with no capabilities on psych's minimum kernel.
func dockerApplies(s *moby.Syscall) bool {
	if in := s.Includes; in != nil {
		if len(in.Caps) > 0 {
			return false
		}
		if len(in.Arches) > 0 && !slices.Contains(in.Arches, "amd64") {
			return false
		}
		if k := in.MinKernel; k != nil && (k.Kernel > minKernel.Kernel ||
			k.Kernel == minKernel.Kernel && k.Major > minKernel.Major) {
			return false
		}
	}
	// Excludes.Caps never matches: the process has none.
	if ex := s.Excludes; ex != nil {
		if slices.Contains(ex.Arches, "amd64") {
			return false
		}
		if k := ex.MinKernel; k != nil && !(k.Kernel > minKernel.Kernel ||
			k.Kernel == minKernel.Kernel && k.Major > minKernel.Major) {
			return false
		}
	}
	return true
}

// dockerCond is a Docker rule's argument comparison as a Cond; false for an
// operator psych does not know.
func dockerCond(a specs.LinuxSeccompArg) (Cond, bool) {
	i := slices.Index(ociOps[:], a.Op)
	if i < int(OpEqual) { // unknown, or empty
		return Cond{}, false
	}
	c := Cond{Arg: a.Index, Op: Op(i), Value: a.Value}
	if c.Op == OpMaskedEqual {
		// runtime-spec: Value is the mask, ValueTwo the expected result.
		c.Mask, c.Value = a.Value, a.ValueTwo
	}
	return c, true
}
