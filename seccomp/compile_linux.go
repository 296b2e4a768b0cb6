//go:build linux && cgo

package seccomp

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"runtime"
	"slices"
	"sync"
	"syscall"

	libseccomp "github.com/seccomp/libseccomp-golang"
	"golang.org/x/sys/unix"
)

// tableScan bounds the scan of libseccomp's x86_64 syscall table. Native
// x86_64 numbers stay below 512; x32's own numbers start there.
const tableScan = 512

// passData marks the default action of the deny stage, "no deny rule
// matched, go on": SECCOMP_RET_TRACE with this data. Compile rewrites every
// return of it into a jump to the next stage. No Policy can produce it, and
// a stray one would only make the syscall fail (a trace action with no
// tracer fails with ENOSYS).
const passData = 0x5053

var (
	actPass = libseccomp.ActTrace.SetReturnCode(passData)
	retPass = uint32(ActTrace) | passData
)

// Compile turns the policy into a BPF program for native x86_64 processes.
//
// libseccomp has a single default action per filter, cannot compare a
// syscall number with a range, and does not specify what overlapping rules
// with different actions do. So Compile never gives it such rules. It
// builds two libseccomp programs and splices them behind a six-instruction
// prologue of its own:
//
//   - the prologue sends every native number above the largest in
//     libseccomp's table to UnknownErrno, and everything else on;
//   - the deny stage holds the Deny rules; its default ("pass") is rewritten
//     into a jump to the next stage;
//   - the main stage holds Override, UnknownErrno for the holes in the
//     table, and the Allow rules, with DeniedErrno as its default.
//
// Both stages check the architecture themselves, so the prologue passes
// other ABIs and x32 on to them. Compile then checks the result: the kernel's
// load-time rules, and that i386, x32, an unknown number and each override
// get what the policy says.
func (p *Policy) Compile() (*Filter, error) {
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("compile seccomp policy: %w", err)
	}
	if runtime.GOARCH != "amd64" {
		return nil, fmt.Errorf("compile seccomp policy: %w: GOARCH %s (the policy is for x86_64)", ErrUnsupported, runtime.GOARCH)
	}
	c, err := newCompiler()
	if err != nil {
		return nil, fmt.Errorf("compile seccomp policy: %w", err)
	}
	raw, err := c.compile(p)
	if err != nil {
		return nil, fmt.Errorf("compile seccomp policy: %w", err)
	}
	f := newFilter(raw)
	f.unresolved = slices.Sorted(maps.Keys(c.unresolved))
	if f.err != nil {
		return nil, fmt.Errorf("compile seccomp policy: %w", f.err)
	}
	if err := selfCheck(f, p, c); err != nil {
		return nil, fmt.Errorf("compile seccomp policy: %w: libseccomp %s: %w", ErrUnsupported, libseccompVersion(), err)
	}
	return f, nil
}

func libseccompVersion() string {
	major, minor, micro := libseccomp.GetLibraryVersion()
	return fmt.Sprintf("%d.%d.%d", major, minor, micro)
}

var defaultFilter = sync.OnceValues(func() (*Filter, error) { return Default().Compile() })

// DefaultFilter is Default().Compile(), done once per process: compiling
// costs milliseconds. Every caller gets the same Filter.
func DefaultFilter() (*Filter, error) { return defaultFilter() }

// compiler holds libseccomp's view of the x86_64 syscall table.
type compiler struct {
	maxKnown   int
	holes      []int // numbers below maxKnown without a name
	unresolved map[string]struct{}
}

func newCompiler() (*compiler, error) {
	if _, err := libseccomp.GetAPI(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnsupported, err)
	}
	c := &compiler{maxKnown: -1, unresolved: map[string]struct{}{}}
	var named []int
	for n := range tableScan {
		if _, err := libseccomp.ScmpSyscall(n).GetNameByArch(libseccomp.ArchAMD64); err == nil {
			named = append(named, n)
		}
	}
	if len(named) == 0 {
		return nil, fmt.Errorf("%w: libseccomp names no x86_64 syscall", ErrUnsupported)
	}
	c.maxKnown = named[len(named)-1]
	for n, i := 0, 0; n < c.maxKnown; n++ {
		if named[i] == n {
			i++
			continue
		}
		c.holes = append(c.holes, n)
	}
	return c, nil
}

// resolve returns the x86_64 number of name, or false (and records the
// name) when libseccomp knows no such x86_64 syscall.
func (c *compiler) resolve(name string) (libseccomp.ScmpSyscall, bool) {
	nr, err := libseccomp.GetSyscallFromNameByArch(name, libseccomp.ArchAMD64)
	if err != nil || nr < 0 {
		// Unknown, or a pseudo-number for a syscall only other ABIs have.
		c.unresolved[name] = struct{}{}
		return 0, false
	}
	return nr, true
}

func (c *compiler) compile(p *Policy) ([]byte, error) {
	overridden := func(name string) bool { _, ok := p.Override[name]; return ok }

	var stages [][]insn
	if len(p.Deny) > 0 {
		deny, err := c.stage(p, actPass, func(f *libseccomp.ScmpFilter) error {
			return c.addRules(f, p.Deny, errnoAction(p.DeniedErrno), overridden)
		})
		if err != nil {
			return nil, fmt.Errorf("deny stage: %w", err)
		}
		stages = append(stages, deny)
	}
	denied := errnoAction(p.DeniedErrno)
	main, err := c.stage(p, denied, func(f *libseccomp.ScmpFilter) error {
		for _, name := range slices.Sorted(maps.Keys(p.Override)) {
			nr, ok := c.resolve(name)
			act := errnoAction(p.Override[name])
			if !ok || act == denied { // libseccomp refuses a rule that repeats the default
				continue
			}
			if err := f.AddRuleExact(nr, act); err != nil {
				return fmt.Errorf("override %s: %w", name, err)
			}
		}
		if unknown := errnoAction(p.UnknownErrno); unknown != denied {
			for _, n := range c.holes {
				if err := f.AddRuleExact(libseccomp.ScmpSyscall(n), unknown); err != nil {
					return fmt.Errorf("unknown number %d: %w", n, err)
				}
			}
		}
		return c.addRules(f, p.Allow, libseccomp.ActAllow, overridden)
	})
	if err != nil {
		return nil, fmt.Errorf("main stage: %w", err)
	}
	stages = append(stages, main)

	prog := c.prologue(p)
	for i, s := range stages {
		last := i == len(stages)-1
		for pc, in := range s {
			if in.code != bpfRET|bpfK || in.k != retPass {
				continue
			}
			if last {
				return nil, errors.New("pass action left in the last stage")
			}
			// Jump over the rest of this stage to the next one.
			s[pc] = insn{code: bpfJMP | bpfJA, k: uint32(len(s) - pc - 1)}
		}
		prog = append(prog, s...)
	}
	if len(prog) > bpfMaxInsns {
		return nil, fmt.Errorf("%d instructions, more than the kernel's %d", len(prog), bpfMaxInsns)
	}
	return encodeProgram(prog), nil
}

// prologue sends native numbers above libseccomp's table to UnknownErrno.
// Other ABIs, x32 numbers and -1 go on to the stages, which decide them.
func (c *compiler) prologue(p *Policy) []insn {
	return []insn{
		{code: bpfLD | bpfW | bpfABS, k: 4},                       // A = arch
		{code: bpfJMP | bpfJEQ | bpfK, jf: 4, k: AuditArchX86_64}, // other ABI: stages
		{code: bpfLD | bpfW | bpfABS, k: 0},                       // A = nr
		{code: bpfJMP | bpfJGE | bpfK, jt: 2, k: X32SyscallBit},   // x32 or -1: stages
		{code: bpfJMP | bpfJGT | bpfK, jf: 1, k: uint32(c.maxKnown)},
		{code: bpfRET | bpfK, k: uint32(ActErrno) | uint32(p.UnknownErrno)},
	}
}

// stage builds one libseccomp program for native x86_64 only.
func (c *compiler) stage(p *Policy, def libseccomp.ScmpAction, add func(*libseccomp.ScmpFilter) error) ([]insn, error) {
	f, err := libseccomp.NewFilter(def)
	if err != nil {
		return nil, fmt.Errorf("new filter: %w", err)
	}
	defer f.Release()
	if ok, err := f.IsArchPresent(libseccomp.ArchAMD64); err != nil || !ok {
		return nil, fmt.Errorf("%w: native architecture is not x86_64", ErrUnsupported)
	}
	badArch, err := libseccompAction(p.BadArch)
	if err != nil {
		return nil, err
	}
	if err := f.SetBadArchAction(badArch); err != nil {
		return nil, fmt.Errorf("set bad-arch action: %w", err)
	}
	// A binary tree by syscall number: O(log n) for calls the kernel's
	// action cache does not answer.
	if err := f.SetOptimize(2); err != nil {
		return nil, fmt.Errorf("set optimize: %w", err)
	}
	if err := add(f); err != nil {
		return nil, err
	}
	raw, err := exportBPF(f)
	if err != nil {
		return nil, err
	}
	return decodeProgram(raw)
}

func (c *compiler) addRules(f *libseccomp.ScmpFilter, rules []Rule, act libseccomp.ScmpAction, skip func(string) bool) error {
	for _, r := range rules {
		conds := make([]libseccomp.ScmpCondition, 0, len(r.Conds))
		for _, cd := range r.Conds {
			sc, err := scmpCondition(cd)
			if err != nil {
				return fmt.Errorf("rule %v: %w", r.Names, err)
			}
			conds = append(conds, sc)
		}
		for _, name := range r.Names {
			if skip(name) {
				continue
			}
			nr, ok := c.resolve(name)
			if !ok {
				continue
			}
			if err := f.AddRuleConditionalExact(nr, act, conds); err != nil {
				return fmt.Errorf("rule %s: %w", name, err)
			}
		}
	}
	return nil
}

func scmpCondition(c Cond) (libseccomp.ScmpCondition, error) {
	ops := map[Op]libseccomp.ScmpCompareOp{
		OpEqual:          libseccomp.CompareEqual,
		OpNotEqual:       libseccomp.CompareNotEqual,
		OpLess:           libseccomp.CompareLess,
		OpLessOrEqual:    libseccomp.CompareLessOrEqual,
		OpGreater:        libseccomp.CompareGreater,
		OpGreaterOrEqual: libseccomp.CompareGreaterEqual,
	}
	if c.Op == OpMaskedEqual {
		return libseccomp.MakeCondition(c.Arg, libseccomp.CompareMaskedEqual, c.Mask, c.Value)
	}
	return libseccomp.MakeCondition(c.Arg, ops[c.Op], c.Value)
}

func errnoAction(e syscall.Errno) libseccomp.ScmpAction {
	return libseccomp.ActErrno.SetReturnCode(int16(e))
}

func libseccompAction(a Action) (libseccomp.ScmpAction, error) {
	switch a {
	case ActKillProcess:
		return libseccomp.ActKillProcess, nil
	case ActKillThread:
		return libseccomp.ActKillThread, nil
	case ActTrap:
		return libseccomp.ActTrap, nil
	}
	return 0, fmt.Errorf("%w: bad-arch action %s", ErrInvalidPolicy, a)
}

// exportBPF reads libseccomp's program back through a memfd: libseccomp
// 2.5 exports only to a file descriptor.
func exportBPF(f *libseccomp.ScmpFilter) ([]byte, error) {
	fd, err := unix.MemfdCreate("psych-seccomp", unix.MFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("export bpf: %w", os.NewSyscallError("memfd_create", err))
	}
	file := os.NewFile(uintptr(fd), "psych-seccomp")
	defer file.Close()
	if err := f.ExportBPF(file); err != nil {
		return nil, fmt.Errorf("export bpf: %w", err)
	}
	if _, err := file.Seek(0, io.SeekStart); err != nil {
		return nil, fmt.Errorf("export bpf: %w", err)
	}
	raw, err := io.ReadAll(file)
	if err != nil {
		return nil, fmt.Errorf("export bpf: %w", err)
	}
	return raw, nil
}

// selfCheck evaluates what the policy fixes regardless of its rules, so a
// libseccomp that builds differently is caught here rather than in a
// sandbox.
func selfCheck(f *Filter, p *Policy, c *compiler) error {
	badArch := uint32(p.BadArch)
	unknown := uint32(ActErrno) | uint32(p.UnknownErrno)
	type probe struct {
		what string
		d    Data
		want uint32
	}
	probes := []probe{
		{"i386 ABI", Data{Nr: 0, Arch: AuditArchI386}, badArch},
		{"x32 ABI", Data{Nr: X32SyscallBit, Arch: AuditArchX86_64}, badArch},
		{"number above the table", Data{Nr: int32(c.maxKnown + 1), Arch: AuditArchX86_64}, unknown},
	}
	for _, n := range c.holes {
		probes = append(probes, probe{fmt.Sprintf("hole %d", n), Data{Nr: int32(n), Arch: AuditArchX86_64}, unknown})
	}
	for _, name := range slices.Sorted(maps.Keys(p.Override)) {
		if nr, ok := c.resolve(name); ok {
			probes = append(probes, probe{"override " + name, Data{Nr: int32(nr), Arch: AuditArchX86_64},
				uint32(ActErrno) | uint32(p.Override[name])})
		}
	}
	for _, pr := range probes {
		got, err := f.Evaluate(pr.d)
		if err != nil {
			return err
		}
		if got != pr.want {
			return fmt.Errorf("%s: got %s, want %s", pr.what, FormatReturn(got), FormatReturn(pr.want))
		}
	}
	return nil
}
