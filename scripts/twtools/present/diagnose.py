"""A diagnosis (twtools.analyse.diagnose) as text, as JSON, and as a section of a page.

    headline(diagnosis)              the diagnosis in one sentence
    format_text(diagnosis)           what `tw diagnose` prints
    to_json(diagnosis)               what `tw diagnose --json` prints
    report_section(doc, diagnosis)   the same findings as blocks of a document.Doc (a report)
"""
import json
import os

from ..analyse import diagnose as ad
from ..core import escape
from ..core.fmt import fmt
from ..machine import registry
from .document import outside

BAR = 40


def _ns(s, digits=0):
    """'+410 ns [393, 428]' for a per-call difference; 'unknown (why)'."""
    if s is None or s.get("median") is None:
        return "unknown"
    m, lo, hi = s["median"], s["ci_low"], s["ci_high"]
    if m == 0 and lo == 0 and hi == 0:
        return "0 (the fastest path)"
    return f"{m:+.{digits}f} ns [{lo:.{digits}f}, {hi:.{digits}f}]"


def _kinds(d):
    """'int 0x80' / 'int 0x80 and sysenter' for the slow paths' instructions, by calls."""
    by = {}
    for c, g in zip(d["cost"], d["paths"]):
        if not c["is_fastest"]:
            k = "__kernel_vsyscall" if g["entry"] == "vdso32-call" else ad.INSN_TEXT.get(g["entry"], g["entry"])
            by[k] = by.get(k, 0) + g["calls"]
    ks = sorted(by, key=lambda k: -by[k])
    return " and ".join(ks) if ks else ""


def fastest_text(d):
    f = d.get("fastest")
    if not f:
        return "the fastest path"
    m = registry.get(f)
    if m.entry == "vdso32-call":
        ins = (d.get("vdso") or {}).get("instruction")
        return "the vDSO path" + (f" ({ins} here)" if ins else "")
    return f"the {m.bits}-bit {ad.INSN_TEXT.get(m.entry, m.entry)} path"


def fmt_ms(s):
    """'1.23 ms [1.10, 1.40]' from a summary in ns; 'unknown (why)'."""
    if s is None or s.get("median") is None:
        return "unknown"
    k = 1e-6
    m, lo, hi = s["median"] * k, s["ci_low"] * k, s["ci_high"] * k
    digits = 3 if max(abs(lo), abs(hi)) < 1 else 2 if max(abs(lo), abs(hi)) < 100 else 0
    return f"{m:.{digits}f} ms [{lo:.{digits}f}, {hi:.{digits}f}]"


def headline(d):
    """The diagnosis in one sentence: the calls by slower paths and what they cost here."""
    x = d["extra"]
    n = d["calls"]
    w = d.get("witness") or {}
    if w.get("checked") and not w.get("agree"):
        return ("the tracer's counts disagree with each other, so no count here can be relied "
                "on: " + "; ".join(w["disagreements"]))
    if n == 0:
        return "the tracer saw no system call from this program"
    if x["calls"] == 0:
        return (f"this run made {n} system call{'s' if n != 1 else ''}, all by the fastest path available to it here "
                f"({fastest_text(d)}): its entry path cost nothing extra")
    base = f"this run made {x['calls']} call{'s' if x['calls'] != 1 else ''} by {_kinds(d)}"
    if x["calls"] != n:
        base += f" (of {n})"
    if x["total_ns"] is None:
        why = "; ".join(u["why"] for u in x["unknown"]) or d.get("fastest_why") or "unknown"
        return f"{base}; what that cost on this machine is unknown ({why})"
    s = f"{base}; on this machine that cost {fmt_ms(x['total_ns'])} more than {fastest_text(d)} would have"
    if x["share"]:
        # One traced run: its run time moves by tens of percent from one run to the next (a
        # Go program's start-up, the page cache), which no interval from this run can cover.
        # So the share is this run's, given without an interval; the cost above has one.
        rt = (d.get("run_time_s") or {}).get("median")
        pct = 100 * x["share"]["median"]
        s += (f", about {pct:.2g}% of this run's {rt * 1e3:.2f} ms (one run: run times vary "
              "between runs, so the share has no interval; the cost's interval covers a rerun)"
              if rt else f", about {pct:.2g}% of its run time (one run)")
        if x["share"]["of"] == "traced run time":
            s += " (of the traced time: the tracer's cost could not be taken out)"
    s += exits_text(d)
    if x["unknown"]:
        nu = sum(u["calls"] for u in x["unknown"])
        s += f"; {nu} more call{'s' if nu != 1 else ''} by paths of unknown cost"
    return s


def exits_text(d):
    """The int 0x80 calls priced in VM exits (issue 24): since Linux 6.7 each reads the APIC,
    one exit on a VM whose host does not virtualise that read."""
    rows = [c for c in d["cost"] if c.get("exits_per_call")]
    if rows:
        return "; " + "; ".join(
            f"its {c['calls']} int 0x80 call{'s' if c['calls'] != 1 else ''} cost "
            f"{_iv(c['exits_per_call'], 2)} VM exits each at {_price(c['exit_price_ns'])} an exit "
            f"(cpuid): {_iv(c['exits'], 0)} exits in all" for c in rows)
    why = next((c["exits_why"] for c in d["cost"] if c.get("exits_why")), None)
    return f"; its int 0x80 calls in VM exits: {why}" if why else ""


def _price(p):
    return f"{p['value']:.0f} ns [{p['ci_low']:.0f}, {p['ci_high']:.0f}]"


def _iv(s, digits):
    return f"{s['median']:.{digits}f} [{s['ci_low']:.{digits}f}, {s['ci_high']:.{digits}f}]"


def _n(x):
    return "—" if x is None else f"{x:.0f}"


def program_line(d):
    p = d["program"]
    what = " ".join(p["cmd"]) if p.get("cmd") else f"process {p['pid']} ({p.get('exe')})"
    return what


def tracer_line(d):
    t = d["tracer"]
    s = f"traced with {t['name']} ({t['script']})"
    if t.get("not_used"):
        s += "; not " + "; not ".join(f"{k}: {v}" for k, v in t["not_used"].items())
    return s


def path_rows(d):
    rows = []
    for g, c in zip(d["paths"], d["cost"]):
        rows.append([g["label"], str(g["calls"]), str(g["writes"]),
                     c["variant"] or "—",
                     _ns(c["per_call_ns"]) if c["per_call_ns"] else f"unknown ({c['why']})",
                     "0" if c["is_fastest"] else fmt_ms(c["total_ns"]) if c["total_ns"] else "unknown"])
    return rows


def short_label(g):
    """'compat int80 text', 'compat vdso32-call': a path in a few words, for the sites table."""
    return f"{g['abi']} {g['entry']} {g['origin']}" if g["entry"] != "vdso32-call" else \
        f"{g['abi']} vdso32-call"


def _short_path(p):
    """A path relative to the current directory when it lies under it."""
    if not p:
        return "—"
    try:
        rel = os.path.relpath(p)
    except ValueError:
        return p
    return p if rel.startswith("..") else rel


def site_rows(d, limit=12, short=True):
    rows = []
    for g in d["paths"]:
        for s in g["sites"]:
            rows.append((s["calls"], short_label(g), s))
    rows.sort(key=lambda r: -r[0])
    out = []
    for n, lab, s in rows[:limit]:
        calls = ", ".join(f"{k} {v}" for k, v in list(s["syscalls"].items())[:5])
        if len(s["syscalls"]) > 5:
            calls += f", … ({len(s['syscalls']) - 5} more)"
        out.append([str(n), lab, s["site"], _short_path(s.get("path")) if short else (s.get("path") or "—"),
                    calls])
    return out, len(rows)


def latency_rows(d):
    out = []
    for l in d["latency"]:
        p = l["percentiles"]
        out.append([f"{l['name']} ({'i386' if l['abi'] == 'compat' else 'x86-64'} {l['id']})",
                    str(l["calls"]), _n(l["mean_ns"]), _n(p.get("p50")), _n(p.get("p90")),
                    _n(p.get("p99"))])
    return out


def histogram(buckets, width=BAR):
    """bpftrace-style bars: '[512, 1K)   953 |@@@@…|'."""
    top = max((b["count"] for b in buckets), default=0)
    lines = []
    for b in buckets:
        if not b["count"]:
            continue
        rng = f"[{_k(b['lo_ns'])}, {_k(b['hi_ns']) if b['hi_ns'] is not None else '...'})"
        bar = "@" * max(1, round(width * b["count"] / top)) if top else ""
        lines.append(f"{rng:<18} {b['count']:>7} |{bar:<{width}}|")
    return "\n".join(lines)


def _k(v):
    if v >= 1 << 20 and v % (1 << 20) == 0:
        return f"{v >> 20}M"
    if v >= 1024 and v % 1024 == 0 and (v & (v - 1)) == 0:
        return f"{v >> 10}K"
    return str(int(v))


def method_lines(d):
    out = []
    ov = d["tracer"]["overhead_ns"]
    rt = d.get("run_time_s") or {}
    wall = d.get("wall_s")
    if wall is not None:
        if ov.get("median") is not None and not rt.get("traced"):
            out.append(f"Run time: {wall * 1e3:.2f} ms traced. The tracer added "
                       f"{fmt(ov)} per call (syscost-{ov['variant']} {ov['op']}, bare against "
                       f"under the same tracer) x {d['calls']} calls; without it the run takes about "
                       f"{rt['median'] * 1e3:.2f} ms [{rt['ci_low'] * 1e3:.2f}, {rt['ci_high'] * 1e3:.2f}], "
                       f"the time the shares above are of.  (The subtraction takes the calls as "
                       f"made one after another; calls of other threads overlap, so for a threaded "
                       f"program the run time is a lower bound and the share an upper bound.)")
        else:
            out.append(f"Run time: {wall * 1e3:.2f} ms traced; {rt.get('why') or ov.get('why')}, so "
                       f"shares are of the traced time and understate the entry path's part.")
    out.append(f"Per-call costs: {d['percall_source']}; " + "; ".join(
        sorted({c["method"] for c in d["cost"] if c.get("method") and not c["is_fastest"]}) or
        ["no slower path to price"]) + ".")
    pens = {}
    for c in d["cost"]:
        for v, p in (c.get("penalty_ns") or {}).items():
            pens[v] = p
    if pens:
        known = {v: p for v, p in pens.items() if p.get("median") is not None}
        if known:
            out.append("Post-return penalty (ret minus jmp shape, already inside the ret-shape "
                       "differences above): " + "; ".join(f"{v} {fmt(p)}" for v, p in known.items())
                       + ".")
        missing = [v for v in pens if v not in known]
        if missing:
            out.append(f"Post-return penalty of {', '.join(missing)}: unknown (the per-call matrix has "
                       "no jmp-shape null cell for it); the ret-shape differences above include "
                       "whatever each path pays after its return, but it cannot be shown apart.")
    if d["tracer"]["name"] == "bpftrace":
        out.append("Latencies run from raw_syscalls:sys_enter to sys_exit and include the "
                   "probes' own work between the two stamps.")
    else:
        out.append("Latencies are strace -T's: each includes two ptrace stops, several "
                   "microseconds that the call itself does not cost.")
    if d["tracer"].get("note"):
        out.append(f"Note: {d['tracer']['note']}.")
    out.append(witness_line(d))
    r = d["tracer"].get("regs_ok")
    if r and r.get("bad"):
        out.append(f"Warning: {r['bad']} calls read a pt_regs whose orig_ax did not match; "
                   "their origin may be wrong (THREAD_SIZE differs on this kernel?).")
    return out


def witness_line(d):
    """What the counts were checked against (analyse.diagnose.witnesses), in one line."""
    w = d.get("witness") or {}
    if not w.get("checked"):
        return f"Counts not checked against a second witness: {w.get('why') or 'unknown'}."
    if d["tracer"]["name"] == "bpftrace":
        s = (f"Counts checked: the sites sum to {w['entries']} calls, the probe's own total "
             f"(@regs_ok) is {w['regs_ok']}, and {w['exits']} came back ({w.get('no_return', 0)} "
             "never return: exit, exit_group)")
    else:
        s = f"Counts checked: strace printed {w['entries']} calls that the rows hold"
    col = w.get("collapsed") or {}
    if col:
        s += ("; bpftrace printed " + ", ".join(f"{n} more entries of {m}" for m, n in col.items())
              + " under keys that print alike (bytes of the key that do not print differ): "
              "each is summed into its key")
    if w.get("warnings"):
        s += "; bpftrace warned: " + "; ".join(w["warnings"])
    if not w.get("agree"):
        return s + ". They disagree: " + "; ".join(w["disagreements"]) + "."
    return s + ": they agree."


def format_text(d):
    lines = [f"tw diagnose: {program_line(d)}",
             f"  {tracer_line(d)}; exit status {d['program']['status']}; "
             f"{d['program']['bits']}-bit program" +
             (f"; the 32-bit vDSO here: {d['vdso']['instruction']}" if d['vdso'].get('instruction') else ""),
             "", headline(d), "", "System calls by entry path"]
    fast = d.get("fastest") or "the fastest path"
    hdr = ["path", "calls", "writes", "as", f"vs {fast}, per call", "total"]
    lines += _table(hdr, path_rows(d))
    rows, n = site_rows(d)
    lines += ["", f"Entry sites, most calls first ({min(n, len(rows))} of {n})"]
    lines += _table(["calls", "path", "site", "file", "system calls"], rows)
    lines += ["", f"Latency, entry to exit, ns (write and the top {ad.TOP} of "
                  f"{d['syscalls_seen']} syscalls by count)"]
    lines += _table(["syscall", "calls", "mean", "p50", "p90", "p99"], latency_rows(d))
    for l in d["latency"]:
        if l["is_write"] or l is d["latency"][0]:
            h = l["linear"] or l["log2"]
            lines += ["", f"{l['name']} ({'i386' if l['abi'] == 'compat' else 'x86-64'}), ns:",
                      *histogram(h).split("\n")]
    lines += [""] + method_lines(d)
    # Command words, symbol and file names and the tracer's notes came from outside: each
    # line is escaped whole for the terminal (a name holding ESC ] 0; cannot retitle it).
    return "\n".join(escape.terminal(line) for line in lines)


def _table(headers, rows):
    w = [max(len(str(h)), *(len(str(r[i])) for r in rows)) if rows else len(str(h))
         for i, h in enumerate(headers)]
    out = ["  " + "  ".join(str(h).ljust(w[i]) for i, h in enumerate(headers)).rstrip()]
    for r in rows:
        out.append("  " + "  ".join(str(c).ljust(w[i]) for i, c in enumerate(r)).rstrip())
    return out


def to_json(d):
    """The diagnosis and its headline as JSON (which shows control characters as \\u001b)."""
    return json.dumps(dict(d, headline=headline(d)), indent=1, default=str)


def report_section(doc, d, level=2, title=None):
    """The diagnosis as blocks of a document.Doc: heading, headline, paths, sites, latency,
    method.  The caller (a report) chooses the level and title."""
    doc.h(level, title or f"Diagnosis: {outside(program_line(d))}")
    h = headline(d)
    doc.p(f"**{h[0].upper() + h[1:]}.**")
    doc.p(tracer_line(d).capitalize() + f"; exit status {d['program']['status']}; "
          f"{d['program']['bits']}-bit program" +
          (f"; the 32-bit vDSO here uses `{d['vdso']['instruction']}`." if d['vdso'].get('instruction') else "."))
    fast = d.get("fastest") or "the fastest path"
    doc.table(["path", "calls", "writes", "as", f"vs {fast}, per call", "total"], path_rows(d))
    rows, n = site_rows(d, limit=8, short=False)   # a page reads the same wherever it is built
    doc.p(f"Entry sites, most calls first ({len(rows)} of {n}):")
    # symbol and file names come from the program's ELF files and /proc
    doc.table(["calls", "path", "site", "file", "system calls"],
              [[outside(c) if isinstance(c, str) else c for c in r] for r in rows])
    doc.p("Latency from entry to exit, in ns:")
    doc.table(["syscall", "calls", "mean", "p50", "p90", "p99"], latency_rows(d))
    w = next((l for l in d["latency"] if l["is_write"]), None)
    if w:
        doc.code(f"{w['name']} ({'i386' if w['abi'] == 'compat' else 'x86-64'}), ns:\n"
                 + histogram(w["linear"] or w["log2"]))
    for line in method_lines(d):
        doc.p(outside(line))
    return doc
