"""The fleet view (twtools.analyse.fleet.view) as a page, a CSV, a JSON file and a terminal
summary.

The page must stay readable for a thousand machines, so it leads with the groups (one row
each: the facts that set it apart, how many machines, the median figure per mechanism and
the spread inside the group) as a heat map, and lists a group's machines only on demand,
inside a <details> element.  Every string that came from a results directory (host names,
CPU names, kernel releases) is escaped for where it goes: html.escape for the page,
escape.terminal for the terminal (and before html.escape, so that
control characters show on the page too).  fleet.csv is written by the database itself
(store.fleetdb.write_csv), where a cell that a spreadsheet would run as a formula (=, +, -,
@) is prefixed with a quote.

A group lists at most PAGE_MACHINES machines on the page: a page of 100,000 machine rows
would not open, and every machine is in fleet.csv and fleet.json.
"""
import contextlib
import html
import math
import os

import orjson

from ..analyse import fleet as afleet
from ..core import escape, files

def _g(x, unit=""):
    if x is None:
        return "—"
    return f"{x:.3g}{unit}" if abs(x) < 1000 else f"{x:.0f}{unit}"


def _ci(lo, hi, unit=""):
    return f" [{_g(lo)}, {_g(hi)}]" if lo is not None and hi is not None else ""


PAGE_MACHINES = 500


def _heat(ratio):
    """A background colour for a ratio to the machine's own reference call: white at 1×,
    deep red at 100× and beyond, on a log scale (22 ns and 6 µs on one page)."""
    if ratio is None or ratio <= 0:
        return "#eeeeee"
    t = max(0.0, min(1.0, math.log10(max(ratio, 1.0)) / 2))
    g = int(255 - 175 * t)
    return f"rgb(255,{g},{int(255 - 215 * t)})"


# ---- terminal ---------------------------------------------------------------------------------

def unranked_measured(view):
    """The measured causes (analyse.fleet.explain_measured) the ranking does not open with: too
    few machines priced an exit, or the price accounts for less than half the spread; those
    it opens with are said once, there."""
    ranked = {e["column"] for e in view.get("explain") or [] if e.get("kind") == "measured"}
    return [e for e in view.get("explain_measured") or [] if e["column"] not in ranked]


def travel_facts(view):
    """{column: [fact names]} of the facts that only travel with a measured cause."""
    out = {}
    for e in split_ranking(view)[1]:
        names = out.setdefault(e["column"], [])
        if afleet.FACT_NAMES[e["fact"]] not in names:
            names.append(afleet.FACT_NAMES[e["fact"]])
    return out


def _travel_note(view):
    """One sentence for the page's head: the groups' facts that, in some columns, only travel
    with the measured exit price (escaped: a fact name is ours, a column ours)."""
    by = {}
    for col, names in travel_facts(view).items():
        by.setdefault(tuple(names), []).append(col)
    if not by:
        return ""
    parts = [f"{' and '.join(n)} only travel{'s' if len(n) == 1 else ''} with the exit price "
             f"in {' and '.join(cs)}" for n, cs in by.items()]
    text = "; ".join(parts)
    return " " + _e(text[0].upper() + text[1:] + ": they group beside it, and are not the cause "
                    "of its spread (below).")


def split_ranking(view):
    """(the ranking's causes and explaining facts, the facts that only travel with a measured
    cause): analyse.fleet.rank() puts the measured causes first and these last."""
    ex = view.get("explain") or []
    return ([e for e in ex if not e.get("confounded_with")],
            [e for e in ex if e.get("confounded_with")])


def text(view, out=None):
    """A few lines for the terminal: counts, refused hosts, groups, outliers, explanations."""
    lines = [f"tw fleet: {len(view['machines'])} machines compared, "
             f"{len(view['refused'])} refused; figure: {view['figure']}; "
             f"op: {view['op'] or 'all'}"]
    if 0 < len(view["machines"]) <= 20:
        lines.append("machines: " + ", ".join(escape.terminal(m["host"]) for m in view["machines"]))
    lines.append(f"groups by what differs ({', '.join(afleet.FACT_NAMES[f] for f in view['differ']) or 'nothing differs'}):")
    for g in view["groups"][:20]:
        facts = "; ".join(f"{afleet.FACT_NAMES[k]} {v}" for k, v in g["facts"].items()) or "all machines"
        lines.append(f"  {g['n']:>5} machine{'s' if g['n'] != 1 else ' '}: {escape.terminal(facts)}")
    if len(view["groups"]) > 20:
        lines.append(f"  ... {len(view['groups']) - 20} more groups (see the page)")
    if view["outliers"]:
        lines.append("outliers (gap to the group's median [95% CI]):")
        for o in view["outliers"][:10]:
            lines.append(f"  {escape.terminal(o['host'])} {escape.terminal(o['column'])}: {_g(o['value'])} ns vs "
                         f"{_g(o['group_median'])} ns, {100 * o['gap']:+.0f}%"
                         + (f" [{100 * o['gap_low']:+.0f}, {100 * o['gap_high']:+.0f}]"
                            if o["gap_low"] is not None else "") + f" ({o['interval']})")
    for b in view.get("bases") or []:
        lines.append(f"the base on {escape.terminal(b['cpu'])}: kernel "
                     f"{escape.terminal(b['b_kernel'])} against {escape.terminal(b['a_kernel'])}: "
                     f"{escape.terminal(b['sentence'])}")
    rest = unranked_measured(view)
    if rest:
        lines.append("measured causes (analyse/causes.py), not ranked:")
        for e in rest[:8]:
            lines.append("  " + escape.terminal(afleet.measured_sentence(e)))
    ranked, travel = split_ranking(view)
    if ranked:
        lines.append("what explains the differences, ranked (measured causes first):")
        for e in ranked[:8]:
            lines.append("  " + escape.terminal(afleet.sentence(e)))
    if travel:
        lines.append("facts that only travel with a measured cause (confounded, not explanations):")
        for e in travel[:8]:
            lines.append("  " + escape.terminal(afleet.sentence(e)))
    if out:
        lines.append(f"written: {escape.path(out)}/fleet.html, fleet.csv, fleet.json")
    return "\n".join(lines) + "\n"


# ---- HTML -------------------------------------------------------------------------------------

CSS = """body{font-family:system-ui,sans-serif;max-width:100%;margin:1em 2em;color:#111}
.tbl{overflow-x:auto;max-width:100%}table{border-collapse:collapse;font-size:13px}
td,th{border:1px solid #ccc;padding:3px 6px;text-align:right;white-space:nowrap}
th{background:#f4f4f4}td.l,th.l{text-align:left;white-space:normal;min-width:14em}details{margin:.3em 0}
summary{cursor:pointer}.refused{color:#a00}small{color:#555}"""


def _e(s):
    """Text from a results directory on the page: control characters shown visibly (an ESC
    or BEL has no business in a page either), then HTML-escaped."""
    return html.escape(escape.terminal(str(s)), quote=True)


def _group_row(view, g):
    facts = "; ".join(f"{afleet.FACT_NAMES[k]}: {v}" for k, v in g["facts"].items()) or "all"
    cells = []
    for col in view["columns"]:
        r, v = g["ratio"].get(col), g["value"].get(col)
        if not r:
            cells.append('<td style="background:#eee">—</td>')
            continue
        spread = f"<br><small>spread {100 * r['spread']:.0f}%</small>" if r["spread"] is not None else ""
        cells.append(f'<td style="background:{_heat(r["median"])}" title="median of {r["n"]} '
                     f'machines; median ns {_g(v["median"]) if v else "—"}">'
                     f'{_g(r["median"], "×")}<br><small>{_g(v["median"]) if v else "—"} ns</small>'
                     f'{spread}</td>')
    return f'<tr><td class="l">{_e(facts)}</td><td>{g["n"]}</td>{"".join(cells)}</tr>'


def exit_text(m):
    """A machine's exit price and exits per int 0x80 call, from its digest (analyse/causes.py)."""
    c = m.get("causes") or {}
    p = c.get("exit_price") or {}
    if p.get("value") is None:
        return "exit price unknown (no cpuid cell)"
    s = f"exit {_g(p['value'])} ns{_ci(p.get('ci_low'), p.get('ci_high'))}"
    e = ((c.get("int80") or {}).get("exits_per_call") or {})
    if e.get("value") is not None:
        s += f", {e['value']:.2f}{_ci(e.get('ci_low'), e.get('ci_high'))} exits per int 0x80 call"
    return s


def _machine_rows(view, hosts, byhost):
    rows = []
    for h in hosts:
        m = byhost[h]
        cells = []
        for col in view["columns"]:
            c = m["cells"].get(col)
            if c is None:
                cells.append('<td style="background:#eee">—</td>')
                continue
            cells.append(f'<td style="background:{_heat(c["ratio"])}">{_g(c["ratio"], "×")}'
                         f'{_ci(c["ratio_low"], c["ratio_high"])}<br><small>{_g(c["value"])} ns'
                         f'{_ci(c["ci_low"], c["ci_high"])}</small></td>')
        rows.append(f'<tr><td class="l">{_e(h)}<br><small>{_e(m["facts"]["cpu_name"])}; '
                    f'{_e(m["facts"]["kernel"])}; {_e(exit_text(m))}</small></td>{"".join(cells)}</tr>')
    return rows


def page(view):
    cols = view["columns"]
    head = "".join(f"<th>{_e(c)}</th>" for c in cols)
    byhost = {m["host"]: m for m in view["machines"]}
    out = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
           "<title>timewrite fleet</title>", f"<style>{CSS}</style></head><body>",
           f"<h1>{len(view['machines'])} machines</h1>",
           f"<p>Figure: <strong>{_e(view['figure'])}</strong>, each machine's own cost per call "
           f"and × its own reference call ({_e(view['machines'][0]['reference']) if view['machines'] else '—'}). "
           f"Groups by what differs: {_e(', '.join(afleet.FACT_NAMES[f] for f in view['differ']) or 'nothing')}. "
           "Colour: × reference on a log scale (white 1×, red 100×)." + _travel_note(view)
           + "</p>"]
    if view["refused"]:
        out.append(f"<h2>Refused ({len(view['refused'])})</h2><ul>")
        out += [f'<li class="refused">{_e(r["host"])}: {_e(r["why"])}</li>' for r in view["refused"]]
        out.append("</ul>")
    if view.get("bases"):
        out.append("<h2>The base on one CPU model, kernel by kernel</h2><p>Every kernel-entering "
                   "cell of the newest run under each kernel, fitted against the earliest kernel's "
                   "as later = speed × earlier + added (each run's VM exits taken out at its own "
                   "price): added is what every way into the kernel pays more, which ratios to "
                   "each machine's own 64-bit syscall cannot show.</p><ul>")
        out += [f"<li>{_e(b['cpu'])}: kernel {_e(b['b_kernel'])} ({_e(b['b'])}) against "
                f"{_e(b['a_kernel'])} ({_e(b['a'])}): {_e(b['sentence'])}</li>"
                for b in view["bases"]]
        out.append("</ul>")
    rest = unranked_measured(view)
    if rest:
        out.append("<h2>Measured causes, not ranked</h2><ul>")
        out += [f"<li>{_e(afleet.measured_sentence(e))}</li>" for e in rest]
        out.append("</ul>")
    ranked, travel = split_ranking(view)
    if ranked:
        out.append("<h2>What explains the differences, measured causes first</h2><ol>")
        out += [f"<li>{_e(afleet.sentence(e))}</li>" for e in ranked]
        out.append("</ol>")
    if travel:
        out.append("<h2>Facts that only travel with a measured cause</h2><p>Beyond the "
                   "measured exit price, each of these fingerprint facts explains next to nothing "
                   "of its column's spread: it travels with the price (its values sit on hosts "
                   "with different prices), or the machines that share it differ in price and "
                   "their ratios follow the price. It is confounded with the price, not an "
                   "explanation of its own. The machines that tell them apart are named, or the "
                   "machine that would.</p><ul>")
        out += [f"<li>{_e(afleet.sentence(e))}</li>" for e in travel]
        out.append("</ul>")
    out.append(f"<h2>Groups</h2><div class=\"tbl\"><table><thead><tr><th class=\"l\">group</th>"
               f"<th>machines</th>{head}</tr></thead><tbody>")
    out += [_group_row(view, g) for g in view["groups"]]
    out.append("</tbody></table></div>")
    out.append("<h2>Machines, by group</h2>")
    for g in view["groups"]:
        facts = "; ".join(f"{afleet.FACT_NAMES[k]}: {v}" for k, v in g["facts"].items()) or "all"
        out.append(f"<details><summary>{_e(facts)} ({g['n']} machine{'s' if g['n'] != 1 else ''})</summary>"
                   f'<div class="tbl"><table><thead><tr><th class="l">host</th>{head}</tr></thead><tbody>')
        out += _machine_rows(view, g["hosts"][:PAGE_MACHINES], byhost)
        out.append("</tbody></table></div>")
        if g["n"] > PAGE_MACHINES:
            out.append(f"<p><small>The first {PAGE_MACHINES} of {g['n']} machines, by name: "
                       "every machine is in fleet.csv and fleet.json.</small></p>")
        out.append("</details>")
    if view["outliers"]:
        out.append("<h2>Outliers</h2><div class=\"tbl\"><table><thead><tr><th class=\"l\">host</th>"
                   "<th class=\"l\">cell</th><th>ns</th><th>group median ns</th><th>gap [95% CI]</th>"
                   "<th class=\"l\">interval from</th></tr></thead><tbody>")
        for o in view["outliers"][:200]:
            gap = f"{100 * o['gap']:+.1f}%" + (f" [{100 * o['gap_low']:+.1f}, {100 * o['gap_high']:+.1f}]"
                                                if o["gap_low"] is not None else "")
            out.append(f'<tr><td class="l">{_e(o["host"])}</td><td class="l">{_e(o["column"])}</td>'
                       f'<td>{_g(o["value"])}</td><td>{_g(o["group_median"])}</td><td>{gap}</td>'
                       f'<td class="l">{_e(o["interval"])}</td></tr>')
        out.append("</tbody></table></div>")
    out.append("</body></html>")
    return "\n".join(out) + "\n"


def write(view, out, csv):
    """fleet.html, fleet.csv and fleet.json inside out (the caller confines writes to it);
    csv(path) writes fleet.csv from the database the view was drawn from."""
    written = []
    try:
        for name, fill in (("fleet.csv", csv), ("fleet.json", lambda p: files.write_chunks(
                p, json_chunks(view))), ("fleet.html", lambda p: files.write_text(p, page(view)))):
            fill(out / name)
            written.append(out / name)
    except BaseException:
        # All three or none: a full disk must not leave a lone page that looks complete.
        for p in written:
            with contextlib.suppress(OSError):
                os.unlink(p)
        raise


def json_chunks(view, per=2000):
    """fleet.json, compact, in pieces of `per` machines: 100,000 machines are some 300 MB of
    JSON, which need not be in memory at once.  The view holds no NaN: every figure came
    through schema checks that refuse one."""
    opt = orjson.OPT_SERIALIZE_NUMPY
    head = orjson.dumps({k: v for k, v in view.items() if k != "machines"}, option=opt)
    yield head[:-1] + b',"machines":['
    ms = view["machines"]
    for i in range(0, len(ms), per):
        part = orjson.dumps(ms[i:i + per], option=opt)[1:-1]
        yield (b"," if i else b"") + part
    yield b"]}\n"
