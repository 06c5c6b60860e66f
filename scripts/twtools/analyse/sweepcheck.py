"""How the sweeps reproduce: the figures of two back-to-back runs of the seed and TLPI sweeps,
compared cell by cell (`tw sweep --selfcheck`, `make bench-sweeps`).

A cell is one (sweep, variant, mode, buffer size); its figure is the one the report leads
with (analyse.sweeps.lead: undisturbed for async rows, typical for O_SYNC ones).  Per run: the
share of async cells whose 95% half-width is at most 2% of the figure, and the fits' r2.
Between the runs: the share of cells whose two intervals overlap, and how far the figures
moved (|B/A - 1|, median and 90th percentile).

Two 95% intervals of one true value, from independent runs, miss each other when the
difference exceeds the sum of the half-widths: for normal errors of equal size, |Z| > 1.96
sqrt(2), about 0.56% of the time.  So `expected_misses` is what chance alone gives over the
cells compared, and a run with far more misses than that has intervals too narrow.
"""
import math

import numpy as np
from . import stats

TARGETS = {"half_width": 0.02, "half_width_share": 0.90, "overlap": 0.90, "move": 0.01,
           "r2": 0.98, "vs_ref_overlap": 0.95, "vs_ref_move": 0.005}
# P(two independent 95% intervals of one value, of equal width, do not overlap)
MISS_BY_CHANCE = stats.MISS_BY_CHANCE


def cells(analysed):
    """{(sweep, variant, mode, buffsize): lead summary} of analysed sweeps {stem: sweep}."""
    out = {}
    for stem, sw in analysed.items():
        for run in (sw or {}).get("runs", []):
            if not run.get("supported", True):
                continue
            for row in run.get("rows") or []:
                lead = row.get("lead")
                if lead and lead.get("median") is not None and lead.get("ci_low") is not None:
                    out[(stem, run["variant"], run.get("mode"), row["buffsize"])] = lead
    return out


def cells_vs_ref(analysed):
    """{(sweep, variant, 'async', buffsize): summary} of every async cell's vs_ref figure (the
    cell over the sweep's reference measured in the same rounds, analyse.sweeps.vs_ref), the
    reference itself left out (it is 1 by definition)."""
    out = {}
    for stem, sw in analysed.items():
        for run in (sw or {}).get("runs", []):
            for row in run.get("rows") or []:
                v = row.get("vs_ref") or {}
                if v.get("value") is None or v.get("ci_low") is None or v.get("why"):
                    continue
                out[(stem, run["variant"], run.get("mode"), row["buffsize"])] = \
                    {"median": v["value"], "ci_low": v["ci_low"], "ci_high": v["ci_high"]}
    return out


def vs_ref(a, b):
    """The vs_ref figures of two runs: each run's share of async cells within the half-width
    target, and between the runs the overlap (with what chance alone gives) and the move."""
    ca, cb = cells_vs_ref(a), cells_vs_ref(b)
    runs = []
    for c in (ca, cb):
        hws = [h for h in (_hw(s) for s in c.values()) if h is not None]
        runs.append({"cells": len(c),
                     "within_half_width": (sum(h <= TARGETS["half_width"] for h in hws) / len(hws)
                                           if hws else None),
                     "half_width_median": float(np.median(hws)) if hws else None})
    keys = sorted(set(ca) & set(cb), key=str)
    over = [ca[k]["ci_low"] <= cb[k]["ci_high"] and cb[k]["ci_low"] <= ca[k]["ci_high"]
            for k in keys]
    moves = [abs(cb[k]["median"] / ca[k]["median"] - 1) for k in keys if ca[k]["median"]]
    out = {"of": sorted({(sw or {}).get("vs_ref_of") for sw in a.values() if sw} - {None}),
           "runs": runs, "cells": len(keys),
           "overlap_share": sum(over) / len(over) if over else None,
           "misses": len(over) - sum(over),
           "expected_misses": round(MISS_BY_CHANCE * len(over), 2),
           "move_median": float(np.median(moves)) if moves else None,
           "move_p90": float(np.percentile(moves, 90)) if moves else None}
    out["short"] = shortfalls(out)
    return out


def shortfalls(v):
    """What of the vs_ref targets the two runs fell short of (empty when every one held): the
    self-check exits non-zero on any."""
    short = []
    if v["overlap_share"] is None:
        return ["no vs_ref figure in both runs"]
    if v["overlap_share"] < TARGETS["vs_ref_overlap"]:
        short.append(f"vs_ref intervals overlap in {100 * v['overlap_share']:.1f}% of cells "
                     f"({v['misses']} miss; chance gives about {v['expected_misses']}), below "
                     f"{100 * TARGETS['vs_ref_overlap']:.0f}%")
    for i, r in enumerate(v["runs"], 1):
        if r["within_half_width"] is not None and r["within_half_width"] < TARGETS["half_width_share"]:
            short.append(f"run {i}: {100 * r['within_half_width']:.1f}% of vs_ref cells within "
                         f"±{100 * TARGETS['half_width']:.0f}%, below "
                         f"{100 * TARGETS['half_width_share']:.0f}%")
    if v["move_median"] is not None and v["move_median"] > TARGETS["vs_ref_move"]:
        short.append(f"vs_ref moved {100 * v['move_median']:.2f}% (median), above "
                     f"{100 * TARGETS['vs_ref_move']:.1f}%")
    return short


def _hw(s):
    return (s["ci_high"] - s["ci_low"]) / 2 / abs(s["median"]) if s["median"] else None


def per_run(analysed):
    """One run's figures: async cells within the half-width target, and the fits' r2."""
    c = cells(analysed)
    asy = [s for k, s in c.items() if k[2] == "async"]
    und = [s for s in asy if s.get("figure") == "undisturbed"]
    hws = [h for h in (_hw(s) for s in asy) if h is not None]
    r2 = {}
    for stem, sw in analysed.items():
        for f in (sw or {}).get("fits") or []:
            if f.get("mode") != "async" or "a_ns" not in f:
                continue
            for g in (f, f.get("copy")):
                if g and g.get("r2") is not None:
                    r2.setdefault(stem, []).append({"variant": f["variant"],
                                                    "figure": g.get("figure"),
                                                    "regime": g.get("regime"), "r2": g["r2"]})
    return {"async_cells": len(asy), "undisturbed_cells": len(und),
            "within_half_width": (sum(h <= TARGETS["half_width"] for h in hws) / len(hws)
                                  if hws else None),
            "half_width_median": float(np.median(hws)) if hws else None,
            "r2": r2,
            "r2_min": {stem: min(x["r2"] for x in v) for stem, v in r2.items()}}


def compare(a, b):
    """Two runs' analysed sweeps compared cell by cell."""
    ca, cb = cells(a), cells(b)
    keys = sorted(set(ca) & set(cb), key=str)
    over, moves, missed = 0, [], []
    for k in keys:
        x, y = ca[k], cb[k]
        if x["ci_low"] <= y["ci_high"] and y["ci_low"] <= x["ci_high"]:
            over += 1
        else:
            missed.append({"cell": list(k), "a": x["median"], "b": y["median"]})
        if x["median"]:
            moves.append(abs(y["median"] / x["median"] - 1))
    asy = [k for k in keys if k[2] == "async"]
    a_over = sum(1 for k in asy if ca[k]["ci_low"] <= cb[k]["ci_high"]
                 and cb[k]["ci_low"] <= ca[k]["ci_high"])
    return {"cells": len(keys), "overlap_share": over / len(keys) if keys else None,
            "async_cells": len(asy), "async_overlap_share": a_over / len(asy) if asy else None,
            "async_misses": len(asy) - a_over,
            "expected_async_misses": round(MISS_BY_CHANCE * len(asy), 2),
            "move_median": float(np.median(moves)) if moves else None,
            "move_p90": float(np.percentile(moves, 90)) if moves else None,
            "misses": len(missed), "expected_misses": round(MISS_BY_CHANCE * len(keys), 2),
            "missed": missed[:20]}


def _async_pairs(ca, cb, stem):
    """The async cells of one sweep that both runs have, with a positive figure in each."""
    return [k for k in ca if k[0] == stem and k[2] == "async" and k in cb
            and ca[k]["median"] > 0 and cb[k]["median"] > 0]


def host_shift(a, b):
    """How far the host moved as a whole between the runs, per sweep: the median of
    log(B/A) over its async cells (the common shift), and what is left cell by cell once it
    is taken out (the median and 90th percentile of |log(B/A) - shift|, and the share of
    intervals that overlap after it).  On a shared host the fast state itself moves by a few
    per cent over minutes, for every cell alike: a figure measured within one run cannot
    see that, and this tells it apart from a cell that moved on its own."""
    ca, cb = cells(a), cells(b)
    out = {}
    for stem in sorted({k[0] for k in ca}):
        ks = _async_pairs(ca, cb, stem)
        if len(ks) < 3:
            continue
        lr = np.log([cb[k]["median"] / ca[k]["median"] for k in ks])
        sh = float(np.median(lr))
        res = np.abs(lr - sh)
        f = math.exp(sh)
        over = [ca[k]["ci_low"] <= cb[k]["ci_high"] / f and cb[k]["ci_low"] / f <= ca[k]["ci_high"]
                for k in ks]
        out[stem] = {"cells": len(ks), "shift": f - 1,
                     "residual_move_median": float(np.median(res)),
                     "residual_move_p90": float(np.percentile(res, 90)),
                     "overlap_after_shift": sum(over) / len(over)}
    return out


def _clock(sw):
    """(value, relative half-width) of a sweep's hostclock figure, or None."""
    c = (sw or {}).get("host_clock") or {}
    u = c.get("undisturbed") or {}
    v, lo, hi = u.get("value"), u.get("ci_low"), u.get("ci_high")
    if not c.get("supported") or not v or lo is None or hi is None:
        return None
    return v, (hi - lo) / 2 / v


def clock_shift(a, b):
    """Per sweep: how far the host's own speed for user code moved between the runs
    (hostclock, measured in the same rounds as the cells: B/A of its undisturbed figure,
    with an interval from both runs' intervals), and the cells' move with it taken out.
    Unlike host_shift, the host's move here is measured apart from the cells, by a loop
    with no kernel entry.  A cell's intervals are said to agree after the shift when the
    distance between them, on a log scale, is within both half-widths and the shift's own.
    {stem: {...}}; a sweep without hostclock in both runs gives its why."""
    ca, cb = cells(a), cells(b)
    out = {}
    for stem in sorted(set(a) & set(b)):
        x, y = _clock(a.get(stem)), _clock(b.get(stem))
        if x is None or y is None:
            why = ((a.get(stem) or {}).get("host_clock") or {}).get("why") \
                or ((b.get(stem) or {}).get("host_clock") or {}).get("why") \
                or "no hostclock interval in one of the runs"
            out[stem] = {"shift": None, "why": why}
            continue
        f, hf = y[0] / x[0], math.hypot(x[1], y[1])
        ks = _async_pairs(ca, cb, stem)
        res, agree = [], []
        for k in ks:
            p, q = ca[k], cb[k]
            d = abs(math.log(q["median"] / p["median"]) - math.log(f))
            res.append(d)
            agree.append(d <= _hw(p) + _hw(q) + hf)
        out[stem] = {"shift": f - 1, "shift_half_width": hf, "cells": len(ks),
                     "residual_move_median": float(np.median(res)) if res else None,
                     "residual_move_p90": float(np.percentile(res, 90)) if res else None,
                     "agree_after_shift": sum(agree) / len(agree) if agree else None}
    return out


def figures(a, b, reports=()):
    """The self-check: each run's figures, the comparison, and whether any report asks for a
    quieter machine (reports: the two runs' report texts)."""
    quiet = [i for i, t in enumerate(reports, 1) if "quiet" in t.lower()]
    return {"schema": "timewrite-sweepcheck/2", "targets": TARGETS,
            "runs": [per_run(a), per_run(b)], "compare": compare(a, b),
            "host_shift": host_shift(a, b),
            "clock_shift": clock_shift(a, b),
            "vs_ref": vs_ref(a, b),
            "quiet_machine_in_report": quiet}
