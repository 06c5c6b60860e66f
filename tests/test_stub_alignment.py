"""Each hand-written stub starts at a cache line's start in the program that times it.

Where a stub lies in its 64-byte line and fetch block is part of what a call through it costs:
the 32-bit sysenter stub, with no inline twins to align its section, once lay wherever the C
code linked before it ended, and a change to syscost's option parsing alone moved it from 48
to 16 bytes into its line and 32-sysenter's figures by +6 ns (+1.7-2.4%, eight cells outside
their intervals) on an Intel Xeon guest.  A figure must move with the kernel entry, not with
unrelated C code.  Reads the linked build/syscost-<variant> programs with readelf."""
import pytest

from conftest import BUILD, need_tool
from test_stub_instructions import functions
from twtools.machine import registry

LINE = 64


def programs():
    """(program path, mechanism) for every registry mechanism built from an asm/ stub."""
    return [pytest.param(BUILD / f"syscost-{m.name}", m, id=m.name)
            for m in registry.mechanisms() if any(o.startswith("asm/") for o in m.objects)]


@pytest.mark.parametrize("path,mech", programs())
def test_the_stub_and_its_inline_twins_start_a_cache_line(build, path, mech):
    need_tool("readelf")
    assert path.exists(), f"{path} is not built"
    funcs = functions(path)
    assert "tw_syscall3" in funcs, sorted(funcs)
    for name in ("tw_syscall3", "tw_loop3", "tw_loop3_empty"):
        if name in funcs:
            assert funcs[name][0] % LINE == 0, (name, hex(funcs[name][0]))
