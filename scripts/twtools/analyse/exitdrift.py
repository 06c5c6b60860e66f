"""How far the price of a VM exit moved over a run, and the intervals that hold it.

The host moves the price of a VM exit over minutes, and every cell that pays exits moves with
it: on an AMD EPYC guest (family 25, model 17) one cpuid cost 3600 ns [3593, 3608] in a
default run and 3556 [3537, 3574] in the next, and the int 0x80 cells (one exit a call) of
the rerun missed 4 of their 12 intervals, which hold the matrix's moment (+-0.4%) but not the
host's next one.  Within one matrix the price holds still, so no rerun of its processes sees
the move: it is a factor of the run's moment, and only pricing the exit at another moment can.

tw run prices it twice: the matrix's cpuid cell, in the moments of the cells, and the
exit-price stage (measure/exitprice.py) after every other stage, two to three minutes later.
The run's end is where its rerun begins, so the two prices bracket what a rerun right after
would pay.

Only a move the two prices resolve (the interval of their difference excludes zero) widens
anything.  Each price rests on about twenty processes and is +-0.7-3% on a noisy host (an
AMD EPYC guest, three default runs), so widening by every unresolved difference took the
exit-paying cells from +-0.3-0.5% to +-1-3% and the fast cells' median half-width from
0.64-0.70% to 1.05-1.08%, for moves of +0.06% and +1.4% [-1.9, +4.6] that the reruns'
intervals held anyway.  The step the stage is for, -1.2% on prices of +-0.2-0.5%, is
resolved.  Then each cell that pays k exits a call (causes.exits_paid: what the kernel's
facts predict, when the run's own fit agrees) gets an interval that holds its figure at both
prices: its own interval as measured, and the figure moved by k times the price's move, its
half-widths and k times the move's (both prices' in quadrature) added in quadrature.  The
figure stays the matrix's; `moment` keeps the interval as measured, which `tw compare` uses
where it takes the exit's price out itself (analyse/compare.between_runs).

    judge(bench)                     the stage's stopping rule, against the matrix (analysed)
    end_price(end, bench)            {value_ns, half_ns, cycles..., why} of the stage's price
    analyse(raw, bench, causes)      exitprice's analysed summary (None without the stage)
    widen(bench, causes, summary)    the exit-paying cells' intervals, in place
    at_moment(cell)                  a cell with its intervals as measured
"""
import math

from . import causes as causes_mod, percall, stats

ANALYSIS = "exitdrift/1"
# The cpuid processes that met the host's fast state, that the price at the end rests on: a
# fixed number, not "until the interval looks narrow", which would stop on lucky draws.  The
# move's uncertainty is every exit-paying cell's on that side: with 8 the end price was
# +-1.1% on the AMD guest (3671 ns [3631, 3712]), with 16 +-0.7% to +-1.3%; 24 take about
# 2 s on a quiet host.
FAST_PROCESSES = 24
# The stage met the matrix's fast state when its reference (64-bit syscall null) came within
# this of the matrix's undisturbed reference (the matrix's live rule, measure/bench.HOST_TOL);
# otherwise its "fast" processes are only the least slow of a slow moment.
HOST_TOL = 0.10


def _cpuid(analysed):
    ref = (analysed or {}).get("reference") or {}
    return percall.find(analysed, ref.get("variant"), "cpuid") if analysed else None


def _ref(analysed):
    ref = (analysed or {}).get("reference") or {}
    return percall.find(analysed, ref.get("variant"), ref.get("op") or "null",
                        shape=ref.get("shape") or "ret") if analysed else None


def _value(c, unit):
    """(value, half-width) of a cell's undisturbed figure in 'cycles' or 'ns', or None."""
    f = percall.figure(c, "cycles" if unit == "cycles" else "undisturbed") if c else None
    if not f or f.get("median") is None:
        return None
    return f["median"], stats.half_width(f)


def _unit(end, bench):
    """'cycles' when both timed the core's clock (a clock step between them is not the exit's
    move), else 'ns'."""
    both = all(((a or {}).get("core_clock") or {}).get("cycles_per_ns") for a in (end, bench))
    return "cycles" if both else "ns"


def end_price(end, bench):
    """The stage's price of one exit ({value, half, unit, value_ns, half_ns, fast_processes,
    why: None}), or {value: None, why} when it is not known: too few of its cpuid processes
    met the host's fast state, or its fast state was not the matrix's."""
    c = _cpuid(end)
    if c is None or not c.get("supported"):
        return {"value": None, "why": "the stage measured no cpuid cell"
                + (f" ({c.get('reason')})" if c and c.get("reason") else "")}
    u = c.get("undisturbed") or {}
    n = (u.get("host") or {}).get("fast_processes") or 0
    if n < FAST_PROCESSES or u.get("value") is None:
        return {"value": None, "fast_processes": n,
                "why": f"only {n} of its cpuid processes met the host's fast state "
                       f"({FAST_PROCESSES} are needed)"}
    unit = _unit(end, bench)
    er, br = _value(_ref(end), unit), _value(_ref(bench), unit)
    if er and br and er[0] > br[0] * (1 + HOST_TOL):
        return {"value": None, "fast_processes": n,
                "why": f"the host never reached the matrix's fast state during the stage: its "
                       f"reference's figure was {100 * (er[0] / br[0] - 1):.0f}% above the "
                       "matrix's"}
    v, h = _value(c, unit)
    out = {"value": v, "half": h, "unit": unit, "fast_processes": n, "why": None}
    vn, hn = _value(c, "ns")
    out["value_ns"], out["half_ns"] = vn, hn
    return out


def judge(bench):
    """The exit-price stage's stopping rule (measure/exitprice.stage's judge) against the
    analysed matrix: (stop, why) of a stage document."""
    def j(doc):
        p = end_price(percall.analyse(doc), bench)
        if p["value"] is not None:
            return True, f"{p['fast_processes']} cpuid processes met the host's fast state"
        return False, p["why"]
    return j


def analyse(raw, bench, cz):
    """exitprice.json's analysed summary: the two prices, the move between them and its share,
    or why the move is unknown; None when the run has no exit-price stage."""
    if not raw:
        return None
    if not bench:
        return {"analysis": ANALYSIS, "move": None,
                "why": "the run has no matrix, whose price it would be compared with"}
    end = percall.analyse(raw)
    p = end_price(end, bench)
    unit = _unit(end, bench)
    b = _value(_cpuid(bench), unit)
    out = {"analysis": ANALYSIS, "unit": unit, "end": p, "move": None, "why": p["why"],
           "rounds": (raw.get("host_state") or {}).get("rounds"),
           "seconds": raw.get("wall_s"),
           "bench": {"value": b[0], "half": b[1]} if b else None,
           "paying": sorted(v for v in ((cz or {}).get("mechanisms") or {})
                            if causes_mod.exits_paid(cz, v))}
    if b is None:
        out["why"] = "the matrix has no cpuid figure to compare the stage's with"
        return out
    if p["value"] is None:
        return out
    move = p["value"] - b[0]
    # in ns at the matrix's top clock, the unit of its figures
    k = (bench.get("core_clock") or {}).get("cycles_per_ns") if unit == "cycles" else 1.0
    half = math.hypot(b[1], p["half"])
    out.update(move=move, move_pct=100 * move / b[0], move_ns=move / k, move_half_ns=half / k,
               move_half_pct=100 * half / b[0], resolved=abs(move) > half, why=None)
    return out


def _moved(f, mid, lo, hi, s, h):
    """f with its interval (keys lo, hi around f[mid]) widened to hold the figure moved by s
    with the half-widths in quadrature: its own on each side, and h."""
    m = f[mid] + s
    return dict(f, **{lo: min(f[lo], m - math.hypot(f[mid] - f[lo], h)),
                      hi: max(f[hi], m + math.hypot(f[hi] - f[mid], h))})


def widen(bench, cz, summary):
    """Give each cell that pays exits (causes.exits_paid) an interval that holds it at both
    prices of the exit (summary: analyse()'s, with a move its two prices resolve), in place:
    the undisturbed figure's interval in ns, in cycles and as a ratio to the reference; the
    interval as measured kept under exit_drift.moment.  Returns the number of cells widened."""
    if not bench or not summary or summary.get("move") is None or not summary.get("resolved"):
        return 0
    ref = _ref(bench)
    ref_ns = (ref or {}).get("undisturbed_ns")
    kc = (bench.get("core_clock") or {}).get("cycles_per_ns")
    n = 0
    for c in bench.get("cells") or []:
        if not c.get("supported") or c.get("op") == "cpuid" or c.get("undisturbed_ns") is None \
                or c.get("undisturbed_ci_low") is None:
            continue
        k = causes_mod.exits_paid(cz, c["variant"])
        if not k:
            continue
        s, h = k * summary["move_ns"], k * summary["move_half_ns"]
        moment = {x: c.get(x) for x in ("undisturbed", "undisturbed_ci_low", "undisturbed_ci_high",
                                        "undisturbed_cycles", "undisturbed_ratio")}
        c["undisturbed"] = _moved(c["undisturbed"], "value", "ci_low", "ci_high", s, h)
        c["undisturbed_ci_low"], c["undisturbed_ci_high"] = c["undisturbed"]["ci_low"], \
            c["undisturbed"]["ci_high"]
        if c.get("undisturbed_cycles") and kc:
            c["undisturbed_cycles"] = _moved(c["undisturbed_cycles"], "value", "ci_low",
                                             "ci_high", s * kc, h * kc)
        r = c.get("undisturbed_ratio")
        if r and r.get("ci_low") is not None and ref_ns:
            c["undisturbed_ratio"] = _moved(r, "median", "ci_low", "ci_high", s / ref_ns,
                                            h / ref_ns)
        c["exit_drift"] = {"exits": k, "shift_ns": s, "shift_half_ns": h, "moment": moment}
        n += 1
    return n


def at_moment(c):
    """The cell with the intervals its matrix measured, before widen(): where a comparison
    takes the exit's price out itself."""
    d = (c or {}).get("exit_drift")
    return dict(c, **d["moment"]) if d and d.get("moment") else c
