"""Each stub, and each loop that times it, starts at a cache line's start in the program.

Where a function lies in its 64-byte line and fetch block is part of what a call through it
costs.  The 32-bit sysenter stub, with no inline twins to align its section, lay wherever the
C code linked before it ended, and a change to syscost's option parsing alone moved it from 48
to 16 bytes into its line and 32-sysenter's figures by +6 ns (+1.7-2.4%, eight cells outside
their intervals) on an Intel Xeon guest; the same change moved the C libc stub and the C call
loop by 32 bytes and 64-libc write-devnull by -0.6% (tw ab of the two builds).  A figure must
move with the kernel entry, not with unrelated code (TW_TIMED_CODE in timewrite/tw_syscall.h,
`align 64` in asm/include/tw.inc).  Reads the linked build/syscost-<variant> programs with
readelf."""
import pytest

from conftest import BUILD, need_tool
from test_stub_instructions import functions
from twtools.machine import registry

LINE = 64
# what a timed batch runs: the stub and the asm inline twins (each variant's own), and
# syscost.c's loops and the callees they time in place of a kernel entry (gcc may add a
# .constprop.N or .isra.N suffix to a static function's symbol)
STUBS = ("tw_syscall3", "tw_loop3", "tw_loop3_empty")
LOOPS = ("run_calls", "run_loop", "empty_syscall3", "cpuid_call3", "verw_call3", "lfence_call3")


def _base(symbol):
    return symbol.split(".", 1)[0]


@pytest.mark.parametrize("mech", [pytest.param(m, id=m.name) for m in registry.mechanisms()])
def test_the_timed_code_starts_a_cache_line(build, mech):
    need_tool("readelf")
    path = BUILD / f"syscost-{mech.name}"
    assert path.exists(), f"{path} is not built"
    funcs = functions(path)
    timed = {s: a for s, (a, _) in funcs.items() if _base(s) in STUBS + LOOPS}
    assert {_base(s) for s in timed} >= {"tw_syscall3", "run_calls", "run_loop",
                                         "empty_syscall3"}, sorted(funcs)
    assert not [s for s, a in timed.items() if a % LINE], \
        {s: hex(a) for s, a in timed.items() if a % LINE}
