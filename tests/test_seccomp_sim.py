"""The seccomp filter run in user space takes, answers and caches as the kernel does.

tw ab --wall explains each cell's added cost by running the filter on the call's seccomp_data:
whether the kernel would take the filter at all, what it answers, how many instructions it
executes, whether the kernel's action cache lets the call skip it.  This breaks if a filter the
kernel refuses is taken (tw explain then answers for it and tw ab meets EINVAL after the
output folder is made): a check of bpf_check_classic() or seccomp_check_filter() missing or
wrong, each named below with a filter that only it refuses; if the interpreter misreads an
opcode, a jump offset or a load; if the cache rule drifts from the kernel's
(seccomp_cache_check_allow: a number below its architecture's table size is in the bitmap
whether or not a call has it, one past it never is, x32 never, another architecture never);
if a stack's answers are combined other than lowest-action-wins, or its length limit
(MAX_INSNS_PER_PATH, 4 instructions of penalty a filter) is miscounted.  The kernel's own
answers for the same programs are checked live in test_seccomp_live.py."""
import json
import struct

import pytest

from conftest import ROOT
from twtools.analyse import walls
from twtools.machine import seccomp, seccompprofile, seccompruntime, seccompsim

X64, I386 = seccomp.AUDIT_ARCH_X86_64, seccomp.AUDIT_ARCH_I386
ALLOW, EPERM = 0x7FFF0000, 0x00050001
# The tables of Linux 6.18 (its newest call, file_setattr, is 469).
SIZES = {X64: 470, I386: 470}


def ins(code, k=0, jt=0, jf=0):
    return (code, jt, jf, k)


def raw(*prog):
    return b"".join(struct.pack("<HBBI", c, jt, jf, k) for c, jt, jf, k in prog)


LD_NR, LD_ARCH, LD_ARG0 = ins(0x20, 0), ins(0x20, 4), ins(0x20, 16)
RET_ALLOW = ins(0x06, ALLOW)


def test_one_instruction_allow_all():
    prog = seccompsim.load(seccomp.ALLOW_ALL)
    assert prog == [(0x06, 0, 0, ALLOW)]
    assert seccompsim.run(prog, 110, X64) == (ALLOW, 1, set())
    assert seccompsim.const_allow(prog, 110, X64)


def test_jumps_count_and_answer():
    # if nr == 110: errno(EPERM) else allow
    prog = [LD_NR, ins(0x15, 110, 0, 1), ins(0x06, EPERM), RET_ALLOW]
    seccompsim.check(prog)
    assert seccompsim.run(prog, 110, X64) == (EPERM, 3, {"nr"})
    assert seccompsim.run(prog, 39, X64) == (ALLOW, 3, {"nr"})
    assert not seccompsim.const_allow(prog, 110, X64)
    assert seccompsim.const_allow(prog, 39, X64)


def test_every_alu_and_scratch_word_as_the_kernel_computes():
    # A = nr; M[3] = A; A = A * 3 + 1; X = A; A = M[3]; A = A ^ X; A = -A; ret A
    prog = [LD_NR, ins(0x02, 3), ins(0x24, 3), ins(0x04, 1), ins(0x07), ins(0x60, 3),
            ins(0xAC), ins(0x84), ins(0x16)]
    seccompsim.check(prog)
    nr = 7
    want = (-(nr ^ (nr * 3 + 1))) & 0xFFFFFFFF
    assert seccompsim.run(prog, nr, X64)[0] == want
    # a division by a zero X returns 0 from the whole program: KILL_THREAD
    div = [ins(0x01, 0), LD_NR, ins(0x3C), RET_ALLOW]
    seccompsim.check(div)
    assert seccompsim.run(div, 5, X64) == (0, 3, {"nr"})


def test_an_argument_load_keeps_a_call_out_of_the_cache():
    # allow getppid only when its first argument is 0
    prog = [LD_NR, ins(0x15, 110, 0, 4), LD_ARG0, ins(0x15, 0, 0, 1), RET_ALLOW,
            ins(0x06, EPERM), RET_ALLOW]
    ret, n, read = seccompsim.run(prog, 110, X64, args=(0,))
    assert (ret, n, read) == (ALLOW, 5, {"nr", "args[0]"})
    assert seccompsim.run(prog, 110, X64, args=(7,))[0] == EPERM
    assert not seccompsim.const_allow(prog, 110, X64)       # allowed, yet not constant
    assert seccompsim.const_allow(prog, 39, X64)


def test_the_cache_rule_is_the_kernels_table_size_not_a_name():
    allow = [RET_ALLOW]
    # below the table's size: in the bitmap, whether or not any call has the number
    assert seccompsim.cached([allow], 110, X64, SIZES)
    assert seccompsim.cached([allow], 400, X64, SIZES)          # x86-64 has no call 400
    assert seccompsim.cached([allow], 222, I386, SIZES)         # nor i386 222
    assert seccompsim.cached([allow], 469, X64, SIZES)
    # at or past it: never
    assert not seccompsim.cached([allow], 470, X64, SIZES)
    assert not seccompsim.cached([allow], 0x7FFF, I386, SIZES)
    # an x32 call is native by arch, past the table by its bit 30: never
    assert not seccompsim.cached([allow], 110 | seccompsim.X32_SYSCALL_BIT, X64, SIZES)
    # a negative number (the kernel's int) never
    assert not seccompsim.cached([allow], 0xFFFFFFFF, X64, SIZES)
    # an architecture with no bitmap (not native, not compat) never
    assert not seccompsim.cached([allow], 110, 0xC00000B7, SIZES)
    # the table sizes unknown: the answer is unknown, not a guess
    assert seccompsim.cached([allow], 110, X64, None) is None
    # ALU AND with K and JSET are in seccomp_is_const_allow; a JEQ against X is not
    prog_and = [LD_NR, ins(0x54, 0xFF), ins(0x15, 110, 0, 1), RET_ALLOW, ins(0x06, 0)]
    assert seccompsim.cached([prog_and], 110 + 0x100, X64, SIZES)
    prog_x = [LD_NR, ins(0x01, 110), ins(0x1D, 0, 0, 1), RET_ALLOW, ins(0x06, 0)]
    assert seccompsim.run(prog_x, 110, X64)[0] == ALLOW
    assert not seccompsim.const_allow(prog_x, 110, X64)     # LDX: an unknown instruction


def test_a_stack_runs_every_filter_and_the_lowest_action_wins():
    allow = [RET_ALLOW]
    deny = [ins(0x06, EPERM)]
    kill = [ins(0x06, 0x80000000)]
    assert seccompsim.run_stack([allow, allow, allow], 1, X64) == (ALLOW, 3, set())
    assert seccompsim.run_stack([allow, deny], 1, X64)[0] == EPERM
    # KILL_PROCESS is 0x80000000: the lowest as a signed action, below ERRNO
    assert seccompsim.run_stack([deny, kill, allow], 1, X64)[0] == 0x80000000
    assert not seccompsim.cached([allow, deny], 1, X64, SIZES)
    assert seccompsim.cached([allow, allow], 1, X64, SIZES)


def test_a_stacks_length_limit_is_seccomp_attach_filters_on_the_converted_program():
    # the length the limit counts is the eBPF program's (bpf_convert_filter): 3 of prologue,
    # 2 for a RET of a constant, 2 for a jump whose both ways leave the next instruction
    assert seccompsim.converted_len([RET_ALLOW]) == 5
    assert seccompsim.converted_len([LD_NR, ins(0x15, 1, 0, 1), RET_ALLOW, RET_ALLOW]) == 3 + 1 + 1 + 4
    assert seccompsim.converted_len([LD_NR, ins(0x15, 1, 1, 1), RET_ALLOW, RET_ALLOW]) == 3 + 1 + 2 + 4
    assert seccompsim.converted_len([LD_NR, ins(0x45, 1, 0, 1), RET_ALLOW, RET_ALLOW]) == 3 + 1 + 2 + 4
    assert seccompsim.converted_len([LD_NR, ins(0x15, 0xC000003E, 0, 1), RET_ALLOW,
                                     RET_ALLOW]) == 3 + 1 + 2 + 4
    assert seccompsim.converted_len([ins(0x01, 1), LD_NR, ins(0x3C), RET_ALLOW]) == 3 + 1 + 1 + 5 + 2
    # 32768 a path, each filter below the new one counting 4 more
    big = [LD_NR] * 4090 + [RET_ALLOW]                  # 4090 + 2 + 3 = 4095 converted
    assert seccompsim.stack_refused([big] * 7) is None   # 4095 + 6 * 4099 = 28689
    assert seccompsim.stack_refused([big] * 8) == 7      # 4095 + 7 * 4099 = 32788
    one = [RET_ALLOW]
    assert seccompsim.stack_refused([one] * 3600) is None  # 5 + 3599 * 9 = 32396
    assert seccompsim.stack_refused([one] * 3700) == 3641  # 5 + 3641 * 9 = 32774


# Each filter broken in exactly one way, and the kernel rule it breaks.
BROKEN = {
    "not whole instructions": (b"\x06\x00\x00", "bpf_check_basics_ok"),
    "empty": (b"", "bpf_check_basics_ok"),
    "more than BPF_MAXINSNS": (raw(*([LD_NR] * 4096 + [RET_ALLOW])), "bpf_check_basics_ok"),
    "opcode 0xffff": (raw((0xFFFF, 0, 0, 0), RET_ALLOW), "chk_code_allowed"),
    "a jump out of range": (raw(LD_NR, (0x15, 5, 0, 1), RET_ALLOW), "conditional jump"),
    "an unconditional jump out of range": (raw((0x05, 0, 0, 3), RET_ALLOW), "a jump of 3"),
    "a load outside seccomp_data": (raw((0x20, 0, 0, 64), RET_ALLOW), "seccomp_check_filter"),
    "an unaligned load": (raw((0x20, 0, 0, 6), RET_ALLOW), "seccomp_check_filter"),
    "no return at the end": (raw(RET_ALLOW, LD_NR), "must be a RET"),
    "a scratch word read before it is stored": (raw((0x60, 0, 0, 2), RET_ALLOW),
                                                "check_load_and_stores"),
    "a scratch word stored on one path only": (raw(LD_NR, (0x15, 0, 1, 1), (0x02, 0, 0, 4),
                                                   (0x61, 0, 0, 4), RET_ALLOW),
                                               "check_load_and_stores"),
    "a modulo (classic BPF has it, seccomp does not)": (raw(LD_NR, (0x94, 0, 0, 3), RET_ALLOW),
                                                        "seccomp_check_filter"),
    "a byte load (classic BPF has it, seccomp does not)": (raw((0x30, 0, 0, 0), RET_ALLOW),
                                                           "seccomp_check_filter"),
    "a division by the constant 0": (raw(LD_NR, (0x34, 0, 0, 0), RET_ALLOW), "division"),
    "a shift by 32": (raw(LD_NR, (0x64, 0, 0, 32), RET_ALLOW), "a shift by 32"),
    "a scratch word past the sixteen": (raw(LD_NR, (0x02, 0, 0, 16), RET_ALLOW), "scratch word 16"),
    "an ancillary load": (raw((0x20, 0, 0, 0xFFFFF000), RET_ALLOW), "ancillary"),
}


@pytest.mark.parametrize("what", sorted(BROKEN))
def test_what_the_kernel_refuses_is_refused_with_its_rule(what):
    data, rule = BROKEN[what]
    with pytest.raises(seccompsim.BadFilter) as e:
        seccompsim.load(data)
    assert rule in str(e.value)


def test_a_store_on_every_path_is_accepted():
    ok = raw(LD_NR, (0x02, 0, 0, 4), (0x15, 0, 1, 1), (0x61, 0, 0, 4), RET_ALLOW)
    prog = seccompsim.load(ok)
    assert seccompsim.run(prog, 1, X64)[0] == ALLOW


def _compiled(name, runtime="libseccomp"):
    spec, _ = seccompprofile.read(json.loads((ROOT / "walls" / "profiles" /
                                              f"{name}.json").read_text()))
    f = seccompruntime.compile(spec, runtime)
    return seccompsim.load(f.program), f


def test_the_container_profile_allows_by_name_so_the_cache_holds_its_calls():
    prog, f = _compiled("container")
    assert f.notes == []       # every name is known to Debian 12's libseccomp
    for name in ("getppid", "write"):
        for arch in (X64, I386):
            nr = seccomp.number(name, arch)
            assert seccompsim.run(prog, nr, arch, args=(3, 0, 1))[0] == ALLOW
            assert seccompsim.cached([prog], nr, arch, SIZES)
    # what it leaves out: the default answer, EPERM, for the null call's invalid number too
    assert seccompsim.run(prog, seccomp.number("mount", X64), X64)[0] == EPERM
    assert seccompsim.run(prog, 0x7FFF, X64)[0] == EPERM
    # personality is allowed only for some personas: an argument rule, never cached
    nr = seccomp.number("personality", X64)
    assert seccompsim.run(prog, nr, X64, args=(0,))[0] == ALLOW
    assert seccompsim.run(prog, nr, X64, args=(0x40000,))[0] == EPERM
    assert not seccompsim.cached([prog], nr, X64, SIZES)


def test_the_args_profile_inspects_getppid_and_write_so_no_cache_holds_them():
    prog, _ = _compiled("args")
    for name in ("getppid", "write"):
        for arch in (X64, I386):
            nr = seccomp.number(name, arch)
            ret, n, read = seccompsim.run(prog, nr, arch, args=(0, 0, 1))
            assert ret == ALLOW and "args[0]" in read and n > 10
            assert not seccompsim.cached([prog], nr, arch, SIZES)
    assert seccompsim.run(prog, seccomp.number("getppid", X64), X64, args=(2**64 - 16,))[0] == \
        0x00050016
    assert seccompsim.run(prog, seccomp.number("write", X64), X64, args=(1 << 21,))[0] == \
        0x00050009


def test_the_hole_is_found_in_a_numbers_only_filter_and_not_in_libseccomps():
    numbers_only = [LD_NR, ins(0x15, 110, 0, 1), ins(0x06, EPERM), RET_ALLOW]
    h = walls.arch_hole([numbers_only])
    assert h["denied"] == 1
    assert [(x["name"], x["nr_i386"]) for x in h["holes"]] == [("getppid", 64)]
    checked = [LD_ARCH, ins(0x15, X64, 1, 0), ins(0x06, 0x80000000), LD_NR,
               ins(0x15, 110, 0, 1), ins(0x06, EPERM), RET_ALLOW]
    assert walls.arch_hole([checked])["holes"] == []
    prog, _ = _compiled("container")
    h = walls.arch_hole([prog])
    assert h["denied"] > 50 and h["holes"] == []
