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
addresses, from a private copy of the image (its listing is what a person reads). The child is
then killed.  The commands themselves are cli/vdso.py and cli/classify_libc.py; their text is
present/entrypath.py's.

`tw classify-libc` finds write/__write/__libc_write in a library's symbol tables (machine/elf.py,
the library read once), decodes it with capstone (machine/decode.py) and follows direct calls and tail jumps inside the library a few levels (modern
glibc wraps the call in __syscall_cancel and friends) until it finds the instruction that
enters the kernel: `int $0x80`, `call *%gs:0x10` (the vDSO pointer glibc keeps in the TCB),
`syscall` or `sysenter`.
"""
import os
import re
import subprocess
import tempfile
from pathlib import Path

from ..core import files, paths, proc
from . import decode, elf, process
from .vdso32 import classify_vdso32, entry_kind

AT_NULL, AT_SYSINFO, AT_SYSINFO_EHDR = 0, 32, 33
PTRACE_TRACEME = 0

WRITE_NAMES = ("write", "__write", "__libc_write")


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
            data = files.read_regular(c, what="program", magic=b"\x7fELF")
        except (OSError, elf.ElfError):
            continue
        if data and elf.is_i386(data):
            return c
    return None


def read_process_vdso(binary):
    """Start `binary` stopped at its first instruction and read its auxv and vDSO
    (machine.process).

    Returns {pid, auxv: {type: value}, base, end, image: bytes, word: 4|8} or raises OSError /
    RuntimeError with a reason."""
    p = process.start_stopped([str(binary)], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        info = process.read(p.pid, vdso=False)
        if info["why"]:
            raise RuntimeError(info["why"])
        v = next((m for m in info["maps"] if m["path"] == "[vdso]"), None)
        base, end = (v["lo"], v["hi"]) if v else (None, None)
        image = process.vdso_image(p.pid, v) if v else None
        return {"pid": p.pid, "auxv": info["auxv"], "base": base, "end": end, "image": image,
                "word": 4 if info["bits"] == 32 else 8}
    finally:
        process.kill(p)


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
        # The image, and beside it (FILE.txt) its size and AT_SYSINFO's offset in it: what
        # tw doctor --record keeps in tests/fixtures/machines/* (machine/doctor.py reads both).
        # Atomic and never through a symbolic link (core.files).
        files.write_bytes(save, proc["image"])
        files.write_text(str(save) + ".txt",
                         f"vdso32_size={len(proc['image'])}\n"
                         + (f"at_sysinfo_offset={sysinfo - proc['base']:#x}\n"
                            if sysinfo is not None else ""))
    return res


def vdso64():
    """The 64-bit vDSO of this process: its exported functions. It has no kernel-entry function:
    64-bit code always enters with an inline `syscall`; the vDSO only answers some calls
    (clock_gettime, gettimeofday, time, getcpu) without entering the kernel."""
    try:
        own = process.own_vdso()
        if own is not None:
            lo, image = own
            syms = sorted(n for n in elf.Elf(image, "the 64-bit vDSO").symbol_table()
                          if not n.startswith("LINUX_") and (n.startswith("__vdso_") or not n.startswith("_")))
            return {"available": True, "base": hex(lo), "symbols": syms, "why": None}
    except (OSError, elf.ElfError) as e:
        return {"available": None, "symbols": [], "why": f"cannot read /proc/self vDSO: {e}"}
    return {"available": False, "symbols": [], "why": "no [vdso] mapping in this process (vdso=0?)"}


# --- libc classification ----------------------------------------------------

def _function_symbols(e):
    """{name: (addr, size)} of the functions (and untyped code symbols) of an Elf."""
    out = {}
    for v, size, t, n in e.symbols:
        if t == elf.STT_FUNC or (t == elf.STT_NOTYPE and e.in_exec(v)):
            out.setdefault(n, (v, size))
    return out


def classify_libc(lib, depth=4):
    """How the libc (or any ELF) `lib` enters the kernel in write().  lib: a path (read once,
    bounded) or an elf.Elf already read.

    {path, bits, entry: "vdso"|"int80"|"syscall"|"sysenter"|"unknown", symbol, all: [kinds seen],
     evidence: ["func+off: insn", ...], chain: [function names followed], why}.  A path that
    cannot be read or parsed gives entry "unknown" with the reason; never raises."""
    res = {"path": str(getattr(lib, "path", lib)), "bits": None, "entry": "unknown",
           "symbol": None, "all": [], "evidence": [], "chain": [], "why": None}
    try:
        e = lib if isinstance(lib, elf.Elf) else elf.load(Path(lib).resolve())
        res["path"] = str(Path(e.path).resolve()) if not isinstance(lib, elf.Elf) else e.path
        res["bits"] = e.bits
        dec = decode.Decoder(e)
        syms = _function_symbols(e)
        dsyms = e.data_symbols
    except (OSError, elf.ElfError, decode.NoDecoder) as err:
        res["why"] = err.line() if isinstance(err, decode.NoDecoder) else str(err)
        return res
    path = res["path"]
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

    def insn_text(ins):
        # objdump's <symbol> after a memory operand: what `call *_dl_sysinfo` is known by
        t = decode.text(ins)
        for o in ins.ops:
            a = decode.mem_target(ins, o)
            if a in dsyms:
                return f"{t} <{dsyms[a]}>"
        return t

    # Breadth first: the entry closest to write() wins; deeper levels are looked at only when
    # a level has no entry instruction at all.
    frontier, seen = [syms[name][0]], set()
    for level in range(depth + 1):
        found, nxt = [], []
        for start in frontier:
            if start in seen:
                continue
            seen.add(start)
            region = dec.region(start)
            if region is None:
                continue
            stop = min(extent(start), region.vaddr + region.size)
            insns = list(dec.run(start, stop, start))
            res["chain"].append(f"{label(start)}@{start:#x} (level {level})")
            for k, ins in enumerate(insns):
                kind = entry_kind(insn_text(ins))
                if kind:
                    ctx = insns[max(0, k - 2):k + 1]
                    found.append((kind, [f"{label(start)}+{c.addr - start:#x}: {insn_text(c)}"
                                         for c in ctx]))
                if ins.op in ("call", "jmp") and ins.ops and not ins.ops[0].startswith("*"):
                    try:
                        tgt = int(ins.ops[0], 0)
                    except ValueError:
                        continue
                    if ins.op == "call" or not (start <= tgt < stop):
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
        head = (files.read_regular(p, limit=elf.MAX_ELF, what="library") or b"")[:4096]
    except (OSError, elf.ElfError):
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
                        head = files.read_regular(c, what="library", magic=b"\x7fELF")
                        if head and elf.header(head, c).bits == int(bits):
                            found = Path(c)
                            break
                    except (OSError, elf.ElfError):
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
