"""`tw classify BINARY...`: how an ELF program or library enters the kernel, from its code.

The work is twtools.machine.classify's; this module parses the command line and prints: the
one-line answer first, then the sites by kind and function, the C library of a dynamic
program, and the live 32-bit vDSO's instruction where the answer goes through it.
"""
import json
import os

from ..core import ui
from ..core.escape import path as epath
from ..core.escape import terminal
from ..machine import classify as cls


def format_text(res, max_functions=8):
    """The answer for a person.  Paths, symbol names and reasons came from the file (or the
    libraries it names), so they reach the terminal through core.escape, never raw."""
    T = terminal
    lines = [f"{epath(res['path'])}: {T(res['headline'])}"]
    kind = res["type"] + (", static" if res["static"] else ", dynamic")
    lines.append(f"  file: {res['bits']}-bit {kind}" +
                 (", PIE" if res["pie"] and "PIE" not in kind else "") +
                 (f", interpreter {epath(res['interp'])}" if res["interp"] else "") +
                 ("" if res["symbols"] else ", no symbols (sites are shown by address)"))
    if res.get("why"):
        lines.append(f"  why: {T(res['why'])}")
    for k, d in sorted(res["by_kind"].items(), key=lambda kv: -kv[1]["sites"]):
        nf = len(d["functions"])
        lines.append(f"  {cls.KIND_TEXT.get(k, k)}: {d['sites']} site{'s' if d['sites'] != 1 else ''} "
                     f"in {nf} function{'s' if nf != 1 else ''}"
                     + (f", through {T(', '.join(d['via']))}" if d["via"] else ""))
        for n, c in d["functions"][:max_functions]:
            lines.append(f"    {c:5d}  {T(n)}")
        if nf > max_functions:
            lines.append(f"           ... and {nf - max_functions} more (--json lists every site)")
    if not res["by_kind"]:
        lines.append("  no kernel-entry site in the file itself")
    libc = res.get("libc")
    if libc:
        lines.append(f"  libc: {libc['flavour']}, {T(libc['needed'])} -> "
                     f"{epath(libc['path']) if libc['path'] else 'not found'}")
        w = libc.get("write")
        if w:
            lines.append(f"    write(): {w['entry']}" + (f": {T(w['why'])}" if w.get("why") else ""))
            for e in w.get("evidence", [])[:3]:
                lines.append(f"      {T(e)}")
        if libc.get("by_kind"):
            lines.append("    sites in the library: " + ", ".join(
                f"{cls.KIND_TEXT.get(k, k)} {v['sites']}" for k, v in sorted(libc["by_kind"].items())))
        if libc.get("why"):
            lines.append(f"    why: {T(libc['why'])}")
    v = res.get("vdso_here")
    if v:
        lines.append(f"  the 32-bit vDSO on this machine: {v.get('instruction') or 'unknown'}"
                     + (f" ({T(v['why'])})" if v.get("why") else ""))
    for k, why in (res.get("undecodable") or {}).items():
        lines.append(f"  not looked for: {k}: {why}")
    return "\n".join(lines)


def add_arguments(parser, name):
    parser.description = (
        "How an ELF program or library enters the kernel, read from its machine code: every "
        "int 0x80, sysenter, syscall, call to __kernel_vsyscall (call *%gs:0x10, _dl_sysinfo "
        "and other AT_SYSINFO pointers) and call into the vsyscall page, by function; for a "
        "dynamic program, its C library too.  The instructions come from variants/registry.  "
        "Each file is read once (at most 1 GiB, a regular file only) and decoded with capstone.  "
        "Exit status: 0 classified, 1 no entry found, 2 bad usage or a file that is not x86 "
        "ELF, 3 a damaged ELF file or one that is not a regular file (or such a C library "
        "on its run path), 4 a file that cannot be read.")
    parser.add_argument("binaries", nargs="+", metavar="BINARY", help="ELF files to classify")
    parser.add_argument("--json", action="store_true", help="print JSON (every site) instead of text")
    parser.add_argument("--no-libc", dest="libc", action="store_false",
                        help="do not classify the C library of a dynamic program")


def main(args, name):
    # ElfError (exit 3; NotElf, a wrong file, exit 2) and OSError (exit 4) reach
    # cli.failure: one line each.
    for b in args.binaries:
        if os.path.isdir(b):
            raise ui.UserError(f"{b} is a directory", "give ELF files")
    out = [cls.classify(b, follow_libc=args.libc) for b in args.binaries]
    if args.json:
        print(json.dumps(out, indent=1, default=sorted))
    else:
        print("\n\n".join(format_text(r) for r in out))
    return 1 if any(r["entry"] is None for r in out) else 0
