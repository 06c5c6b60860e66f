"""tw vdso and tw classify-libc: which instruction enters the kernel, read from real code.

What it checks: the live 32-bit vDSO (read from a ptrace-stopped 32-bit process) has the
__kernel_vsyscall layout of arch/x86/entry/vdso/vdso32/system_call.S and the instruction the
CPU vendor implies; this machine's libcs classify as glibc builds do (x86-64: syscall, i686:
the vDSO); and tiny libraries assembled here, one per class (inline int 0x80, call *%gs:0x10
reached through a tail jump, syscall, int 0x80 two calls below write as in glibc 2.41's
cancellation bridge, no write at all), classify as what they contain.

Why it can break: a kernel that changes the vDSO layout or stops exporting __kernel_vsyscall;
ptrace restrictions (Yama scope 2/3) that stop us reading a child's memory; binutils changing
objdump's text (the classifier matches AT&T mnemonics); glibc moving write's entry deeper than
the followed call depth."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT, need_tool
from twtools.machine import entrypath, vendors


def vendor():
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("vendor_id"):
            return line.split(":", 1)[1].strip()


def has_fred():
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("flags"):
            return "fred" in line.split()
    return False


@pytest.fixture(scope="module")
def vdso():
    need_tool("objdump")
    r = entrypath.vdso32()
    if r["instruction"] is None and r["available"] is not True:
        pytest.skip(f"no live 32-bit vDSO here: {r['why']}")
    return r


def expected_instruction():
    if has_fred():
        return "int80"
    return vendors.fast32(vendor())


def test_vdso_instruction_matches_vendor(vdso):
    assert vdso["instruction"] == expected_instruction(), vdso


def test_vdso_layout_frame_and_landing_pad(vdso):
    text = [d.split(None, 1)[1] for d in vdso["disasm"]]
    joined = "\n".join(text)
    # the frame the fast paths need, in this order, then int $0x80 and the landing pad
    assert vdso["frame"] == ["push %ecx", "push %edx", "push %ebp"]
    assert "int $0x80" in joined and joined.rstrip().endswith("ret")
    pad = int(vdso["landing_pad"], 16)
    addrs = [int(d.split(":")[0], 16) for d in vdso["disasm"]]
    i = addrs.index(pad)
    assert [t.split(None, 1)[-1].split()[-1] for t in text[i:i + 3]] == ["%ebp", "%edx", "%ecx"]
    assert "int $0x80" in text[i - 1]
    assert int(vdso["kernel_vsyscall"], 16) >= int(vdso["vdso_base"], 16)
    assert "why_mismatch" not in vdso


def test_vdso_from_a_program_made_on_the_spot(vdso, tmp_path):
    """The same answer from a 32-bit program nasm/ld make here, independent of build/."""
    need_tool("nasm")
    need_tool("ld")
    path, why = entrypath.tiny32(tmp_path)
    assert path, why
    r = entrypath.vdso32(path)
    assert r["instruction"] == vdso["instruction"]
    assert [d.split(None, 1)[1] for d in r["disasm"]] == [d.split(None, 1)[1] for d in vdso["disasm"]]


def test_vdso_unexecutable_program_is_unknown_not_guessed(tmp_path):
    """ENOEXEC (what a kernel without IA32 emulation returns) gives no instruction, with why."""
    bad = tmp_path / "not32"
    bad.write_bytes(b"\x7fELF\x01\x01\x01" + b"\0" * 9 + b"\x02\x00\xff\xff" + b"\0" * 40)
    bad.chmod(0o755)
    r = entrypath.vdso32(bad)
    assert r["instruction"] is None and r["available"] is False
    assert "cannot execute 32-bit programs" in r["why"]


def test_vdso64_has_no_entry_function():
    r = entrypath.vdso64()
    assert r["available"] is True
    assert "__vdso_clock_gettime" in r["symbols"]
    assert "__kernel_vsyscall" not in r["symbols"]


def test_cli_vdso_json():
    p = subprocess.run([sys.executable, ROOT / "scripts" / "tw", "vdso", "--json"],
                       capture_output=True, text=True, timeout=120)
    r = json.loads(p.stdout)
    assert (p.returncode == 0) == (r["instruction"] is not None)


# --- this machine's libcs --------------------------------------------------------

@pytest.fixture(scope="module")
def libcs():
    need_tool("objdump")
    return entrypath.default_libcs()


def test_libc64_enters_by_syscall(libcs):
    if not libcs["64"]:
        pytest.skip(libcs["why"]["64"])
    r = entrypath.classify_libc(libcs["64"])
    assert r["bits"] == 64 and r["entry"] == "syscall", r
    assert any(e.endswith("syscall") for e in r["evidence"])


def test_libc32_enters_by_vdso_or_int80(libcs):
    if not libcs["32"]:
        pytest.skip(libcs["why"]["32"])
    r = entrypath.classify_libc(libcs["32"])
    assert r["bits"] == 32 and r["entry"] in ("vdso", "int80"), r
    assert r["evidence"] and r["why"]


def test_cli_classify_libc_default():
    p = subprocess.run([sys.executable, ROOT / "scripts" / "tw", "classify-libc", "--json"],
                       capture_output=True, text=True, timeout=300)
    rows = json.loads(p.stdout)
    assert len(rows) == 2 and all("entry" in r for r in rows)


# --- libraries assembled here, one per class ----------------------------------------

LIBS = {
    "int80": ("elf32", "elf_i386", """bits 32
global write:function
write:  push ebx
        mov eax, 4
        mov ebx, [esp+8]
        mov ecx, [esp+12]
        mov edx, [esp+16]
        int 0x80
        pop ebx
        ret
"""),
    # write tail-jumps to a hidden helper that calls through the TCB, as glibc i686 does
    "vdso": ("elf32", "elf_i386", """bits 32
global __write:function
global helper:function hidden
__write: jmp helper
helper: push ebx
        mov eax, 4
        call [gs:0x10]
        pop ebx
        ret
"""),
    "syscall": ("elf64", "elf_x86_64", """bits 64
global write:function
write:  mov eax, 1
        syscall
        ret
"""),
    # glibc 2.41-style: write -> __syscall_cancel -> __internal_syscall_cancel -> int 0x80
    "deep-int80": ("elf32", "elf_i386", """bits 32
global write:function
global __syscall_cancel:function hidden
global __internal_syscall_cancel:function hidden
write:  push 4
        call __syscall_cancel
        add esp, 4
        ret
__syscall_cancel:
        call __internal_syscall_cancel
        ret
__internal_syscall_cancel:
        mov eax, [esp+8]
        int 0x80
        ret
"""),
    "none": ("elf32", "elf_i386", """bits 32
global read:function
read:   xor eax, eax
        ret
"""),
}


def build_lib(tmp_path, name, shared=True):
    need_tool("nasm")
    need_tool("ld")
    fmt, emul, src = LIBS[name]
    asm = tmp_path / f"{name}.asm"
    asm.write_text(src + "section .note.GNU-stack noalloc noexec nowrite progbits\n")
    obj = tmp_path / f"{name}.o"
    subprocess.run(["nasm", "-f", fmt, "-o", obj, asm], check=True)
    if not shared:
        return obj
    so = tmp_path / f"lib{name}.so"
    subprocess.run(["ld", "-m", emul, "-shared", "-o", so, obj], check=True)
    return so


@pytest.mark.parametrize("name,entry,bits", [("int80", "int80", 32), ("vdso", "vdso", 32),
                                             ("syscall", "syscall", 64), ("deep-int80", "int80", 32)])
def test_classify_assembled_library(tmp_path, name, entry, bits):
    r = entrypath.classify_libc(build_lib(tmp_path, name))
    assert r["entry"] == entry and r["bits"] == bits, r
    assert r["evidence"], r


def test_classify_follows_calls_and_reports_chain(tmp_path):
    r = entrypath.classify_libc(build_lib(tmp_path, "deep-int80"))
    assert any("__internal_syscall_cancel" in c for c in r["chain"]), r["chain"]
    assert "2 call(s) below write" in r["why"]


def test_classify_relocatable_object(tmp_path):
    """A .o (static symbol table only) classifies too."""
    r = entrypath.classify_libc(build_lib(tmp_path, "int80", shared=False))
    assert r["entry"] == "int80", r


def test_classify_without_write_is_unknown(tmp_path):
    r = entrypath.classify_libc(build_lib(tmp_path, "none"))
    assert r["entry"] == "unknown" and "write" in r["why"]


def test_classify_not_elf(tmp_path):
    p = tmp_path / "x.txt"
    p.write_text("hello")
    r = entrypath.classify_libc(p)
    assert r["entry"] == "unknown" and "ELF" in r["why"]
