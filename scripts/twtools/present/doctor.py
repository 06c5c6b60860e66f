"""A fingerprint (twtools.machine.doctor) as the table `tw doctor` prints.

Nearly every value in a fingerprint was read from a file of the machine (or of a recording
given with --sysroot) or printed by a program: the host name, the CPU's model name, the
mitigations, the libc's path.  Each line therefore goes to the terminal through
core.escape.terminal(), so that a recorded machine whose cpuinfo holds an escape sequence
cannot retitle or clear the user's terminal, nor a newline forge a line of the table.
"""
from ..analyse import stats
from ..core import escape
from ..machine import mitigations


def _yn(v):
    return {True: "yes", False: "NO", None: "unknown"}[v]


def exit_price_text(ep, virt):
    """One cpuid's cost from the fingerprint's raw batches: the mean of the fastest 5%, as the
    per-call matrix's undisturbed figure (which `tw run` measures in rounds, with an interval)."""
    if not ep:
        return "unknown (a fingerprint from before the exit price was recorded)"
    if not ep.get("samples_ns"):
        return f"unknown ({ep.get('why') or 'not measured'})"
    v = stats.tail_mean(ep["samples_ns"])
    what = ("no exit to pay: bare metal, so this is the cpuid instruction itself" if virt == "none"
            else "one cpuid, which exits to the hypervisor")
    return f"{v:.0f} ns per cpuid, fastest 5% of {len(ep['samples_ns'])} batches: {what}"


def format_table(fp):
    """The fingerprint as lines of text, every one escaped for the terminal."""
    why = fp.get("why", {})

    def val(key, v):
        if v is None:
            return f"unknown ({why.get(key, 'not seen')})"
        return v
    cpu = fp["cpu"]
    lines = ["Machine"]
    rows = [
        ("host", fp["host"]),
        ("kernel", f"{fp['kernel']['release']} {fp['kernel']['version'] or ''}".strip()),
        ("os", val("os", fp["os"])),
        ("cpu", f"{cpu['vendor']} family {cpu['family']} model {cpu['model']} ({cpu['model_name']}), "
                f"{cpu['count']} CPUs"),
        ("virtualization", f"{fp['virtualization']}"
         + (f" (container: {fp['virtualization_detail']['container']})"
            if fp["virtualization_detail"].get("container") not in (None, "none") else "")),
        ("root", _yn(fp["root"])),
        ("perf_event_paranoid", val("perf_event_paranoid", fp["perf_event_paranoid"])),
        ("ptrace_scope", val("ptrace_scope", fp["ptrace_scope"])),
        ("lockdown", val("lockdown", fp["lockdown"])),
        ("BTF", _yn(fp["btf"])),
        ("PMU counters", _yn(fp["pmu"]) + (f" ({why['pmu']})" if "pmu" in why else "")),
        ("clocksource", val("clocksource", fp["clocksource"])),
        ("invariant TSC", _yn(fp["invariant_tsc"])),
        ("cpufreq governor", val("governor", fp["governor"])),
        ("SMT", val("smt", fp["smt"])),
        ("VM exit price", exit_price_text(fp.get("exit_price"), fp.get("virtualization"))),
        ("mitigations=", fp["mitigations_cmdline"] or "(default)"),
        ("output fs", f"{fp['output_fs']['fstype']} at {fp['output_fs']['path']}"),
    ]
    w = max(len(r[0]) for r in rows + [("IA32 emulation", "")])
    lines += [f"  {k:<{w}}  {v}" for k, v in rows]
    vul = {k: v for k, v in fp["mitigations"].items() if not (v or "").startswith("Not affected")}
    if vul:
        lines.append("  vulnerabilities (not 'Not affected'):")
        lines += [f"    {k}: {v}" for k, v in vul.items()]
    lines += decides_lines(fp)
    lines.append("Entry paths")
    v = fp["vdso32"]
    erows = [
        ("IA32 emulation", f"{_yn(fp['ia32_emulation'])}: {fp['ia32_detail'].get('why')}"),
        ("FRED", f"{_yn(fp['fred'])}: {fp['fred_detail'].get('why')}"),
        ("vDSO32 instruction", f"{v.get('instruction') or 'unknown'}"
         + ("" if v.get("instruction") else f" ({v.get('why')})")),
    ]
    for bits in ("32", "64"):
        l = fp["libc"].get(bits, {})
        erows.append((f"libc {bits}-bit write", f"{l.get('entry')} ({l.get('path') or l.get('why')})"))
    w2 = max(len(r[0]) for r in erows)
    lines += [f"  {k:<{w2}}  {v}" for k, v in erows]
    lines.append("Tools")
    lines.append("  " + ", ".join(f"{k} {v or 'missing'}" for k, v in fp["tools"].items()))
    lines.append("Instruments")
    w3 = max(len(i["name"]) for i in fp["instruments"])
    for i in fp["instruments"]:
        lines.append(f"  {i['name']:<{w3}}  {_yn(i['works']):<7}" + (f"  {i['why']}" if i["why"] else ""))
        if i["skipped"]:
            lines.append(f"  {'':<{w3}}  {'':<7}  skipped: {'; '.join(i['skipped'])}")
    if fp.get("consistency"):
        lines.append("Consistency")
        lines += [f"  ! {c}" for c in fp["consistency"]]
    # A value may hold a newline: escaping line by line shows it as \n inside its own row.
    return "\n".join(escape.terminal(line) for line in lines)


def decides_lines(fp):
    """The facts that decide the mitigations (docs/doctor.md): each its value, or unknown
    with the reason.  A fingerprint from before they were recorded shows none of them."""
    if "cpuid" not in fp and "kernel_log" not in fp:
        return []
    why = fp.get("why") or {}

    def unknown(key, default="not recorded"):
        return f"unknown ({why.get(key) or default})"
    cpu, kern = fp.get("cpu") or {}, fp.get("kernel") or {}
    cfg, cid, klog = fp.get("kernel_config") or {}, fp.get("cpuid") or {}, fp.get("kernel_log") or {}
    opts = cfg.get("options")
    on = [k.removeprefix("CONFIG_") for k, v in (opts or {}).items() if v not in ("n", None)]
    rows = [
        ("CPU bugs", " ".join(cpu["bugs"]) if cpu.get("bugs") is not None else unknown("cpu.bugs")),
        ("compiler", kern.get("compiler") or unknown("kernel.compiler")),
        ("kernel config", (f"{cfg.get('source')}: " + (", ".join(on) or "none of the options set"))
         if opts is not None else unknown("kernel_config", cfg.get("why") or "not recorded")),
        ("CPUID", ("; ".join(f"{k} " + (" ".join(f"{r}={v}" for r, v in regs.items())
                                        if regs else "absent")
                             for k, regs in (cid.get("leaves") or {}).items())
                   + (f" ({', '.join(cid.get('flags') or []) or 'no named bit set'}; "
                      f"{cid.get('source')}" + (f"; {cid['how']}" if cid.get("how") else "") + ")"))
         if cid.get("leaves") else unknown("cpuid", cid.get("why") or "not recorded")),
    ]
    lines = ["  the mitigations' work (docs/mitigations.md), by where it runs:"]
    live = mitigations.in_force(fp.get("mitigations") or {})
    lines += [f"    {x['where_text']}: {x['what']} ({', '.join(x['files'])})" for x in live
              if x["where"] != ["static"]] or ["    none"]
    lines.append("  what decides the mitigations:")
    lines += [f"    {k}: {v}" for k, v in rows]
    if klog.get("lines"):
        lines.append(f"    kernel log ({klog.get('source')}):")
        lines += [f"      {l}" for l in klog["lines"]]
    else:
        lines.append("    kernel log: " + (klog.get("why") or unknown("kernel_log")))
    return lines
