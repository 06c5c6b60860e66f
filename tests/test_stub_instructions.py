"""Each built stub enters the kernel by the instruction its name says, and no other.

Timings are labelled by mechanism name; if asm/32/sysenter.asm quietly used
int 0x80 (or the vdso stub a direct sysenter) every comparison built on it would
be wrong while all counts still matched.  This also checks the frame the 32-bit
sysenter and syscall stubs must build: the kernel returns from both through the
vDSO's landing pad (pop ebp; pop edx; pop ecx; ret), so the stub must reach the
instruction by a call and push ecx, edx, ebp first, and must leave in ebp what
the kernel reads there (the user stack for sysenter, the second argument for
syscall).  Get that wrong and the process crashes on return, or the kernel
reads a wrong argument.  Disassembles build/obj/<flavour>/asm/*.o with objdump."""
import re
import subprocess

import pytest

from conftest import need_tool
from twtools.core import paths
from twtools.machine import registry

# Entry instructions as objdump (AT&T) prints them.
ENTRY = {
    "int80": re.compile(r"^int\s+\$0x80$"),
    "sysenter": re.compile(r"^sysenter$"),
    "syscall": re.compile(r"^syscall$"),
    "vdso": re.compile(r"^call\s+\*%e[a-z]{2}$"),     # call through a register: __kernel_vsyscall
}


def stubs():
    """(id, object path, bits, mechanism) for every asm/ object in the mechanism registry."""
    out = []
    for m in registry.mechanisms():
        for o in m.objects:
            if o.startswith("asm/"):
                path = paths.BUILD / "obj" / f"{m.bits}-{m.abi}" / "asm" / (o.rsplit("/", 1)[1] + ".o")
                out.append(pytest.param(path, m.bits, m.mechanism, id=m.name))
    return out


def disassemble(path):
    """(file format, [(address, label, instruction)]) in program order."""
    p = subprocess.run(["objdump", "-d", "--no-show-raw-insn", path],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    fmt = re.search(r"file format (\S+)", p.stdout).group(1)
    insns, label = [], None
    for line in p.stdout.splitlines():
        m = re.match(r"^[0-9a-f]+ <([^>]+)>:$", line)
        if m:
            label = m.group(1)
            continue
        m = re.match(r"^\s+([0-9a-f]+):\s+(.*?)\s*$", line)
        if m:
            insns.append((int(m.group(1), 16), label, re.sub(r"\s+", " ", m.group(2))))
    return fmt, insns


@pytest.mark.parametrize("path,bits,mech", stubs())
def test_stub_uses_its_instruction_only(build, path, bits, mech):
    need_tool("objdump")
    assert path.exists(), f"{path} is not built"
    fmt, insns = disassemble(path)
    assert fmt == ("elf32-i386" if bits == 32 else "elf64-x86-64")
    found = {name for name, rx in ENTRY.items() for _, _, i in insns if rx.match(i)}
    assert found == {mech}, [i for _, _, i in insns]


@pytest.mark.parametrize("path,bits,mech",
                         [s for s in stubs() if s.values[1] == 32
                          and s.values[2] in ("sysenter", "syscall")])
def test_32bit_fast_entry_builds_vsyscall_frame(build, path, bits, mech):
    need_tool("objdump")
    assert path.exists(), f"{path} is not built"
    _, insns = disassemble(path)
    at = [k for k, (_, _, i) in enumerate(insns) if ENTRY[mech].match(i)]
    assert len(at) == 1, insns
    k = at[0]
    # push ecx; push edx; push ebp; mov <x>,%ebp; <instruction>
    frame = [i for _, _, i in insns[k - 4:k]]
    assert frame[:3] == ["push %ecx", "push %edx", "push %ebp"], frame
    want_ebp = "mov %esp,%ebp" if mech == "sysenter" else "mov %ecx,%ebp"
    assert frame[3] == want_ebp, frame
    # The frame is entered by a call, so the landing pad's ret comes back.
    frame_addr = insns[k - 4][0]
    calls = [i for _, _, i in insns if re.match(rf"^call 0*{frame_addr:x} <", i)]
    assert calls, f"nothing calls the frame at {frame_addr:#x}: {insns}"
