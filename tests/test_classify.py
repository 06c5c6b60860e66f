"""tw classify: every kernel-entry site of an ELF file, found in its machine code.

What it checks: a Go program built here for GOARCH=386 (static, code this project did not
write) enters by inline int 0x80 at as many sites as objdump prints `int $0x80`, none through
the vDSO; its amd64 twin by inline syscall; a 32-bit glibc program relies on glibc, whose
write() goes through the vDSO; a 64-bit Debian program (dd) relies on glibc's inline syscall;
one tiny program per registry row, assembled from the row's own `bytes`, is found as that
row's entry kind at exactly its one site; the pointer forms (call *_dl_sysinfo, a register
loaded from an AT_SYSINFO pointer, a vDSO function pointer) are found and a clobbered
register is not; a stripped binary still shows every site by address; and the command line
answers bad usage in one line with exit 2.

Why it can break: Go changing how linux/386 enters the kernel (then the field fact the
issue quotes has changed: read the new sites); capstone and objdump disagreeing on where
instructions start (the counts are checked against objdump's); a registry row whose bytes no longer match its stub; glibc moving
write()'s entry deeper than classify_libc follows; no 32-bit glibc (gcc-multilib) installed."""
import json
import re
import shutil
import subprocess

import pytest

from conftest import BUILD, ROOT, need_tool, run
from goprog import go_program
from twtools.machine import classify, registry

TW = ROOT / "scripts" / "tw"


def objdump_count(path, pattern):
    p = subprocess.run(["objdump", "-d", "-w", str(path)], capture_output=True, text=True, check=True)
    return len(re.findall(pattern, p.stdout))


@pytest.fixture(scope="module")
def go386():
    need_tool("objdump")
    return go_program("386")


def test_go_386_enters_by_inline_int80(go386):
    r = classify.classify(go386)
    assert r["bits"] == 32 and r["static"] and r["libc"] is None
    assert r["entry"] == "int80", r["headline"]
    assert r["headline"].startswith("enters by inline int 0x80 from "), r["headline"]
    assert "does not use the vDSO's __kernel_vsyscall" in r["headline"]
    # every int $0x80 objdump prints is a site, and nothing else is
    n = objdump_count(go386, r"\tint\s+\$0x80")
    assert n > 0 and r["by_kind"]["int80"]["sites"] == n
    for k in ("vdso32-call", "sysenter", "syscall"):
        assert k not in r["by_kind"], (k, r["by_kind"][k])
    # Go's syscall wrapper (internal/runtime/syscall/linux.Syscall6 in 1.26,
    # runtime/internal/syscall.Syscall6 or syscall.Syscall in older ones) holds one
    fns = [f for f, _ in r["by_kind"]["int80"]["functions"]]
    assert any("Syscall" in f for f in fns), fns
    assert all(s["function"] for s in r["sites"]), "a site without its function in a symbolised binary"


def test_go_386_calls_vdso_clock_through_a_pointer(go386):
    """Go 386 reads the clock through the vDSO's __vdso_clock_gettime (a vdso-call: no kernel
    entry), loaded from runtime.vdsoClockgettimeSym into a register: the data-flow form."""
    r = classify.classify(go386)
    v = r["by_kind"].get("vdso-call")
    assert v and any("vdso" in x.lower() for x in v["via"]), r["by_kind"].keys()
    assert "no kernel entry" in r["headline"]


def test_go_amd64_enters_by_inline_syscall():
    need_tool("objdump")
    p = go_program("amd64")
    r = classify.classify(p)
    assert r["bits"] == 64 and r["static"]
    assert r["entry"] == "syscall", r["headline"]
    assert r["by_kind"]["syscall"]["sites"] == objdump_count(p, r"\tsyscall\s*\n")
    assert "int80" not in r["by_kind"]


def glibc32_program():
    """A real Debian i386 program where multiarch installed one, else this project's own
    timewrite-32-libc (multiarch co-installs i386 libraries, not programs that share a path
    with their amd64 build, so on a stock amd64 system there is none)."""
    p = subprocess.run(["dpkg-query", "-W", "-f", "${Package}:${Architecture}\\n"],
                       capture_output=True, text=True)
    for pkg in (l for l in p.stdout.splitlines() if l.endswith(":i386")):
        files = subprocess.run(["dpkg", "-L", pkg], capture_output=True, text=True).stdout.split()
        for f in files:
            if f.startswith(("/usr/bin/", "/bin/")):
                try:
                    with open(f, "rb") as fh:
                        head = fh.read(20)
                except OSError:
                    continue
                if head[:4] == b"\x7fELF" and head[4] == 1 and head[18] == 3:
                    return f
    return str(BUILD / "timewrite-32-libc")


def test_32bit_glibc_program_relies_on_the_vdso(build):
    need_tool("objdump")
    r = classify.classify(glibc32_program())
    assert r["bits"] == 32 and not r["static"]
    assert r["libc"]["flavour"] == "glibc" and r["libc"]["path"], r["libc"]
    assert r["libc"]["write"]["entry"] == "vdso", r["libc"]["write"]
    assert r["entry"] == "vdso32-call", r["headline"]
    assert r["headline"].startswith("relies on glibc"), r["headline"]
    assert r["libc"]["by_kind"]["vdso32-call"]["sites"] > 100      # glibc i686: every wrapper
    assert not {"int80", "sysenter", "syscall"} & set(r["by_kind"]), r["by_kind"]


def test_64bit_debian_program_relies_on_glibc_syscall():
    need_tool("objdump")
    dd = shutil.which("dd")
    r = classify.classify(dd)
    assert r["bits"] == 64 and r["pie"] and r["libc"]["flavour"] == "glibc"
    assert r["entry"] == "syscall", r["headline"]
    assert "its write() enters by inline syscall" in r["headline"]
    assert r["libc"]["by_kind"]["syscall"]["sites"] > 100


def test_pie_with_its_own_int80_stub(build):
    """timewrite-64-int80: a 64-bit PIE whose own stub holds int $0x80, glibc for the rest."""
    need_tool("objdump")
    r = classify.classify(BUILD / "timewrite-64-int80")
    assert r["pie"] and r["entry"] == "int80"
    # The stub's ret and jmp shapes and its inline loop; the empty loop has no entry.
    assert [(s["function"], s["kind"]) for s in r["sites"]] == [
        ("tw_syscall3", "int80"), ("tw_syscall3_jmp", "int80"), ("tw_loop3", "int80")]
    assert "everything else goes through glibc" in r["headline"]


def test_register_loaded_from_at_sysinfo_pointer(build):
    """timewrite-32-vdso loads tw_vsyscall (AT_SYSINFO) into eax, moves it to esi and calls
    esi: a vdso32-call through a pointer, not a byte pattern."""
    need_tool("objdump")
    r = classify.classify(BUILD / "timewrite-32-vdso", follow_libc=False)
    s = [(x["function"], x["via"], x["insn"]) for x in r["sites"] if x["kind"] == "vdso32-call"]
    # tw_syscall3_jmp is the same stub leaving by a jump (the loop shapes of tw_syscall.h).
    assert s[:2] == [("tw_syscall3", "tw_vsyscall", "call *%esi"),
                     ("tw_syscall3_jmp", "tw_vsyscall", "call *%esi")], \
        f"32-vdso (asm/32/vdso.asm) no longer calls __kernel_vsyscall through tw_vsyscall " \
        f"in both of its stubs; the vdso32-call sites found: {s}"
    assert {f for f, _, _ in s} <= {"tw_syscall3", "tw_syscall3_jmp", "tw_loop3"}, s


# --- one program per registry row, from the row's own bytes --------------------------

def assemble(tmp_path, name, bits, body, data=""):
    need_tool("nasm")
    need_tool("ld")
    src = tmp_path / f"{name}.asm"
    src.write_text(f"bits {bits}\nglobal _start\nsection .text\n_start:\n\tcall {name}\n\thlt\n"
                   f"global {name}:function ({name}.end - {name})\n{name}:\n{body}\n\tret\n.end:\n"
                   + (f"section .data\n{data}\n" if data else ""))
    fmt, emu = ("elf32", "elf_i386") if bits == 32 else ("elf64", "elf_x86_64")
    obj, exe = tmp_path / f"{name}.o", tmp_path / name
    p = run(["nasm", "-f", fmt, "-o", obj, src], text=True)
    assert p.returncode == 0, p.stderr
    p = run(["ld", "-m", emu, "-o", exe, obj], text=True)
    assert p.returncode == 0, p.stderr
    return exe


ROWS = [m for m in registry.mechanisms() if m.bytes]


@pytest.mark.parametrize("m", ROWS, ids=[m.name for m in ROWS])
def test_each_registry_row_is_found_from_its_bytes(tmp_path, m):
    need_tool("objdump")
    name = "site_" + m.name.replace("-", "_")
    if m.bytes.startswith("target="):
        addr = int(m.bytes.split("=", 1)[1], 16)
        reg = "eax" if m.bits == 32 else "rax"
        body = f"\tmov {reg}, {addr:#x}\n\tcall {reg}"
    else:
        body = "\tnop\n\tdb " + ", ".join(f"0x{m.bytes[i:i + 2]}" for i in range(0, len(m.bytes), 2)) + "\n\tnop"
    exe = assemble(tmp_path, name, m.bits, body)
    r = classify.classify(exe)
    got = [(s["kind"], s["function"]) for s in r["sites"]]
    assert got == [(m.entry, name)], (m, got)
    assert r["entry"] == (m.entry if m.entry in classify.ENTERS else None)


def test_every_entry_kind_with_a_row_is_decodable():
    """The classifier's decoders come from the registry: every row's kind is looked for,
    FORMS names only kinds the registry knows, and what cannot be looked for says why."""
    dec = classify.decoders()
    for m in registry.mechanisms():
        if m.entry != "libc":
            assert m.entry in dec
    assert set(classify.FORMS) <= set(registry.ENTRIES)
    for k, why in classify.undecodable().items():
        assert k not in {m.entry for m in ROWS} and "registry" in why


def test_pointer_forms(tmp_path):
    need_tool("objdump")
    data32 = "_dl_sysinfo: dd 0\n__sysinfo: dd 0\nother_ptr: dd 0"
    body = ("\tcall [_dl_sysinfo]\n"            # static i686 glibc: call *_dl_sysinfo
            "\tmov eax, [__sysinfo]\n\tmov esi, eax\n\tcall esi\n"   # musl-like, via two registers
            "\tmov eax, [other_ptr]\n\tcall eax\n"                   # not an AT_SYSINFO pointer
            "\tmov eax, [_dl_sysinfo]\n\tmov eax, 5\n\tcall eax")    # clobbered before the call
    exe = assemble(tmp_path, "ptrs", 32, body, data32)
    r = classify.classify(exe)
    got = [(s["kind"], s["via"], s["insn"]) for s in r["sites"] if s["kind"] != "int80"]
    assert got == [("vdso32-call", "_dl_sysinfo", got[0][2]), ("vdso32-call", "__sysinfo", "call *%esi")], got
    exe64 = assemble(tmp_path, "ptr64", 64, "\tcall [rel __vdso_clock_ptr]\n\tsyscall",
                     "__vdso_clock_ptr: dq 0")
    r = classify.classify(exe64)
    assert sorted((s["kind"], s["via"]) for s in r["sites"]) == \
        [("syscall", None), ("vdso-call", "__vdso_clock_ptr")]
    assert r["entry"] == "syscall"


def test_stripped_binary_sites_by_address(go386, tmp_path):
    need_tool("strip")
    s = tmp_path / "go386-stripped"
    shutil.copy(go386, s)
    subprocess.run(["strip", str(s)], check=True)
    full = classify.classify(go386)
    r = classify.classify(s)
    assert not r["symbols"]
    assert r["entry"] == "int80"
    assert r["by_kind"]["int80"]["sites"] == full["by_kind"]["int80"]["sites"]
    assert "(no symbol)" in r["headline"]


# --- the command line ------------------------------------------------------------

def tw(*args):
    return run([str(TW), *map(str, args)], text=True, timeout=300)


def test_cli_text_and_json(go386):
    p = tw("classify", go386)
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines()[0].startswith(f"{go386}: enters by inline int 0x80 from ")
    p = tw("classify", "--json", go386)
    doc = json.loads(p.stdout)
    assert doc[0]["entry"] == "int80" and doc[0]["sites"][0]["kind"] == "int80"


@pytest.mark.parametrize("args,msg,code", [
    (["/etc/passwd"], "is not an ELF file", 2),
    (["/no/such/file"], "/no/such/file: No such file or directory", 4),   # the system refused
    (["/tmp"], "is a directory", 2),
    ([], "the following arguments are required", 2),
])
def test_cli_bad_usage_is_one_line_with_its_exit_status(args, msg, code):
    p = tw("classify", *args)
    assert p.returncode == code, (p.returncode, p.stderr)
    assert msg in p.stderr and "Traceback" not in p.stderr
    assert len([l for l in p.stderr.splitlines() if l.startswith("tw classify")]) == 1, p.stderr


def test_cli_help():
    p = tw("classify", "--help")
    assert p.returncode == 0 and "variants/registry" in p.stdout


def test_classify_libc_still_works():
    p = tw("classify-libc")
    assert p.returncode == 0, p.stdout + p.stderr
