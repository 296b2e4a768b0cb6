package seccomp

import (
	"errors"
	"syscall"
	"testing"
)

// Hand-assembly helpers for test programs.
func stmt(code uint16, k uint32) insn { return insn{code: code, k: k} }
func jump(code uint16, k uint32, jt, jf uint8) insn {
	return insn{code: bpfJMP | code, jt: jt, jf: jf, k: k}
}

var (
	ldNr   = stmt(bpfLD|bpfW|bpfABS, 0)
	ldArch = stmt(bpfLD|bpfW|bpfABS, 4)
	retA   = stmt(bpfRET|bpfA, 0)
)

func retK(k uint32) insn { return stmt(bpfRET|bpfK, k) }

func evalProg(t *testing.T, prog []insn, d Data) (uint32, error) {
	t.Helper()
	return newFilter(encodeProgram(prog)).Evaluate(d)
}

func TestEvaluateReturns(t *testing.T) {
	// getpid allowed, write EPERM, everything else ENOSYS; other arch killed.
	prog := []insn{
		ldArch,
		jump(bpfJEQ|bpfK, AuditArchX86_64, 1, 0),
		retK(uint32(ActKillProcess)),
		ldNr,
		jump(bpfJEQ|bpfK, 39, 2, 0),
		jump(bpfJEQ|bpfK, 1, 2, 0),
		retK(uint32(ActErrno) | 38),
		retK(uint32(ActAllow)),
		retK(uint32(ActErrno) | 1),
	}
	for _, tc := range []struct {
		d    Data
		want uint32
	}{
		{Data{Nr: 39, Arch: AuditArchX86_64}, uint32(ActAllow)},
		{Data{Nr: 1, Arch: AuditArchX86_64}, uint32(ActErrno) | 1},
		{Data{Nr: 2, Arch: AuditArchX86_64}, uint32(ActErrno) | 38},
		{Data{Nr: 39, Arch: AuditArchI386}, uint32(ActKillProcess)},
	} {
		got, err := evalProg(t, prog, tc.d)
		if err != nil {
			t.Fatal(err)
		}
		if got != tc.want {
			t.Errorf("%+v: got %s, want %s", tc.d, FormatReturn(got), FormatReturn(tc.want))
		}
	}
}

// TestEvaluateDataLayout loads every word of seccomp_data and checks it
// lands where the kernel puts it: 64-bit fields low word first.
func TestEvaluateDataLayout(t *testing.T) {
	d := Data{
		Nr:                 -1,
		Arch:               0xc000003e,
		InstructionPointer: 0x1111111122222222,
		Args:               [6]uint64{0x0a0a0a0a0b0b0b0b, 1, 2, 3, 4, 0xf0f0f0f00f0f0f0f},
	}
	want := map[uint32]uint32{
		0: 0xffffffff, 4: 0xc000003e, 8: 0x22222222, 12: 0x11111111,
		16: 0x0b0b0b0b, 20: 0x0a0a0a0a, 24: 1, 28: 0, 56: 0x0f0f0f0f, 60: 0xf0f0f0f0,
	}
	for off, w := range want {
		got, err := evalProg(t, []insn{stmt(bpfLD|bpfW|bpfABS, off), retA}, d)
		if err != nil {
			t.Fatal(err)
		}
		if got != w {
			t.Errorf("word at %d: got %#x, want %#x", off, got, w)
		}
	}
}

func TestEvaluateALUAndMemory(t *testing.T) {
	for _, tc := range []struct {
		name string
		prog []insn
		want uint32
	}{
		{"add", []insn{stmt(bpfLD|bpfIMM, 5), stmt(bpfALU|bpfADD|bpfK, 7), retA}, 12},
		{"sub wraps", []insn{stmt(bpfLD|bpfIMM, 5), stmt(bpfALU|bpfSUB|bpfK, 7), retA}, 0xfffffffe},
		{"mul", []insn{stmt(bpfLD|bpfIMM, 6), stmt(bpfALU|bpfMUL|bpfK, 7), retA}, 42},
		{"div", []insn{stmt(bpfLD|bpfIMM, 43), stmt(bpfALU|bpfDIV|bpfK, 7), retA}, 6},
		{"mod", []insn{stmt(bpfLD|bpfIMM, 43), stmt(bpfALU|bpfMOD|bpfK, 7), retA}, 1},
		{"and", []insn{stmt(bpfLD|bpfIMM, 0xff0), stmt(bpfALU|bpfAND|bpfK, 0x0ff), retA}, 0x0f0},
		{"or", []insn{stmt(bpfLD|bpfIMM, 0xf00), stmt(bpfALU|bpfOR|bpfK, 0x00f), retA}, 0xf0f},
		{"xor", []insn{stmt(bpfLD|bpfIMM, 0xff), stmt(bpfALU|bpfXOR|bpfK, 0x0f), retA}, 0xf0},
		{"lsh", []insn{stmt(bpfLD|bpfIMM, 1), stmt(bpfALU|bpfLSH|bpfK, 31), retA}, 0x80000000},
		{"rsh", []insn{stmt(bpfLD|bpfIMM, 0x80000000), stmt(bpfALU|bpfRSH|bpfK, 31), retA}, 1},
		{"neg", []insn{stmt(bpfLD|bpfIMM, 1), stmt(bpfALU|bpfNEG, 0), retA}, 0xffffffff},
		{"x operand", []insn{stmt(bpfLDX|bpfIMM, 3), stmt(bpfLD|bpfIMM, 4), stmt(bpfALU|bpfMUL|bpfX, 0), retA}, 12},
		{"div by x zero ends with 0", []insn{stmt(bpfLDX|bpfIMM, 0), stmt(bpfLD|bpfIMM, 4), stmt(bpfALU|bpfDIV|bpfX, 0), retK(7)}, 0},
		{"mod by x zero ends with 0", []insn{stmt(bpfLDX|bpfIMM, 0), stmt(bpfLD|bpfIMM, 4), stmt(bpfALU|bpfMOD|bpfX, 0), retK(7)}, 0},
		{"tax txa", []insn{stmt(bpfLD|bpfIMM, 9), stmt(bpfMISC|bpfTAX, 0), stmt(bpfLD|bpfIMM, 1), stmt(bpfMISC|bpfTXA, 0), retA}, 9},
		{"len", []insn{stmt(bpfLD|bpfW|bpfLEN, 0), retA}, 64},
		{"ldx len", []insn{stmt(bpfLDX|bpfW|bpfLEN, 0), stmt(bpfMISC|bpfTXA, 0), retA}, 64},
		{"st ld mem", []insn{stmt(bpfLD|bpfIMM, 5), stmt(bpfST, 15), stmt(bpfLD|bpfIMM, 0), stmt(bpfLD|bpfMEM, 15), retA}, 5},
		{"stx ldx mem", []insn{stmt(bpfLDX|bpfIMM, 6), stmt(bpfSTX, 0), stmt(bpfLDX|bpfIMM, 0), stmt(bpfLDX|bpfMEM, 0), stmt(bpfMISC|bpfTXA, 0), retA}, 6},
		{"ja", []insn{stmt(bpfJMP|bpfJA, 1), retK(1), retK(2)}, 2},
		{"jgt", []insn{stmt(bpfLD|bpfIMM, 5), jump(bpfJGT|bpfK, 5, 0, 1), retK(1), retK(2)}, 2},
		{"jge", []insn{stmt(bpfLD|bpfIMM, 5), jump(bpfJGE|bpfK, 5, 0, 1), retK(1), retK(2)}, 1},
		{"jset", []insn{stmt(bpfLD|bpfIMM, 6), jump(bpfJSET|bpfK, 1, 0, 1), retK(1), retK(2)}, 2},
		{"jeq x", []insn{stmt(bpfLDX|bpfIMM, 4), stmt(bpfLD|bpfIMM, 4), jump(bpfJEQ|bpfX, 0, 0, 1), retK(1), retK(2)}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := evalProg(t, tc.prog, Data{})
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("got %#x, want %#x", got, tc.want)
			}
		})
	}
}

func TestEvaluateInvalidPrograms(t *testing.T) {
	long := make([]insn, bpfMaxInsns+1)
	for i := range long {
		long[i] = retK(0)
	}
	for _, tc := range []struct {
		name string
		prog []insn
	}{
		{"empty", nil},
		{"too long", long},
		{"no return", []insn{ldNr}},
		{"ends in a jump", []insn{retK(0), stmt(bpfJMP|bpfJA, 0)}},
		{"jt out of range", []insn{ldNr, jump(bpfJEQ|bpfK, 1, 2, 0), retK(0)}},
		{"jf out of range", []insn{ldNr, jump(bpfJEQ|bpfK, 1, 0, 1), retK(0)}},
		{"ja out of range", []insn{stmt(bpfJMP|bpfJA, 1), retK(0)}},
		{"load past seccomp_data", []insn{stmt(bpfLD|bpfW|bpfABS, 64), retA}},
		{"unaligned load", []insn{stmt(bpfLD|bpfW|bpfABS, 2), retA}},
		{"half-word load", []insn{stmt(bpfLD|bpfH|bpfABS, 0), retA}},
		{"byte load", []insn{stmt(bpfLD|bpfB|bpfABS, 0), retA}},
		{"indirect load", []insn{stmt(bpfLD|bpfW|bpfIND, 0), retA}},
		{"msh", []insn{stmt(bpfLDX|bpfB|bpfMSH, 0), retA}},
		{"scratch slot out of range", []insn{stmt(bpfST, 16), retA}},
		{"read before store", []insn{stmt(bpfLD|bpfMEM, 3), retA}},
		{"read stored on one path only", []insn{
			ldNr, jump(bpfJEQ|bpfK, 1, 0, 1), stmt(bpfST, 3), stmt(bpfLD|bpfMEM, 3), retA,
		}},
		{"division by constant zero", []insn{stmt(bpfALU|bpfDIV|bpfK, 0), retA}},
		{"shift by 32", []insn{stmt(bpfALU|bpfLSH|bpfK, 32), retA}},
		{"unknown alu op", []insn{stmt(bpfALU|0xb0, 1), retA}},
		{"unknown jump op", []insn{jump(0x50, 0, 0, 0), retA}},
		{"return x", []insn{stmt(bpfRET|bpfX, 0)}},
		{"unknown misc", []insn{stmt(bpfMISC|0x40, 0), retA}},
		{"opcode above 0xff", []insn{stmt(0x106, 0)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ret, err := evalProg(t, tc.prog, Data{})
			if !errors.Is(err, ErrInvalidProgram) {
				t.Fatalf("got %#x, %v; want ErrInvalidProgram", ret, err)
			}
		})
	}
	t.Run("partial instruction", func(t *testing.T) {
		raw := append(encodeProgram([]insn{retK(0)}), 0)
		if _, err := newFilter(raw).Evaluate(Data{}); !errors.Is(err, ErrInvalidProgram) {
			t.Fatalf("got %v, want ErrInvalidProgram", err)
		}
	})
	t.Run("read stored on every path", func(t *testing.T) {
		prog := []insn{
			ldNr, jump(bpfJEQ|bpfK, 1, 0, 2), stmt(bpfST, 3), stmt(bpfJMP|bpfJA, 1), stmt(bpfST, 3),
			stmt(bpfLD|bpfMEM, 3), retA,
		}
		if _, err := evalProg(t, prog, Data{Nr: 1}); err != nil {
			t.Fatal(err)
		}
	})
}

func TestProgramRoundTrip(t *testing.T) {
	prog := []insn{ldNr, jump(bpfJEQ|bpfK, 0xdeadbeef, 1, 0), retK(1), retK(2)}
	raw := encodeProgram(prog)
	if len(raw) != len(prog)*8 {
		t.Fatalf("%d bytes for %d instructions", len(raw), len(prog))
	}
	back, err := decodeProgram(raw)
	if err != nil {
		t.Fatal(err)
	}
	for i := range prog {
		if back[i] != prog[i] {
			t.Errorf("instruction %d: got %+v, want %+v", i, back[i], prog[i])
		}
	}
	f := newFilter(raw)
	if f.Len() != len(prog) {
		t.Errorf("Len %d, want %d", f.Len(), len(prog))
	}
	b := f.Bytes()
	b[0] ^= 0xff
	if f.Bytes()[0] == b[0] {
		t.Error("Bytes shares the filter's memory")
	}
}

func TestDecodeReturn(t *testing.T) {
	for _, tc := range []struct {
		ret      uint32
		act      Action
		data     uint16
		errno    syscall.Errno
		hasErrno bool
		text     string
	}{
		{0x7fff0000, ActAllow, 0, 0, false, "allow"},
		{0x00050001, ActErrno, 1, 1, true, "errno(1)"},
		{0x00050026, ActErrno, 38, 38, true, "errno(38)"},
		{0x80000000, ActKillProcess, 0, 0, false, "kill_process"},
		{0x00000000, ActKillThread, 0, 0, false, "kill_thread"},
		{0x7ff05053, ActTrace, 0x5053, 0, false, "trace(20563)"},
	} {
		act, data := DecodeReturn(tc.ret)
		errno, ok := ReturnErrno(tc.ret)
		if act != tc.act || data != tc.data || errno != tc.errno || ok != tc.hasErrno || FormatReturn(tc.ret) != tc.text {
			t.Errorf("%#x: got %s %d %d %v %q", tc.ret, act, data, errno, ok, FormatReturn(tc.ret))
		}
	}
}
