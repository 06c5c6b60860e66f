"""vs_ref: each async sweep cell over one reference measured in the same rounds.

Why it can break: between two runs a minute apart a shared host moves as a whole by 0.5-4.5%
(docs/sweeps.md), so absolute figures cannot be both narrow and honest there.  The ratio to a
reference of the same rounds must cancel that common move (pair the rounds wrongly and it
does not), keep the mechanisms' differences (a reference per mechanism would erase them, and
the knee with them), reach the CSVs with the name of its reference, and fail the self-check
in words when it does not hold.  Synthetic sweeps with a known host, no measurement.
"""
import copy

import numpy as np
import pytest

from twtools.analyse import sweepcheck, sweeps
from twtools.present import sweepcheck as present_sweepcheck, tables

SIZES = [256, 1024, 4096, 16384, 65536]
COST = {"64-syscall": 120.0, "32-int80": 4000.0}     # ns a call costs besides its bytes
PER_BYTE = 0.25


def sweep(rng, host=1.0, rounds=24, passes=2, wander=0.02):
    """A sweep_seed-like document: every round runs each variant once, every size in
    `passes` passes; the whole host's speed is `host`, and moves from round to round by
    `wander` (the same for every cell of that round)."""
    runs = []
    speed = host * (1 + wander * rng.standard_normal(rounds))
    for v, a in COST.items():
        rows = []
        for size in SIZES:
            calls = 262144 // size
            real, rnd = [], []
            for r in range(rounds):
                for _ in range(passes):
                    ns = (a + PER_BYTE * size) * speed[r] * (1 + abs(rng.normal(0, 0.003)))
                    real.append(ns * calls / 1e9)
                    rnd.append(r)
            rows.append({"buffsize": size, "calls": calls,
                         "samples": {"real_s": real, "user_s": [0.0] * len(real),
                                     "sys_s": [x / 2 for x in real], "round": rnd}})
        runs.append({"variant": v, "mode": "async", "supported": True, "rows": rows})
    return {"schema": "timewrite-sweep/2", "runs": runs}


def test_the_reference_is_named_and_is_one_by_definition():
    a = sweeps.sweep(sweep(np.random.default_rng(1)))
    assert a["vs_ref_of"] == f"64-syscall async {sweeps.REF_SIZE} B"
    ref = [row for run in a["runs"] for row in run["rows"]
           if run["variant"] == "64-syscall" and row["buffsize"] == sweeps.REF_SIZE][0]
    assert ref["vs_ref"]["value"] == 1.0 and ref["vs_ref"]["why"] == "the reference itself"
    int80 = [row for run in a["runs"] for row in run["rows"]
             if run["variant"] == "32-int80" and row["buffsize"] == 256][0]
    want = (COST["32-int80"] + PER_BYTE * 256) / (COST["64-syscall"] + PER_BYTE * 4096)
    v = int80["vs_ref"]
    assert v["ci_low"] <= want <= v["ci_high"] and v["value"] == pytest.approx(want, rel=0.01)


def test_a_common_move_of_the_host_cancels():
    """The second run's host is 10% slower as a whole: the absolute figures move 10% and
    miss; vs_ref does not move, and the self-check passes on it."""
    rng = np.random.default_rng(2)
    a = {"sweep_seed": sweeps.sweep(sweep(rng))}
    b = {"sweep_seed": sweeps.sweep(sweep(rng, host=1.10))}
    absolute = sweepcheck.compare(a, b)
    assert absolute["move_median"] == pytest.approx(0.10, abs=0.01)
    assert absolute["async_overlap_share"] < 0.5
    v = sweepcheck.vs_ref(a, b)
    assert v["cells"] == len(COST) * len(SIZES) - 1
    assert v["overlap_share"] >= 0.95 and v["move_median"] < 0.005, v
    assert v["short"] == []
    text = "\n".join(present_sweepcheck._vs_ref_lines(v, sweepcheck.TARGETS))
    assert "every vs_ref target held" in text and "64-syscall async 4096 B" in text


def test_a_cell_that_moved_on_its_own_is_short_in_words():
    rng = np.random.default_rng(3)
    a = {"sweep_seed": sweeps.sweep(sweep(rng))}
    raw = sweep(rng)
    for row in raw["runs"][1]["rows"]:             # 32-int80 alone 10% slower
        row["samples"]["real_s"] = [x * 1.10 for x in row["samples"]["real_s"]]
    b = {"sweep_seed": sweeps.sweep(raw)}
    v = sweepcheck.vs_ref(a, b)
    assert v["misses"] >= len(SIZES) and v["short"]
    assert any("overlap in" in s and "chance gives about" in s for s in v["short"])


def test_the_mechanisms_differences_and_the_knee_stay():
    """One reference for every cell: the lines on vs_ref are the absolute lines divided by
    one number, so the knee (a size) is the same on both."""
    a = sweeps.sweep(sweep(np.random.default_rng(4), wander=0.0))
    k, kv = a["knee"]["async"], a["knee_vs_ref"]
    assert k.get("value") and kv.get("value")
    assert kv["value"] == pytest.approx(k["value"], rel=0.05)
    fits = {f["variant"]: f for f in a["fits_vs_ref"]}
    assert fits["32-int80"]["a_ns"]["value"] > 10 * fits["64-syscall"]["a_ns"]["value"]


def test_the_csv_carries_vs_ref_and_its_reference():
    a = sweeps.sweep(sweep(np.random.default_rng(5)))
    t = tables.sweep(a, "sweep_seed")
    cols = t.headers
    for c in ("vs_ref", "vs_ref_ci_low", "vs_ref_ci_high", "vs_ref_of"):
        assert c in cols
    rows = [dict(zip(cols, r)) for r in t.rows]
    assert all(r["vs_ref_of"] == "64-syscall async 4096 B" for r in rows)
    assert all(r["vs_ref_ci_low"] <= r["vs_ref"] <= r["vs_ref_ci_high"] for r in rows)
    f = tables.fits(a, "sweep_seed")
    assert "vs_ref" in {dict(zip(f.headers, r))["figure"] for r in f.rows}


def test_a_sweep_without_rounds_has_no_vs_ref_and_says_nothing_false():
    raw = sweep(np.random.default_rng(6))
    for run in raw["runs"]:
        for row in run["rows"]:
            del row["samples"]["round"]
    a = sweeps.sweep(copy.deepcopy(raw))
    assert a["vs_ref_of"] is None and "knee_vs_ref" not in a
    v = sweepcheck.vs_ref({"s": a}, {"s": a})
    assert v["cells"] == 0 and v["short"] == ["no vs_ref figure in both runs"]
