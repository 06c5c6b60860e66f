"""The 32-bit vDSO's __kernel_vsyscall read from its image alone: which entry instruction the
kernel patched in (its form), disassembled by objdump.  A live image (machine/process.py reads
it from a stopped process; machine/entrypath.py's `tw vdso`) and a recorded one
(tests/fixtures/machines/*/vdso32.so, machine/doctor.py) are read by the same code.  Below
both process and entrypath: each uses it, and it uses neither."""
import re
import tempfile

from ..core import proc
from . import elf

# Entry instructions as objdump (AT&T syntax) prints them -> the mechanism they stand for.
ENTRY_PATTERNS = [
    (re.compile(r"\bint\s+\$0x80\b"), "int80"),
    (re.compile(r"\bcall\s+\*%gs:0x10\b"), "vdso"),          # glibc i686: SYSINFO_OFFSET in the TCB
    (re.compile(r"\bcall\s+\*.*<_dl_sysinfo"), "vdso"),      # static i686 glibc: call *_dl_sysinfo
    (re.compile(r"\bsysenter\b"), "sysenter"),
    (re.compile(r"\bsyscall\b"), "syscall"),
]
INSN_RE = re.compile(r"^\s*([0-9a-f]+):\s+((?:[0-9a-f]{2} )+)\s*(.*)$")

VDSO_WHY = {
    "sysenter": "the kernel patched `mov %esp,%ebp; sysenter` into __kernel_vsyscall "
                "(X86_FEATURE_SYSENTER32, SYSFAST32 since 2026: an Intel-compatible CPU running "
                "32-bit code under a 64-bit kernel); the `int $0x80` after it is only used to "
                "restart an interrupted call",
    "syscall": "the kernel patched `mov %ecx,%ebp; syscall` into __kernel_vsyscall "
               "(X86_FEATURE_SYSCALL32: an AMD or Hygon CPU); the `int $0x80` after it is only "
               "used to restart an interrupted call",
    "int80-frame": "neither fast instruction was patched in, so __kernel_vsyscall falls through to "
                   "`int $0x80` after building its frame (FRED kernels 6.9+ on CPUs that have it, "
                   "where int 0x80 is itself fast, or a CPU/kernel with neither SYSENTER32 nor "
                   "SYSCALL32)",
    "int80-direct": "__kernel_vsyscall starts with `int $0x80; ret`: a kernel from 2026 with no fast "
                    "32-bit instruction here (X86_FEATURE_SYSFAST32 clear, e.g. under FRED) enters "
                    "by int 0x80 directly, without the frame",
}

# --- disassembly -----------------------------------------------------------

def parse_objdump(text):
    """objdump -d lines -> [{addr, bytes, text, line}] (continuation lines merged)."""
    out = []
    for line in text.splitlines():
        m = INSN_RE.match(line)
        if not m:
            continue
        addr, raw, insn = int(m.group(1), 16), m.group(2).split(), m.group(3).strip()
        if not insn and out:  # objdump wraps long encodings onto a second line
            out[-1]["bytes"] += raw
            continue
        out.append({"addr": addr, "bytes": raw, "text": re.sub(r"\s+", " ", insn), "line": line.rstrip()})
    return out


def disassemble_bytes(data, start, stop, vma=0, arch="i386"):
    """Disassemble data[start:stop] (offsets) with objdump, printing addresses vma+offset."""
    if not proc.which("objdump"):
        raise RuntimeError("objdump is not installed (binutils)")
    with tempfile.NamedTemporaryFile(suffix=".bin") as f:
        f.write(data)
        f.flush()
        p = proc.run(["objdump", "-D", "-b", "binary", "-m", arch, f"--adjust-vma={vma:#x}",
                        f"--start-address={vma + start:#x}", f"--stop-address={vma + stop:#x}",
                        f.name], timeout=60)
    if p.returncode:
        raise RuntimeError(f"objdump failed: {p.stderr.strip()}")
    return parse_objdump(p.stdout)


def entry_kind(text):
    for rx, kind in ENTRY_PATTERNS:
        if rx.search(text):
            return kind
    return None


def classify_vdso32(image, base=0, sysinfo_offset=None):
    """What a 32-bit vDSO image's __kernel_vsyscall does, from the image alone, so that a
    recorded vDSO (tests/fixtures/machines/*/vdso32.so) is read exactly as a live one.

    base is the address the image was mapped at (0 for a file); sysinfo_offset the offset
    AT_SYSINFO pointed at, or None to take __kernel_vsyscall from the symbol table.
    Returns {available, instruction, form, disasm, why, vdso_base, kernel_vsyscall,
    landing_pad, bytes, frame}."""
    res = {"available": True, "instruction": None, "form": None, "disasm": [], "why": None,
           "vdso_base": hex(base), "kernel_vsyscall": None, "landing_pad": None, "bytes": None}
    try:
        image_elf = elf.Elf(image, "the vDSO image")
        syms, load = image_elf.symbol_table(), image_elf.load_vaddr
    except elf.ElfError as e:
        res["available"] = None
        res["why"] = f"cannot parse the vDSO image: {e}"
        return res
    sym = syms.get("__kernel_vsyscall")
    if sysinfo_offset is None and sym is None:
        res["available"] = False
        res["why"] = "no AT_SYSINFO and no __kernel_vsyscall in the 32-bit vDSO"
        return res
    off = sysinfo_offset if sysinfo_offset is not None else sym[0] - load
    size = sym[1] if sym and sym[1] else 32
    if sym and sysinfo_offset is not None and sym[0] - load != off:
        res["why_mismatch"] = (f"AT_SYSINFO points at vDSO offset {off:#x} but the symbol table says "
                               f"{sym[0] - load:#x}; using AT_SYSINFO")
    code = image[off:off + size]
    res["kernel_vsyscall"] = hex(base + off)
    res["bytes"] = code.hex(" ")
    res["form"] = vdso32_form(code)
    try:
        insns = disassemble_bytes(image, off, off + size, vma=base)
    except RuntimeError as e:
        res["instruction"] = FORM_INSTRUCTION.get(res["form"])
        res["why"] = f"{VDSO_WHY.get(res['form'], '')} (not disassembled: {e})"
        return res
    res["disasm"] = [f"{i['addr']:08x}:  {' '.join(i['bytes']):<21} {i['text']}" for i in insns]
    res["instruction"] = FORM_INSTRUCTION.get(res["form"])
    # The landing pad: the instruction after the int $0x80 that follows the fast instruction.
    for n, i in enumerate(insns):
        if entry_kind(i["text"]) == "int80" and n + 1 < len(insns) and \
                not insns[n + 1]["text"].startswith("ret"):
            res["landing_pad"] = hex(insns[n + 1]["addr"])
    res["frame"] = [i["text"] for i in insns[:3]]
    res["why"] = VDSO_WHY.get(res["form"], "no entry instruction found in __kernel_vsyscall: unknown layout")
    return res


def vdso32_form(code):
    """The layout of __kernel_vsyscall's machine code:

      sysenter      push ecx/edx/ebp, mov esp,ebp, sysenter, int $0x80, pop..., ret (Intel)
      syscall       the same with mov ecx,ebp; syscall (AMD)
      int80-frame   the same frame with no fast instruction patched in: int $0x80 (FRED, or a
                    CPU with neither, on kernels before 2026)
      int80-direct  int $0x80; ret before the frame (kernels from 2026, X86_FEATURE_SYSFAST32
                    clear: "When using int $0x80, use it directly")
      unknown       none of these"""
    if code[:3] == b"\xcd\x80\xc3":
        return "int80-direct"
    i80 = code.find(b"\xcd\x80")
    head = code[:i80] if i80 >= 0 else code
    if b"\x0f\x34" in head:
        return "sysenter"
    if b"\x0f\x05" in head:
        return "syscall"
    if i80 >= 0:
        return "int80-frame"
    return "unknown"


FORM_INSTRUCTION = {"sysenter": "sysenter", "syscall": "syscall", "int80-frame": "int80",
                    "int80-direct": "int80"}
