"""A seccomp filter run in user space, as the kernel runs it: what it answers, how many
instructions one call executes, and whether the kernel's action cache lets the call skip it.

The programs are classic BPF, the bytes `syscost --seccomp` loads (machine.seccomp exports them
from libseccomp).  run() interprets the instruction set seccomp accepts
(kernel/seccomp.c, seccomp_check_filter) on one call's struct seccomp_data, as libseccomp's
simulator (tools/scmp_bpf_sim.c) does, counting the instructions executed.  const_allow() is
the kernel's seccomp_is_const_allow() (Linux 5.11): at attach time the kernel emulates each
filter for every call number of the native and the compat architecture with only the number
and the architecture known; a call for which every filter reaches SECCOMP_RET_ALLOW without
reading anything else is set in the filter's bitmap, and seccomp_cache_check_allow() then
allows it without running any filter.  A call whose path reads an argument or the
instruction pointer, or uses any other instruction, is never cached.

struct seccomp_data (include/uapi/linux/seccomp.h): int nr at 0, u32 arch at 4, u64
instruction_pointer at 8, u64 args[6] at 16; the loads are 32-bit words of it.
"""
import struct

# BPF opcode fields (include/uapi/linux/bpf_common.h).
LD, LDX, ST, STX, ALU, JMP, RET, MISC = 0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07
W, ABS, IMM, MEM, LEN = 0x00, 0x20, 0x00, 0x60, 0x80
ADD, SUB, MUL, DIV, OR, AND, LSH, RSH, NEG, MOD, XOR = (
    0x00, 0x10, 0x20, 0x30, 0x40, 0x50, 0x60, 0x70, 0x80, 0x90, 0xA0)
JA, JEQ, JGT, JGE, JSET = 0x00, 0x10, 0x20, 0x30, 0x40
K, X = 0x00, 0x08
TAX, TXA = 0x00, 0x80
SECCOMP_DATA_SIZE = 64
MEMWORDS = 16
RET_ALLOW = 0x7FFF0000
RET_ACTION_FULL = 0xFFFF0000
M32 = 0xFFFFFFFF


class BadFilter(ValueError):
    """Not a program the kernel would accept as a seccomp filter."""


def parse(data):
    """[(code, jt, jf, k), ...] from raw struct sock_filter bytes."""
    if not data or len(data) % 8 or len(data) // 8 > 4096:
        raise BadFilter(f"{len(data)} bytes: not a whole number of 8-byte instructions, 1 to "
                        "4096 of them (BPF_MAXINSNS)")
    return [struct.unpack_from("<HBBI", data, i) for i in range(0, len(data), 8)]


def data_words(nr, arch, args=(), ip=0):
    """struct seccomp_data as {offset: 32-bit word} (little-endian halves of the u64s)."""
    words = {0: nr & M32, 4: arch & M32, 8: ip & M32, 12: (ip >> 32) & M32}
    a = list(args) + [0] * (6 - len(args))
    for i, v in enumerate(a[:6]):
        words[16 + 8 * i] = v & M32
        words[20 + 8 * i] = (v >> 32) & M32
    return words


def run(prog, nr, arch, args=(), ip=0):
    """(return value, instructions executed, fields read) of one filter on one call's
    seccomp_data; fields read are 'nr', 'arch', 'ip', 'args[i]' (the half of an argument
    is its argument).  BadFilter for what seccomp_check_filter refuses or a run that falls
    off the end."""
    d = data_words(nr, arch, args, ip)
    a = x = 0
    mem = [0] * MEMWORDS
    pc, n, read = 0, 0, set()
    while pc < len(prog):
        code, jt, jf, k = prog[pc]
        n += 1
        cls = code & 0x07
        if cls in (LD, LDX):
            mode = code & 0xE0
            if mode == ABS and (code & 0x18) == W and cls == LD:
                if k >= SECCOMP_DATA_SIZE or k & 3:
                    raise BadFilter(f"instruction {pc}: a load at offset {k}, outside "
                                    "seccomp_data or unaligned")
                read.add("nr" if k == 0 else "arch" if k == 4 else "ip" if k < 16
                         else f"args[{(k - 16) // 8}]")
                v = d[k]
            elif mode == LEN:
                v = SECCOMP_DATA_SIZE
            elif mode == IMM:
                v = k
            elif mode == MEM and k < MEMWORDS:
                v = mem[k]
            else:
                raise BadFilter(f"instruction {pc}: code {code:#06x} is not one seccomp takes")
            if cls == LD:
                a = v
            else:
                x = v
        elif cls in (ST, STX):
            if k >= MEMWORDS:
                raise BadFilter(f"instruction {pc}: scratch word {k} of {MEMWORDS}")
            mem[k] = a if cls == ST else x
        elif cls == ALU:
            op, src = code & 0xF0, (x if code & X else k)
            if op == NEG:
                a = (-a) & M32
            elif op in (DIV, MOD) and src == 0:
                return 0, n, read   # the kernel's classic BPF returns 0 (kill) here
            else:
                a = {ADD: a + src, SUB: a - src, MUL: a * src, DIV: a // max(src, 1),
                     MOD: a % max(src, 1), OR: a | src, AND: a & src, XOR: a ^ src,
                     LSH: a << (src & 31), RSH: a >> (src & 31)}.get(op)
                if a is None:
                    raise BadFilter(f"instruction {pc}: ALU code {code:#06x}")
                a &= M32
        elif cls == JMP:
            op, src = code & 0xF0, (x if code & X else k)
            if op == JA:
                pc += 1 + k
                continue
            taken = {JEQ: a == src, JGT: a > src, JGE: a >= src, JSET: bool(a & src)}.get(op)
            if taken is None:
                raise BadFilter(f"instruction {pc}: jump code {code:#06x}")
            pc += 1 + (jt if taken else jf)
            continue
        elif cls == RET:
            return ((a if (code & 0x18) == 0x10 else k) & M32), n, read
        elif cls == MISC:
            if code & 0xF8 == TXA:
                a = x
            else:
                x = a
        pc += 1
    raise BadFilter("the program runs off its end without returning")


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


def _signed(v):
    return v - (1 << 32) if v & 0x80000000 else v


def const_allow(prog, nr, arch):
    """The kernel's seccomp_is_const_allow(): True when the filter reaches RET_ALLOW for
    this number and architecture using only them."""
    reg, pc = 0, 0
    while pc < len(prog):
        code, jt, jf, k = prog[pc]
        if code == LD | W | ABS:
            if k == 0:
                reg = nr & M32
            elif k == 4:
                reg = arch & M32
            else:
                return False
        elif code == RET | K:
            return k == RET_ALLOW
        elif code == JMP | JA:
            pc += k
        elif code in (JMP | JEQ | K, JMP | JGE | K, JMP | JGT | K, JMP | JSET | K):
            op = code & 0xF0
            res = {JEQ: reg == k, JGE: reg >= k, JGT: reg > k, JSET: bool(reg & k)}[op]
            pc += jt if res else jf
        elif code == ALU | AND | K:
            reg &= k
        else:
            return False
        pc += 1
    return False


def cached(progs, nr, arch, table_has_nr=True):
    """Whether the kernel's cache allows this call without running the stack: every
    filter const-allows it, and the number is inside the architecture's table (the bitmap
    covers only numbers below the table's size: a number no table has is never cached)."""
    return table_has_nr and nr >= 0 and all(const_allow(p, nr, arch) for p in progs)
