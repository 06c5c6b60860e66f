"""Each built stub enters the kernel by the instruction its name says, and no other; its loop
shapes differ from the plain stub in exactly the way their names say.

Timings are labelled by mechanism name; if asm/32/sysenter.asm quietly used
int 0x80 (or the vdso stub a direct sysenter, or the vsyscall stub a syscall) every
comparison built on it would be wrong while all counts still matched.  The same holds
for the loop shapes (tw_syscall.h): if tw_syscall3_jmp left by ret after all, the jmp
shape would measure the ret shape again and the post-return penalty would read zero; if
tw_loop3_empty differed from tw_loop3 in more than the entry, the inline shape would
subtract the wrong loop cost.  So the jmp stub must be the ret stub with its final ret
replaced by pop; jmp through the same register, and the empty loop the loop with its
one entry replaced by a load of the accepted result.  The registry's shapes column must
match the functions each program really has.  This also checks the frame the 32-bit
sysenter and syscall stubs must build: the kernel returns from both through the vDSO's
landing pad (pop ebp; pop edx; pop ecx; ret), so the stub must reach the instruction by
a call and push ecx, edx, ebp first, and must leave in ebp what the kernel reads there
(the user stack for sysenter, the second argument for syscall).  Get that wrong and the
process crashes on return, or the kernel reads a wrong argument.  Disassembles
build/obj/<flavour>/asm/*.o and the linked syscost programs with objdump and readelf."""
import re
import subprocess

import pytest

from conftest import BUILD, need_tool
from twtools.core import paths
from twtools.machine import registry

# Kernel entry instructions as objdump (AT&T) prints them.
INSN = {
    "int80": re.compile(r"^int\s+\$0x80$"),
    "sysenter": re.compile(r"^sysenter$"),
    "syscall": re.compile(r"^syscall$"),
}
CALL_REG = re.compile(r"^call\s+\*%([er][a-z0-9]+)$")        # a call through a register
VSYSCALL_PAGE = 0xffffffffff600000
# The vsyscall page's entries (arch/x86/entry/vsyscall/vsyscall_64.c): gettimeofday,
# time, getcpu.  Any other address in the page is not an entry and kills the caller.
VSYSCALL_ENTRIES = {VSYSCALL_PAGE, VSYSCALL_PAGE + 0x400, VSYSCALL_PAGE + 0x800}
SHAPE_FUNCS = {"ret": {"tw_syscall3"}, "jmp": {"tw_syscall3_jmp"},
               "inline": {"tw_loop3", "tw_loop3_empty"}}


def stubs(pred=lambda m: True):
    """(id, object path, mechanism row) for every asm/ object in the mechanism registry."""
    out = []
    for m in registry.mechanisms():
        if not pred(m):
            continue
        for o in m.objects:
            if o.startswith("asm/"):
                path = paths.BUILD / "obj" / f"{m.bits}-{m.abi}" / "asm" / (o.rsplit("/", 1)[1] + ".o")
                out.append(pytest.param(path, m, id=m.name))
    return out


def disassemble(path):
    """(file format, [(address, function, instruction)]) in program order."""
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


def functions(path):
    """{name: (address, size)} of the FUNC symbols defined in an object or program."""
    out = subprocess.run(["readelf", "--syms", "--wide", str(path)], capture_output=True,
                         text=True, timeout=60).stdout
    return {f[7]: (int(f[1], 16), int(f[2], 0)) for f in (line.split() for line in out.splitlines())
            if len(f) == 8 and f[3] == "FUNC" and f[6] != "UND"}


def body(path, insns, func):
    """func's instructions (by its ELF size: not the alignment padding after it), with
    objdump's comments dropped and branch targets written as the index of the instruction
    they reach, so that two functions laid out differently compare as code:
    'jne 46 <tw_loop3+0x26>' -> 'jne @9'."""
    start, size = functions(path).get(func, (0, 0))
    mine = [(a, re.sub(r"\s*#.*$", "", i)) for a, _, i in insns if start <= a < start + size]
    index = {a: k for k, (a, _) in enumerate(mine)}

    def target(m):
        return f"{m.group(1)} @{index.get(int(m.group(2), 16), 'outside')}"
    return [re.sub(r"^(j\w+|call) ([0-9a-f]+) <[^>]*>$", target, i) for _, i in mine]


def entries(insns, bits):
    """The entry kinds (registry `entry` column) a stub's code contains."""
    code = [i for _, _, i in insns]
    found = {name for name, rx in INSN.items() for i in code if rx.match(i)}
    consts = {int(c, 16) for i in code for c in re.findall(r"\$0x([0-9a-f]{16})\b", i)
              if int(c, 16) & ~0xfff == VSYSCALL_PAGE}
    if any(CALL_REG.match(i) for i in code):
        found.add("vsyscall-call" if consts else "vdso32-call" if bits == 32 else "vdso-call")
    return found, consts


@pytest.mark.parametrize("path,mech", stubs())
def test_stub_uses_its_instruction_only(build, path, mech):
    need_tool("objdump")
    assert path.exists(), f"{path} is not built"
    fmt, insns = disassemble(path)
    assert fmt == ("elf32-i386" if mech.bits == 32 else "elf64-x86-64")
    found, consts = entries(insns, mech.bits)
    assert found == {mech.entry}, [i for _, _, i in insns]
    if mech.entry == "vsyscall-call":
        # Exactly the page's three entries: an address beside them is no function.
        assert consts == VSYSCALL_ENTRIES, sorted(hex(c) for c in consts)
        assert mech.bytes == f"target={VSYSCALL_PAGE:x}"


@pytest.mark.parametrize("path,mech", stubs(lambda m: m.bits == 32
                                            and m.entry in ("sysenter", "syscall")))
def test_32bit_fast_entry_builds_vsyscall_frame(build, path, mech):
    need_tool("objdump")
    assert path.exists(), f"{path} is not built"
    _, insns = disassemble(path)
    at = [k for k, (_, _, i) in enumerate(insns) if INSN[mech.entry].match(i)]
    # One entry per function that has the instruction (ret and jmp shapes).
    assert len(at) == len({insns[k][1] for k in at}) == len(mech.shapes), insns
    for k in at:
        # push ecx; push edx; push ebp; mov <x>,%ebp; <instruction>
        frame = [i for _, _, i in insns[k - 4:k]]
        assert frame[:3] == ["push %ecx", "push %edx", "push %ebp"], frame
        want_ebp = "mov %esp,%ebp" if mech.entry == "sysenter" else "mov %ecx,%ebp"
        assert frame[3] == want_ebp, frame
        # The frame is entered by a call, so the landing pad's ret comes back.
        frame_addr = insns[k - 4][0]
        calls = [i for _, f, i in insns if re.match(rf"^call 0*{frame_addr:x} <", i)
                 and f == insns[k][1]]
        assert calls, f"nothing in {insns[k][1]} calls the frame at {frame_addr:#x}: {insns}"


@pytest.mark.parametrize("path,mech", stubs(lambda m: "jmp" in m.shapes))
def test_jmp_stub_is_the_stub_leaving_by_a_jump(build, path, mech):
    """tw_syscall3_jmp == tw_syscall3 with one ret (the one after the entry) replaced by
    pop <reg>; jmp *<reg>."""
    need_tool("objdump")
    _, insns = disassemble(path)
    ret, jmp = body(path, insns, "tw_syscall3"), body(path, insns, "tw_syscall3_jmp")
    assert ret and jmp, f"{path.name} lacks tw_syscall3 or tw_syscall3_jmp"
    reg = "%rcx" if mech.bits == 64 else "%ecx"
    leave = [f"pop {reg}", f"jmp *{reg}"]

    def replaced(k):
        """ret with its k-th instruction (a ret) replaced by the two of `leave`: every
        branch to an instruction after it now reaches one further."""
        moved = [re.sub(r"@(\d+)$", lambda m: f"@{int(m.group(1)) + (int(m.group(1)) > k)}", i)
                 for i in ret]
        return moved[:k] + leave + moved[k + 1:]
    matches = [k for k, i in enumerate(ret) if i == "ret" and replaced(k) == jmp]
    assert matches, f"tw_syscall3_jmp is not tw_syscall3 leaving by {leave}:\n{ret}\n{jmp}"


@pytest.mark.parametrize("path,mech", stubs(lambda m: "inline" in m.shapes))
def test_empty_loop_differs_only_by_the_entry(build, path, mech):
    """tw_loop3_empty == tw_loop3 with its one entry replaced by a load of struct
    tw_loop's lo (the accepted result), and nothing else changed."""
    need_tool("objdump")
    _, insns = disassemble(path)
    loop, empty = body(path, insns, "tw_loop3"), body(path, insns, "tw_loop3_empty")
    assert loop and empty, f"{path.name} lacks tw_loop3 or tw_loop3_empty"
    assert len(loop) == len(empty), (loop, empty)
    diff = [k for k in range(len(loop)) if loop[k] != empty[k]]
    assert len(diff) == 1, [(loop[k], empty[k]) for k in diff]
    k = diff[0]
    found, _ = entries([(0, "", loop[k])], mech.bits)
    if mech.entry == "vsyscall-call":
        found = {"vsyscall-call"} if CALL_REG.match(loop[k]) else found
    assert found == {mech.entry}, loop[k]
    lo = 4 * mech.bits // 8                  # struct tw_loop: nr, a1, a2, a3, lo, ...
    assert re.fullmatch(rf"mov 0x{lo:x}\(%[a-z0-9]+\),%[er]?ax", empty[k]), empty[k]


@pytest.mark.parametrize("mech", registry.mechanisms(), ids=registry.names())
def test_registry_shapes_are_the_functions_syscost_has(build, mech):
    """A shape is in the registry's shapes column exactly when syscost-<variant> links its
    functions; syscost refuses the others (tests/test_syscost.py)."""
    need_tool("readelf")
    have = set(functions(BUILD / f"syscost-{mech.name}"))
    for shape, funcs in SHAPE_FUNCS.items():
        assert (funcs <= have) == (shape in mech.shapes), (shape, mech.shapes, sorted(have))
        if shape not in mech.shapes:
            assert not funcs & have, (shape, sorted(funcs & have))
