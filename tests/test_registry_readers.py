"""Everything outside Python that reads a table the project keeps once agrees with it.

The Makefile reads variants/registry through variants/rows.awk, and twtools.machine.registry
reads it in Python; if the two parsed it differently, `make` would build one set of variants
and the tools would measure, test and report another (a variant missing from the build
fails late, one missing from the tools is never measured).  traces/syscount_abi.bt names
system calls from two tables written into it, because bpftrace cannot read a header; if a
number there drifted from the kernel's UAPI headers (which tw_sysnr.h and machine/sysnr.py
read), the tool would print i386 calls under the wrong name, the very mistake it exists to
avoid.  No build is needed: make only prints its lists."""
import re
import subprocess

import pytest

from conftest import ROOT, need_tool
from twtools.machine import registry, sysnr

ROWS_AWK = ROOT / "variants" / "rows.awk"


def make_list(target):
    need_tool("make")
    p = subprocess.run(["make", "--no-print-directory", "-s", "-C", str(ROOT), target],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    return p.stdout.split()


def awk_rows(path):
    p = subprocess.run(["awk", "-f", str(ROWS_AWK), str(path)], capture_output=True, text=True,
                       timeout=60)
    return p.returncode, p.stdout.splitlines(), p.stderr


def expected_row(m):
    """The line rows.awk must print for a Mechanism."""
    return ":".join([str(m.bits), m.abi, m.mechanism, "w" if "write-file" in m.ops else "-",
                     *m.objects])


def test_make_list_variants_is_the_registry():
    assert make_list("list-variants") == registry.names()


def test_make_list_write_variants_is_the_registry():
    assert make_list("list-write-variants") == [m.name for m in registry.mechanisms()
                                                if "write-file" in m.ops]


def test_rows_awk_agrees_with_registry_py_row_by_row():
    rc, rows, err = awk_rows(registry.REGISTRY)
    assert rc == 0, err
    assert rows == [expected_row(m) for m in registry.mechanisms()]


# A registry that exercises what the real one may not: a group that brings write-file in
# only through another group's name, a variant whose ops name write-file directly, one
# that has write-sync but not write-file, comments and blank lines anywhere.
SYNTHETIC = """\
# header
ops plain = null,getppid   # trailing comment
ops writes = write-devnull,write-file

64-a  x86_64  syscall  0f05  -  plain,writes  ret  syscall  asm/64/a alloc
32-b  i386    int80    cd80  ia32  write-file,null  ret,jmp  syscall  asm/32/b alloc   # c
32-c  i386    int80    cd80  ia32  write-sync,time  ret  syscall  c_init alloc_low
"""


def test_rows_awk_agrees_with_registry_py_on_groups_and_comments(tmp_path):
    path = tmp_path / "registry"
    path.write_text(SYNTHETIC)
    _, mechs = registry.parse(SYNTHETIC)
    rc, rows, err = awk_rows(path)
    assert rc == 0, err
    assert rows == [expected_row(m) for m in mechs]
    assert [r.split(":")[3] for r in rows] == ["w", "w", "-"]


def test_rows_awk_stops_on_a_short_line(tmp_path):
    path = tmp_path / "registry"
    path.write_text(SYNTHETIC + "64-d x86_64 syscall\n")
    with pytest.raises(registry.RegistryError):
        registry.parse(path.read_text())
    rc, _, err = awk_rows(path)
    assert rc == 1
    assert err.strip() == ("variants/registry:8: expected variant, abi, entry, bytes, needs, "
                           "ops, shapes, seen-as and objects")


@pytest.mark.parametrize("table,abi", [("n32", "i386"), ("n64", "x86_64")])
def test_syscount_abi_numbers_are_the_uapi_headers(table, abi):
    """Every `@n32[N] = "name"` / `@n64[N] = "name"` in syscount_abi.bt is that call's number
    in the kernel's header for that ABI, the one tw_sysnr.h includes."""
    text = (ROOT / "traces" / "syscount_abi.bt").read_text()
    rows = re.findall(r'@%s\[(\d+)\]\s*=\s*"(\w+)"' % table, text)
    # Every assignment was read: none written in a form the pattern would pass over.
    assert len(rows) == len(re.findall(r"@%s\[\d+\]\s*=" % table, text)) > 50
    numbers = sysnr.syscall_numbers(abi)
    wrong = [(int(n), name, numbers.get(name)) for n, name in rows if numbers.get(name) != int(n)]
    assert wrong == [], f"(number in syscount_abi.bt, name, number in {sysnr.UAPI_HEADERS[abi]})"
    assert len({n for n, _ in rows}) == len(rows), "a number is named twice"
