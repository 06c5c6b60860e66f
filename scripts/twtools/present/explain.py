"""`tw explain`: every way into the kernel, for the machine this runs on.

For each entry path: whether it works here and why (each variant's own --probe), the live
disassembly (the stubs' objects in build/obj, and the vDSO read from a real 32-bit process by
entrypath), what the kernel does with it, and its measured cost per call when a results
directory is given (percall.json, op "null": the empty system call, loop cost removed).

`tw explain --markdown` prints the same as Markdown; `tw explain --update-doc docs/mechanisms.md`
replaces the live section of that page (between the `<!-- live:begin -->` and
`<!-- live:end -->` markers) with it.
"""
import datetime
import json
import re
from pathlib import Path

from ..machine import entrypath
from ..core import files, paths, proc, ui
from ..machine import probe

BEGIN, END = "<!-- live:begin -->", "<!-- live:end -->"
NOT_MEASURED = "not measured: run make report (or pass --results DIR)"

# Entry paths in teaching order. variant: the build/timewrite-<variant> that takes the path;
# stub: the object whose tw_syscall3 is shown.
PATHS = [
    {"id": "int80-32", "title": "int 0x80 from 32-bit code", "variant": "32-int80",
     "stub": "32-i386/asm/int80.o",
     "kernel": "IDT vector 0x80 -> entry_INT80_compat (asm, before 6.7) or asm_int80_emulation -> "
               "do_int80_emulation (C, 6.7+; under FRED fred_intx -> int80_emulation); i386 table, "
               "args in ebx ecx edx esi edi ebp; returns with iret"},
    {"id": "sysenter-32", "title": "sysenter from 32-bit code (Intel)", "variant": "32-sysenter",
     "stub": "32-i386/asm/sysenter.o",
     "kernel": "MSR_IA32_SYSENTER_EIP -> entry_SYSENTER_compat -> do_SYSENTER_32 -> "
               "do_fast_syscall_32: reads ebp (the sixth argument) from the user stack, sets "
               "regs->ip to the vDSO's int80_landing_pad (2 bytes past an int $0x80, so a restarted call re-enters by int 0x80); returns with sysretl (sysexit on 32-bit kernels) or iret"},
    {"id": "syscall-32", "title": "syscall from 32-bit code (AMD)", "variant": "32-syscall",
     "stub": "32-i386/asm/syscall.o",
     "kernel": "MSR_CSTAR -> entry_SYSCALL_compat -> do_fast_syscall_32 (second argument taken from "
               "ebp because syscall overwrote ecx); returns to the landing pad with sysretl"},
    {"id": "vdso-32", "title": "__kernel_vsyscall in the 32-bit vDSO", "variant": "32-vdso",
     "stub": "32-i386/asm/vdso.o",
     "kernel": "whatever instruction the kernel patched into __kernel_vsyscall at boot "
               "(ALTERNATIVE_2 in arch/x86/entry/vdso/vdso32/system_call.S); the fast paths "
               "return to int80_landing_pad: pop ebp; pop edx; pop ecx; ret"},
    {"id": "libc-32", "title": "32-bit glibc write()", "variant": "32-libc", "stub": None, "libc": "32",
     "kernel": "i686 glibc calls *%gs:0x10 (the AT_SYSINFO pointer copied into the TCB), i.e. "
               "__kernel_vsyscall; a generic i386/i586 build inlines int $0x80"},
    {"id": "syscall-64", "title": "syscall from 64-bit code", "variant": "64-syscall",
     "stub": "64-x86_64/asm/syscall.o",
     "kernel": "MSR_LSTAR -> entry_SYSCALL_64 -> do_syscall_64; x86-64 table; returns with sysretq "
               "when it can, else iret"},
    {"id": "libc-64", "title": "64-bit glibc write()", "variant": "64-libc", "stub": None, "libc": "64",
     "kernel": "inline syscall, as 64-bit code always does: the 64-bit vDSO has no entry function"},
    {"id": "int80-64", "title": "int 0x80 from 64-bit code (int 0x80 emulation, 6.7+)",
     "variant": "64-int80", "stub": "64-i386/asm/int80.o",
     "kernel": "the same IDT vector as 32-bit int 0x80: a compat (i386-table) call from a 64-bit "
               "task, pointers truncated to 32 bits; since 6.7 do_int80_emulation handles it in C"},
    {"id": "fred", "title": "FRED (Flexible Return and Event Delivery)", "variant": None, "stub": None,
     "kernel": "one entry point for every event: syscall from 64-bit code -> fred_entry_from_user "
               "-> do_syscall_64; int 0x80 -> fred_intx -> int80_emulation; sysenter and 32-bit "
               "syscall are not used (SYSENTER32/SYSCALL32 cleared), so the vDSO runs int 0x80, "
               "which FRED delivers without the IDT's slow path; returns with ERETU"},
]


def kernel_at_least(release, major, minor):
    m = re.match(r"(\d+)\.(\d+)", release or "")
    return bool(m) and (int(m.group(1)), int(m.group(2))) >= (major, minor)


def stub_disasm(rel):
    """tw_syscall3 (and its local labels) from build/obj/<rel>, as lines, or (None, why)."""
    path = paths.BUILD / "obj" / rel
    if not path.exists():
        return None, f"{path.relative_to(paths.ROOT)} is not built (run make)"
    if not proc.which("objdump"):
        return None, "objdump is not installed (binutils)"
    p = proc.run(["objdump", "-d", "-w", "--section=.text", path], timeout=60)
    if p.returncode:
        return None, p.stderr.strip()
    lines = []
    for line in p.stdout.splitlines():
        if re.match(r"^[0-9a-f]+ <", line):
            lines.append(line.strip())
        m = entrypath.INSN_RE.match(line)
        if m and m.group(3).strip():
            insn = re.sub(r"[ \t]+", " ", m.group(3).strip())
            lines.append(f"  {int(m.group(1), 16):4x}:  {' '.join(m.group(2).split()):<21} {insn}")
    return lines, None


def percall_cells(percall):
    """{variant: cell} for op == 'null'."""
    out = {}
    for c in (percall or {}).get("cells", []):
        if c.get("op") == "null":
            out.setdefault(c.get("variant"), c)
    return out


def cost_text(cell, base=None):
    if cell is None:
        return None
    if cell.get("supported") is False:
        return f"unsupported: {cell.get('reason')}"
    if cell.get("median") is None:
        return "unknown: " + (cell.get("why") or cell.get("reason") or "no samples")
    from ..analyse import stats  # numpy: only needed when there are costs to show
    t = stats.fmt(cell, "ns") + f" per call (median, 95% CI; n={cell.get('n')})"
    if base and base.get("median") and base is not cell:
        t += f", {cell['median'] / base['median']:.1f}x the 64-bit syscall"
    return t


def machine(fingerprint=None):
    """The parts of a fingerprint explain needs, measured now when not given."""
    if fingerprint:
        return fingerprint
    from ..machine.doctor import Doctor
    d = Doctor()
    cpu = d.cpu()
    fred, fred_detail = d.fred(cpu["flags"])
    v = entrypath.vdso32()
    ia32, ia32_detail = d.ia32(v)
    return {"host": d.read("/proc/sys/kernel/hostname"),
            "kernel": {"release": d.read("/proc/sys/kernel/osrelease"),
                       "version": d.read("/proc/sys/kernel/version")},
            "cpu": cpu, "fred": fred, "fred_detail": fred_detail, "vdso32": v,
            "ia32_emulation": ia32, "ia32_detail": ia32_detail, "libc": entrypath.libc_entries(),
            "why": dict(d.why)}


def collect(fingerprint=None, percall=None, variants=None):
    """[{id, title, supported, why, disasm, kernel, cost}] for every entry path."""
    fp = machine(fingerprint)
    if variants is None:
        variants = probe.check_all("timewrite")
    vmap = {v["name"]: v for v in variants}
    cells = percall_cells(percall)
    base = cells.get("64-syscall")
    release = (fp.get("kernel") or {}).get("release")
    out = []
    for p in PATHS:
        e = {"id": p["id"], "title": p["title"], "kernel": p["kernel"], "variant": p["variant"],
             "supported": None, "why": None, "disasm": [], "disasm_source": None, "notes": []}
        v = vmap.get(p["variant"]) if p["variant"] else None
        if v is not None:
            e["supported"], e["why"] = v["supported"], v["reason"]
        elif p["variant"]:
            e["why"] = f"{p['variant']} is not in the build matrix"
        if p["stub"]:
            lines, why = stub_disasm(p["stub"])
            e["disasm"], e["disasm_source"] = lines or [], f"objdump -d build/obj/{p['stub']}"
            if why:
                e["notes"].append(why)
        if p["id"] == "vdso-32":
            vd = fp.get("vdso32") or {}
            if vd.get("disasm"):
                e["vdso_disasm"] = vd["disasm"]
                e["notes"].append(f"the live __kernel_vsyscall uses {vd.get('instruction')}: {vd.get('why')}"
                                  + (f"; landing pad at {vd['landing_pad']}" if vd.get("landing_pad") else ""))
            else:
                e["notes"].append(f"live vDSO not readable: {vd.get('why')}")
        if p.get("libc"):
            lc = (fp.get("libc") or {}).get(p["libc"]) or {}
            e["disasm"] = lc.get("evidence", [])[:6]
            e["disasm_source"] = f"objdump of {lc.get('path')} (write and what it calls)"
            e["notes"].append(f"this libc enters by: {lc.get('entry')} ({lc.get('why')})")
        if p["id"] == "int80-64" or p["id"] == "int80-32":
            if kernel_at_least(release, 6, 7):
                e["notes"].append(f"kernel {release} >= 6.7: int 0x80 is handled by do_int80_emulation (C)")
            elif release:
                e["notes"].append(f"kernel {release} < 6.7: int 0x80 goes through entry_INT80_compat (asm)")
        if p["id"] == "fred":
            e["supported"] = fp.get("fred")
            e["why"] = None if fp.get("fred") else (fp.get("fred_detail") or {}).get("why")
        if p["id"] == "sysenter-32" and e["supported"] is False and fp.get("fred"):
            e["notes"].append("FRED is on: the kernel does not use sysenter")
        if p["variant"]:
            if percall is None:
                e["cost"] = NOT_MEASURED
            else:
                e["cost"] = cost_text(cells.get(p["variant"]), base) or \
                    f"no op=null cell for {p['variant']} in percall.json"
        else:
            e["cost"] = "no variant of its own: it changes how the other paths are delivered"
        out.append(e)
    return fp, out


def _yn(v):
    return {True: "yes", False: "no", None: "unknown"}[v]


def render_text(fp, paths, results=None):
    cpu = fp.get("cpu") or {}
    lines = [f"Machine: {fp.get('host')}, Linux {(fp.get('kernel') or {}).get('release')}, "
             f"{cpu.get('vendor')} family {cpu.get('family')} model {cpu.get('model')} "
             f"({cpu.get('model_name')}); FRED {_yn(fp.get('fred'))}; IA32 emulation "
             f"{_yn(fp.get('ia32_emulation'))}"]
    if results:
        lines.append(f"Costs from: {results}")
    for e in paths:
        lines.append("")
        lines.append(f"== {e['title']}" + (f"  [{e['variant']}]" if e["variant"] else ""))
        lines.append(f"   works here: {_yn(e['supported'])}" + (f" ({e['why']})" if e["why"] else ""))
        lines.append(f"   kernel: {e['kernel']}")
        if e["disasm"]:
            lines.append(f"   {e['disasm_source']}:")
            lines += [f"     {d}" for d in e["disasm"]]
        if e.get("vdso_disasm"):
            lines.append("   live __kernel_vsyscall (tw vdso):")
            lines += [f"     {d}" for d in e["vdso_disasm"]]
        for n in e["notes"]:
            lines.append(f"   note: {n}")
        lines.append(f"   cost (empty call): {e['cost']}")
    return "\n".join(lines)


def render_markdown(fingerprint, percall, variants=None, results_label=None):
    """The live section of docs/mechanisms.md for this machine (or the given fingerprint)."""
    fp, paths = collect(fingerprint, percall, variants)
    cpu = fp.get("cpu") or {}
    k = fp.get("kernel") or {}
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    out = [f"Captured {now} on `{fp.get('host')}`: Linux {k.get('release')} ({k.get('version')}), "
           f"{cpu.get('vendor')} family {cpu.get('family')} model {cpu.get('model')} "
           f"({cpu.get('model_name')}), FRED {_yn(fp.get('fred'))}, IA32 emulation "
           f"{_yn(fp.get('ia32_emulation'))}.",
           "Regenerate with `scripts/tw explain --update-doc docs/mechanisms.md"
           + (f" --results {results_label}" if results_label else "") + "`.", ""]
    out.append("| entry path | variant | works here | cost of an empty call |")
    out.append("|---|---|---|---|")
    for e in paths:
        why = f" ({e['why']})" if e["why"] else ""
        out.append(f"| {e['title']} | {e['variant'] or '-'} | {_yn(e['supported'])}{why} | {e['cost']} |")
    for e in paths:
        out += ["", f"#### {e['title']}", "", f"Kernel side: {e['kernel']}.", ""]
        if e["disasm"]:
            out += [f"`{e['disasm_source']}`:", "", "```"] + e["disasm"] + ["```", ""]
        if e.get("vdso_disasm"):
            out += ["Live `__kernel_vsyscall` (`scripts/tw vdso`):", "", "```"] + e["vdso_disasm"] + ["```", ""]
        for n in e["notes"]:
            out.append(f"- {n}")
    return "\n".join(out).rstrip() + "\n"


def update_doc(path, markdown):
    text = Path(path).read_text()
    if BEGIN not in text or END not in text:
        raise SystemExit(f"tw explain: {path} has no {BEGIN} ... {END} section to replace")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    Path(path).write_text(f"{head}{BEGIN}\n{markdown}{END}{tail}")


def load_percall(results):
    if not results:
        return None
    p = Path(results)
    f = p / "percall.json" if p.is_dir() else p
    data = files.read_json(f)
    if data is None:
        ui.warn(f"no {f}", "run make report, or point --results at a results directory")
    return data


def add_arguments(parser, name):
    parser.add_argument("--results", metavar="DIR", help="results directory whose percall.json gives the costs")
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.add_argument("--markdown", action="store_true", help="print the Markdown live section")
    parser.add_argument("--update-doc", metavar="FILE",
                        help="replace the live section of FILE (docs/mechanisms.md)")


def main(args, name):
    percall = load_percall(args.results)
    if args.markdown or args.update_doc:
        md = render_markdown(None, percall, results_label=args.results)
        if args.update_doc:
            update_doc(args.update_doc, md)
            ui.progress(f"updated the live section of {args.update_doc}")
        else:
            print(md, end="")
        return 0
    fp, paths = collect(None, percall)
    if args.json:
        print(json.dumps({"machine": {k: fp.get(k) for k in ("host", "kernel", "cpu", "fred",
                                                             "ia32_emulation", "vdso32", "libc")},
                          "paths": paths}, indent=1))
    else:
        print(render_text(fp, paths, args.results))
    return 0
