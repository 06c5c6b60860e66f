"""`tw classify BINARY...`: every place an ELF program or library enters the kernel.

The static half of a diagnosis.  Any ELF file on x86: static or dynamic, 32- or 64-bit, PIE or
not, a program or a library.  The file is read twice:

  its ELF structure, here in Python: class, type, PT_INTERP, DT_NEEDED/DT_RUNPATH, the
  executable PT_LOAD segments and every symbol of .symtab and .dynsym (what resolves an
  address to a function, also for `tw diagnose`, which resolves live instruction pointers);

  its machine code, by `objdump -d -w` over every executable section.  An instruction is a
  kernel-entry site when it matches a row of the mechanism registry (variants/registry): its
  `bytes` column is the instruction's encoding (cd80 int $0x80, 0f05 syscall, 0f34 sysenter,
  65ff1510000000 call *%gs:0x10), or `target=ADDR` for a call into that page (the legacy
  vsyscall page).  The registry's entry kinds also name the forms no byte string identifies,
  listed in FORMS: a call through a pointer the program keeps to __kernel_vsyscall
  (AT_SYSINFO: glibc's _dl_sysinfo, musl's __sysinfo, this project's tw_vsyscall), loaded into
  a register and called there or called through memory; and a call through a pointer to a
  vDSO function (Go's runtime.vdsoClockgettimeSym), which does not enter the kernel at all.

A dynamic program usually enters through its C library: the libc named by DT_NEEDED is found
(DT_RUNPATH, then `ldconfig -p`, then the usual directories for the file's class) and
classified too, with entrypath.classify_libc for the path its write() takes.

The answer (classify()) carries one line a user can act on, `headline`, then the detail;
`tw classify` (cli/classify.py) prints it.
"""
import functools
import os
import re
import struct
from pathlib import Path

from ..core import proc
from . import entrypath, registry

# How objdump prints the forms of an entry kind that no fixed byte string identifies, keyed by
# the registry's entry kinds (registry.ENTRIES).  `pointer` is a regular expression over the
# name of the data symbol a call goes through (directly, or via a register loaded from it).
FORMS = {
    "vdso32-call": {"pointer": re.compile(r"sysinfo|vsyscall", re.I), "bits": (32,),
                    "what": "a call through a pointer to __kernel_vsyscall (AT_SYSINFO)"},
    "vdso-call": {"pointer": re.compile(r"vdso", re.I), "bits": (32, 64),
                  "what": "a call through a pointer to a vDSO function"},
}
# What each entry kind is, in the words of a headline.
KIND_TEXT = {
    "int80": "inline int 0x80",
    "sysenter": "inline sysenter",
    "syscall": "inline syscall",
    "vdso32-call": "the vDSO (a call to __kernel_vsyscall)",
    "vsyscall-call": "a call into the legacy vsyscall page",
    "vdso-call": "a vDSO function (no kernel entry)",
}
# classify_libc's words -> the registry's entry kinds.
LIBC_KIND = {"vdso": "vdso32-call", "int80": "int80", "syscall": "syscall", "sysenter": "sysenter"}
# Entry kinds that reach the kernel (a vdso-call answers in user space).
ENTERS = ("int80", "sysenter", "syscall", "vdso32-call", "vsyscall-call")

PT_LOAD, PT_DYNAMIC, PT_INTERP = 1, 2, 3
PF_X = 1
SHT_SYMTAB, SHT_DYNSYM = 2, 11
SHF_EXECINSTR = 4
STT_OBJECT, STT_FUNC = 1, 2
DT_NEEDED, DT_STRTAB, DT_SONAME, DT_RPATH, DT_RUNPATH, DT_FLAGS_1 = 1, 5, 14, 15, 29, 0x6ffffffb
DF_1_PIE = 0x08000000
EM_386, EM_X86_64 = 3, 62


class ElfError(ValueError):
    """The file is not an ELF file this tool reads: the message says why, in one line."""


# --- ELF ---------------------------------------------------------------------

class Elf:
    """The parts of an x86 ELF file a classification needs, read with struct."""

    def __init__(self, path, data=None):
        """path: the file; data: its bytes when they are already in hand (a vDSO image read
        from a process, named by path for messages only)."""
        self.path = str(path)
        if data is None:
            try:
                with open(path, "rb") as f:
                    data = f.read()
            except IsADirectoryError:
                raise ElfError(f"{path} is a directory")
            except OSError as e:
                err = ElfError(f"cannot read {path}: {e.strerror}")
                err.system = True       # the system refused, not the user's file: exit 4
                raise err from None
        if data[:4] != b"\x7fELF":
            raise ElfError(f"{path} is not an ELF file")
        if len(data) < 52 or data[4] not in (1, 2) or data[5] != 1:
            raise ElfError(f"{path} is not a little-endian 32- or 64-bit ELF file")
        self.data = data
        self.bits = 64 if data[4] == 2 else 32
        try:
            self._parse()
        except (struct.error, IndexError, UnicodeDecodeError) as e:
            raise ElfError(f"{path}: damaged ELF file ({e})")

    def _parse(self):
        d, b64 = self.data, self.bits == 64
        if b64:
            (self.type, self.machine, _, self.entry, phoff, shoff, _, _, phentsize, phnum,
             shentsize, shnum, shstrndx) = struct.unpack_from("<HHIQQQIHHHHHH", d, 16)
        else:
            (self.type, self.machine, _, self.entry, phoff, shoff, _, _, phentsize, phnum,
             shentsize, shnum, shstrndx) = struct.unpack_from("<HHIIIIIHHHHHH", d, 16)
        if self.machine not in (EM_386, EM_X86_64):
            raise ElfError(f"{self.path} is not x86 machine code (e_machine {self.machine})")
        self.segments = []
        for i in range(phnum):
            off = phoff + i * phentsize
            if b64:
                t, flags, o, va, _, fsz, msz, _ = struct.unpack_from("<IIQQQQQQ", d, off)
            else:
                t, o, va, _, fsz, msz, flags, _ = struct.unpack_from("<IIIIIIII", d, off)
            self.segments.append({"type": t, "flags": flags, "offset": o, "vaddr": va,
                                  "filesz": fsz, "memsz": msz})
        self.sections = []
        for i in range(shnum if shoff else 0):
            off = shoff + i * shentsize
            if b64:
                name, t, flags, addr, o, size, link, _, _, entsize = struct.unpack_from("<IIQQQQIIQQ", d, off)
            else:
                name, t, flags, addr, o, size, link, _, _, entsize = struct.unpack_from("<IIIIIIIIII", d, off)
            self.sections.append({"name_off": name, "type": t, "flags": flags, "addr": addr,
                                  "offset": o, "size": size, "link": link, "entsize": entsize})
        if self.sections and shstrndx < len(self.sections):
            base = self.sections[shstrndx]["offset"]
            for s in self.sections:
                s["name"] = self._cstr(base + s["name_off"])
        self.interp = None
        for s in self.segments:
            if s["type"] == PT_INTERP:
                self.interp = d[s["offset"]:s["offset"] + s["filesz"]].split(b"\0")[0].decode()
        self.needed, self.runpath, self.flags_1, self.soname = [], [], 0, None
        self._dynamic()

    def _cstr(self, off):
        end = self.data.index(b"\0", off)
        return self.data[off:end].decode(errors="replace")

    def vaddr_to_offset(self, va):
        for s in self.segments:
            if s["type"] == PT_LOAD and s["vaddr"] <= va < s["vaddr"] + s["filesz"]:
                return va - s["vaddr"] + s["offset"]
        return None

    def bytes_at(self, va, n):
        """n bytes of the file's image at vaddr va, or None outside the file's segments."""
        off = self.vaddr_to_offset(va)
        return None if off is None else self.data[off:off + n]

    def offset_to_vaddr(self, off):
        for s in self.segments:
            if s["type"] == PT_LOAD and s["offset"] <= off < s["offset"] + s["filesz"]:
                return off - s["offset"] + s["vaddr"]
        return None

    def _dynamic(self):
        dyn = next((s for s in self.segments if s["type"] == PT_DYNAMIC), None)
        if dyn is None:
            return
        fmt = "<qQ" if self.bits == 64 else "<iI"
        size = struct.calcsize(fmt)
        entries = []
        for off in range(dyn["offset"], dyn["offset"] + dyn["filesz"] - size + 1, size):
            tag, val = struct.unpack_from(fmt, self.data, off)
            if tag == 0:
                break
            entries.append((tag, val))
        strtab = next((v for t, v in entries if t == DT_STRTAB), None)
        stroff = self.vaddr_to_offset(strtab) if strtab is not None else None
        for tag, val in entries:
            if tag == DT_FLAGS_1:
                self.flags_1 = val
            if stroff is None:
                continue
            if tag == DT_NEEDED:
                self.needed.append(self._cstr(stroff + val))
            elif tag == DT_SONAME:
                self.soname = self._cstr(stroff + val)
            elif tag in (DT_RUNPATH, DT_RPATH):
                self.runpath.extend(p for p in self._cstr(stroff + val).split(":") if p)

    @property
    def static(self):
        return self.interp is None and not self.needed

    @property
    def pie(self):
        """ET_DYN with an interpreter or DF_1_PIE (a static-pie has only the flag)."""
        return self.type == 3 and (self.interp is not None or bool(self.flags_1 & DF_1_PIE))

    @property
    def kind(self):
        if self.type == 2:
            return "executable"
        if self.type == 3:
            if self.soname:     # glibc's libc.so.6 has an interpreter too: it runs
                return "shared library"
            return "PIE executable" if self.pie else "shared library"
        return {1: "relocatable object", 4: "core file"}.get(self.type, f"ELF type {self.type}")

    def exec_start(self):
        """The lowest vaddr of an executable PT_LOAD: the kernel's mm->start_code minus the
        load bias (fs/binfmt_elf.c)."""
        xs = [s["vaddr"] for s in self.segments if s["type"] == PT_LOAD and s["flags"] & PF_X]
        return min(xs) if xs else None

    @functools.cached_property
    def symbols(self):
        """[(value, size, type, name)] of .symtab and .dynsym, defined ones, sorted by value."""
        out, seen = [], set()
        for s in self.sections:
            if s["type"] not in (SHT_SYMTAB, SHT_DYNSYM) or not s["entsize"]:
                continue
            if s["link"] >= len(self.sections):
                continue
            stroff = self.sections[s["link"]]["offset"]
            for j in range(s["size"] // s["entsize"]):
                e = s["offset"] + j * s["entsize"]
                if self.bits == 64:
                    name, info, _, shndx, value, size = struct.unpack_from("<IBBHQQ", self.data, e)
                else:
                    name, value, size, info, _, shndx = struct.unpack_from("<IIIBBH", self.data, e)
                if not name or shndx == 0 or not value:
                    continue
                n = self._cstr(stroff + name).split("@", 1)[0]
                key = (value, n)
                if key in seen:
                    continue
                seen.add(key)
                out.append((value, size, info & 0xF, n))
        out.sort()
        return out

    @functools.cached_property
    def _functions(self):
        fs = [(v, sz, n) for v, sz, t, n in self.symbols if t == STT_FUNC]
        if not fs:     # Go and hand-written assembly may mark text symbols NOTYPE
            fs = [(v, sz, n) for v, sz, t, n in self.symbols if t == 0 and self._in_exec(v)]
        return fs, [v for v, _, _ in fs]

    def _in_exec(self, va):
        return any(s["type"] == PT_LOAD and s["flags"] & PF_X and s["vaddr"] <= va < s["vaddr"] + s["memsz"]
                   for s in self.segments)

    def function_at(self, va):
        """(name, offset) of the function holding vaddr va, or (None, None).  A symbol of size
        0 extends to the next one."""
        import bisect
        fs, starts = self._functions
        i = bisect.bisect_right(starts, va) - 1
        while i >= 0:
            v, sz, n = fs[i]
            if sz and va < v + sz:
                return n, va - v
            if not sz:
                nxt = starts[i + 1] if i + 1 < len(starts) else None
                if (nxt is None or va < nxt) and va - v < 1 << 16:
                    return n, va - v
            # an earlier, larger symbol may still cover va (nested local labels)
            if i and fs[i - 1][0] == v:
                i -= 1
                continue
            break
        return None, None

    @functools.cached_property
    def data_symbols(self):
        """{vaddr: name} of object (and untyped, non-code) symbols: what a pointer lives in."""
        out = {}
        for v, _, t, n in self.symbols:
            if t == STT_OBJECT or (t == 0 and not self._in_exec(v)):
                out.setdefault(v, n)
        return out


# --- the libc a dynamic program relies on -------------------------------------------------

def libc_flavour(elf):
    """('glibc'|'musl'|None, the DT_NEEDED name) of the C library a dynamic program links."""
    interp = elf.interp or ""
    for n in elf.needed:
        if n.startswith("libc.musl") or "ld-musl" in n:
            return "musl", n
        if n == "libc.so.6":
            return "glibc", n
        if n == "libc.so":
            return ("musl" if "musl" in interp else "unknown libc"), n
    if "ld-musl" in interp:
        return "musl", Path(interp).name
    return None, None


def _ldconfig_paths(name, bits):
    if not proc.which("ldconfig") and not os.path.exists("/sbin/ldconfig"):
        return []
    exe = proc.which("ldconfig") or "/sbin/ldconfig"
    try:
        p = proc.run([exe, "-p"], timeout=30)
    except OSError:
        return []
    out = []
    for line in p.stdout.splitlines():
        m = re.match(r"^\s*(\S+)\s+\(([^)]*)\)\s+=>\s+(\S+)$", line)
        if m and m.group(1) == name:
            tags = m.group(2)
            if ("x86-64" in tags) == (bits == 64) and "x32" not in tags:
                out.append(m.group(3))
    return out


DEFAULT_DIRS = {64: ["/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/lib64",
                     "/lib", "/usr/lib"],
                32: ["/lib/i386-linux-gnu", "/usr/lib/i386-linux-gnu", "/lib32", "/usr/lib32",
                     "/lib", "/usr/lib"]}


def find_library(name, elf):
    """The path of DT_NEEDED `name` for this ELF (its class): DT_RUNPATH/RPATH ($ORIGIN
    expanded), then ldconfig's cache, then the usual directories; None when not found."""
    origin = str(Path(elf.path).resolve().parent)
    cands = [os.path.join(d.replace("$ORIGIN", origin).replace("${ORIGIN}", origin), name)
             for d in elf.runpath]
    if "/" in name:
        cands.insert(0, name)
    cands += _ldconfig_paths(name, elf.bits)
    cands += [os.path.join(d, name) for d in DEFAULT_DIRS[elf.bits]]
    for c in cands:
        try:
            with open(c, "rb") as f:
                head = f.read(20)
        except OSError:
            continue
        if head[:4] == b"\x7fELF" and (64 if head[4] == 2 else 32) == elf.bits \
                and struct.unpack_from("<H", head, 18)[0] == elf.machine:
            return str(Path(c).resolve())
    return None


# --- the sites ---------------------------------------------------------------

@functools.lru_cache(maxsize=None)
def decoders(mechs=None):
    """What identifies each entry kind, from the registry's rows: {kind: {"bytes": {hex},
    "pages": {page}}}, plus the kinds FORMS decodes.  mechs: a tuple of registry rows (all of
    variants/registry by default)."""
    mechs = tuple(registry.mechanisms()) if mechs is None else mechs
    out = {}
    for m in mechs:
        if m.entry == "libc" or not m.bytes:
            continue
        d = out.setdefault(m.entry, {"bytes": set(), "pages": set()})
        if m.bytes.startswith("target="):
            d["pages"].add(int(m.bytes.split("=", 1)[1], 16) & ~0xFFF)
        else:
            d["bytes"].add(m.bytes.lower())
    for kind in FORMS:
        out.setdefault(kind, {"bytes": set(), "pages": set()})
    return out


def undecodable(mechs=None):
    """Entry kinds of the registry schema this classifier cannot find, and why."""
    dec = decoders(mechs)
    out = {}
    for k in registry.ENTRIES:
        if k == "libc":
            continue
        d = dec.get(k)
        if d is None or (not d["bytes"] and not d["pages"] and k not in FORMS):
            out[k] = ("no row of variants/registry gives its bytes or target, so its sites "
                      "cannot be recognised")
    return out


_HEADER = re.compile(r"^([0-9a-f]+) <(.+)>:$")
_REG = r"%[re]?[a-z0-9]+"
_CALL_REG = re.compile(r"^\*(" + _REG + r")$")
_DIRECT = re.compile(r"^([0-9a-f]+)\b")
_MOV_REG = re.compile(r"^mov[lq]?\s+(\S+),(" + _REG + r")$")
_ABS = re.compile(r"^(?:%ds:)?(0x[0-9a-f]+)$")
_RIP_COMMENT = re.compile(r"#\s*([0-9a-f]+)")
# Instructions that read their last operand without writing it.
READ_ONLY = ("test", "cmp", "push", "bt")
# How many instructions a register loaded from a pointer is followed to its call.
TRACK = 40


def _mem_target(text):
    """The absolute address a memory operand of `text` names, or None: `0x804f128` (32-bit
    absolute), `0x2f3e(%rip)  # 404028 <sym>` (objdump's resolved rip-relative comment)."""
    if "(%rip)" in text:
        m = _RIP_COMMENT.search(text)
        return int(m.group(1), 16) if m else None
    sp = text.find(" ")
    if sp < 0:
        return None
    src = text[sp:].split("#", 1)[0].strip().lstrip("*").split(",", 1)[0]
    m = _ABS.match(src)
    return int(m.group(1), 16) if m else None


def disassemble(path):
    """objdump -d -w of every executable section: [(addr, bytes_hex, text, label)], text with
    objdump's padding after the mnemonic squeezed to one space."""
    if not proc.which("objdump"):
        raise RuntimeError("objdump is not installed (binutils)")
    p = proc.run(["objdump", "-d", "-w", path], timeout=600)
    if p.returncode:
        raise RuntimeError(f"objdump failed on {path}: {p.stderr.strip()[-300:]}")
    out, label = [], None
    for line in p.stdout.splitlines():
        f = line.split("\t")
        if len(f) >= 3 and f[0].endswith(":"):
            try:
                addr = int(f[0][:-1], 16)
            except ValueError:
                continue
            text = f[2].strip()
            sp = text.find(" ")
            if sp > 0:
                text = text[:sp] + " " + text[sp:].lstrip()
            out.append((addr, f[1].replace(" ", ""), text, label))
        elif line.endswith(">:"):
            h = _HEADER.match(line)
            if h:
                label = h.group(2)
    return out


def find_sites(elf, insns, mechs=None):
    """Every kernel-entry site (and vDSO-function call) in the disassembly:
    [{addr, kind, bytes, insn, function, offset, via}]."""
    dec = decoders(mechs)
    by_bytes = {b: k for k, d in dec.items() for b in d["bytes"]}
    pages = {p: k for k, d in dec.items() for p in d["pages"]}
    dsyms = elf.data_symbols
    pointer_kinds = [(k, f) for k, f in FORMS.items() if k in dec and elf.bits in f["bits"]]
    # the pointers worth following: data symbols whose names say what they hold
    pointers = {}
    for a, name in dsyms.items():
        for k, f in pointer_kinds:
            if f["pointer"].search(name):
                pointers[a] = (k, name)
                break

    sites = []
    regs = {}          # register -> (kind, via, index of the load)
    last_label = None

    def add(addr, kind, byts, text, via=None):
        fn, off = elf.function_at(addr)
        sites.append({"addr": addr, "kind": kind, "bytes": byts, "insn": text,
                      "function": fn, "offset": off, "via": via})

    follow = bool(pointers or pages)
    for i, (addr, byts, text, label) in enumerate(insns):
        k = by_bytes.get(byts)
        if k:
            add(addr, k, byts, text)
            continue
        if not follow:
            continue
        if label != last_label:
            regs.clear()
            last_label = label
        op = text.split(" ", 1)[0]
        if op.startswith(("call", "jmp")):
            rest = text[len(op):].strip()
            if rest.startswith("*"):
                m = _CALL_REG.match(rest)
                if m:
                    if m.group(1) in regs:
                        kind, via, _ = regs[m.group(1)]
                        add(addr, kind, byts, text, via)
                else:
                    t = _mem_target(text)
                    if t in pointers:
                        add(addr, pointers[t][0], byts, text, pointers[t][1])
            elif pages:
                m = _DIRECT.match(rest)
                if m and (int(m.group(1), 16) & ~0xFFF) in pages:
                    add(addr, pages[int(m.group(1), 16) & ~0xFFF], byts, text,
                        f"{int(m.group(1), 16):#x}")
            if op.startswith("jmp"):
                regs.clear()
            continue
        if op.startswith("ret"):
            regs.clear()
            continue
        if op.startswith("mov"):
            # register data flow, a few instructions deep: loads of a pointer symbol or of an
            # address in a target page, and moves between registers
            m = _MOV_REG.match(text.split("#", 1)[0].strip())
            if m:
                src, dst = m.group(1), m.group(2)
                if src in regs:
                    regs[dst] = regs[src][:2] + (i,)
                    continue
                if pages and src.startswith("$0x"):
                    v = int(src[1:], 16)
                    if (v & ~0xFFF) in pages:
                        regs[dst] = (pages[v & ~0xFFF], f"{v:#x}", i)
                        continue
                t = _mem_target(text) if pointers else None
                if t in pointers:
                    regs[dst] = pointers[t] + (i,)
                    continue
                regs.pop(dst, None)
                continue
        if regs:
            # any other instruction writing a tracked register ends its tracking
            if not op.startswith(READ_ONLY):
                dst = text.split("#", 1)[0].rsplit(",", 1)
                if len(dst) == 2:
                    regs.pop(dst[1].strip(), None)
            for r in [r for r, v in regs.items() if i - v[2] > TRACK]:
                regs.pop(r)
    return sites


def summarise_sites(sites):
    """{kind: {"sites": n, "functions": [(name, n)], ...}} with functions by site count."""
    out = {}
    for s in sites:
        d = out.setdefault(s["kind"], {"sites": 0, "functions": {}, "via": set()})
        d["sites"] += 1
        fn = s["function"] or f"(no symbol) {s['addr']:#x}"
        d["functions"][fn] = d["functions"].get(fn, 0) + 1
        if s.get("via"):
            d["via"].add(s["via"])
    for d in out.values():
        d["functions"] = sorted(d["functions"].items(), key=lambda kv: (-_syscallish(kv[0]), -kv[1], kv[0]))
        d["via"] = sorted(d["via"])
    return out


def _syscallish(name):
    """Wrappers named for system calls first: they are what a program's calls go through."""
    return 1 if re.search(r"syscall", name or "", re.I) else 0


# --- one file ----------------------------------------------------------------

def classify(path, mechs=None, follow_libc=True, vdso_here=None):
    """The static classification of one ELF file.  Raises ElfError for a file that is not an
    x86 ELF file (a user mistake); every other failure is recorded in 'why'."""
    elf = Elf(path)
    res = {"path": str(Path(path)), "resolved": str(Path(path).resolve()), "bits": elf.bits,
           "type": elf.kind, "pie": elf.pie, "static": elf.static, "interp": elf.interp,
           "needed": list(elf.needed), "symbols": bool(elf.symbols), "sites": [],
           "by_kind": {}, "libc": None, "entry": None, "headline": None, "why": None,
           "undecodable": undecodable(mechs)}
    try:
        insns = disassemble(res["resolved"])
    except RuntimeError as e:
        res["why"] = str(e)
        res["headline"] = f"unknown: {e}"
        return res
    sites = find_sites(elf, insns, mechs)
    res["sites"] = [dict(s, addr=hex(s["addr"]), offset=(hex(s["offset"]) if s["offset"] is not None else None))
                    for s in sites]
    res["by_kind"] = summarise_sites(sites)
    flavour, needed = libc_flavour(elf)
    if flavour:
        lib = find_library(needed, elf)
        libc = {"flavour": flavour, "needed": needed, "path": lib, "write": None, "by_kind": None,
                "why": None}
        if lib is None:
            libc["why"] = f"{needed} not found for a {elf.bits}-bit program (DT_RUNPATH, ldconfig -p, " \
                          f"{', '.join(DEFAULT_DIRS[elf.bits][:4])})"
        elif follow_libc:
            libc["write"] = entrypath.classify_libc(lib)
            try:
                lelf = Elf(lib)
                libc["by_kind"] = {k: {"sites": v["sites"]} for k, v in
                                   summarise_sites(find_sites(lelf, disassemble(lib), mechs)).items()}
            except (ElfError, RuntimeError) as e:
                libc["why"] = str(e)
        res["libc"] = libc
    if vdso_here is None and _uses_vdso32(res):
        vdso_here = entrypath.vdso32()
    res["vdso_here"] = ({k: vdso_here.get(k) for k in ("instruction", "why")}
                        if vdso_here else None)
    res["entry"], res["headline"] = headline(res)
    return res


def _uses_vdso32(res):
    if "vdso32-call" in res["by_kind"]:
        return True
    w = ((res.get("libc") or {}).get("write") or {})
    return w.get("entry") == "vdso"


def _kind_phrase(kind, d, limit=1):
    fns = d["functions"]
    names = ", ".join(n for n, _ in fns[:limit])
    more = len(fns) - limit
    where = f"from {names}" + (f" and {more} more function{'s' if more != 1 else ''}" if more > 0 else "")
    n = d["sites"]
    return f"{KIND_TEXT[kind]} {where} ({n} site{'s' if n != 1 else ''})"


def _vdso_note(res):
    v = res.get("vdso_here") or {}
    ins = v.get("instruction")
    return f", which uses {ins} on this machine" if ins else ""


def headline(res):
    """(entry kind, the one line a user can act on)."""
    own = {k: d for k, d in res["by_kind"].items() if k in ENTERS}
    order = sorted(own, key=lambda k: -own[k]["sites"])
    libc = res.get("libc")
    lw = (libc or {}).get("write") or {}
    lkind = LIBC_KIND.get(lw.get("entry"))
    vfun = res["by_kind"].get("vdso-call")
    parts = []
    if order:
        parts.append("enters by " + "; and by ".join(
            _kind_phrase(k, own[k]) + (_vdso_note(res) if k == "vdso32-call" else "") for k in order))
    if libc:
        name = f"{libc['flavour']} ({libc['path'] or libc['needed'] + ', not found'})"
        if lkind:
            via = f"{KIND_TEXT[lkind]}{_vdso_note(res) if lkind == 'vdso32-call' else ''}"
            lib = f"its write() enters by {via}"
        else:
            why = lw.get("why") or libc.get("why") or ("not classified: --no-libc" if not lw else
                                                        "no reason recorded")
            lib = f"how its write() enters is unknown ({why})"
        if order:
            parts.append(f"everything else goes through {name}: {lib}")
        else:
            parts.append(f"relies on {name} for entry: {lib}")
    if not parts:
        what = "no kernel-entry instruction found"
        if res["type"] == "shared library":
            what += " (a library that enters only through others)"
        return None, what
    entry = order[0] if order else lkind
    uses = "vdso32-call" in own or lkind == "vdso32-call"
    if res["bits"] == 32 and not uses:
        parts.append("does not use the vDSO's __kernel_vsyscall")
    if vfun:
        parts.append(f"calls vDSO functions through {', '.join(vfun['via']) or 'a pointer'} "
                     f"({vfun['sites']} site{'s' if vfun['sites'] != 1 else ''}; no kernel entry)")
    return entry, "; ".join(parts)
