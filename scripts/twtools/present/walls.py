"""The walls in the report: the first screen's line on what a container's seccomp profile adds
to the 64-bit syscall and to int 0x80, and the section with every wall measured, each row's
added cost with its interval and the path the call takes through the wall."""
from ..analyse import walls as a_walls
from ..machine.walldefs import HEADLINE_CELLS, HEADLINE_WORDS
from .census import fmt_ns as _ns
from .document import outside

HEADERS = ["wall", "way in", "call", "bare (ns)", "added (ns)", "95% interval", "B/A",
           "why (the call's path through the wall)"]


def _added_text(row):
    a = a_walls.added(row)
    if a is None:
        return None
    bare = ((row.get("a") or {}).get("value"))
    pct = f", {100 * a[0] / bare:+.1f}%" if bare else ""
    return f"{_ns(a[0])} ns [{_ns(a[1])}, {_ns(a[2])}]{pct}"


def first_line(d):
    """One sentence for the first screen, or None when the stage did not run or measured
    neither headline cell."""
    if not d or not d.get("headline"):
        return None
    h = d["headline"]
    parts = []
    for variant, op in HEADLINE_CELLS:
        what = HEADLINE_WORDS[(variant, op)]
        t = _added_text(h.get((variant, op)))
        if t:
            cached = ((h[(variant, op)].get("chain") or {}).get("cached"))
            parts.append(f"{what} {t}" + (" (cached: no filter runs)" if cached else ""))
    if not parts:
        return None
    return ("**Behind a container's seccomp profile** (walls/profiles/container.json), a "
            "getppid call pays " + "; ".join(parts) + ". The kernel still leaves its fast "
            "path for every call of a filtered process (docs/walls.md).")


def section(doc, data):
    """The walls section of the report, from the results directory's analysed walls.json."""
    d = (data or {}).get("walls")
    if not d:
        return
    doc.h(2, "The walls: what a seccomp filter, audit or a tracer adds here")
    doc.p("Each wall was put up for B's runs only, A and B alternating round by round on the "
          "same copies of each program (tw ab --wall; docs/walls.md). The added cost is B - A "
          "of the undisturbed figures, with its 95% interval.")
    rows = []
    for w in d["walls"]:
        if w.get("why"):
            doc.p(outside(f"{w['spec']}: not measured: {w['why']}"))
            continue
        for r in w["rows"]:
            a = a_walls.added(r)
            ratio = (r.get("ratio") or {}).get("median")
            bare = (r.get("a") or {}).get("value")
            rows.append([outside(w["spec"]), r["variant"], r["op"],
                         "" if bare is None else f"{bare:.1f}",
                         "unknown" if a is None else _ns(a[0]),
                         "" if a is None else f"[{_ns(a[1])}, {_ns(a[2])}]",
                         "" if ratio is None else f"{ratio:.3f}",
                         outside(r.get("why") or r.get("sentence", ""))])
        for line in w["lines"]:
            doc.p(outside(line.strip()))
    if rows:
        doc.table(HEADERS, rows)
    if d.get("audit_why"):
        doc.p(outside(d["audit_why"]))
    if not d.get("full"):
        doc.p("This run measured the container profile on the headline's two cells only. "
              "`tw run --walls` measures every standard wall (a one-instruction filter, the "
              "container profile, audit, a tracer on raw_syscalls) on every way in that works "
              "here, for a null call, getppid and both writes: on the project's AMD EPYC "
              "guest it adds about two and a half minutes to the run.")
