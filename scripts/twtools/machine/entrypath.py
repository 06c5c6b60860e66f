"""How code on this machine enters the kernel: the live 32-bit vDSO, and libc's write().

`tw vdso` reads the vDSO the kernel mapped into a real 32-bit process and disassembles its
__kernel_vsyscall, to show which instruction the kernel patched in at boot (ALTERNATIVE_2 in
arch/x86/entry/vdso/vdso32/system_call.S): `sysenter` (X86_FEATURE_SYSENTER32, Intel),
`syscall` (X86_FEATURE_SYSCALL32, AMD), or nothing, so that the `int $0x80` that follows is
the entry (FRED, or neither feature).

How the 32-bit vDSO is read, without C and without root: a 32-bit binary from build/ is
started with PTRACE_TRACEME, so it stops right after execve, before any of its own code runs.
We are its tracer and parent, so /proc/<pid>/auxv and /proc/<pid>/mem are readable; the
auxiliary vector (pairs of u32 in a 32-bit process) gives AT_SYSINFO_EHDR (the vDSO's ELF
header) and AT_SYSINFO (__kernel_vsyscall). The vDSO's own dynamic symbol table is parsed to
cross-check and to find the function's size; objdump disassembles the bytes at their live
addresses. The child is then killed.

`tw classify-libc` finds write/__write/__libc_write in a library's symbol tables, disassembles
it with objdump and follows direct calls and tail jumps inside the library a few levels (modern
glibc wraps the call in __syscall_cancel and friends) until it finds the instruction that
enters the kernel: `int $0x80`, `call *%gs:0x10` (the vDSO pointer glibc keeps in the TCB),
`syscall` or `sysenter`.
"""
import ctypes
import json
import os
import re
import signal
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

from ..core import files, paths, proc

AT_NULL, AT_SYSINFO, AT_SYSINFO_EHDR = 0, 32, 33
PTRACE_TRACEME = 0

# Entry instructions as objdump (AT&T syntax) prints them -> the mechanism they stand for.
ENTRY_PATTERNS = [
    (re.compile(r"\bint\s+\$0x80\b"), "int80"),
    (re.compile(r"\bcall\s+\*%gs:0x10\b"), "vdso"),          # glibc i686: SYSINFO_OFFSET in the TCB
    (re.compile(r"\bcall\s+\*.*<_dl_sysinfo"), "vdso"),      # static i686 glibc: call *_dl_sysinfo
    (re.compile(r"\bsysenter\b"), "sysenter"),
    (re.compile(r"\bsyscall\b"), "syscall"),
]
WRITE_NAMES = ("write", "__write", "__libc_write")
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


# --- ELF -------------------------------------------------------------------

def elf_symbols(data):
    """{name: (value, size)} from an ELF image's .dynsym and .symtab (32- or 64-bit, LE).

    Enough ELF for a vDSO or a test object: section headers, symbol tables, their string
    tables. Raises ValueError on anything that is not little-endian ELF."""
    if data[:4] != b"\x7fELF" or data[5] != 1:
        raise ValueError("not a little-endian ELF image")
    is64 = data[4] == 2
    if is64:
        shoff, = struct.unpack_from("<Q", data, 0x28)
        shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    else:
        shoff, = struct.unpack_from("<I", data, 0x20)
        shentsize, shnum = struct.unpack_from("<HH", data, 0x2E)
    sections = []
    for i in range(shnum):
        off = shoff + i * shentsize
        if is64:
            _, stype, _, _, soff, ssize, link, _, _, entsize = struct.unpack_from("<IIQQQQIIQQ", data, off)
        else:
            _, stype, _, _, soff, ssize, link, _, _, entsize = struct.unpack_from("<IIIIIIIIII", data, off)
        sections.append((stype, soff, ssize, link, entsize))
    syms = {}
    for stype, soff, ssize, link, entsize in sections:
        if stype not in (2, 11) or not entsize:  # SHT_SYMTAB, SHT_DYNSYM
            continue
        stroff = sections[link][1]
        for j in range(ssize // entsize):
            e = soff + j * entsize
            if is64:
                name, _, _, _, value, size = struct.unpack_from("<IBBHQQ", data, e)
            else:
                name, value, size, _, _, _ = struct.unpack_from("<IIIBBH", data, e)
            if not name:
                continue
            end = data.index(b"\0", stroff + name)
            n = data[stroff + name:end].decode(errors="replace").split("@", 1)[0]
            syms.setdefault(n, (value, size))
    return syms


def elf_load_vaddr(data):
    """p_vaddr of the first PT_LOAD (0 for the kernel's vDSO images)."""
    is64 = data[4] == 2
    if is64:
        phoff, = struct.unpack_from("<Q", data, 0x20)
        phentsize, phnum = struct.unpack_from("<HH", data, 0x36)
    else:
        phoff, = struct.unpack_from("<I", data, 0x1C)
        phentsize, phnum = struct.unpack_from("<HH", data, 0x2A)
    for i in range(phnum):
        off = phoff + i * phentsize
        ptype, = struct.unpack_from("<I", data, off)
        if ptype == 1:
            vaddr, = struct.unpack_from("<Q" if is64 else "<I", data, off + (16 if is64 else 8))
            return vaddr
    return 0


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


# --- the live 32-bit vDSO ---------------------------------------------------

TINY32 = """bits 32
global _start
section .text
_start: mov eax, 1
        xor ebx, ebx
        int 0x80
section .note.GNU-stack noalloc noexec nowrite progbits
"""


def tiny32(workdir):
    """Assemble and link a 32-bit program that only exits: a 32-bit process needing nothing
    from build/. Returns (path, None) or (None, why)."""
    workdir = Path(workdir)
    if not proc.which("nasm") or not proc.which("ld"):
        return None, "no 32-bit binary in build/ and nasm/ld are not installed to make one"
    (workdir / "tiny32.asm").write_text(TINY32)
    for cmd in (["nasm", "-f", "elf32", "-o", workdir / "tiny32.o", workdir / "tiny32.asm"],
                ["ld", "-m", "elf_i386", "-o", workdir / "tiny32", workdir / "tiny32.o"]):
        p = proc.run(cmd, timeout=60)
        if p.returncode:
            return None, f"cannot build a 32-bit test program: {' '.join(map(str, cmd[:1]))}: {p.stderr.strip()}"
    return workdir / "tiny32", None


def find_32bit_binary():
    """A 32-bit binary from build/ (the libc variant first), or None."""
    names = ["timewrite-32-libc", "syscost-32-libc", "wvbench-32", "timewrite-32-vdso"]
    cands = [paths.BUILD / n for n in names] + sorted(paths.BUILD.glob("*-32-*"))
    for c in cands:
        try:
            with open(c, "rb") as f:
                head = f.read(20)
        except OSError:
            continue
        if head[:4] == b"\x7fELF" and head[4] == 1 and head[18] == 3:  # ELFCLASS32, EM_386
            return c
    return None


def _traceme():
    libc = ctypes.CDLL(None, use_errno=True)
    libc.ptrace(PTRACE_TRACEME, 0, None, None)


def read_process_vdso(binary):
    """Start `binary` stopped at its first instruction and read its auxv and vDSO.

    Returns {pid, auxv: {type: value}, base, end, image: bytes, word: 4|8} or raises OSError /
    RuntimeError with a reason."""
    p = subprocess.Popen([str(binary)], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, preexec_fn=_traceme, close_fds=True)
    try:
        _, status = os.waitpid(p.pid, 0)
        if not os.WIFSTOPPED(status):
            raise RuntimeError("the child was not stopped at execve: ptrace(PTRACE_TRACEME) was "
                               "refused (kernel.yama.ptrace_scope 2 or 3, or a seccomp filter); "
                               "/proc/<pid>/mem is then unreadable too")
        raw = Path(f"/proc/{p.pid}/auxv").read_bytes()
        with open(f"/proc/{p.pid}/exe", "rb") as f:
            word = 4 if f.read(5)[4] == 1 else 8
        fmt = "<II" if word == 4 else "<QQ"
        auxv = {}
        for off in range(0, len(raw) - struct.calcsize(fmt) + 1, struct.calcsize(fmt)):
            t, v = struct.unpack_from(fmt, raw, off)
            if t == AT_NULL:
                break
            auxv[t] = v
        base = end = None
        for line in Path(f"/proc/{p.pid}/maps").read_text().splitlines():
            if line.rstrip().endswith("[vdso]"):
                lo, hi = line.split()[0].split("-")
                base, end = int(lo, 16), int(hi, 16)
        image = None
        if base is not None:
            with open(f"/proc/{p.pid}/mem", "rb", buffering=0) as mem:
                mem.seek(base)
                image = mem.read(end - base)
        return {"pid": p.pid, "auxv": auxv, "base": base, "end": end, "image": image, "word": word}
    finally:
        try:
            os.kill(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        p.wait()


def vdso32(binary=None, save=None):
    """The live 32-bit vDSO's __kernel_vsyscall: which entry instruction the kernel patched in.

    {available: bool|None, instruction: "sysenter"|"syscall"|"int80"|None, disasm: [lines],
     why, source, vdso_base, kernel_vsyscall, landing_pad, frame: [..]}. Never raises."""
    res = {"available": None, "instruction": None, "disasm": [], "why": None, "source": None,
           "vdso_base": None, "kernel_vsyscall": None, "landing_pad": None, "bytes": None}
    with tempfile.TemporaryDirectory(prefix="tw-vdso-") as tmp:
        if binary is None:
            binary = find_32bit_binary()
            if binary is None:
                binary, why = tiny32(tmp)
                if binary is None:
                    res["why"] = why
                    return res
        res["source"] = str(binary)
        try:
            proc = read_process_vdso(binary)
        except OSError as e:
            import errno
            if e.errno == errno.ENOEXEC:
                res["available"] = False
                res["why"] = (f"the kernel cannot execute 32-bit programs ({e.strerror}): no IA32 "
                              "emulation (CONFIG_IA32_EMULATION off or booted with ia32_emulation=0), "
                              "so no 32-bit process has a vDSO here")
            else:
                res["why"] = f"cannot run or read {Path(binary).name}: {e}"
            return res
        except RuntimeError as e:
            res["why"] = str(e)
            return res
    if proc["word"] != 4:
        res["why"] = f"{binary} is not a 32-bit program"
        return res
    sysinfo, ehdr = proc["auxv"].get(AT_SYSINFO), proc["auxv"].get(AT_SYSINFO_EHDR)
    if proc["image"] is None or ehdr is None:
        res["available"] = False
        res["why"] = ("the kernel mapped no vDSO into the 32-bit process (booted with vdso32=0?); "
                      "32-bit glibc then enters with int $0x80 for every call")
        return res
    res.update(classify_vdso32(proc["image"], proc["base"],
                               None if sysinfo is None else sysinfo - proc["base"]))
    if save:
        # The image and AT_SYSINFO's offset in it: what tests/fixtures/machines/* record.
        files.write_bytes(save, proc["image"])
        files.write_text(str(save) + ".txt", 
            f"vdso32_size={len(proc['image'])}\n"
            + (f"at_sysinfo_offset={sysinfo - proc['base']:#x}\n" if sysinfo is not None else ""))
    return res


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
        syms = elf_symbols(image)
        load = elf_load_vaddr(image)
    except (ValueError, struct.error, IndexError) as e:
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


def vdso64():
    """The 64-bit vDSO of this process: its exported functions. It has no kernel-entry function:
    64-bit code always enters with an inline `syscall`; the vDSO only answers some calls
    (clock_gettime, gettimeofday, time, getcpu) without entering the kernel."""
    try:
        for line in Path("/proc/self/maps").read_text().splitlines():
            if line.rstrip().endswith("[vdso]"):
                lo, hi = (int(x, 16) for x in line.split()[0].split("-"))
                with open("/proc/self/mem", "rb", buffering=0) as mem:
                    mem.seek(lo)
                    image = mem.read(hi - lo)
                syms = sorted(n for n in elf_symbols(image)
                              if not n.startswith("LINUX_") and (n.startswith("__vdso_") or not n.startswith("_")))
                return {"available": True, "base": hex(lo), "symbols": syms, "why": None}
    except (OSError, ValueError, struct.error) as e:
        return {"available": None, "symbols": [], "why": f"cannot read /proc/self vDSO: {e}"}
    return {"available": False, "symbols": [], "why": "no [vdso] mapping in this process (vdso=0?)"}


# --- libc classification ----------------------------------------------------

def _objdump_symbols(path):
    """[(addr, size, name)] from objdump -T and -t (a stripped libc has only -T)."""
    out = {}
    for flag in ("-T", "-t"):
        p = proc.run(["objdump", flag, path], timeout=60)
        for line in p.stdout.splitlines():
            parts = line.split()
            if len(parts) < 4 or not re.fullmatch(r"[0-9a-f]{8,16}", parts[0]):
                continue
            if ".text" not in line and " F " not in line and "DF" not in line:
                continue
            # "addr flags... section size [version] name"
            m = re.match(r"^([0-9a-f]+)\s.*?\s(\S+)\s+([0-9a-f]{8,16})\s+(?:\S+\s+)?(\S+)$", line)
            if not m or m.group(2) in ("*UND*",):
                continue
            addr, size, name = int(m.group(1), 16), int(m.group(3), 16), m.group(4)
            name = name.split("@", 1)[0]
            out.setdefault(name, (addr, size))
    return out


def _arch_of(path):
    with open(path, "rb") as f:
        head = f.read(20)
    if head[:4] != b"\x7fELF":
        raise ValueError(f"{path} is not an ELF file")
    return 32 if head[4] == 1 else 64


def _disasm_range(path, start, stop):
    p = proc.run(["objdump", "-d", "-w", f"--start-address={start:#x}", f"--stop-address={stop:#x}",
                    path], timeout=120)
    if p.returncode:
        raise RuntimeError(p.stderr.strip())
    return parse_objdump(p.stdout)


def classify_libc(path, depth=4):
    """How the libc (or any ELF) at `path` enters the kernel in write().

    {path, bits, entry: "vdso"|"int80"|"syscall"|"sysenter"|"unknown", symbol, all: [kinds seen],
     evidence: ["func+off: insn", ...], chain: [function names followed], why}. Never raises."""
    res = {"path": str(path), "bits": None, "entry": "unknown", "symbol": None, "all": [],
           "evidence": [], "chain": [], "why": None}
    try:
        path = str(Path(path).resolve())
        res["bits"] = _arch_of(path)
        if not proc.which("objdump"):
            res["why"] = "objdump is not installed (binutils)"
            return res
        syms = _objdump_symbols(path)
    except (OSError, ValueError) as e:
        res["why"] = str(e)
        return res
    name = next((n for n in WRITE_NAMES if n in syms), None)
    if name is None:
        res["why"] = f"none of {', '.join(WRITE_NAMES)} is defined in {path}"
        return res
    res["symbol"] = name
    by_addr = {a: (n, s) for n, (a, s) in syms.items()}
    starts = sorted(by_addr)

    def extent(addr):
        n, s = by_addr.get(addr, (None, 0))
        if s:
            return addr + s
        later = [a for a in starts if a > addr]
        return min(later[0] if later else addr + 512, addr + 512)

    def label(addr):
        if addr in by_addr:
            return by_addr[addr][0]
        return f"sub_{addr:x}"

    # Breadth first: the entry closest to write() wins; deeper levels are looked at only when
    # a level has no entry instruction at all.
    frontier, seen = [syms[name][0]], set()
    for level in range(depth + 1):
        found, nxt = [], []
        for start in frontier:
            if start in seen:
                continue
            seen.add(start)
            stop = extent(start)
            try:
                insns = _disasm_range(path, start, stop)
            except RuntimeError as e:
                res["why"] = f"objdump failed: {e}"
                return res
            res["chain"].append(f"{label(start)}@{start:#x} (level {level})")
            for k, ins in enumerate(insns):
                kind = entry_kind(ins["text"])
                if kind:
                    ctx = insns[max(0, k - 2):k + 1]
                    found.append((kind, [f"{label(start)}+{c['addr'] - start:#x}: {c['text']}" for c in ctx]))
                m = re.match(r"^(call|jmp)\w*\s+([0-9a-f]+)\b", ins["text"])
                if m:
                    tgt = int(m.group(2), 16)
                    if m.group(1) == "call" or not (start <= tgt < stop):
                        # get_pc_thunk helpers are one mov and a ret: not worth a level
                        if not label(tgt).startswith("__x86.get_pc_thunk"):
                            nxt.append(tgt)
        if found:
            kinds = []
            for kind, ev in found:
                if kind not in kinds:
                    kinds.append(kind)
                res["evidence"].extend(ev)
            res["all"] = kinds
            res["entry"] = kinds[0]
            res["why"] = _libc_why(kinds, res["bits"], level)
            return res
        frontier = nxt
        if not frontier:
            break
    res["why"] = (f"no int $0x80, call *%gs:0x10, sysenter or syscall within {depth} levels of "
                  f"calls from {name} (calls through the PLT are not followed)")
    return res


def _libc_why(kinds, bits, level):
    where = "in write itself" if level == 0 else f"{level} call(s) below write"
    k = kinds[0]
    text = {
        "vdso": "calls __kernel_vsyscall through the pointer in the TCB (call *%gs:0x10): glibc's "
                "i686 build (I386_USE_SYSENTER); the vDSO then uses the fastest instruction the "
                "kernel patched in",
        "int80": "inline int $0x80 on every call: glibc's generic i386/i586 build (no vDSO), the "
                 "seed hypothesis's case",
        "syscall": "inline syscall: the x86-64 ABI" if bits == 64 else "inline syscall from 32-bit code",
        "sysenter": "inline sysenter (unusual: needs the vDSO landing pad to return)",
    }[k]
    more = f"; also seen: {', '.join(kinds[1:])}" if len(kinds) > 1 else ""
    return f"{text} ({where}){more}"


def _resolve_linker_script(path):
    """gcc's libc.so is often a linker script naming the real libc.so.6."""
    p = Path(path)
    try:
        head = p.read_bytes()[:4096]
    except OSError:
        return None
    if head[:4] == b"\x7fELF":
        return p
    m = re.search(rb"(/\S*libc\.so\.6)", head)
    return Path(m.group(1).decode()) if m else None


def default_libcs():
    """{"64": path|None, "32": path|None, "why": {bits: reason}} for this machine's libcs."""
    out, why = {}, {}
    cands = {
        "64": ["/lib/x86_64-linux-gnu/libc.so.6", "/lib64/libc.so.6", "/usr/lib64/libc.so.6",
               "/usr/lib/libc.so.6"],
        "32": ["/lib32/libc.so.6", "/usr/lib32/libc.so.6", "/lib/i386-linux-gnu/libc.so.6",
               "/usr/lib/i386-linux-gnu/libc.so.6", "/lib/libc.so.6"],
    }
    for bits, flag in (("64", "-m64"), ("32", "-m32")):
        found = None
        if proc.which("gcc"):
            for name in ("libc.so.6", "libc.so"):
                p = proc.run(["gcc", flag, f"-print-file-name={name}"], timeout=30)
                q = p.stdout.strip()
                if p.returncode == 0 and q and os.path.isabs(q) and os.path.exists(q):
                    found = _resolve_linker_script(q)
                    if found:
                        break
        if found is None:
            for c in cands[bits]:
                if os.path.exists(c):
                    try:
                        if _arch_of(c) == int(bits):
                            found = Path(c)
                            break
                    except (OSError, ValueError):
                        pass
        if found is None:
            why[bits] = f"no {bits}-bit libc.so.6 found (gcc {flag} -print-file-name and the usual directories)"
        out[bits] = str(Path(found).resolve()) if found else None
    out["why"] = why
    return out


def libc_entries():
    """{"32": classify_libc(...) | {entry: unknown, why}, "64": ...} for the default libcs."""
    d = default_libcs()
    out = {}
    for bits in ("32", "64"):
        if d[bits]:
            out[bits] = classify_libc(d[bits])
        else:
            out[bits] = {"path": None, "entry": "unknown", "evidence": [], "why": d["why"][bits]}
    return out


# --- command line -------------------------------------------------------------

def add_arguments(parser, name):
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")
    if name == "vdso":
        parser.add_argument("--binary", help="the 32-bit program to read the vDSO from "
                                             "(default: one from build/, else a tiny one made with nasm)")
        parser.add_argument("--64", dest="show64", action="store_true",
                            help="also list the 64-bit vDSO's functions")
        parser.add_argument("--save", metavar="FILE",
                            help="also write the vDSO image to FILE and AT_SYSINFO's offset to "
                                 "FILE.txt (to record a machine)")
    else:
        parser.add_argument("paths", nargs="*", metavar="PATH",
                            help="libraries or programs to classify (default: this machine's "
                                 "32-bit and 64-bit libc.so.6)")


def main(args, name):
    if name == "vdso":
        r = vdso32(args.binary, save=args.save)
        if args.show64:
            r["vdso64"] = vdso64()
        if args.json:
            print(json.dumps(r, indent=1))
        else:
            print(format_vdso(r))
        return 0 if r["instruction"] else 1
    paths = args.paths
    if not paths:
        results = list(libc_entries().values())
    else:
        results = [classify_libc(p) for p in paths]
    if args.json:
        print(json.dumps(results, indent=1))
    else:
        for r in results:
            print(format_libc(r))
            print()
    return 0 if all(r["entry"] != "unknown" for r in results) else 1


def format_vdso(r):
    lines = [f"32-bit vDSO __kernel_vsyscall: {r['instruction'] or 'unknown'}"]
    if r.get("source"):
        lines.append(f"  read from: a stopped {r['source']} (pid's auxv AT_SYSINFO, /proc/<pid>/mem)")
    if r.get("kernel_vsyscall"):
        lines.append(f"  vDSO at {r['vdso_base']}, __kernel_vsyscall at {r['kernel_vsyscall']}, "
                     f"landing pad at {r.get('landing_pad') or 'unknown'}")
    if r.get("disasm"):
        lines.append("  disassembly:")
        for d in r["disasm"]:
            mark = "   <- landing pad" if r.get("landing_pad") and d.startswith(r["landing_pad"][2:].rjust(8, "0")) else ""
            lines.append(f"    {d}{mark}")
    if r.get("why"):
        lines.append(f"  why: {r['why']}")
    if r.get("vdso64"):
        v = r["vdso64"]
        lines.append(f"64-bit vDSO: {', '.join(v['symbols']) if v['symbols'] else v['why']}")
    return "\n".join(lines)


def format_libc(r):
    lines = [f"{r['path']}: {r['entry']}" + (f" ({r['bits']}-bit, via {r['symbol']})" if r.get("symbol") else "")]
    if r.get("why"):
        lines.append(f"  why: {r['why']}")
    for e in r.get("evidence", [])[:12]:
        lines.append(f"  evidence: {e}")
    if r.get("chain") and len(r["chain"]) > 1:
        lines.append(f"  followed: {' -> '.join(r['chain'][:8])}")
    return "\n".join(lines)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main(None, "vdso"))
