"""A seccomp filter run in user space, as the kernel runs it: whether the kernel would take it,
what it answers, how many instructions one call executes, and whether the kernel's action
cache lets the call skip it.

The programs are classic BPF, the bytes `syscost --seccomp` loads.  Every rule here is the
kernel's own, named by the function it follows (Linux 6.x):

  load()         bpf_prog_create_from_user() -> bpf_check_basics_ok(), bpf_check_classic()
                 (net/core/filter.c: chk_code_allowed(), the per-opcode checks, the last
                 instruction a RET, check_load_and_stores()), then seccomp_check_filter()
                 (kernel/seccomp.c), the narrower list seccomp takes.  A filter that fails
                 any of them is what seccomp(SECCOMP_SET_MODE_FILTER) answers EINVAL to:
                 BadFilter, with the rule and the instruction.
  stack_refused()  seccomp_attach_filter()'s MAX_INSNS_PER_PATH: a stack whose filters, 4
                 instructions of penalty each but the newest, pass 32768 instructions is
                 refused with ENOMEM at the filter that passes it.  The count is of each
                 filter's program as the kernel keeps it, converted to eBPF
                 (bpf_convert_filter: a prologue of 3, a RET of a constant 2, a conditional
                 jump whose both ways leave the next instruction 2, ...): converted_len().
  run()          the interpreter, one switch over whole opcodes (as the kernel's converted
                 program and libseccomp's tools/scmp_bpf_sim.c run them) whose default is a
                 fault, on one call's struct seccomp_data: the answer, the instructions
                 executed, the fields read.
  run_stack()    seccomp_run_filters(): every filter runs, the lowest action wins.
  const_allow()  seccomp_is_const_allow(): at attach time the kernel emulates each filter
                 with only the number and the architecture known.
  cached()       seccomp_cache_check_allow(): the call's number is looked up in the bitmap of
                 its architecture, native (x86_64) or compat (i386) only, and only below that
                 table's size (NR_syscalls, IA32_NR_syscalls): any number below it is in the
                 bitmap, a number the table never assigned too; a number at or above it, an
                 x32 call (its number has bit 30 set) and any other architecture never are.

struct seccomp_data (include/uapi/linux/seccomp.h): int nr at 0, u32 arch at 4, u64
instruction_pointer at 8, u64 args[6] at 16; the loads are 32-bit words of it.
"""
import struct

# BPF opcode fields (include/uapi/linux/bpf_common.h, linux/filter.h).
LD, LDX, ST, STX, ALU, JMP, RET, MISC = 0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07
W, H, B = 0x00, 0x08, 0x10
IMM, ABS, IND, MEM, LEN, MSH = 0x00, 0x20, 0x40, 0x60, 0x80, 0xA0
ADD, SUB, MUL, DIV, OR, AND, LSH, RSH, NEG, MOD, XOR = (
    0x00, 0x10, 0x20, 0x30, 0x40, 0x50, 0x60, 0x70, 0x80, 0x90, 0xA0)
JA, JEQ, JGT, JGE, JSET = 0x00, 0x10, 0x20, 0x30, 0x40
K, X = 0x00, 0x08
RET_A = 0x10
TAX, TXA = 0x00, 0x80

BPF_MAXINSNS = 4096
MEMWORDS = 16                                  # BPF_MEMWORDS
SKF_AD_OFF = 0xFFFFF000                        # -0x1000 as the u32 k holds it
SECCOMP_DATA_SIZE = 64
# seccomp_attach_filter(): "Limit any path through the tree to 256KB worth of instructions."
MAX_INSNS_PER_PATH = (1 << 18) // 8
STACK_PENALTY = 4                              # "4 instr penalty" per filter below the new one

RET_ALLOW = 0x7FFF0000
RET_ACTION_FULL = 0xFFFF0000
M32 = 0xFFFFFFFF

# The kernel's SECCOMP_ARCH_NATIVE and SECCOMP_ARCH_COMPAT on x86-64
# (arch/x86/include/asm/seccomp.h): the two architectures with a cache bitmap.  x32 calls
# carry AUDIT_ARCH_X86_64 with bit 30 of the number set (__X32_SYSCALL_BIT).
AUDIT_ARCH_X86_64 = 0xC000003E
AUDIT_ARCH_I386 = 0x40000003
X32_SYSCALL_BIT = 0x40000000
NATIVE, COMPAT = AUDIT_ARCH_X86_64, AUDIT_ARCH_I386

# chk_code_allowed()'s table (net/core/filter.c): the classic opcodes a filter may hold at all.
CLASSIC_CODES = frozenset({
    ALU | ADD | K, ALU | ADD | X, ALU | SUB | K, ALU | SUB | X, ALU | MUL | K, ALU | MUL | X,
    ALU | DIV | K, ALU | DIV | X, ALU | MOD | K, ALU | MOD | X, ALU | AND | K, ALU | AND | X,
    ALU | OR | K, ALU | OR | X, ALU | XOR | K, ALU | XOR | X, ALU | LSH | K, ALU | LSH | X,
    ALU | RSH | K, ALU | RSH | X, ALU | NEG,
    LD | W | ABS, LD | H | ABS, LD | B | ABS, LD | W | LEN, LD | W | IND, LD | H | IND,
    LD | B | IND, LD | IMM, LD | MEM, LDX | W | LEN, LDX | B | MSH, LDX | IMM, LDX | MEM,
    ST, STX, MISC | TAX, MISC | TXA, RET | K, RET | RET_A,
    JMP | JA, JMP | JEQ | K, JMP | JEQ | X, JMP | JGE | K, JMP | JGE | X, JMP | JGT | K,
    JMP | JGT | X, JMP | JSET | K, JMP | JSET | X})
# seccomp_check_filter()'s list (kernel/seccomp.c): what seccomp takes of them.  The loads
# it rewrites (LD|W|ABS into seccomp_data, LD|W|LEN and LDX|W|LEN into its size) are in it;
# MOD, the byte and half-word loads, the indirect loads and LDX|B|MSH are not.
SECCOMP_CODES = frozenset({
    LD | W | ABS, LD | W | LEN, LDX | W | LEN,
    RET | K, RET | RET_A,
    ALU | ADD | K, ALU | ADD | X, ALU | SUB | K, ALU | SUB | X, ALU | MUL | K, ALU | MUL | X,
    ALU | DIV | K, ALU | DIV | X, ALU | AND | K, ALU | AND | X, ALU | OR | K, ALU | OR | X,
    ALU | XOR | K, ALU | XOR | X, ALU | LSH | K, ALU | LSH | X, ALU | RSH | K, ALU | RSH | X,
    ALU | NEG, LD | IMM, LDX | IMM, MISC | TAX, MISC | TXA, LD | MEM, LDX | MEM, ST, STX,
    JMP | JA, JMP | JEQ | K, JMP | JEQ | X, JMP | JGE | K, JMP | JGE | X, JMP | JGT | K,
    JMP | JGT | X, JMP | JSET | K, JMP | JSET | X})
CONDITIONAL = frozenset(c for c in CLASSIC_CODES if c & 0x07 == JMP and c != JMP | JA)


class BadFilter(ValueError):
    """Not a program the kernel would accept as a seccomp filter: the message says which of
    its rules it breaks, and where."""


def parse(data):
    """[(code, jt, jf, k), ...] from raw struct sock_filter bytes: bpf_check_basics_ok()
    (1 to BPF_MAXINSNS instructions) and whole 8-byte instructions.  Not yet checked: load()
    is parse() and check()."""
    if not data or len(data) % 8 or len(data) // 8 > BPF_MAXINSNS:
        raise BadFilter(f"{len(data)} bytes: not a whole number of 8-byte instructions, 1 to "
                        f"{BPF_MAXINSNS} of them (the kernel's bpf_check_basics_ok: BPF_MAXINSNS)")
    return [struct.unpack_from("<HBBI", data, i) for i in range(0, len(data), 8)]


def check(prog):
    """Raise BadFilter unless the kernel takes prog as a seccomp filter: bpf_check_classic()
    and then seccomp_check_filter(), in the kernel's order, each refusal named."""
    n = len(prog)
    if not 1 <= n <= BPF_MAXINSNS:
        raise BadFilter(f"{n} instructions: the kernel takes 1 to {BPF_MAXINSNS} "
                        "(bpf_check_basics_ok)")
    for pc, (code, jt, jf, k) in enumerate(prog):
        at = f"instruction {pc} (code {code:#06x})"
        if code not in CLASSIC_CODES:
            raise BadFilter(f"{at}: not a classic BPF opcode (bpf_check_classic: "
                            "chk_code_allowed)")
        if code in (ALU | DIV | K, ALU | MOD | K) and k == 0:
            raise BadFilter(f"{at}: a division by the constant 0 (bpf_check_classic)")
        if code in (ALU | LSH | K, ALU | RSH | K) and k >= 32:
            raise BadFilter(f"{at}: a shift by {k}, 32 or more (bpf_check_classic)")
        if code in (LD | MEM, LDX | MEM, ST, STX) and k >= MEMWORDS:
            raise BadFilter(f"{at}: scratch word {k}, of {MEMWORDS} (bpf_check_classic)")
        if code == JMP | JA and k >= n - pc - 1:
            raise BadFilter(f"{at}: a jump of {k} past the end of the program "
                            "(bpf_check_classic)")
        if code in CONDITIONAL and (pc + jt + 1 >= n or pc + jf + 1 >= n):
            raise BadFilter(f"{at}: a conditional jump ({jt}, {jf}) past the end of the "
                            "program (bpf_check_classic)")
        if code in (LD | W | ABS, LD | H | ABS, LD | B | ABS) and k >= SKF_AD_OFF:
            raise BadFilter(f"{at}: a socket filter's ancillary load, which seccomp has no "
                            "data for (bpf_check_classic, then seccomp_check_filter)")
    if prog[-1][0] not in (RET | K, RET | RET_A):
        raise BadFilter(f"instruction {n - 1}: the program does not end with a return "
                        "(bpf_check_classic: the last instruction must be a RET)")
    _check_load_and_stores(prog)
    for pc, (code, _, _, k) in enumerate(prog):
        if code not in SECCOMP_CODES:
            raise BadFilter(f"instruction {pc} (code {code:#06x}): an opcode seccomp does not "
                            "take (seccomp_check_filter)")
        if code == LD | W | ABS and (k >= SECCOMP_DATA_SIZE or k & 3):
            raise BadFilter(f"instruction {pc}: a load at offset {k}, outside struct "
                            "seccomp_data or not 32-bit aligned (seccomp_check_filter)")


def _check_load_and_stores(prog):
    """check_load_and_stores(): no scratch word is read before every path to the read has
    stored it."""
    masks = [0xFFFF] * len(prog)
    valid = 0
    for pc, (code, jt, jf, k) in enumerate(prog):
        valid &= masks[pc]
        if code in (ST, STX):
            valid |= 1 << k
        elif code in (LD | MEM, LDX | MEM):
            if not valid & (1 << k):
                raise BadFilter(f"instruction {pc}: reads scratch word {k}, which a path to it "
                                "never stored (bpf_check_classic: check_load_and_stores)")
        elif code == JMP | JA:
            masks[pc + 1 + k] &= valid
            valid = 0xFFFF
        elif code in CONDITIONAL:
            masks[pc + 1 + jt] &= valid
            masks[pc + 1 + jf] &= valid
            valid = 0xFFFF


def load(data):
    """The instructions of raw filter bytes, checked as the kernel checks them (parse, check):
    BadFilter says why the kernel would refuse them."""
    prog = parse(data)
    check(prog)
    return prog


def converted_len(prog):
    """The instructions of a checked filter once the kernel has converted it to eBPF, which
    its length limit counts (bpf_prog->len after bpf_convert_filter, net/core/filter.c):
    the prologue's 3 (A and X cleared, the context kept); per instruction 1, but a RET of a
    constant 2 (the move and the exit), a division by X 5 (its check of X for zero first),
    a conditional jump 2 when neither of its ways is the next instruction (a jump and a
    JA; a JEQ, JGT or JGE whose true way is the next one is turned round instead), and 1
    more for a compare with a constant whose top bit is set (moved into a register first,
    as eBPF's immediates are signed).  Constant blinding (net.core.bpf_jit_harden 2) would
    add more; it is off by default, and at 1 it spares root."""
    n = 3
    for code, jt, jf, k in prog:
        if code == ALU | DIV | X:
            n += 5
        elif code in CONDITIONAL:
            n += 1 if code & X == 0 and k & 0x80000000 else 0
            if jf == 0 or (jt == 0 and code & 0xF0 in (JEQ, JGT, JGE)):
                n += 1
            else:
                n += 2
        elif code == RET | K:
            n += 2
        else:
            n += 1
    return n


def stack_refused(progs):
    """seccomp_attach_filter()'s limit on a stack of checked filters installed in this order
    (oldest first): the index of the first filter the kernel refuses (ENOMEM), or None.  Each
    counts its converted length (converted_len), and each below the new one 4 more."""
    below = 0
    for i, p in enumerate(progs):
        n = converted_len(p)
        if n + below > MAX_INSNS_PER_PATH:
            return i
        below += n + STACK_PENALTY
    return None


def data_words(nr, arch, args=(), ip=0):
    """struct seccomp_data as {offset: 32-bit word} (little-endian halves of the u64s)."""
    words = {0: nr & M32, 4: arch & M32, 8: ip & M32, 12: (ip >> 32) & M32}
    a = list(args) + [0] * (6 - len(args))
    for i, v in enumerate(a[:6]):
        words[16 + 8 * i] = v & M32
        words[20 + 8 * i] = (v >> 32) & M32
    return words


def _field(k):
    return "nr" if k == 0 else "arch" if k == 4 else "ip" if k < 16 else f"args[{(k - 16) // 8}]"


_ALU = {ADD: lambda a, s: a + s, SUB: lambda a, s: a - s, MUL: lambda a, s: a * s,
        DIV: lambda a, s: a // s, AND: lambda a, s: a & s, OR: lambda a, s: a | s,
        XOR: lambda a, s: a ^ s, LSH: lambda a, s: a << (s & 31), RSH: lambda a, s: a >> (s & 31)}
_JMP = {JEQ: lambda a, s: a == s, JGT: lambda a, s: a > s, JGE: lambda a, s: a >= s,
        JSET: lambda a, s: bool(a & s)}


def run(prog, nr, arch, args=(), ip=0):
    """(return value, instructions executed, fields read) of one checked filter on one call's
    seccomp_data; fields read are 'nr', 'arch', 'ip', 'args[i]' (either half of an argument
    is its argument).  One switch over whole opcodes, each branch the kernel's: a code that
    check() would have refused is a fault (BadFilter), never a guess."""
    d = data_words(nr, arch, args, ip)
    a = x = 0
    mem = [0] * MEMWORDS
    pc, n, read = 0, 0, set()
    while pc < len(prog):
        code, jt, jf, k = prog[pc]
        n += 1
        pc += 1
        if code == LD | W | ABS:            # seccomp_check_filter: LDX|W|ABS on seccomp_data
            if k >= SECCOMP_DATA_SIZE or k & 3:
                raise BadFilter(f"instruction {pc - 1}: a load at offset {k}, outside "
                                "seccomp_data (seccomp_check_filter)")
            read.add(_field(k))
            a = d[k]
        elif code == LD | W | LEN:          # seccomp_check_filter: the size of seccomp_data
            a = SECCOMP_DATA_SIZE
        elif code == LDX | W | LEN:
            x = SECCOMP_DATA_SIZE
        elif code == LD | IMM:
            a = k
        elif code == LDX | IMM:
            x = k
        elif code == LD | MEM:
            a = mem[k]
        elif code == LDX | MEM:
            x = mem[k]
        elif code == ST:
            mem[k] = a
        elif code == STX:
            mem[k] = x
        elif code == MISC | TAX:
            x = a
        elif code == MISC | TXA:
            a = x
        elif code == ALU | NEG:
            a = (-a) & M32
        elif code & 0x07 == ALU and code & 0xF0 in _ALU and code in SECCOMP_CODES:
            src = x if code & X else k
            if code & 0xF0 == DIV and src == 0:
                # The converted program's division by a zero X returns 0 from the whole
                # program (bpf_convert_filter), which seccomp reads as KILL_THREAD.
                return 0, n, read
            a = _ALU[code & 0xF0](a, src) & M32
        elif code == JMP | JA:
            pc += k
        elif code in CONDITIONAL:
            pc += jt if _JMP[code & 0xF0](a, x if code & X else k) else jf
        elif code == RET | K:
            return k & M32, n, read
        elif code == RET | RET_A:
            return a & M32, n, read
        else:
            raise BadFilter(f"instruction {pc - 1}: code {code:#06x} is not one seccomp takes "
                            "(seccomp_check_filter)")
    raise BadFilter("the program runs off its end without returning (bpf_check_classic: the "
                    "last instruction must be a RET)")


def _signed(v):
    return v - (1 << 32) if v & 0x80000000 else v


def run_stack(progs, nr, arch, args=(), ip=0):
    """The kernel's seccomp_run_filters over a stack (newest first, as the kernel walks
    them; the order changes no answer): every filter runs, the lowest action wins (its
    data with it).  (return value, instructions executed in all, fields read)."""
    ret, total, read = RET_ALLOW, 0, set()
    for p in progs:
        r, n, rd = run(p, nr, arch, args, ip)
        total += n
        read |= rd
        # ACTION_ONLY compares as signed 32-bit: KILL_PROCESS (0x80000000) is the lowest.
        if _signed(r & RET_ACTION_FULL) < _signed(ret & RET_ACTION_FULL):
            ret = r
    return ret, total, read


def const_allow(prog, nr, arch):
    """The kernel's seccomp_is_const_allow(): True when the filter reaches RET_ALLOW for
    this number and architecture using only them.  Its own switch: every other instruction,
    a load of anything but nr and arch among them, makes the call not constant."""
    reg, pc = 0, 0
    while pc < len(prog):
        code, jt, jf, k = prog[pc]
        if code == LD | W | ABS:
            if k == 0:
                reg = nr & M32
            elif k == 4:
                reg = arch & M32
            else:
                return False                # can't optimize (non-constant value load)
        elif code == RET | K:
            return k == RET_ALLOW           # reached return with constant values only
        elif code == JMP | JA:
            pc += k
        elif code in (JMP | JEQ | K, JMP | JGE | K, JMP | JGT | K, JMP | JSET | K):
            pc += jt if _JMP[code & 0xF0](reg, k) else jf
        elif code == ALU | AND | K:
            reg &= k
        else:
            return False                    # can't optimize (unknown insn)
        pc += 1
    return False                            # ran off the end of the filter


def cached(progs, nr, arch, sizes):
    """seccomp_cache_check_allow(): whether the kernel allows this call from the stack's
    cache without running a filter.  sizes: {arch: its table's size} for the native and the
    compat architecture (machine.sysnr.table_sizes); None where they are not known, and
    then the answer is None too.  A number below its table's size is in the bitmap whether
    or not the table assigned it; at or above it (the null call's 0x7fff, an x32 call's
    bit 30) it never is; an architecture without a bitmap is never cached."""
    if sizes is None or sizes.get(arch) is None:
        return None if arch in (NATIVE, COMPAT) else False
    if arch not in (NATIVE, COMPAT):
        return False
    # `int syscall_nr = sd->nr`: the number as the kernel's int sees it
    nr = nr - (1 << 32) if nr & 0x80000000 else nr
    if not 0 <= nr < sizes[arch]:
        return False
    return all(const_allow(p, nr, arch) for p in progs)
