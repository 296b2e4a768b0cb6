package seccomp

import (
	"encoding/binary"
	"fmt"
	"syscall"
)

// Data is the kernel's struct seccomp_data: what a filter sees of one
// syscall. A filter reads it as 32-bit words in native byte order (little
// endian on x86_64), so a 64-bit field is two words, low word first.
type Data struct {
	Nr                 int32
	Arch               uint32
	InstructionPointer uint64
	Args               [6]uint64
}

// dataSize is sizeof(struct seccomp_data).
const dataSize = 64

// Linux audit architecture numbers (linux/audit.h) of the ABIs that reach an
// x86_64 kernel.
const (
	AuditArchX86_64 uint32 = 0xc000003e
	AuditArchI386   uint32 = 0x40000003
)

// X32SyscallBit marks an x32 syscall: an x32 process enters the kernel with
// AUDIT_ARCH_X86_64 and nr|X32SyscallBit.
const X32SyscallBit = 0x40000000

// Action is the action half of a SECCOMP_RET_* value.
type Action uint32

// The SECCOMP_RET_* actions (linux/seccomp.h).
const (
	ActKillProcess Action = 0x80000000
	ActKillThread  Action = 0x00000000
	ActTrap        Action = 0x00030000
	ActErrno       Action = 0x00050000
	ActUserNotif   Action = 0x7fc00000
	ActTrace       Action = 0x7ff00000
	ActLog         Action = 0x7ffc0000
	ActAllow       Action = 0x7fff0000
)

const (
	retActionFull = 0xffff0000
	retData       = 0x0000ffff
)

func (a Action) String() string {
	switch a {
	case ActKillProcess:
		return "kill_process"
	case ActKillThread:
		return "kill_thread"
	case ActTrap:
		return "trap"
	case ActErrno:
		return "errno"
	case ActUserNotif:
		return "user_notif"
	case ActTrace:
		return "trace"
	case ActLog:
		return "log"
	case ActAllow:
		return "allow"
	}
	return fmt.Sprintf("action(%#x)", uint32(a))
}

// DecodeReturn splits a filter's return value into its action and its 16
// data bits (the errno of ActErrno).
func DecodeReturn(ret uint32) (Action, uint16) {
	return Action(ret & retActionFull), uint16(ret & retData)
}

// ReturnErrno reports the errno a return value makes the syscall fail with,
// and false when the action is not ActErrno.
func ReturnErrno(ret uint32) (syscall.Errno, bool) {
	act, data := DecodeReturn(ret)
	if act != ActErrno {
		return 0, false
	}
	return syscall.Errno(data), true
}

// FormatReturn renders a return value for humans: "allow", "errno(1)",
// "kill_process".
func FormatReturn(ret uint32) string {
	act, data := DecodeReturn(ret)
	switch act {
	case ActErrno, ActTrace, ActTrap:
		return fmt.Sprintf("%s(%d)", act, data)
	}
	return act.String()
}

// Classic BPF opcode fields (linux/filter.h, linux/bpf_common.h).
const (
	bpfLD   = 0x00
	bpfLDX  = 0x01
	bpfST   = 0x02
	bpfSTX  = 0x03
	bpfALU  = 0x04
	bpfJMP  = 0x05
	bpfRET  = 0x06
	bpfMISC = 0x07

	bpfW   = 0x00
	bpfH   = 0x08
	bpfB   = 0x10
	bpfIMM = 0x00
	bpfABS = 0x20
	bpfIND = 0x40
	bpfMEM = 0x60
	bpfLEN = 0x80
	bpfMSH = 0xa0

	bpfADD = 0x00
	bpfSUB = 0x10
	bpfMUL = 0x20
	bpfDIV = 0x30
	bpfOR  = 0x40
	bpfAND = 0x50
	bpfLSH = 0x60
	bpfRSH = 0x70
	bpfNEG = 0x80
	bpfMOD = 0x90
	bpfXOR = 0xa0

	bpfJA   = 0x00
	bpfJEQ  = 0x10
	bpfJGT  = 0x20
	bpfJGE  = 0x30
	bpfJSET = 0x40

	bpfK = 0x00
	bpfX = 0x08
	bpfA = 0x10

	bpfTAX = 0x00
	bpfTXA = 0x80

	bpfMemWords = 16   // BPF_MEMWORDS
	bpfMaxInsns = 4096 // BPF_MAXINSNS
	insnSize    = 8    // sizeof(struct sock_filter)
)

// insn is one struct sock_filter.
type insn struct {
	code   uint16
	jt, jf uint8
	k      uint32
}

// decodeProgram splits raw sock_filter bytes (native endian) into
// instructions.
func decodeProgram(b []byte) ([]insn, error) {
	if len(b)%insnSize != 0 {
		return nil, fmt.Errorf("%w: %d bytes is not a whole number of instructions", ErrInvalidProgram, len(b))
	}
	prog := make([]insn, len(b)/insnSize)
	for i := range prog {
		p := b[i*insnSize:]
		prog[i] = insn{
			code: binary.NativeEndian.Uint16(p[0:2]),
			jt:   p[2],
			jf:   p[3],
			k:    binary.NativeEndian.Uint32(p[4:8]),
		}
	}
	return prog, nil
}

// encodeProgram is the inverse of decodeProgram.
func encodeProgram(prog []insn) []byte {
	b := make([]byte, len(prog)*insnSize)
	for i, in := range prog {
		p := b[i*insnSize:]
		binary.NativeEndian.PutUint16(p[0:2], in.code)
		p[2], p[3] = in.jt, in.jf
		binary.NativeEndian.PutUint32(p[4:8], in.k)
	}
	return b
}

// checkProgram refuses what the kernel's classic BPF and seccomp checkers
// (bpf_check_classic, seccomp_check_filter) would refuse to load: an empty or
// oversized program, a jump out of the program, a load outside seccomp_data
// or unaligned, a scratch slot out of range or read before any store, a
// division by a constant zero, an opcode seccomp does not accept, and a
// program that does not end in a return.
func checkProgram(prog []insn) error {
	if len(prog) == 0 || len(prog) > bpfMaxInsns {
		return fmt.Errorf("%w: %d instructions (want 1..%d)", ErrInvalidProgram, len(prog), bpfMaxInsns)
	}
	for pc, in := range prog {
		bad := func(format string, a ...any) error {
			return fmt.Errorf("%w: instruction %d (code %#04x): %s", ErrInvalidProgram, pc, in.code, fmt.Sprintf(format, a...))
		}
		if in.code > 0xff {
			return bad("unknown opcode")
		}
		switch in.code & 0x07 {
		case bpfLD:
			switch in.code {
			case bpfLD | bpfW | bpfABS:
				if in.k >= dataSize || in.k%4 != 0 {
					return bad("load at offset %d outside seccomp_data or unaligned", in.k)
				}
			case bpfLD | bpfW | bpfLEN, bpfLD | bpfIMM:
			case bpfLD | bpfMEM:
				if in.k >= bpfMemWords {
					return bad("scratch slot %d out of range", in.k)
				}
			default:
				return bad("load mode not allowed in seccomp")
			}
		case bpfLDX:
			switch in.code {
			case bpfLDX | bpfW | bpfLEN, bpfLDX | bpfIMM:
			case bpfLDX | bpfMEM:
				if in.k >= bpfMemWords {
					return bad("scratch slot %d out of range", in.k)
				}
			default:
				return bad("load mode not allowed in seccomp")
			}
		case bpfST, bpfSTX:
			if in.code != bpfST && in.code != bpfSTX {
				return bad("unknown store")
			}
			if in.k >= bpfMemWords {
				return bad("scratch slot %d out of range", in.k)
			}
		case bpfALU:
			op, src := in.code&0xf0, in.code&0x08
			switch op {
			case bpfADD, bpfSUB, bpfMUL, bpfOR, bpfAND, bpfXOR:
			case bpfDIV, bpfMOD:
				if src == bpfK && in.k == 0 {
					return bad("division by constant zero")
				}
			case bpfLSH, bpfRSH:
				if src == bpfK && in.k >= 32 {
					return bad("shift by %d", in.k)
				}
			case bpfNEG:
				if src != bpfK {
					return bad("unknown opcode")
				}
			default:
				return bad("unknown opcode")
			}
		case bpfJMP:
			rest := len(prog) - pc - 1
			switch in.code & 0xf0 {
			case bpfJA:
				if in.code&0x08 != 0 {
					return bad("unknown opcode")
				}
				if uint64(in.k) >= uint64(rest) {
					return bad("jump by %d past the end", in.k)
				}
			case bpfJEQ, bpfJGT, bpfJGE, bpfJSET:
				if int(in.jt) >= rest || int(in.jf) >= rest {
					return bad("jump by %d/%d past the end", in.jt, in.jf)
				}
			default:
				return bad("unknown opcode")
			}
		case bpfRET:
			if in.code != bpfRET|bpfK && in.code != bpfRET|bpfA {
				return bad("unknown opcode")
			}
		case bpfMISC:
			if in.code != bpfMISC|bpfTAX && in.code != bpfMISC|bpfTXA {
				return bad("unknown opcode")
			}
		}
	}
	if last := prog[len(prog)-1].code; last&0x07 != bpfRET {
		return fmt.Errorf("%w: last instruction (code %#04x) is not a return", ErrInvalidProgram, last)
	}
	return checkScratch(prog)
}

// checkScratch refuses a program that may read a scratch slot before it
// stores to it on some path, as the kernel does. Jumps only go forward, so
// one pass in program order with the set of slots stored on every path
// suffices.
func checkScratch(prog []insn) error {
	const all = 1<<bpfMemWords - 1
	in := make([]uint16, len(prog)) // slots stored on every path into pc
	for i := range in {
		in[i] = all
	}
	in[0] = 0
	for pc, ins := range prog {
		valid := in[pc]
		switch ins.code {
		case bpfLD | bpfMEM, bpfLDX | bpfMEM:
			if valid&(1<<ins.k) == 0 {
				return fmt.Errorf("%w: instruction %d reads scratch slot %d before any store", ErrInvalidProgram, pc, ins.k)
			}
		case bpfST, bpfSTX:
			valid |= 1 << ins.k
		}
		next := func(to int) { in[to] &= valid }
		switch ins.code & 0x07 {
		case bpfRET:
		case bpfJMP:
			if ins.code&0xf0 == bpfJA {
				next(pc + 1 + int(ins.k))
			} else {
				next(pc + 1 + int(ins.jt))
				next(pc + 1 + int(ins.jf))
			}
		default:
			next(pc + 1)
		}
	}
	return nil
}

// run executes a checked program against d and returns its return value.
// The machine's registers stay in run's locals; alu and jump compute.
func run(prog []insn, d *Data) uint32 {
	raw := seccompData(d)
	var (
		a, x uint32
		mem  [bpfMemWords]uint32
	)
	for pc := 0; ; pc++ {
		in := prog[pc]
		operand := in.k
		if in.code&0x08 == bpfX {
			operand = x
		}
		switch in.code & 0x07 {
		case bpfLD:
			switch in.code &^ 0x07 {
			case bpfW | bpfABS:
				a = binary.NativeEndian.Uint32(raw[in.k:])
			case bpfW | bpfLEN:
				a = dataSize
			case bpfIMM:
				a = in.k
			case bpfMEM:
				a = mem[in.k]
			}
		case bpfLDX:
			switch in.code &^ 0x07 {
			case bpfW | bpfLEN:
				x = dataSize
			case bpfIMM:
				x = in.k
			case bpfMEM:
				x = mem[in.k]
			}
		case bpfST:
			mem[in.k] = a
		case bpfSTX:
			mem[in.k] = x
		case bpfALU:
			var ok bool
			if a, ok = alu(in.code, a, operand); !ok {
				return 0 // a division by zero: the kernel ends the program with 0
			}
		case bpfJMP:
			pc += jumpBy(in, a, operand)
		case bpfRET:
			if in.code&0x18 == bpfA {
				return a
			}
			return in.k
		case bpfMISC:
			if in.code&0xf8 == bpfTXA {
				a = x
			} else {
				x = a
			}
		}
	}
}

// seccompData lays d out as the kernel's struct seccomp_data.
func seccompData(d *Data) [dataSize]byte {
	var raw [dataSize]byte
	binary.NativeEndian.PutUint32(raw[0:], uint32(d.Nr))
	binary.NativeEndian.PutUint32(raw[4:], d.Arch)
	binary.NativeEndian.PutUint64(raw[8:], d.InstructionPointer)
	for i, a := range d.Args {
		binary.NativeEndian.PutUint64(raw[16+8*i:], a)
	}
	return raw
}

// alu returns the accumulator a after the arithmetic instruction code with
// operand; false is a division by zero, which ends the program.
func alu(code uint16, a, operand uint32) (uint32, bool) {
	switch code & 0xf0 {
	case bpfADD:
		a += operand
	case bpfSUB:
		a -= operand
	case bpfMUL:
		a *= operand
	case bpfDIV:
		if operand == 0 {
			return 0, false
		}
		a /= operand
	case bpfMOD:
		if operand == 0 {
			return 0, false
		}
		a %= operand
	case bpfOR:
		a |= operand
	case bpfAND:
		a &= operand
	case bpfXOR:
		a ^= operand
	case bpfLSH:
		a <<= operand & 31
	case bpfRSH:
		a >>= operand & 31
	case bpfNEG:
		a = -a
	}
	return a, true
}

// jumpBy returns how many instructions the jump in skips past the next one,
// given the accumulator a and its operand.
func jumpBy(in insn, a, operand uint32) int {
	var cond bool
	switch in.code & 0xf0 {
	case bpfJA:
		return int(in.k)
	case bpfJEQ:
		cond = a == operand
	case bpfJGT:
		cond = a > operand
	case bpfJGE:
		cond = a >= operand
	case bpfJSET:
		cond = a&operand != 0
	}
	if cond {
		return int(in.jt)
	}
	return int(in.jf)
}
