"""`tw classify BINARY...`: every place an ELF program or library enters the kernel.

The static half of a diagnosis.  Any ELF file on x86: static or dynamic, 32- or 64-bit, PIE or
not, a program or a library.  The file is read once (machine/elf.load: a regular file, bounded)
and everything comes from those bytes:

  its ELF structure (machine/elf.py): class, type, PT_INTERP, DT_NEEDED/DT_RUNPATH, the code
  regions and every symbol of .symtab and .dynsym (what resolves an address to a function,
  also for `tw diagnose`, which resolves live instruction pointers);

  its machine code, decoded with capstone (machine/decode.py) through every code region, as
  objdump -d walks it.  An instruction is a
  kernel-entry site when it matches a row of the mechanism registry (variants/registry): its
  `bytes` column is the instruction's encoding (cd80 int $0x80, 0f05 syscall, 0f34 sysenter,
  65ff1510000000 call *%gs:0x10), or `target=ADDR` for a call into that page (the legacy
  vsyscall page).  The registry's entry kinds also name the forms no byte string identifies,
  listed in FORMS: a call through a pointer the program keeps to __kernel_vsyscall
  (AT_SYSINFO: glibc's _dl_sysinfo, musl's __sysinfo, this project's tw_vsyscall), loaded into
  a register and called there or called through memory; and a call through a pointer to a
  vDSO function (Go's runtime.vdsoClockgettimeSym), which does not enter the kernel at all.
  find_sites decides, for classify's whole walk and for the few instructions `tw scan`
  decodes around a candidate alike.

A dynamic program usually enters through its C library: the libc named by DT_NEEDED is found
(DT_RUNPATH, then `ldconfig -p`, then the usual directories for the file's class) and
classified too, with entrypath.classify_libc for the path its write() takes.

The answer (classify()) carries one line a user can act on, `headline`, then the detail;
`tw classify` (cli/classify.py) prints it.
"""
import functools
import os
import re
from pathlib import Path

from ..core import files, proc
from . import decode, elf, entrypath, registry

# The forms of an entry kind that no fixed byte string identifies, keyed by
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


ElfError = elf.ElfError
# The largest file classify reads (a cap, so that /dev/zero-like inputs cannot exhaust memory).
MAX_FILE = elf.MAX_ELF


# --- the libc a dynamic program relies on -------------------------------------------------

def libc_flavour(e):
    """('glibc'|'musl'|None, the DT_NEEDED name) of the C library a dynamic program links."""
    interp = e.interp or ""
    for n in e.needed:
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


def find_library(name, e):
    """The path of DT_NEEDED `name` for the Elf e (its class): DT_RUNPATH/RPATH ($ORIGIN
    expanded), then ldconfig's cache, then the usual directories; None when not found.
    DataError when a candidate of that name is a FIFO, a device or not readable as a file:
    the dynamic loader would stop there too."""
    origin = str(Path(e.path).resolve().parent)
    cands = [os.path.join(d.replace("$ORIGIN", origin).replace("${ORIGIN}", origin), name)
             for d in e.runpath]
    if "/" in name:
        cands.insert(0, name)
    cands += _ldconfig_paths(name, e.bits)
    cands += [os.path.join(d, name) for d in DEFAULT_DIRS[e.bits]]
    for c in cands:
        if not os.path.lexists(c):
            continue
        # The first bytes only, bounded and never from a FIFO: a run path is the program's
        # word, not the user's, and may hold anything.
        head = files.read_regular(c, what="library", magic=b"\x7fELF")
        if head is None or head[:4] != b"\x7fELF":
            continue
        try:
            h = elf.header(head, c)
        except ElfError:
            continue
        if h.bits == e.bits and h.machine == e.machine:
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


# Instructions that read their last operand without writing it.
READ_ONLY = ("test", "cmp", "push", "bt")
# How many instructions a register loaded from a pointer is followed to its call.
TRACK = 40
# The mnemonics a registry row's bytes can spell (its encoding is compared only for these).
BYTE_MNEMONICS = frozenset({"int", "syscall", "sysenter", "call"})
_MASK64 = (1 << 64) - 1


def _immediate(operand):
    """The value of an immediate operand ($0x10, $-5, $18446744073699065856), or None."""
    if not operand.startswith("$"):
        return None
    try:
        return int(operand[1:], 0) & _MASK64
    except ValueError:
        return None


def _direct_target(operand):
    try:
        return int(operand, 0) & _MASK64
    except ValueError:
        return None


def pointers_of(e, mechs=None, only=None):
    """{vaddr: (kind, name)} of the data symbols whose names say they hold an entry pointer
    (FORMS): the pointers a call may go through.  only: the kinds wanted (all by default);
    the symbols are not read when no kind applies to the file's class."""
    dec = decoders(mechs)
    kinds = [(k, f) for k, f in FORMS.items() if k in dec and e.bits in f["bits"]
             and (only is None or k in only)]
    out = {}
    if not kinds:
        return out
    for a, name in e.data_symbols.items():
        for k, f in kinds:
            if f["pointer"].search(name):
                out[a] = (k, name)
                break
    return out


def find_sites(e, insns, mechs=None, pointers=None):
    """Every kernel-entry site (and vDSO-function call) in a stream of decode.Insn:
    [{addr, kind, bytes, insn, function, offset, via, origin}].  `origin` is (vaddr, size)
    of the instruction that made the site: the entry instruction itself, the call through a
    pointer, or the load of the register the call goes through (tw scan confirms a candidate
    by it).  pointers: pointers_of(e, mechs), when the caller has it already."""
    dec = decoders(mechs)
    by_bytes = {b: k for k, d in dec.items() for b in d["bytes"]}
    pages = {p: k for k, d in dec.items() for p in d["pages"]}
    pointers = pointers_of(e, mechs) if pointers is None else pointers
    data = e.data
    sites = []
    regs = {}          # register -> (kind, via, index of the load, (vaddr, size) of the load)
    last_label = None

    def add(ins, kind, via=None, origin=None):
        fn, off = e.function_at(ins.addr)
        sites.append({"addr": ins.addr, "kind": kind,
                      "bytes": data[ins.off:ins.off + ins.size].hex(), "insn": decode.text(ins),
                      "function": fn, "offset": off, "via": via,
                      "origin": origin or (ins.addr, ins.size)})

    follow = bool(pointers or pages)
    for i, ins in enumerate(insns):
        op, ops = ins.op, ins.ops
        if op in BYTE_MNEMONICS:
            k = by_bytes.get(data[ins.off:ins.off + ins.size].hex())
            if k:
                add(ins, k)
                continue
        if not follow:
            continue
        if ins.label != last_label:
            regs.clear()
            last_label = ins.label
        if op in ("call", "jmp"):
            rest = ops[0] if ops else ""
            if rest.startswith("*"):
                if rest[1:2] == "%" and ":" not in rest:
                    if rest[1:] in regs:
                        kind, via, _, origin = regs[rest[1:]]
                        add(ins, kind, via, origin)
                else:
                    t = decode.mem_target(ins, rest)
                    if t in pointers:
                        add(ins, *pointers[t])
            elif pages:
                t = _direct_target(rest)
                if t is not None and (t & ~0xFFF) in pages:
                    add(ins, pages[t & ~0xFFF], f"{t:#x}")
            if op == "jmp":
                regs.clear()
            continue
        if op == "ret":
            regs.clear()
            continue
        if op.startswith("mov") and len(ops) == 2 and ops[1].startswith("%"):
            # register data flow, a few instructions deep: loads of a pointer symbol or of an
            # address in a target page, and moves between registers
            src, dst = ops
            if src in regs:
                regs[dst] = regs[src][:2] + (i, regs[src][3])
                continue
            v = _immediate(src) if pages else None
            if v is not None and (v & ~0xFFF) in pages:
                regs[dst] = (pages[v & ~0xFFF], f"{v:#x}", i, (ins.addr, ins.size))
                continue
            t = decode.mem_target(ins, src) if pointers else None
            if t in pointers:
                regs[dst] = pointers[t] + (i, (ins.addr, ins.size))
                continue
            regs.pop(dst, None)
            continue
        if regs:
            # any other instruction writing a tracked register ends its tracking
            if not op.startswith(READ_ONLY) and len(ops) >= 2:
                regs.pop(ops[-1], None)
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

def sites_of(e, mechs=None):
    """Every site of an x86 Elf, its whole code walked (decode.Decoder.all)."""
    return find_sites(e, decode.Decoder(e).all(), mechs)


def _public(site):
    """A site as classify reports it: addresses in hex, no origin."""
    out = {k: v for k, v in site.items() if k != "origin"}
    out["addr"] = hex(site["addr"])
    out["offset"] = hex(site["offset"]) if site["offset"] is not None else None
    return out


def classify(path, mechs=None, follow_libc=True, vdso_here=None):
    """The static classification of one ELF file, read once (elf.load, bounded).  Raises
    ElfError (exit 3) for a file that is not x86 ELF or is damaged, and for a C library that
    the run path leads to and that cannot be read as one; OSError when the system refuses
    the read (exit 4)."""
    e = elf.load(path, MAX_FILE)
    sites = sites_of(e, mechs)
    res = {"path": str(Path(path)), "resolved": str(Path(path).resolve()), "bits": e.bits,
           "machine": e.machine_name, "type": e.kind, "pie": e.pie, "static": e.static,
           "interp": e.interp, "needed": list(e.needed), "needs_ia32": e.needs_ia32,
           "symbols": bool(e.symbols), "sites": [_public(s) for s in sites],
           "by_kind": summarise_sites(sites), "libc": None, "entry": None, "headline": None,
           "why": None, "undecodable": undecodable(mechs)}
    flavour, needed = libc_flavour(e)
    if flavour:
        lib = find_library(needed, e)
        libc = {"flavour": flavour, "needed": needed, "path": lib, "write": None, "by_kind": None,
                "why": None}
        if lib is None:
            libc["why"] = f"{needed} not found for a {e.bits}-bit program (DT_RUNPATH, ldconfig -p, " \
                          f"{', '.join(DEFAULT_DIRS[e.bits][:4])})"
        elif follow_libc:
            lelf = elf.load(lib, MAX_FILE)
            libc["write"] = entrypath.classify_libc(lelf)
            libc["by_kind"] = {k: {"sites": v["sites"]} for k, v in
                               summarise_sites(sites_of(lelf, mechs)).items()}
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
