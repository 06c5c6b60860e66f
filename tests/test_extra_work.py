"""`make TW_EXTRA_WORK=N`: a build of the 64-bit syscall stub that costs a little more.

The detection test of `tw ab` needs a known difference: a second syscost build whose stub
does N dependent multiplies before its `syscall` (docs/syscost.md, "A build that costs a
little more").  If N=0 changed the code, every ordinary build would carry the knob's cost;
if N>0 changed anything but the call (the loops, the empty twin, another instruction), the
difference would not be the known one.  And if changing N did not rebuild the stub, a
second build would silently be the first one again.  Builds one object through the
Makefile into a temporary build directory, and compares the disassembly."""
import subprocess

import pytest

from conftest import need_tool
from test_stub_instructions import body, disassemble, functions
from twtools.core import paths

STUB = "obj/64-x86_64/asm/syscall.o"
FUNCS = ("tw_syscall3", "tw_syscall3_jmp", "tw_loop3", "tw_loop3_empty")


def make_stub(build_dir, *args):
    """Build the 64-bit syscall stub into build_dir with make; (returncode, stderr)."""
    p = subprocess.run(["make", "--no-print-directory", "-C", str(paths.ROOT), "TW_DEPS_CHECKED=1",
                        f"BUILD={build_dir}", *args, str(build_dir / STUB)],
                       capture_output=True, text=True, timeout=120)
    return p.returncode, p.stderr


def code(path):
    """{function: [instruction]} of the stub's four functions."""
    _, insns = disassemble(path)
    return {f: body(path, insns, f) for f in FUNCS}


@pytest.fixture(scope="module")
def plain(tmp_path_factory):
    """The stub as NASM builds it with no knob at all."""
    need_tool("nasm")
    need_tool("objdump")
    out = tmp_path_factory.mktemp("plain") / "syscall.o"
    subprocess.run(["nasm", "-f", "elf64", "-Iasm/include/", "-o", str(out), "asm/64/syscall.asm"],
                   cwd=paths.ROOT, check=True, timeout=60)
    return out


def test_zero_is_the_plain_code(plain, tmp_path):
    rc, err = make_stub(tmp_path, "TW_EXTRA_WORK=0")
    assert rc == 0, err
    assert code(tmp_path / STUB) == code(plain)


def test_default_is_zero(plain, tmp_path):
    rc, err = make_stub(tmp_path)
    assert rc == 0, err
    assert code(tmp_path / STUB) == code(plain)


@pytest.mark.parametrize("n", [1, 5])
def test_n_multiplies_before_the_entry_in_the_call_only(plain, tmp_path, n):
    rc, err = make_stub(tmp_path, f"TW_EXTRA_WORK={n}")
    assert rc == 0, err
    before, after = code(plain), code(tmp_path / STUB)
    for f in ("tw_syscall3", "tw_syscall3_jmp"):
        at = before[f].index("syscall")
        # Branch targets are instruction indices, and no branch crosses the insertion in
        # these straight-line functions, so the rest compares as it is.
        assert after[f] == before[f][:at] + ["imul %r11,%r11"] * n + before[f][at:], after[f]
    # The inline loops and their empty twin are the same: only the call costs more.
    assert after["tw_loop3"] == before["tw_loop3"]
    assert after["tw_loop3_empty"] == before["tw_loop3_empty"]


def test_changing_n_rebuilds_the_stub(plain, tmp_path):
    assert make_stub(tmp_path, "TW_EXTRA_WORK=0")[0] == 0
    assert code(tmp_path / STUB) == code(plain)
    assert make_stub(tmp_path, "TW_EXTRA_WORK=2")[0] == 0
    assert code(tmp_path / STUB)["tw_syscall3"].count("imul %r11,%r11") == 2
    assert make_stub(tmp_path, "TW_EXTRA_WORK=0")[0] == 0
    assert code(tmp_path / STUB) == code(plain)


@pytest.mark.parametrize("n", [2, 5])
def test_unchained_is_the_same_layout_with_no_multiply_waiting(plain, tmp_path, n):
    # TW_EXTRA_CHAIN=0 is bench-ab's A side: the same number of multiplies, none reading the
    # one before, in instructions of the same length, so every byte after them sits where it
    # sits in the chained build.  Only the waiting differs.
    chained, unchained = tmp_path / "chained", tmp_path / "unchained"
    assert make_stub(chained, f"TW_EXTRA_WORK={n}")[0] == 0
    assert make_stub(unchained, f"TW_EXTRA_WORK={n}", "TW_EXTRA_CHAIN=0")[0] == 0
    a, b = code(chained / STUB), code(unchained / STUB)
    for f in ("tw_syscall3", "tw_syscall3_jmp"):
        assert b[f] == [("imul $0x1,%r10,%r11" if i == "imul %r11,%r11" else i) for i in a[f]]
        assert b[f].count("imul $0x1,%r10,%r11") == n
    assert functions(chained / STUB) == functions(unchained / STUB)
    assert b["tw_loop3"] == a["tw_loop3"] and b["tw_loop3_empty"] == a["tw_loop3_empty"]
    # and the knob alone, with no multiplies, is the plain code
    assert make_stub(tmp_path / "zero", "TW_EXTRA_CHAIN=0")[0] == 0
    assert code(tmp_path / "zero" / STUB) == code(plain)


@pytest.mark.parametrize("bad", ["2", "yes", ""])
def test_bad_chain_value_is_one_line(tmp_path, bad):
    rc, err = make_stub(tmp_path, "TW_EXTRA_WORK=1", f"TW_EXTRA_CHAIN={bad}")
    assert rc != 0 and "TW_EXTRA_CHAIN must be 0 or 1" in err, err
    assert not (tmp_path / STUB).exists()


@pytest.mark.parametrize("bad", ["-1", "abc", "1.5", "10000"])
def test_bad_value_is_one_line(tmp_path, bad):
    rc, err = make_stub(tmp_path, f"TW_EXTRA_WORK={bad}")
    assert rc != 0
    assert "TW_EXTRA_WORK must be a whole number" in err, err
    assert not (tmp_path / STUB).exists()
