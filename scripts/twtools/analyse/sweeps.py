"""The sweeps' figures (seed, TLPI, writev, stdio), computed from their raw samples.

The sweep stage files keep every repetition's user, system and real seconds (and, for
writev, both timings of each paired repetition); here they become summaries, the seed
sweep's fits and its knee.  A stage file from before this split carries summaries as well;
they are ignored and recomputed from the samples beside them.
"""
import copy

import numpy as np

from . import fits, stats

ANALYSIS = "sweeps/4"


def _arr(row, key):
    s = (row.get("samples") or {}).get(key)
    return np.asarray([x for x in s if x is not None], float) if s else None


# Why a row leads with its typical figure rather than the undisturbed one.
WAITS = ("an O_SYNC write waits for the disk: its time is mostly waiting, which is what the "
         "row measures, so the typical figure (the median) leads (†)")
NO_ROUNDS = ("recorded without the run of each pass (a sweep from before batches): only the "
             "typical figure can be computed")


def _by_round(rnd, *series):
    """Each series (arrays as long as rnd) cut into one list per run, in run order: the
    units the undisturbed figure's jackknife leaves out."""
    keys = sorted(set(rnd))
    out = []
    for x in series:
        groups = {k: [] for k in keys}
        for r, v in zip(rnd, x.tolist()):
            groups[r].append(v)
        out.append([groups[k] for k in keys])
    return out


def _undisturbed(row, nspc):
    """The undisturbed ns per call of one row: its passes grouped by the run they came from
    (samples.round), the mean of the fastest passes with the jackknife over runs
    (stats.undisturbed, as every per-call cell)."""
    rnd = (row.get("samples") or {}).get("round")
    if not rnd or len(rnd) != nspc.size:
        return None
    return stats.undisturbed(_by_round(rnd, nspc)[0])


def lead(row, mode):
    """(summary {median, ci_low, ci_high, unstable, n, figure}, why typical or None): the
    figure a row leads with.  Async rows lead with the undisturbed figure where their passes
    were taken in batches over several runs; O_SYNC rows with the typical one (WAITS)."""
    typ = dict(row.get("ns_per_call") or {}, figure="typical")
    if mode == "sync":
        return typ, WAITS
    u = row.get("undisturbed")
    if not u:
        return typ, NO_ROUNDS
    if u.get("value") is None or u.get("ci_low") is None:
        return typ, u.get("why") or "no undisturbed interval"
    return dict(as_summary(u), unstable=stats.unstable(u["value"], u["ci_low"], u["ci_high"]),
                n=u.get("n"), n_rounds=u.get("n_rounds"), figure="undisturbed"), None


def as_summary(u):
    """An undisturbed figure ({value, ci_low, ci_high, ...}, stats.undisturbed) in the keys a
    summary has ({median, ci_low, ci_high}), for what formats summaries."""
    u = u or {}
    return {"median": u.get("value"), "ci_low": u.get("ci_low"), "ci_high": u.get("ci_high")}


def sweep(obj):
    """An analysed copy of sweep_seed.json or sweep_tlpi.json."""
    if not obj:
        return None
    out = copy.deepcopy(obj)
    for run in out.get("runs", []):
        for row in run.get("rows") or []:
            u, s, r = (_arr(row, k) for k in ("user_s", "sys_s", "real_s"))
            if r is None:
                continue
            wait = r - u - s
            nspc = r / row["calls"] * 1e9
            rnd = (row.get("samples") or {}).get("round")
            row["samples"] = {"user_s": u.tolist(), "sys_s": s.tolist(), "real_s": r.tolist(),
                              "wait_s": wait.tolist(), "ns_per_call": nspc.tolist()}
            for k, v in row["samples"].items():
                row[k] = stats.summarize(v)
            if rnd is not None:
                row["samples"]["round"] = rnd
            und = _undisturbed({"samples": {"round": rnd}}, nspc)
            if und is not None:
                row["undisturbed"] = und
                row["undisturbed_ns"], row["undisturbed_ci_low"], row["undisturbed_ci_high"] = \
                    und.get("value"), und.get("ci_low"), und.get("ci_high")
            row["lead"], row["lead_why"] = lead(row, run.get("mode"))
            row["figure"] = row["lead"]["figure"]
    fitted = fits.fit_linear(out.get("runs", []), out.get("page_size") or fits.PAGE)
    out["fits"] = fitted
    out["vs_ref_of"] = vs_ref(out.get("runs", []))
    if out["vs_ref_of"]:
        on_ref = _runs_on_ref(out.get("runs", []))
        out["fits_vs_ref"] = fits.fit_linear(on_ref, out.get("page_size") or fits.PAGE)
        asy = [f for f in out["fits_vs_ref"] if f["mode"] == "async"]
        out["knee_vs_ref"] = fits.knee(asy) if asy else None
    modes = sorted({run.get("mode") for run in out.get("runs", [])})
    out["knee"] = {m: (fits.knee([f for f in fitted if f["mode"] == m]) if m == "async" else
                       {"value": None, "why": "O_SYNC per-call time is mostly I/O wait; differences "
                                              "in its intercepts are disk noise, not entry cost"})
                   for m in modes}
    if "host_clock" in out:
        out["host_clock"] = host_clock(out["host_clock"])
    out["analysis"] = ANALYSIS
    return out


# The reference every async cell of a sweep is divided by, measured in the same round: one
# mechanism at one size.  The host's common move between two runs (its write path, or its
# core: docs/sweeps.md) moves the cell and the reference alike and cancels in the ratio; the
# mechanisms' differences stay, since every cell has the same reference, so the fits and the
# knee can be given on it too.
REF_VARIANTS = ("64-syscall", "64-libc")
REF_SIZE = 4096


def _round_groups(row, key="ns_per_call"):
    """{round: [values]} of a row's passes, or None when they were not recorded by round."""
    smp = row.get("samples") or {}
    rnd, vals = smp.get("round"), smp.get(key)
    if not rnd or not vals or len(rnd) != len(vals):
        return None
    g = {}
    for r, v in zip(rnd, vals):
        g.setdefault(r, []).append(v)
    return g


def vs_ref(runs):
    """Each async row's undisturbed figure over the reference's of the same rounds
    (stats.undisturbed_ratio: each round's floor, the same rounds left out of both by the
    jackknife), as row['vs_ref'] {value, ci_low, ci_high}; returns the reference's name
    ('64-syscall async 4096 B'), or None when the sweep has none (then no row gets one)."""
    asy = [r for r in runs if r.get("mode") == "async" and r.get("supported", True)]
    ref_run = next((r for v in REF_VARIANTS for r in asy if r.get("variant") == v), None)
    if ref_run is None or not ref_run.get("rows"):
        return None
    ref_row = min(ref_run["rows"], key=lambda r: abs(r["buffsize"] - REF_SIZE))
    ref = _round_groups(ref_row)
    if not ref:
        return None
    name = f"{ref_run['variant']} async {ref_row['buffsize']} B"
    for run in asy:
        for row in run.get("rows") or []:
            g = None if row is ref_row else _round_groups(row)
            keys = sorted(set(g or {}) & set(ref))
            r = stats.undisturbed_ratio([g[k] for k in keys], [ref[k] for k in keys]) \
                if g else None
            if row is ref_row:
                row["vs_ref"] = {"value": 1.0, "ci_low": 1.0, "ci_high": 1.0,
                                 "why": "the reference itself"}
            elif r is None:
                row["vs_ref"] = {"value": None, "ci_low": None, "ci_high": None,
                                 "why": "fewer than two rounds shared with the reference"}
            else:
                row["vs_ref"] = {"value": r["median"], "ci_low": r["ci_low"],
                                 "ci_high": r["ci_high"], "n_rounds": r["n_rounds"]}
            row["vs_ref_of"] = name
    return name


def _runs_on_ref(runs):
    """The async runs with each row leading with its vs_ref figure, for fits.fit_linear."""
    out = []
    for run in runs:
        if run.get("mode") != "async":
            continue
        rows = []
        for row in run.get("rows") or []:
            v = row.get("vs_ref") or {}
            if v.get("value") is None or v.get("why") == "the reference itself":
                continue
            rows.append(dict(row, figure="undisturbed",
                             lead={"median": v["value"], "ci_low": v["ci_low"],
                                   "ci_high": v["ci_high"], "n_rounds": v.get("n_rounds"),
                                   "figure": "vs_ref"}))
        out.append(dict(run, rows=rows))
    return out


CLOCK_NOT_RECORDED = "this sweep was recorded without hostclock (before it existed)"


def host_clock(raw):
    """The host's speed for user code during a sweep, from hostclock's batches (one run per
    round): the undisturbed ns per multiply-add with its interval (stats.undisturbed, the
    jackknife over rounds and the drift term), and how far the per-round figure (the fastest
    batch of each round) wandered, as the 5th to 95th percentile over the median.  A cell in
    ns moves with this; analyse.sweepcheck sets the cells' move between runs beside its."""
    if not raw:
        return {"supported": False, "why": CLOCK_NOT_RECORDED}
    out = {k: v for k, v in raw.items() if k not in ("batch_ns", "round")}
    if raw.get("supported") is False:
        out["why"] = raw.get("reason") or "hostclock did not run"
        return out
    ns, rnd, it = raw.get("batch_ns"), raw.get("round"), raw.get("iterations")
    if not ns or not rnd or len(ns) != len(rnd) or not it:
        return dict(out, supported=False, why="no hostclock batches were recorded")
    per_it = np.asarray(ns, float) / it
    rounds = _by_round(rnd, per_it)[0]
    u = stats.undisturbed(rounds)
    best = np.asarray([min(r) for r in rounds])
    mid = float(np.median(best))
    out.update(supported=True, undisturbed=u, unit="ns per multiply-add",
               rounds=len(rounds),
               wander_low=float(np.percentile(best, 5) / mid - 1),
               wander_high=float(np.percentile(best, 95) / mid - 1),
               drift_rel=(u["drift"] / u["value"]) if u.get("drift") is not None
               and u.get("value") else None)
    return out


def writev(obj):
    """An analysed copy of writev.json: write and writev times, their paired ratio per rep."""
    if not obj:
        return None
    out = copy.deepcopy(obj)
    for row in out.get("rows", []):
        if not row.get("supported"):
            continue
        w, v = _arr(row, "write_ns"), _arr(row, "writev_ns")
        ratio = v / w
        row["samples"]["ratio"] = ratio.tolist()
        row.update(write_ns=stats.summarize(w), writev_ns=stats.summarize(v),
                   ratio=stats.summarize(ratio),
                   write_ns_per_call=stats.summarize(w / row["write_calls"]))
        row["lead"], row["lead_why"] = _writev_lead(row, w, v)
        row["figure"] = row["lead"]["figure"]
    ok = [r for r in out.get("rows", []) if r.get("supported")]
    wins = [r for r in ok if r["lead"]["ci_high"] < 1]
    loses = [r for r in ok if r["lead"]["ci_low"] > 1]

    def extreme(fn):
        if not ok:
            return None
        r = fn(ok, key=lambda r: r["lead"]["median"])
        return {"bits": r["bits"], "n_buffers": r["n_buffers"], "size": r["size"],
                "ratio": r["lead"]}
    out["summary"] = {"cells": len(ok), "writev_faster": len(wins), "writev_slower": len(loses),
                      "best": extreme(min), "worst": extreme(max)}
    out["analysis"] = ANALYSIS
    return out


def _writev_lead(row, w, v):
    """(the ratio writev/write a row leads with, why typical or None).  With its repetitions
    in runs (samples.round, two runs or more): the undisturbed figures of write and writev
    (stats.undisturbed: each run's fastest repetition, the mean of the fastest 20% of those, the jackknife over
    runs), and their ratio with both sides' same runs left out together
    (stats.undisturbed_ratio).  Else the typical ratio, the median of the paired ones."""
    typ = dict(row["ratio"], figure="typical")
    rnd = (row.get("samples") or {}).get("round")
    if not rnd or len(rnd) != w.size or len(set(rnd)) < 2:
        return typ, ("its repetitions were taken in one run (a writev.json from before "
                     "runs): only the typical figure can be computed")
    wr, vr = _by_round(rnd, w, v)
    row["write_ns_undisturbed"] = stats.undisturbed(wr)
    row["writev_ns_undisturbed"] = stats.undisturbed(vr)
    r = stats.undisturbed_ratio(vr, wr)
    if not r:
        return typ, "no undisturbed interval could be computed from its runs"
    return dict(r, figure="undisturbed"), None


def stdio(obj):
    """An analysed copy of stdio.json."""
    if not obj:
        return None
    out = copy.deepcopy(obj)
    for row in out.get("rows", []):
        if not row.get("supported"):
            continue
        sm = {k: _arr(row, k) for k in ("real_s", "user_s", "sys_s")}
        row.update(real_s=stats.summarize(sm["real_s"]), user_s=stats.summarize(sm["user_s"]),
                   sys_s=stats.summarize(sm["sys_s"]),
                   ns_per_byte=stats.summarize(sm["real_s"] / out["bytes"] * 1e9))
    out["analysis"] = ANALYSIS
    return out
