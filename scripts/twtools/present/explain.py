"""`tw explain`: every way into the kernel, for the machine this runs on.

For each mechanism of the registry (variants/registry): whether it works here and why (its
probe, judged by the support oracle), what it needs, what the kernel does with it (from its
stub's own header comment: the stub is the documentation), the live disassembly (the stub's
object in build/obj; the live vDSO read from a real 32-bit process; libc's write and what it
calls), and its measured cost per call with the post-return penalty, from a results directory:
results/latest by default, or --results DIR.  Which run the costs come from is always said.

`tw explain --markdown` prints the same as Markdown; `tw explain --update-doc
docs/mechanisms.md` replaces the live section of that page (between the `<!-- live:begin -->`
and `<!-- live:end -->` markers) with it.  The command itself is twtools.cli.explain.

What came from outside (the host name, the CPU's model name, the mitigations, a results
directory's labels and reasons, libc's path) is escaped for where it goes: each line of the
text through core.escape.terminal, each such value of the Markdown through
core.escape.markdown.
"""
import datetime
import re
from pathlib import Path

from ..analyse import percall, results
from ..core import escape, files, paths, proc, ui
from ..core.fmt import fmt
from ..machine import entrypath, oracle, probe, registry, vdso32
from . import chains

BEGIN, END = "<!-- live:begin -->", "<!-- live:end -->"
NOT_MEASURED = "not measured: run make report (or pass --results DIR)"
# Where each kind of stub keeps its header: asm/<bits>/<name>.asm or timewrite/<name>.c.
COMMENT = {".asm": re.compile(r"^;\s?(.*)$"), ".c": re.compile(r"^(?:/\*| \*/?)\s?(.*)$")}
# Mitigations whose mechanisms act on returns: the ones to name beside a measured penalty.
RETURN_MITIGATIONS = ("spectre_v2", "retbleed", "spec_rstack_overflow", "indirect_target_selection")


def kernel_at_least(release, major, minor):
    m = re.match(r"(\d+)\.(\d+)", release or "")
    return bool(m) and (int(m.group(1)), int(m.group(2))) >= (major, minor)


def source_of(m):
    """The file that documents a mechanism: its NASM stub, or its C file."""
    for o in m.objects:
        if o.startswith("asm/"):
            return paths.ROOT / f"{o}.asm"
    for o in m.objects:
        if o not in ("alloc", "alloc_low") and not o.endswith("_init"):
            return paths.ROOT / "timewrite" / f"{o}.c"
    return None


def header(path):
    """(title, {heading: paragraph}) from a stub's opening comment: the first line's text
    after 'file: ', and each paragraph that starts with 'Heading:'."""
    if path is None or not path.exists():
        return None, {}
    rx = COMMENT[path.suffix]
    lines = []
    for line in path.read_text().splitlines():
        m = rx.match(line)
        if not m:
            break
        lines.append(m.group(1).rstrip())
    text = "\n".join(lines).strip()
    first, _, rest = text.partition("\n")
    title = first.split(": ", 1)[1].rstrip(".") if ": " in first else first
    paras = {}
    for para in re.split(r"\n\s*\n", rest):
        m = re.match(r"^([A-Z][\w ,'/()-]{2,40}):\s+(.*)$", para.strip(), re.S)
        if m:
            paras[m.group(1)] = re.sub(r"\s+", " ", m.group(2)).strip()
    return title, paras


def stub_disasm(m):
    """The stub's functions (tw_syscall3 and its shapes) from build/obj, or (None, why)."""
    src = next((o for o in m.objects if o.startswith("asm/")), None)
    if src is None:
        return None, None
    rel = f"{m.bits}-{m.abi}/asm/{src.rsplit('/', 1)[1]}.o"
    path = paths.BUILD / "obj" / rel
    if not path.exists():
        return None, f"build/obj/{rel} is not built (run make)"
    if not proc.which("objdump"):
        return None, "objdump is not installed (binutils)"
    p = proc.run(["objdump", "-d", "-w", "--section=.text", path], timeout=60)
    if p.returncode:
        return None, p.stderr.strip()
    lines, skip = [], False
    for line in p.stdout.splitlines():
        if re.match(r"^[0-9a-f]+ <", line):
            # The empty loop is the timing loop's twin with the entry replaced: syscost's
            # docs describe it, and showing it here would only repeat tw_loop3.
            skip = "<tw_loop3_empty>" in line
            if not skip:
                lines.append(line.strip())
            continue
        mm = vdso32.INSN_RE.match(line)
        # Alignment padding between functions is never executed.
        if skip or not mm or mm.group(3).strip().startswith(("nop", "xchg %ax,%ax", "data16")):
            continue
        if mm.group(3).strip():
            insn = re.sub(r"[ \t]+", " ", mm.group(3).strip())
            lines.append(f"  {int(mm.group(1), 16):4x}:  {' '.join(mm.group(2).split()):<21} {insn}")
    return lines, f"objdump -d build/obj/{rel}"


def cost_cell(analysed, m):
    """The cell that stands for a mechanism's cost: its null call, else its first operation."""
    for op in ("null",) + tuple(o for o in m.ops if o != "null"):
        c = percall.find(analysed, m.name, op)
        if c is not None:
            return c
    return None


def cost_text(cell):
    """The cost of a cell, undisturbed figure first (what the call costs when the host leaves
    the CPU alone), then the typical median; each with its interval."""
    if cell is None:
        return None
    if cell.get("supported") is False:
        return f"{cell.get('status', 'unsupported')}: {cell.get('reason')}"
    if cell.get("median") is None:
        return "unknown: " + (cell.get("why") or cell.get("reason") or "no samples")
    und = percall.figure(cell, "undisturbed")
    t = f"{cell['op']}: "
    if und is not None:
        t += fmt(und, "ns") + " per call undisturbed (the fastest batches' mean, 95% interval); typical "
    else:
        why = (cell.get("undisturbed") or {}).get("why") or "no undisturbed figure"
        t += f"undisturbed unknown ({why}); typical "
    t += fmt(cell, "ns") + f" (median, 95% interval over {cell.get('n_rounds', '?')} runs)"
    ur, r = cell.get("undisturbed_ratio"), cell.get("ratio")
    if ur and ur.get("median") and abs(ur["median"] - 1) > 1e-9:
        t += (f"; {ur['median']:.2f}x [{ur['ci_low']:.2f}, {ur['ci_high']:.2f}] the 64-bit syscall"
              ", same rounds, undisturbed")
    elif r and r.get("median") and abs(r["median"] - 1) > 1e-9:
        t += f"; {r['median']:.2f}x [{r['ci_low']:.2f}, {r['ci_high']:.2f}] the 64-bit syscall, same rounds"
    return t


def penalty_text(analysed, m):
    for p in (analysed or {}).get("penalties", []):
        if p["variant"] == m.name and p["op"] in ("null", m.ops[0]):
            s = p.get("penalty_ns")
            return (f"{fmt(s, 'ns')} per call ({p['op']}: ret {p['ret_ns']:.1f} ns, indirect jump "
                    f"{p['jmp_ns']:.1f} ns)") if s else "unknown: no paired rounds"
    if "jmp" not in m.shapes:
        return "not measurable: this mechanism has no jmp shape (its return is fixed)"
    return None


def machine(fingerprint=None):
    """The parts of a fingerprint explain needs, measured now when not given."""
    if fingerprint:
        return fingerprint
    from ..machine.doctor import Doctor
    d = Doctor()
    out = d.entry_facts()
    out.update(host=d.read("/proc/sys/kernel/hostname"),
               kernel={"release": d.read("/proc/sys/kernel/osrelease"),
                       "version": d.read("/proc/sys/kernel/version")},
               libc=entrypath.libc_entries(), mitigations=d.mitigations(), why=dict(d.why))
    return out


def default_results():
    """results/latest when it exists, else None."""
    latest = paths.RESULTS / "latest"
    return latest if latest.is_dir() else None


def costs_from(results_dir):
    """(analysed data, label) of a results directory, or (None, why)."""
    if results_dir is None:
        return None, NOT_MEASURED
    d = Path(results_dir)
    if not (d / "percall.json").exists():
        return None, f"not measured: {d} has no percall.json"
    data = results.load(d)
    meta, fp = data.get("meta") or {}, data.get("fingerprint") or {}
    label = (f"{d.resolve().name} (measured {meta.get('created_utc') or 'at an unknown date'} "
             f"on {meta.get('host') or fp.get('host') or 'an unknown host'})")
    return data, label


def collect(fingerprint=None, data=None, judged=None):
    """The machine, and [{variant, title, works, status, why, needs, kernel, disasm, notes,
    cost, penalty}] for every mechanism of the registry."""
    fp = machine(fingerprint)
    if judged is None:
        judged = {r["name"]: r for r in probe.check_all("syscost", facts=fp)}
    pred = oracle.predict(fp)
    analysed = (data or {}).get("percall")
    release = (fp.get("kernel") or {}).get("release")
    out = []
    for m in registry.mechanisms():
        title, paras = header(source_of(m))
        j = judged.get(m.name) or {}
        e = {"variant": m.name, "title": title or m.name, "entry": m.entry,
             "works": j.get("supported"), "status": j.get("status"), "why": j.get("reason"),
             "needs": pred[m.name]["why"], "kernel": paras.get("Kernel side") or
             paras.get("Why this file exists") or "", "disasm": [], "disasm_source": None,
             "notes": []}
        lines, why = stub_disasm(m)
        if lines:
            e["disasm"], e["disasm_source"] = lines, why
        elif why:
            e["notes"].append(why)
        if m.entry == "vdso32-call":
            vd = fp.get("vdso32") or {}
            if vd.get("disasm"):
                e["vdso_disasm"] = vd["disasm"]
                e["notes"].append(f"the live __kernel_vsyscall ({vd.get('form')}): {vd.get('why')}"
                                  + (f"; landing pad at {vd['landing_pad']}" if vd.get("landing_pad") else ""))
            else:
                e["notes"].append(f"live vDSO not readable: {vd.get('why')}")
        if m.entry == "libc":
            lc = (fp.get("libc") or {}).get(str(m.bits)) or {}
            e["disasm"] = lc.get("evidence", [])[:6]
            e["disasm_source"] = f"objdump of {lc.get('path')} (write and what it calls)"
            e["notes"].append(f"this libc enters by: {lc.get('entry')} ({lc.get('why')})")
        if m.entry == "int80" and release:
            e["notes"].append(f"kernel {release} " + (">= 6.7: int 0x80 is handled by "
                              "do_int80_emulation (C)" if kernel_at_least(release, 6, 7) else
                              "< 6.7: int 0x80 goes through entry_INT80_compat (asm)"))
        if data is None:
            e["cost"], e["penalty"] = NOT_MEASURED, None
        else:
            e["cost"] = cost_text(cost_cell(analysed, m)) or f"{m.name} is not in that run"
            e["penalty"] = penalty_text(analysed, m)
        e["chain"] = chains.chain(m.name, (data or {}).get("fingerprint") or fp,
                                  (data or {}).get("causes") if data is not None else None)
        cell = cost_cell(analysed, m) if data is not None else None
        if cell is not None and cell.get("supported") is False:
            # No cost to explain: the chain is what the kernel would do, and the figures say why not.
            e["chain"]["figures"] = [f"{cell.get('status', 'unsupported')} here: {cell.get('reason')}"]
        out.append(e)
    return fp, out


def fred_text(fp, esc=str):
    """The FRED paragraph; esc escapes the fact read from the machine for where it goes."""
    detail = fp.get("fred_detail") or {}
    return ("FRED (Flexible Return and Event Delivery) is " + ("on" if fp.get("fred") else "off")
            + f" here: {esc(detail.get('why') or 'unknown')}. Under FRED every event enters at one "
            "entry point: 64-bit syscall -> fred_entry_from_user -> do_syscall_64; int 0x80 -> "
            "fred_intx -> int80_emulation; sysenter from 32-bit code -> fred_other -> "
            "do_fast_syscall_32; syscall from 32-bit code -> #UD.  The 32-bit vDSO then uses "
            "int 0x80, which FRED delivers without the IDT's slow path; returns use ERETU.")


def return_text(fp, data, esc=str):
    """What the return after a call costs on the measured machine, and the mitigations in
    force there that act on returns.  Nothing is asserted about the cause: it is measured.
    esc escapes the mitigations (read from a fingerprint) for where the text goes."""
    mfp = (data or {}).get("fingerprint") or fp
    mit = [esc(f"{k}: {v}") for k, v in sorted((mfp.get("mitigations") or {}).items())
           if k in RETURN_MITIGATIONS and v and not v.startswith("Not affected")]
    return ("A stub (or libc wrapper) is called, enters the kernel, and leaves by `ret`.  The CPU "
            "predicts returns with a return-stack buffer; kernel entry and exit, and mitigations "
            "that fill or flush that buffer, can leave it mispredicting the first `ret` after the "
            "kernel returns.  The per-call matrix measures each mechanism in two shapes, the stub "
            "leaving by `ret` and the same stub leaving by an indirect jump, and reports the "
            "difference as the post-return penalty, paired by round.  It may be near zero on one "
            "CPU and kernel and tens of nanoseconds on another; that is a result either way.  "
            "Mitigations in force on the measured machine that act on returns: "
            + ("; ".join(mit) if mit else "none reported") + ".")


def exit_text(data):
    """The price of one VM exit in the measured run (the cpuid cell), or why it is unknown."""
    if data is None:
        return NOT_MEASURED
    p = (data.get("causes") or {}).get("exit_price_ns") or {}
    if p.get("value") is None:
        return p.get("why") or "unknown: no cost model for these results"
    return (fmt({"median": p["value"], "ci_low": p["ci_low"], "ci_high": p["ci_high"]}, "ns")
            + f" undisturbed ({p.get('what')})")


def render_text(fp, entries, label, data=None):
    cpu = fp.get("cpu") or {}
    lines = [f"Machine: {fp.get('host')}, Linux {(fp.get('kernel') or {}).get('release')}, "
             f"{cpu.get('vendor')} family {cpu.get('family')} model {cpu.get('model')} "
             f"({cpu.get('model_name')})",
             f"Costs from: {label}",
             f"One VM exit (cpuid): {exit_text(data)}"]
    for e in entries:
        lines += ["", f"== {e['title']}  [{e['variant']}]",
                  f"   works here: {_yn(e['works'])}" + (f" ({e['why']})" if e["why"] else ""),
                  f"   needs: {e['needs']}"]
        if e["kernel"]:
            lines.append(f"   kernel: {e['kernel']}")
        if e["disasm"]:
            lines.append(f"   {e['disasm_source']}:")
            lines += [f"     {d}" for d in e["disasm"]]
        if e.get("vdso_disasm"):
            lines.append("   live __kernel_vsyscall (tw vdso):")
            lines += [f"     {d}" for d in e["vdso_disasm"]]
        lines += [f"   note: {n}" for n in e["notes"]]
        lines.append(f"   cost: {e['cost']}")
        if e.get("penalty"):
            lines.append(f"   post-return penalty: {e['penalty']}")
        if e.get("chain"):
            lines.append("   why it costs that here, step by step:")
            lines += chains.text_lines(e["chain"])
    # Host, model name, reasons and paths came from outside: each line is escaped whole, so
    # that a newline in one shows as \n in its own line.
    return "\n".join(escape.terminal(line) for line in lines)


def _yn(v):
    return {True: "yes", False: "no", None: "unknown"}[v]


def _fenced(lines):
    """Disassembly as a fenced block: objdump prints what a file holds (a symbol name may
    hold anything), so the fence is longer than any run of backticks in it, and each line
    shows its control characters."""
    body = [escape.terminal(line) for line in lines]
    longest = max((len(r) for line in body for r in re.findall(r"`+", line)), default=0)
    fence = "`" * max(3, longest + 1)
    return [fence] + body + [fence, ""]


def render_markdown(fp, entries, label, data=None):
    """The live section of docs/mechanisms.md for this machine."""
    cpu = fp.get("cpu") or {}
    k = fp.get("kernel") or {}
    md = escape.markdown
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    out = [f"Captured {now} on {md(fp.get('host'))}: Linux {md(k.get('release'))}, "
           f"{md(cpu.get('vendor'))} family {md(cpu.get('family'))} model "
           f"{md(cpu.get('model'))} ({md(cpu.get('model_name'))}). Costs from: {md(label)}. "
           f"One VM exit (cpuid): {md(exit_text(data))}.",
           "Regenerate with `scripts/tw explain --update-doc docs/mechanisms.md`.", "",
           "| entry path | variant | works here | cost | post-return penalty |", "|---|---|---|---|---|"]
    for e in entries:
        why = f" ({md(e['why'])})" if e["why"] else ""
        out.append(f"| {e['title']} | {e['variant']} | {_yn(e['works'])}{why} | {md(e['cost'])} | "
                   f"{md(e.get('penalty')) or '—'} |")
    out += ["", "#### The return after the call", "", return_text(fp, data, md), "",
            "#### FRED", "", fred_text(fp, md)]
    for e in entries:
        out += ["", f"#### {e['title']}", "", f"Needs: {md(e['needs'])}.", ""]
        if e["kernel"]:
            out += [f"Kernel side: {e['kernel']}", ""]
        if e["disasm"]:
            out += [f"{md(e['disasm_source'])}:", ""] + _fenced(e["disasm"])
        if e.get("vdso_disasm"):
            out += ["Live `__kernel_vsyscall` (`scripts/tw vdso`):", ""] + _fenced(e["vdso_disasm"])
        out += [f"- {md(n)}" for n in e["notes"]]
        if e.get("chain"):
            out += ["", "Why it costs that here, step by step:", ""] + chains.markdown(e["chain"], md)
    return "\n".join(out).rstrip() + "\n"


def update_doc(path, markdown):
    """Replace the live section of the page at path with markdown: read once (bounded, a
    regular file), written whole or not at all (core.files.write_text), never through a
    link.  A page without both markers is a UserError naming it, and is left as it was."""
    raw = files.read_regular(path, limit=16 << 20, what="documentation page")
    if raw is None:
        raise ui.UserError(f"{path}: no such file", "give the page whose live section to "
                           "replace (docs/mechanisms.md)")
    text = raw.decode("utf-8", errors="replace")
    if BEGIN not in text or END not in text or text.index(BEGIN) > text.index(END):
        raise ui.UserError(f"{path}: has no {BEGIN} ... {END} section to replace",
                           "add the two markers where the live section goes")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    files.write_text(path, f"{head}{BEGIN}\n{markdown}{END}{tail}")
