"""The seccomp filter run in user space answers as the kernel does.

tw ab --wall explains each cell's added cost by running the filter on the call's
seccomp_data: what it answers, how many instructions it executes, whether the kernel's
action cache lets the call skip it.  This breaks if the interpreter misreads an opcode, a
jump offset or a load (the count of instructions, or the answer, is then wrong), if the cache
rule drifts from the kernel's seccomp_is_const_allow (a call said cached that runs the filter,
or the reverse), if a stack's answers are combined other than lowest-action-wins, or if
libseccomp's compile of the project's profiles stops matching what the docs say of them.
The kernel's own answers for the same programs are checked live in test_seccomp_live.py."""
import json
import struct

import pytest

from conftest import ROOT
from twtools.analyse import walls
from twtools.machine import seccomp, seccompsim

X64, I386 = seccomp.AUDIT_ARCH_X86_64, seccomp.AUDIT_ARCH_I386
ALLOW, EPERM = 0x7FFF0000, 0x00050001


def ins(code, k=0, jt=0, jf=0):
    return (code, jt, jf, k)


LD_NR, LD_ARCH, LD_ARG0 = ins(0x20, 0), ins(0x20, 4), ins(0x20, 16)


def test_one_instruction_allow_all():
    prog = seccompsim.parse(seccomp.ALLOW_ALL)
    assert prog == [(0x06, 0, 0, ALLOW)]
    assert seccompsim.run(prog, 110, X64) == (ALLOW, 1, set())
    assert seccompsim.const_allow(prog, 110, X64)


def test_jumps_count_and_answer():
    # if nr == 110: errno(EPERM) else allow
    prog = [LD_NR, ins(0x15, 110, 0, 1), ins(0x06, EPERM), ins(0x06, ALLOW)]
    assert seccompsim.run(prog, 110, X64) == (EPERM, 3, {"nr"})
    assert seccompsim.run(prog, 39, X64) == (ALLOW, 3, {"nr"})
    assert not seccompsim.const_allow(prog, 110, X64)
    assert seccompsim.const_allow(prog, 39, X64)


def test_an_argument_load_keeps_a_call_out_of_the_cache():
    # allow getppid only when its first argument is 0
    prog = [LD_NR, ins(0x15, 110, 0, 4), LD_ARG0, ins(0x15, 0, 0, 1), ins(0x06, ALLOW),
            ins(0x06, EPERM), ins(0x06, ALLOW)]
    ret, n, read = seccompsim.run(prog, 110, X64, args=(0,))
    assert (ret, n, read) == (ALLOW, 5, {"nr", "args[0]"})
    assert seccompsim.run(prog, 110, X64, args=(7,))[0] == EPERM
    assert not seccompsim.const_allow(prog, 110, X64)       # allowed, yet not constant
    # any number other than 110 never reaches the load: constant, cached
    assert seccompsim.const_allow(prog, 39, X64)


def test_the_cache_rule_takes_only_what_the_kernel_takes():
    # ALU AND with K and JSET are in seccomp_is_const_allow; a JEQ against X is not
    prog_and = [LD_NR, ins(0x54, 0xFF), ins(0x15, 110, 0, 1), ins(0x06, ALLOW), ins(0x06, 0)]
    assert seccompsim.const_allow(prog_and, 110 + 0x100, X64)
    prog_x = [LD_NR, ins(0x01, 110), ins(0x1D, 0, 0, 1), ins(0x06, ALLOW), ins(0x06, 0)]
    assert seccompsim.run(prog_x, 110, X64)[0] == ALLOW
    assert not seccompsim.const_allow(prog_x, 110, X64)     # LDX: an unknown instruction
    # a number beyond every table is never cached, whatever the filter says
    assert not seccompsim.cached([prog_and], 0x7FFF, X64, table_has_nr=False)


def test_a_stack_runs_every_filter_and_the_lowest_action_wins():
    allow = [ins(0x06, ALLOW)]
    deny = [ins(0x06, EPERM)]
    kill = [ins(0x06, 0x80000000)]
    assert seccompsim.run_stack([allow, allow, allow], 1, X64) == (ALLOW, 3, set())
    assert seccompsim.run_stack([allow, deny], 1, X64)[0] == EPERM
    # KILL_PROCESS is 0x80000000: the lowest as a signed action, below ERRNO
    assert seccompsim.run_stack([deny, kill, allow], 1, X64)[0] == 0x80000000
    assert not seccompsim.cached([allow, deny], 1, X64)
    assert seccompsim.cached([allow, allow], 1, X64)


@pytest.mark.parametrize("bad", [b"", b"\x06\x00\x00\x00", struct.pack("<HBBI", 0x20, 0, 0, 6)
                                 + struct.pack("<HBBI", 0x06, 0, 0, ALLOW),
                                 struct.pack("<HBBI", 0x15, 0, 0, 1)])
def test_what_the_kernel_refuses_is_refused(bad):
    with pytest.raises(seccompsim.BadFilter):
        seccompsim.run(seccompsim.parse(bad), 1, X64)


def _compiled(name):
    prog, notes = seccomp.compile_profile(json.loads((ROOT / "walls" / "profiles" /
                                                      f"{name}.json").read_text()))
    return seccompsim.parse(prog), notes


def test_the_container_profile_allows_by_name_so_the_cache_holds_its_calls():
    prog, notes = _compiled("container")
    assert notes == []       # every name is known to Debian 12's libseccomp
    for name in ("getppid", "write"):
        for arch in (X64, I386):
            nr = seccomp.resolve(name, arch)
            assert seccompsim.run(prog, nr, arch, args=(3, 0, 1))[0] == ALLOW
            assert seccompsim.cached([prog], nr, arch)
    # what it leaves out: the default answer, EPERM, for the null call's invalid number too
    assert seccompsim.run(prog, seccomp.resolve("mount", X64), X64)[0] == EPERM
    assert seccompsim.run(prog, 0x7FFF, X64)[0] == EPERM
    # personality is allowed only for some personas: an argument rule, never cached
    nr = seccomp.resolve("personality", X64)
    assert seccompsim.run(prog, nr, X64, args=(0,))[0] == ALLOW
    assert seccompsim.run(prog, nr, X64, args=(0x40000,))[0] == EPERM
    assert not seccompsim.cached([prog], nr, X64)


def test_the_args_profile_inspects_getppid_and_write_so_no_cache_holds_them():
    prog, _ = _compiled("args")
    for name in ("getppid", "write"):
        for arch in (X64, I386):
            nr = seccomp.resolve(name, arch)
            ret, n, read = seccompsim.run(prog, nr, arch, args=(0, 0, 1))
            assert ret == ALLOW and "args[0]" in read and n > 10
            assert not seccompsim.cached([prog], nr, arch)
    assert seccompsim.run(prog, seccomp.resolve("getppid", X64), X64, args=(2**64 - 16,))[0] == \
        0x00050016
    assert seccompsim.run(prog, seccomp.resolve("write", X64), X64, args=(1 << 21,))[0] == \
        0x00050009


def test_the_hole_is_found_in_a_numbers_only_filter_and_not_in_libseccomps():
    numbers_only = [LD_NR, ins(0x15, 110, 0, 1), ins(0x06, EPERM), ins(0x06, ALLOW)]
    h = walls.arch_hole([numbers_only])
    assert h["denied"] == 1
    assert [(x["name"], x["nr_i386"]) for x in h["holes"]] == [("getppid", 64)]
    checked = [LD_ARCH, ins(0x15, X64, 1, 0), ins(0x06, 0x80000000), LD_NR,
               ins(0x15, 110, 0, 1), ins(0x06, EPERM), ins(0x06, ALLOW)]
    assert walls.arch_hole([checked])["holes"] == []
    prog, _ = _compiled("container")
    h = walls.arch_hole([prog])
    assert h["denied"] > 50 and h["holes"] == []
