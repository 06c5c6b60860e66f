"""The host's state over a bench run, read from the reference cell's processes (issue 42).

On a noisy cloud host the neighbours slow the measured CPU most of the time and leave it alone
in bursts of a few seconds (the AMD EPYC guest of tests/fixtures/machines/amd-epyc-zen3-kvm-noisy:
its reference cell was within 5% of its fastest in 37 of 1408 batches, 30 of them in one burst
of 1.3 s in a 40 s bench).  The bench runs the reference cell (64-syscall null ret) every
measure.bench.REF_EVERY cells, a fraction of a second apart, so its processes are a calibrator
already in every percall.json: this module labels the host from them, after the fact.

  fast      a reference process is fast when its floor (its fastest usable batch) is within
            FAST_WITHIN (5%) of the fastest floor of the reference in the run; a batch is
            fast by the same rule on its own value;
  bursts    runs of fast reference processes in time order, bridging at most BRIDGE (1) slow
            one between two fast ones: the report run's burst at 26.5-27.8 s holds 13 fast
            reference processes and one slow one at 27.04 s, which strictly consecutive runs
            (bridge=0) would cut in two.  Start and end are the first and last fast one's start
            times (t_s, seconds since the matrix started), so a burst of one process has
            length 0;
  cells     each cell's processes whose nearest reference process in time (by start; the
            earlier on a tie) was fast: the processes a gated estimate could use, and their
            floors in time order (fast_floors), which analyse/sequential.py takes.

The rule is relative to the run's own fastest, so a run that was never quiet still has "fast"
processes, near its lowest state: `label` cannot tell a quiet host from a uniformly slow one, and
says so nowhere by itself.  The lead's calibrator (measure/bench.py) labels while measuring;
this reading is what a recorded run allows, and what the replay tests check."""
import numpy as np

FAST_WITHIN = 0.05
BRIDGE = 1
REFERENCE = ("64-syscall", "null", "ret")


def _key(cell):
    return (cell.get("variant"), cell.get("op"), cell.get("size"), cell.get("shape") or "ret")


def _usable_vals(rd):
    """A process's usable batch values (percall.usable: the disturbed ones left out)."""
    from .percall import usable      # lazy: percall may come to import this module
    return [float(v) for v in usable(rd)[0] if v is not None and np.isfinite(v) and v > 0]


def _floor(rd):
    """A process's floor: its fastest usable batch, or None."""
    vals = _usable_vals(rd)
    return min(vals) if vals else None


def reference_cell(doc):
    """The document's reference cell (doc["reference"], else 64-syscall null ret), or None."""
    ref = doc.get("reference") or {}
    want = (ref.get("variant", REFERENCE[0]), ref.get("op", REFERENCE[1]),
            ref.get("shape") or REFERENCE[2])
    for c in doc.get("cells") or []:
        if (c.get("variant"), c.get("op"), c.get("shape") or "ret") == want and c.get("rounds"):
            return c
    return None


def _timed(rounds):
    """(t_s, floor, round) of the rounds that have both, in time order."""
    out = [(float(rd["t_s"]), _floor(rd), rd) for rd in rounds or []
           if rd.get("t_s") is not None]
    return sorted([x for x in out if x[1] is not None], key=lambda x: x[0])


def label(doc, within=FAST_WITHIN, bridge=BRIDGE):
    """The host's state over the run: {within, reference, fastest_ns, batches, fast_batches,
    fast_batch_share, processes, fast_processes, fast_process_share, timeline: [{t_s, floor_ns,
    fast}], bursts: [{start_s, end_s, length_s, processes, fast_batches}], cells: [{variant, op,
    size, shape, processes, fast_processes, fast_floors}], wall_s}; or {why} when the document
    has no reference rounds with start times (a run before percall/2 kept none)."""
    ref = reference_cell(doc)
    procs = _timed(ref["rounds"]) if ref else []
    if not procs:
        return {"why": "no reference rounds with start times (t_s) in this percall.json",
                "within": within}
    floors = np.array([f for _, f, _ in procs])
    ts = np.array([t for t, _, _ in procs])
    fastest = float(floors.min())
    limit = fastest * (1 + within)
    fast = floors <= limit
    batch_fast = [sum(1 for v in _usable_vals(rd) if v <= limit) for _, _, rd in procs]
    n_batches = sum(len(_usable_vals(rd)) for _, _, rd in procs)

    bursts, i = [], 0
    while i < len(procs):
        if not fast[i]:
            i += 1
            continue
        j = i           # the burst's last fast process so far
        while True:
            nxt = next((k for k in range(j + 1, min(j + 2 + bridge, len(procs))) if fast[k]),
                       None)
            if nxt is None:
                break
            j = nxt
        n_fast = int(fast[i:j + 1].sum())
        bursts.append({"start_s": float(ts[i]), "end_s": float(ts[j]),
                       "length_s": round(float(ts[j] - ts[i]), 6), "processes": n_fast,
                       "slow_inside": j - i + 1 - n_fast,
                       "fast_batches": int(sum(batch_fast[i:j + 1]))})
        i = j + 1

    cells = []
    for c in doc.get("cells") or []:
        rows = _timed(c.get("rounds"))
        if not rows:
            continue
        t = np.array([r[0] for r in rows])
        # the nearest reference process by start time; argmin takes the earlier on a tie
        near = np.abs(t[:, None] - ts[None, :]).argmin(axis=1)
        gated = fast[near]
        cells.append({"variant": c.get("variant"), "op": c.get("op"), "size": c.get("size"),
                      "shape": c.get("shape") or "ret", "processes": len(rows),
                      "fast_processes": int(gated.sum()),
                      "fast_floors": [r[1] for r, g in zip(rows, gated) if g]})
    return {"within": within, "reference": {"variant": ref.get("variant"), "op": ref.get("op"),
                                            "shape": ref.get("shape") or "ret"},
            "fastest_ns": fastest, "batches": n_batches, "fast_batches": int(sum(batch_fast)),
            "fast_batch_share": sum(batch_fast) / n_batches if n_batches else None,
            "processes": len(procs), "fast_processes": int(fast.sum()),
            "fast_process_share": float(fast.mean()),
            "timeline": [{"t_s": float(t), "floor_ns": float(f), "fast": bool(x)}
                         for t, f, x in zip(ts, floors, fast)],
            "bursts": bursts, "cells": cells, "wall_s": doc.get("wall_s")}


def cell(state, variant, op, shape="ret", size=None):
    """One cell's row of label()'s cells, or None."""
    for c in state.get("cells") or []:
        if (c["variant"], c["op"], c["shape"], c["size"]) == (variant, op, shape, size):
            return c
    return None
