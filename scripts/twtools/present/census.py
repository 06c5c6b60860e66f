"""A census (twtools.analyse.census) as text, as JSON, and as a section of a report.

    format_text(census)            what `tw census` prints: the readiness answer first
    to_json(census)                what `tw census --json` prints
    report_section(doc, census)    the same findings as blocks of a document.Doc (a report)
    section(doc, data)             the report's hook: the section, or nothing without a census

Every string that came from a process (its command, its executable) goes to the terminal
through core.escape.terminal and to a page through core.escape.markdown.
"""
import json

from ..core import escape
from ..analyse import census as ac
from .document import outside

SHOWN = 15          # processes in the per-process table
NAMED = 20          # processes named in one readiness sentence; the rest are counted


def _listed(items, text):
    """'a; b; c' for the first NAMED items, then how many more (all are in --json)."""
    out = "; ".join(text(x) for x in items[:NAMED])
    if len(items) > NAMED:
        out += f"; and {len(items) - NAMED} more (tw census --json lists them all)"
    return out


def _g(x):
    """Three significant figures, never in exponent form."""
    return f"{x:.0f}" if abs(x) >= 100 else f"{x:.3g}" if abs(x) >= 0.001 or x == 0 else f"{x:.1e}"


def _ms(s):
    """'12.3 ms [11.9, 12.8]' for ns per second; 'unknown'."""
    if s is None or s.get("median") is None:
        return "unknown"
    return f"{_g(s['median'] / 1e6)} ms [{_g(s['ci_low'] / 1e6)}, {_g(s['ci_high'] / 1e6)}]"


def _who(p, esc):
    exe = p.get("exe") or "executable unknown"
    if p.get("exe_from") == "execve":
        exe += ", as given to execve"
    elif p.get("exe_from") == "parent":
        exe += ", its parent's: it never called execve"
    when = []
    if p.get("started"):
        when.append("started in the window")
    if p.get("exited"):
        when.append("ended in the window")
    return f"{p['pid']} {esc(p.get('comm') or '?')} ({esc(exe)})" + \
        (f" [{', '.join(when)}]" if when else "")


def readiness(d, esc=escape.terminal):
    """The first screen's sentences: what ia32_emulation=0 would stop, what int 0x80 costs."""
    r = d["readiness"]
    ia = d.get("ia32") or {}
    out = []
    w = d.get("witness") or {}
    # No statement of absence rests on a count that could not be checked (issue 70).
    unchecked = w.get("checked") and not w.get("agree")
    if unchecked:
        why = list(w["disagreements"]) + ([ac.full_text(w)] if w.get("maps_full") else [])
        counts = "the census's counts disagree (" + "; ".join(esc(x) for x in why) + ")"
    if ia.get("enabled") is False:
        out.append(f"IA32 emulation is already off here ({esc(ia.get('why'))}): no 32-bit program "
                   "and no int 0x80 can run, so booting with ia32_emulation=0 changes nothing.")
    elif r["stop"]:
        out.append(f"Booting with ia32_emulation=0 here would stop {len(r['stop'])} "
                   f"process{'es' if len(r['stop']) != 1 else ''}" +
                   (" at least" if unchecked else "") + ": " +
                   _listed(r["stop"], lambda p: f"{_who(p, esc)}, {esc(p['stops_because'])}") + ".")
    elif unchecked:
        out.append("Whether booting with ia32_emulation=0 would stop a program here cannot be "
                   f"said: no 32-bit process was seen in /proc, but {counts}, so an int 0x80 call "
                   "may have gone uncounted.")
    elif r.get("unreadable"):
        out.append("Booting with ia32_emulation=0 here would stop none of the processes this "
                   "census could read: no 32-bit process" +
                   ("" if d.get("why_not") else " and no int 0x80 call") + " was seen.")
    else:
        out.append("Booting with ia32_emulation=0 here would stop nothing that ran: no 32-bit "
                   "process" + ("" if d.get("why_not") else " and no int 0x80 call") +
                   " was seen.")
    if r.get("unreadable"):
        out.append(f"{len(r['unreadable'])} process(es) could not be read, and may be 32-bit "
                   "too: " + _listed(r["unreadable"],
                                     lambda p: f"{_who(p, esc)}: {esc(p.get('why'))}") + ".")
    if d.get("why_not"):
        out.append(f"No call counts: {esc(d['why_not'])}.")
    elif r["int80"]:
        cost = (f"costing {_ms(r['int80_ns_per_s'])} per second here against the fastest path "
                "open to each" if r.get("int80_ns_per_s") else "at a cost per second not known "
                "here")
        out.append(f"These programs enter by int 0x80, {cost}: " +
                   _listed(r["int80"], lambda p: f"{_who(p, esc)}: {p['int80_calls']} calls, "
                                                 f"{_ms(p.get('int80_ns_per_s'))}/s") + ".")
        if r.get("int80_unknown"):
            out.append("Not priced: " + "; ".join(esc(x) for x in r["int80_unknown"]) + ".")
        out.append(exits_text(r, esc))
    elif unchecked:
        out.append(f"Whether a program entered by int 0x80 during the window cannot be said: {counts}.")
    else:
        out.append("No program entered by int 0x80 during the window.")
    if unchecked and r["int80"]:
        out.append(f"The int 0x80 counts above may be short: {counts}.")
    return out


def exits_text(r, esc=escape.terminal):
    """The int 0x80 calls in VM exits (issue 24): since Linux 6.7 each reads the APIC, one exit
    on a VM whose host does not virtualise the read; this counts what the excess is worth."""
    p, x = r.get("exit_price_ns") or {}, r.get("int80_exits_per_s")
    if p.get("value") is None:
        return f"In VM exits: {esc(p.get('why')) or 'unknown'}."
    if not x:
        return "In VM exits: unknown, because the int 0x80 calls' cost per second is unknown."
    return (f"At {p['value']:.0f} ns [{p['ci_low']:.0f}, {p['ci_high']:.0f}] an exit here (cpuid), "
            f"that is {x['median']:.0f} [{x['ci_low']:.0f}, {x['ci_high']:.0f}] exits' worth per "
            "second.")


def tracer_text(d, esc=escape.terminal):
    """What the census cost the machine: the measured CPU time per second, or its bound when
    the measurement cannot tell it from zero (a loaded machine)."""
    t = d.get("tracer_cost")
    if not t:
        return None
    if t.get("ns_per_s") is None:
        return f"The census's own cost is unknown: {esc(t.get('why'))}."
    c, share, cps = t["ns_per_s"], t.get("share_of_cpus"), t["calls_per_s"]
    seen = (f"{cps['native']:.0f} native and {cps['compat']:.0f} compat calls per second seen, "
            "times the ns per call bpftrace added to syscost getppid: " +
            ", ".join(f"{esc(v)} {_ns(a, esc)}" for v, a in t["added_ns"].items()))
    pct = (lambda x: f"{100 * x:.2g}%")
    if c["ci_low"] > 0:
        s = (f"The census's own cost: about {_ms(c)} of CPU per second"
             + (f", {pct(share['median'])} [{pct(share['ci_low'])}, {pct(share['ci_high'])}] of "
                f"{t['cpus']} CPUs" if share else "") + f" ({seen}).")
    elif c["ci_high"] > 0:
        s = (f"The census's own cost could not be told from zero on this machine's noise; it was "
             f"at most {_g(c['ci_high'] / 1e6)} ms of CPU per second"
             + (f", {pct(max(share['ci_high'], 0))} of {t['cpus']} CPUs" if share else "")
             + f" ({seen}).")
    else:
        # The whole interval at or below zero: the noise swamped the tracer's cost, which is
        # not negative; no bound above zero can be stated from it.
        s = (f"The census's own cost could not be measured on this machine's noise: its interval "
             f"lies at or below zero ({_g(c['ci_low'] / 1e6)} to {_g(c['ci_high'] / 1e6)} ms of "
             f"CPU per second), so it gives no bound ({seen}).")
    s += (" Each traced call was that much slower, so a busy caller's calls per second are a "
          f"lower bound. {esc(t['not_counted'][0].upper() + t['not_counted'][1:])}.")
    return s


def fmt_ns(x):
    """A signed ns figure: one decimal below 100 ns."""
    return f"{x:+.0f}" if abs(x) >= 100 else f"{x:+.1f}"


def _per_s(g):
    c = g.get("ns_per_s")
    if not c:
        return None
    return f"{_g(c['median'] / 1e3)} µs of CPU per second [{_g(c['ci_low'] / 1e3)}, " \
           f"{_g(c['ci_high'] / 1e3)}]"


def _group_line(g, what, esc):
    """One wall's processes, their calls per second and what the wall costs them; what:
    (the verb phrase for one process, for several)."""
    n = g.get("processes") or 0
    names = ", ".join(f"{p['pid']} {esc(p.get('comm') or '?')}"
                      + (f" ({p['seccomp_filters']} filters)" if (p.get("seccomp_filters") or 0)
                         > 1 else "") for p in g["who"][:6])
    s = f"{n} process{'es' if n != 1 else ''} {what[n != 1]}" + (
        f": {names}" + (", ..." if n > 6 else "") if n else "")
    if n and g.get("native_calls_per_s") is not None:
        s += (f". They made {g['native_calls_per_s']:.0f} native and "
              f"{g['compat_calls_per_s']:.0f} compat (int 0x80 or 32-bit) calls per second")
        pn, pc = (g.get("price") or {}).get("native"), (g.get("price") or {}).get("compat")
        each = "; ".join(f"{k} calls pay {fmt_ns(x[0])} ns [{fmt_ns(x[1])}, {fmt_ns(x[2])}] "
                         "more each" for k, x in (("native", pn), ("compat", pc)) if x)
        if each:
            s += f"; {g['price']['as']}, {each}"
        cost = _per_s(g)
        s += f": {cost}" if cost else f"; {esc(g.get('why') or 'their price is unknown')}"
    return s + "."


def walls_text(d, esc=escape.terminal):
    """Who runs behind a wall on this machine, and what it costs them (analyse.census.walls_of)."""
    w = d.get("walls")
    if not w:
        return []
    if w.get("why"):
        return [f"The walls: {esc(w['why'])}."]
    out = [_group_line(w["seccomp"], ("runs behind a seccomp filter (Seccomp: 2)",
                                      "run behind seccomp filters (Seccomp: 2)"), esc)]
    a = w.get("audit_state") or {}
    if not w.get("work_read"):
        out.append("Audit: whether processes carry an audit context is unknown: "
                   + esc(w["audit"].get("why") or "no work flags were read") + ".")
    else:
        line = _group_line(w["audit"], ("carries an audit context (SYSCALL_AUDIT on its calls)",
                                        "carry an audit context (SYSCALL_AUDIT on their calls)"),
                           esc)
        if w.get("audit_silent"):
            line += (" Audit is off now (auditctl -s: enabled 0), yet they pay for it: it was "
                     "enabled once in this boot, and every process started since gets the "
                     "context until reboot, unless a task rule says never (auditctl -a "
                     "never,task).")
        elif a.get("enabled") is None and a.get("why"):
            line += f" Audit's state: unknown ({esc(a['why'])})."
        out.append(line)
    if w.get("tracers"):
        who = ", ".join(sorted({f"{t['pid']} {esc(t.get('comm') or '?')}" if t.get("pid")
                                else esc(t.get("comm") or "?") for t in w["tracers"]}))
        out.append(f"Programs on raw_syscalls before this census attached: {who}. Every call of "
                   "every process pays for them. " + _group_line(
                       w["tracer_all"], ("made calls in the window",) * 2, esc))
    elif w.get("tracers_why"):
        out.append(f"Other tracers on raw_syscalls: unknown ({esc(w['tracers_why'])}).")
    else:
        out.append("No other program was attached to raw_syscalls.")
    return out


def _ns(s, esc=escape.terminal):
    if not s or s.get("median") is None:
        return f"unknown ({esc((s or {}).get('why'))})"
    return f"{s['median']:+.0f} ns [{s['ci_low']:.0f}, {s['ci_high']:.0f}]"


def process_rows(d, esc, limit=SHOWN):
    rows = []
    for p in d["processes"][:limit]:
        if not p["calls"] and not p.get("needs_ia32"):
            continue
        paths = "; ".join(f"{esc(g['label'])} {g['per_s']:.0f}/s" if g.get("per_s") is not None
                          else esc(g["label"]) for g in p["paths"][:3]) or "—"
        top = ", ".join(f"{esc(t['name'])} {t['calls']}" for t in p["top"][:3]) or "—"
        rows.append([str(p["pid"]), esc(p.get("comm") or "?"), esc(p.get("exe") or "?"),
                     str(p["bits"] or "?"), str(p["calls"]), paths, top,
                     _ms(p.get("slow_ns_per_s")) if p["paths"] else "—"])
    return rows


HEADERS = ["pid", "command", "executable", "bits", "calls", "paths (calls per second)",
           "top system calls", "slow paths cost per second"]


def _how(d, esc):
    """How the census was taken.  The tracer, its script, the reasons and the costs' source (a
    folder name, percall.json's host and mode) came from outside: each goes through esc, the
    terminal's or the page's escaping, so that ESC, BEL or a newline stay data."""
    out = []
    if d.get("why_not"):
        out.append(f"Read from /proc only ({esc(d['why_not'])}).")
    else:
        out.append(f"Traced every process for {d['window_s']:.1f} s with {esc(d['tracer'])} "
                   f"({esc(d['script'])}); {len(d['processes'])} processes seen.")
        out.append(witness_text(d, esc))
    vd = d.get("vdso32") or {}
    if vd.get("instruction") in ("sysenter", "syscall", "int80"):
        out.append(f"The 32-bit vDSO here enters by `{vd['instruction']}`.")
    if d.get("percall_source"):
        fig = " and ".join(esc(f) for f in d.get("figure") or []) or \
            "none needed (no slow path was priced)"
        out.append(f"Per-call costs from {esc(d['percall_source'])}; figure used: {fig}.")
    elif d.get("percall_why"):
        w = d["percall_why"]
        out.append(esc(w[0].upper() + w[1:]) + ".")
    out += [f"Not seen: {esc(b)}." for b in d.get("blind") or []]
    return out


def witness_text(d, esc=escape.terminal):
    """What the census's counts were checked against (analyse.census.witnesses), one sentence."""
    w = d.get("witness") or {}
    if not w.get("checked"):
        return f"Counts not checked against a second witness: {esc(w.get('why') or 'unknown')}."
    s = (f"Counts checked: {w['calls']} calls by entry path, {w['by_number']} by call number and "
         f"{w['regs_ok']} by the probe's own total")
    col = w.get("collapsed") or {}
    if col:
        s += (" (bpftrace printed " + ", ".join(f"{n} more entries of {esc(m)}" for m, n in col.items())
              + " under keys that print alike: each summed into its key)")
    if w.get("warnings"):
        s += "; bpftrace warned: " + "; ".join(esc(x) for x in w["warnings"])
    why = list(w["disagreements"]) + ([ac.full_text(w)] if w.get("maps_full") else [])
    return s + (": they agree." if w.get("agree") else
                ": they disagree: " + "; ".join(esc(x) for x in why) + ".")


def format_text(d):
    esc = escape.terminal
    lines = readiness(d, esc) + [""] + _how(d, esc)
    t = tracer_text(d, esc)
    if t:
        lines.append(t)
    walls = walls_text(d, esc)
    if walls:
        lines += [""] + walls
    rows = process_rows(d, esc)
    if rows:
        lines += ["", "Processes, most calls first:"]
        lines += ["  " + " | ".join(r) for r in [HEADERS] + rows]
    return "\n".join(lines)


def to_json(d):
    return json.dumps(d, indent=1, sort_keys=False, allow_nan=False)


def section(doc, data):
    """The report's census section, from a results directory's analysed data: nothing at all
    when the census stage did not run (tw run --only without it)."""
    d = data.get("census")
    if d:
        report_section(doc, d)


def report_section(doc, d, level=2):
    """The census as blocks of a document.Doc: outside text marked, for each exporter to
    show as text (escaped Markdown in the .md, plain text in the HTML)."""
    esc = outside
    doc.h(level, "The running system: who enters the old ways")
    for s in readiness(d, esc):
        doc.p(s)
    for s in _how(d, esc):
        doc.p(s)
    t = tracer_text(d, esc)
    if t:
        doc.p(t)
    for s in walls_text(d, esc):
        doc.p(s)
    rows = process_rows(d, esc)
    if rows:
        doc.table(HEADERS, rows)
