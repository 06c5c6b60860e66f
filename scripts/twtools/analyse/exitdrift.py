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

Each cell that pays k exits a call (causes.exits_paid: what the kernel's facts predict, when
the run's own fit agrees) gets an interval that holds its figure at both prices and at the
price as far the other way: its own interval as measured, widened on each side by k times the
price's move.  The move is taken as the two prices give it, resolved or not, and its own
uncertainty is not added:
  - On each side, not only towards the move: the move within a run does not say which way the
    next run's price goes.  In fifteen recorded default pairs on the AMD EPYC guest the
    rerun's matrix price lay the other way from the first run's end in twelve.  In one
    (2026-11-28, beside the neighbour) the end price was 0.68% below the matrix's and the
    rerun's int 0x80 cells 0.6% to 0.9% above, and six of them missed it (40 of 48 fast cells
    overlapped; 46 widened on each side).  Replayed on eighteen pairs, widening on each side
    held 46 to 48 of 48 in every pair, where towards the move held 40 to 48, and the fast
    cells' median half-width rose by 0-0.4 points (at most to 1.81%).
  - Widening only where the two prices resolved a move (their difference's interval excludes
    zero) widened nothing in eight default pairs on an AMD EPYC guest (family 25, model 17),
    and missed moves that were real: one run's end price was +0.71% +-0.71% above its
    matrix's, its rerun's matrix +1.1%, and two of its int 0x80 cells missed the rerun's
    (45 of 48 fast cells overlapped; 45 again in another pair, +0.93% +-1.66% within the run).
  - Adding the move's uncertainty (both prices' halves in quadrature, +-0.7-3% there) made
    the widening that size whether anything moved or not: the fast cells' median half-width
    went to 1.05-1.47% in runs where it had been 0.53-0.70%.
  - Moved by the move as measured, replayed on those eight pairs: 47 or 48 of 48 fast cells
    overlapped in each, and the median half-width rose by 0-0.4 points (0.64% to 1.08% in
    the run whose end price was +-3.3%, which is why the stage now asks STAGE_PROCESSES).
The figure stays the matrix's; `moment` keeps the interval as measured, which `tw compare`
uses where it takes the exit's price out itself (analyse/compare.between_runs).  `resolved`
is still said: whether the two prices' intervals tell the move from nothing.

    judge(bench, mode)               the stage's stopping rule, against the matrix (analysed)
    end_price(end, bench)            {value_ns, half_ns, cycles..., why} of the stage's price
    analyse(raw, bench, causes)      exitprice's analysed summary (None without the stage)
    widen(bench, causes, summary)    the exit-paying cells' intervals, in place
    widen_sweep(sweep, causes, summary)  the exit-paying async rows of a sweep, in place
    hold(raw, bench, causes, sweeps) analyse() then widen() and widen_sweep(), with `widened`
    at_moment(cell)                  a cell with its intervals as measured
"""
import math

from . import causes as causes_mod, percall, stats, sweeps

ANALYSIS = "exitdrift/3"   # 3: on each side; 2: towards the move, by itself; 1: a resolved one, with its half
# The cpuid processes that met the host's fast state, that the price at the end rests on: a
# fixed number, not "until the interval looks narrow", which would stop on lucky draws.  The
# stage asks STAGE_PROCESSES; a stage its budget stopped gives a price from FAST_PROCESSES.
# The move's error is every exit-paying cell's widening: with 8 the end price was +-1.1% on
# the AMD guest (3671 ns [3631, 3712]), with 16 +-0.7% to +-1.3%, with 24 +-0.2-1.9% (eight
# runs; the matrix's own, from 23-31, +-0.25-0.8%).  24 take 0.7-2.6 s there, beside the
# neighbour too, so 64 take about 2-7 s of the stage's 8.  A --quick run asks the least.
FAST_PROCESSES = 24
STAGE_PROCESSES = {"quick": FAST_PROCESSES, "default": 64, "long": 64}
# The stage met the matrix's fast state when its reference (64-bit syscall null) came within
# this of the top of the matrix's undisturbed reference's interval (the matrix's live rule,
# measure/bench.HOST_TOL);
# otherwise its "fast" processes are only the least slow of a slow moment.
HOST_TOL = 0.10


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


def end_price(end, bench, need=None):
    """The stage's price of one exit ({value, half, unit, value_ns, half_ns, fast_processes,
    why: None}), or {value: None, why} when it is not known: fewer than `need` (default
    FAST_PROCESSES) of its cpuid processes met the host's fast state, or its fast state was
    not the matrix's."""
    need = FAST_PROCESSES if need is None else need
    c = percall.exit_cell(end)
    if c is None or not c.get("supported"):
        return {"value": None, "why": "the stage measured no cpuid cell"
                + (f" ({c.get('reason')})" if c and c.get("reason") else "")}
    u = c.get("undisturbed") or {}
    n = (u.get("host") or {}).get("fast_processes") or 0
    if n < need or u.get("value") is None:
        return {"value": None, "fast_processes": n,
                "why": f"only {n} of its cpuid processes met the host's fast state "
                       f"({need} are needed)"}
    unit = _unit(end, bench)
    er, br = _value(_ref(end), unit), _value(_ref(bench), unit)
    # Against the top of the matrix's interval, not its figure alone: a --quick matrix's
    # reference came out at 202 ns [171, 233] (few fast processes, two levels) and a stage at
    # 227 ns [226, 227], the usual figure and fast in 430 of 436 probes, was refused as slow:
    # no price, and 8 s of the budget spent waiting for a state the matrix never proved.
    if er and br and er[0] > (br[0] + br[1]) * (1 + HOST_TOL):
        return {"value": None, "fast_processes": n,
                "why": f"the host never reached the matrix's fast state during the stage: its "
                       f"reference's figure was {100 * (er[0] / br[0] - 1):.0f}% above the "
                       f"matrix's ({100 * (er[0] / (br[0] + br[1]) - 1):.0f}% above the top of "
                       "its interval)"}
    v, h = _value(c, unit)
    out = {"value": v, "half": h, "unit": unit, "fast_processes": n, "why": None}
    vn, hn = _value(c, "ns")
    out["value_ns"], out["half_ns"] = vn, hn
    return out


def judge(bench, mode="default"):
    """The exit-price stage's stopping rule (measure/exitprice.stage's judge) against the
    analysed matrix: (stop, why) of a stage document: the mode's STAGE_PROCESSES fast cpuid
    processes."""
    need = STAGE_PROCESSES.get(mode, FAST_PROCESSES)

    def j(doc):
        p = end_price(percall.analyse(doc), bench, need=need)
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
    b = _value(percall.exit_cell(bench), unit)
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


def _moved(f, lo, hi, s):
    """f with its interval (keys lo, hi) widened by |s| on each side: it holds the same
    interval moved by s, and by -s (the module's docstring)."""
    return dict(f, **{lo: f[lo] - abs(s), hi: f[hi] + abs(s)})


def widen(bench, cz, summary):
    """Give each cell that pays exits (causes.exits_paid) an interval that holds it at both
    prices of the exit and as far the other way (summary: analyse()'s, with the move between
    them; _moved), in place: the
    undisturbed figure's interval in ns, in cycles and as a ratio to the reference; the
    interval as measured kept under exit_drift.moment.  Returns the number of cells widened."""
    if not bench or not summary or summary.get("move") is None:
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
        s = k * summary["move_ns"]
        moment = {x: c.get(x) for x in ("undisturbed", "undisturbed_ci_low", "undisturbed_ci_high",
                                        "undisturbed_cycles", "undisturbed_ratio")}
        c["undisturbed"] = _moved(c["undisturbed"], "ci_low", "ci_high", s)
        c["undisturbed_ci_low"], c["undisturbed_ci_high"] = c["undisturbed"]["ci_low"], \
            c["undisturbed"]["ci_high"]
        if c.get("undisturbed_cycles") and kc:
            c["undisturbed_cycles"] = _moved(c["undisturbed_cycles"], "ci_low", "ci_high",
                                             s * kc)
        r = c.get("undisturbed_ratio")
        if r and r.get("ci_low") is not None and ref_ns:
            c["undisturbed_ratio"] = _moved(r, "ci_low", "ci_high", s / ref_ns)
        c["exit_drift"] = {"exits": k, "shift_ns": s, "moment": moment}
        n += 1
    return n


def widen_sweep(sweep, cz, summary):
    """The sweep's rows (analyse.sweeps.sweep's) that pay exits, async and led by their
    undisturbed figure, widened in place as widen() widens the matrix's cells: by the move
    times the exits a call, on each side; `exit_drift: {exits, shift_ns, moment}` in the
    row's undisturbed figure keeps the interval as measured.  A write by int 0x80 pays its
    exit as the matrix's calls do: beside the neighbour on the AMD EPYC guest the exit's price
    moved +2.4% over one run, and the next run's TLPI sweep missed four of its 32-int80 rows
    (1-32 B) by 2.7-3.4%.  Returns the number of rows widened."""
    if not sweep or not summary or summary.get("move") is None:
        return 0
    n = 0
    for run in sweep.get("runs") or []:
        k = causes_mod.exits_paid(cz, run.get("variant")) if run.get("mode") == "async" else 0
        if not k:
            continue
        sh = k * summary["move_ns"]
        for row in run.get("rows") or []:
            u = row.get("undisturbed")
            if not u or u.get("ci_low") is None or row.get("figure") != "undisturbed":
                continue
            row["undisturbed"] = dict(_moved(u, "ci_low", "ci_high", sh), exit_drift={
                "exits": k, "shift_ns": sh, "moment": [u["ci_low"], u["ci_high"]]})
            row["undisturbed_ci_low"] = row["undisturbed"]["ci_low"]
            row["undisturbed_ci_high"] = row["undisturbed"]["ci_high"]
            row["lead"], row["lead_why"] = sweeps.lead(row, "async")
            n += 1
    return n


def hold(raw, bench, cz, sweeps_=()):
    """analyse()'s summary with the exit-paying cells of bench widened in place to hold the
    move (widen; `widened`: how many), and the exit-paying rows of the analysed sweeps given
    (widen_sweep; `widened_sweep_rows`), as results.load and tw bench --target take it; None
    when there is no exit-price stage."""
    s = analyse(raw, bench, cz)
    if s:
        s["widened"] = widen(bench, cz, s)
        if sweeps_:
            s["widened_sweep_rows"] = sum(widen_sweep(x, cz, s) for x in sweeps_)
    return s


def at_moment(c):
    """The cell with the intervals its matrix measured, before widen(): where a comparison
    takes the exit's price out itself."""
    d = (c or {}).get("exit_drift")
    return dict(c, **d["moment"]) if d and d.get("moment") else c
