"""No crowd of 64-bit programs hides a 32-bit exec from tw watch, for real: its exec tracer
attached, the scenarios of tests/watch_farm.py run against it.

  - a symlink farm: one 64-bit program behind 4300 symbolic links, each exec'd once in one
    interval, then a 32-bit program three times.  The kernel's exec map was keyed by the name
    as started, so one file filled its 4096 keys; the execs it dropped were counted as 64-bit
    ("bitness unknown"), and the report said booting with ia32_emulation=0 "would have
    stopped nothing".  Now the map holds files: the 4300 are one key, and the 32-bit program
    is named, counted 3 times, 32-bit.
  - the program cap: 60 distinct 64-bit programs against --max-programs 20, then 3 new 32-bit
    programs; the watch restarted on the same state, then 3 more.  A cap shared by every
    program folded every new 32-bit program into "other", for good (the reloaded 64-bit rows
    filled it again).  Now programs that entered a compat path have a budget of their own.

Why it can break: a key that holds a name again, one budget of keys or of programs for both
bitnesses, drops counted without their bitness, a load that fills memory with 64-bit rows
first.  The figures are events (execs counted and named), never timings.  Skips: those of
need_watch (not root, no BTF, no tracefs), no nasm or ld, 32-bit programs cannot run here.
"""
import pytest

from conftest import need_supported, need_tool, need_watch
import watch_farm


@pytest.fixture(autouse=True)
def _can():
    need_watch()
    need_supported("syscost", "32-int80")
    need_tool("nasm")
    need_tool("ld")


def test_a_symlink_farm_does_not_turn_32bit_execs_into_64bit_ones(tmp_path):
    out = watch_farm.scenario("symlinks", str(tmp_path), links=4300)
    assert out["farm64_named"] == 4300, out          # one file: every exec, under its path
    assert out["named32"] == 3, out                  # named and counted, as 32-bit
    assert out["folded"].get("map_full/32", 0) == 0 and out["other32_everyone"] == 0, out
    assert out["report_error"] is None
    assert any(p.endswith("/tw-farm32") for p in out["report_programs"]), out


def test_64bit_programs_past_the_cap_never_crowd_out_32bit_ones(tmp_path):
    out = watch_farm.scenario("cap", str(tmp_path), programs=60, new32=3, max_programs=20)
    for phase in ("before_restart", "after_restart"):
        f = out[phase]
        # Ours are named, unless the compat budget filled with other 32-bit programs (the
        # machine's own: a test run's other workers exec hundreds of distinct 32-bit files,
        # and after the restart the state's reloaded rows hold them) before the rest of ours
        # came, which is the cap working, not a crowd of 64-bit ones: then the budget is
        # full, and every one of ours left out is counted, as 32-bit.
        if f["named32"] < 3:
            assert f["compat_named"] >= 20, (phase, f)
            assert f["other32_grew"] >= 3 - f["named32"], (phase, f)
        assert f["farm64_named"] <= 20, (phase, f)   # the 64-bit budget is full
        assert f["folded"]["cap/64"] > 0, (phase, f)
