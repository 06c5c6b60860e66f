"""Decisions: is B slower or faster than A, by how much, and what could have been detected.

Two kinds of comparison, one rule:

  between runs (tw compare)   A and B are two results directories.  Each cell's interval
                              already holds its run's drift (stats.clustered), so the ratio of
                              two cells, with its CI by quadrature, holds the run-to-run
                              component of both.  Cells are compared as absolute figures and
                              as ratios to each run's own reference cell (64-bit syscall,
                              null), which removes a machine-wide change of speed.
  within a session (tw ab)    A and B alternate in interleaved rounds; each round gives one
                              B/A ratio, and the decision rests on those paired ratios.

The rule: B is called slower (or faster) by X% only when the interval of B/A excludes 1.
Otherwise the answer is "no difference detected", with the smallest difference the interval
could have detected: its larger half-width, in percent.
"""
import math

from . import stats

SLOWER, FASTER, SAME = "slower", "faster", "no difference detected"


def decide(ratio, what="B"):
    """{decision, pct, pct_ci, detectable_pct, sentence} from a B/A ratio summary, or a
    decision of 'unknown' with why when the ratio is missing or not finite."""
    if not ratio or ratio.get("median") is None or ratio.get("ci_low") is None \
            or ratio.get("ci_high") is None \
            or not all(math.isfinite(ratio[k]) for k in ("median", "ci_low", "ci_high")):
        why = (ratio or {}).get("why") or "one side has no value"
        return {"decision": "unknown", "why": why, "sentence": f"unknown ({why})"}
    m, lo, hi = ratio["median"], ratio["ci_low"], ratio["ci_high"]
    pct = 100 * (m - 1)
    ci = [100 * (lo - 1), 100 * (hi - 1)]
    if lo > 1:
        d = SLOWER
    elif hi < 1:
        d = FASTER
    else:
        d = SAME
    detectable = max(abs(ci[0] - pct), abs(ci[1] - pct))
    if d == SAME:
        sentence = (f"{SAME}: {pct:+.1f}% [{ci[0]:+.1f}, {ci[1]:+.1f}]; differences smaller "
                    f"than about {detectable:.1f}% could not have been detected")
    else:
        sentence = f"{what} is {d} by {abs(pct):.1f}% [{ci[0]:+.1f}, {ci[1]:+.1f}]"
    return {"decision": d, "pct": pct, "pct_ci": ci, "detectable_pct": detectable,
            "sentence": sentence}


def drift_share(a, b):
    """How much of a difference drift alone could explain, in percent of A: the two runs'
    drift estimates combined in quadrature (None when neither run could estimate drift)."""
    da, db = (a or {}).get("drift"), (b or {}).get("drift")
    if (da is None and db is None) or not (a or {}).get("median"):
        return None
    return 100 * math.hypot(da or 0.0, (db or 0.0) * a["median"] / b["median"]
                            if b and b.get("median") else 0.0) / a["median"]


def between_runs(a_cell, b_cell, a_ref=None, b_ref=None, same_host=False):
    """The comparison of one cell in two runs: absolute and relative to each run's reference,
    each with its decision, and how much drift alone could explain.

    Each cell's interval holds its own run's drift, but not a change of the machine's speed
    between the runs (the host's other guests come and go: one Intel guest ran 11% faster an
    hour later).  When both runs come from the same host, the reference cell's own change
    (a_ref, b_ref: each run's 64-bit syscall null) measures that change, so drift alone
    could explain at least that much, and an absolute difference no larger than it is not
    called one.  Between different machines the reference's change is part of the machines'
    difference and cannot be told apart from drift: there the relative column is the answer."""
    out = {"absolute": None, "relative": None, "drift_pct": drift_share(a_cell, b_cell),
           "machine_shift_pct": None}
    if same_host and a_ref and b_ref and a_ref.get("median") and b_ref.get("median"):
        shift = 100 * (b_ref["median"] / a_ref["median"] - 1)
        out["machine_shift_pct"] = shift
        out["drift_pct"] = max(out["drift_pct"] or 0.0, abs(shift))
    if a_cell and b_cell and a_cell.get("supported") and b_cell.get("supported"):
        r = stats.ratio_summary(b_cell, a_cell)
        out["absolute"] = dict(decide(r), ratio=r)
        shift = out["machine_shift_pct"]
        if shift is not None and out["absolute"]["decision"] in (SLOWER, FASTER) \
                and abs(out["absolute"]["pct"]) <= abs(shift) + out["absolute"]["detectable_pct"]:
            out["absolute"]["decision"] = "within drift"
            out["absolute"]["sentence"] = (
                f"no decision: {out['absolute']['pct']:+.1f}% "
                f"[{out['absolute']['pct_ci'][0]:+.1f}, {out['absolute']['pct_ci'][1]:+.1f}], "
                f"but this machine's own 64-bit syscall moved {shift:+.1f}% between the runs: "
                "read the relative column")
        ra, rb = a_cell.get("ratio"), b_cell.get("ratio")
        if ra and rb:
            rr = stats.ratio_summary(rb, ra)
            out["relative"] = dict(decide(rr), ratio=rr)
    return out


def paired_rounds(a_rounds, b_rounds):
    """The decision from interleaved rounds: one B/A value per round (stats.paired)."""
    r = stats.paired(b_rounds, a_rounds, "ratio")
    return dict(decide(r), ratio=r)


def ab(doc):
    """The decisions of a tw ab run (ab.json): per cell, B/A from the rounds both sides have."""
    from .percall import usable
    out = []
    for c in (doc or {}).get("cells", []):
        ra = {r["round"]: usable(r)[0] for r in c["a"]["rounds"]}
        rb = {r["round"]: usable(r)[0] for r in c["b"]["rounds"]}
        common = sorted(set(ra) & set(rb))
        row = {k: c[k] for k in ("variant", "op", "shape")}
        why = c["a"].get("reason") or c["b"].get("reason")
        if why or len(common) < 2:
            row.update(decision="unknown",
                       sentence=f"unknown ({why or f'only {len(common)} paired round(s)'})")
        else:
            row.update(paired_rounds([ra[i] for i in common], [rb[i] for i in common]))
            row["rounds"] = len(common)
        out.append(row)
    return out
