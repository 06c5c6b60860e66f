"""The sweeps' self-check compares two runs cell by cell: what it counts must follow the cells.

Why it can break: a cell keyed differently in the two runs (then nothing is compared), the
overlap test reversed, the move taken from the typical figure where the report leads with the
undisturbed one, or the chance count of missed pairs left out.  Pure: built from the recorded
results fixture's sweeps (tests/fixtures/results-fixture), no measurement.
"""
import copy
import math
import json

import pytest

from conftest import ROOT
from twtools.analyse import sweepcheck, sweeps
from twtools.present import sweepcheck as present

FIX = ROOT / "tests" / "fixtures" / "results-fixture"


def analysed():
    return {stem: sweeps.sweep(json.loads((FIX / f"{stem}.json").read_text()))
            for stem in ("sweep_seed", "sweep_tlpi")}


def scaled(a, k):
    """a copy of analysed sweeps whose every leading figure is k times as large"""
    b = copy.deepcopy(a)
    for sw in b.values():
        for run in sw["runs"]:
            for row in run.get("rows") or []:
                if row.get("lead"):
                    for f in ("median", "ci_low", "ci_high"):
                        row["lead"][f] *= k
    return b


def test_a_run_against_itself_overlaps_everywhere_and_moves_nothing():
    a = analysed()
    f = sweepcheck.figures(a, copy.deepcopy(a), reports=["", ""])
    c = f["compare"]
    assert c["cells"] == len(sweepcheck.cells(a)) > 50
    assert c["overlap_share"] == 1.0 and c["misses"] == 0 and c["move_median"] == 0.0
    assert c["expected_misses"] == pytest.approx(sweepcheck.MISS_BY_CHANCE * c["cells"], abs=0.01)
    assert 0.005 < sweepcheck.MISS_BY_CHANCE < 0.006
    assert f["quiet_machine_in_report"] == []


def test_a_shift_beyond_the_intervals_is_counted_as_moved_and_missed():
    a = analysed()
    b = scaled(a, 1.5)
    c = sweepcheck.compare(a, b)
    assert c["move_median"] == pytest.approx(0.5)
    narrow = [k for k, s in sweepcheck.cells(a).items()
              if s["ci_high"] * 1.5 > s["ci_high"] and s["ci_low"] * 1.5 > s["ci_high"]]
    assert c["misses"] == len(narrow) > 0


def test_the_report_text_is_searched_for_a_quieter_machine():
    a = analysed()
    f = sweepcheck.figures(a, a, reports=["fine", "re-run on a Quiet machine"])
    assert f["quiet_machine_in_report"] == [2]
    text = "\n".join(present.lines(f))
    assert "run 2" in text and "target" in text


def test_the_fixture_sweeps_lead_with_the_typical_figure_and_say_why():
    """Recorded before batches: no run per pass, so no undisturbed figure, and the share of
    async cells within 2% counts them as they are."""
    r = sweepcheck.per_run(analysed())
    assert r["undisturbed_cells"] == 0 and r["async_cells"] > 0
    for sw in analysed().values():
        for run in sw["runs"]:
            for row in run.get("rows") or []:
                assert row["figure"] == "typical" and row["lead_why"]


def test_a_whole_host_shift_is_told_apart_from_cells_that_moved_alone():
    # Every cell 4% slower (the host's fast state moved) and one cell 3x on its own:
    # the shift is the common 4%, what is left is nothing but that one cell, and once the
    # shift is out every other interval overlaps again.
    a = analysed()
    b = scaled(a, 1.04)
    odd = next(k for k in sweepcheck.cells(b) if k[0] == "sweep_seed" and k[2] == "async")
    for run in b["sweep_seed"]["runs"]:
        for row in run.get("rows") or []:
            if (run["variant"], run.get("mode"), row["buffsize"]) == odd[1:]:
                for f in ("median", "ci_low", "ci_high"):
                    row["lead"][f] *= 3
    h = sweepcheck.host_shift(a, b)
    assert h["sweep_seed"]["shift"] == pytest.approx(0.04)
    assert h["sweep_seed"]["residual_move_median"] == pytest.approx(0.0, abs=1e-9)
    assert h["sweep_seed"]["residual_move_p90"] < 0.01
    n = h["sweep_seed"]["cells"]
    assert h["sweep_seed"]["overlap_after_shift"] == pytest.approx((n - 1) / n)
    text = "\n".join(present.lines(sweepcheck.figures(a, b)))
    assert "the host moved +4.00% as a whole" in text


def with_clock(a, value, half=0.002):
    """a copy of analysed sweeps that carry a hostclock figure `value` (± half relative)"""
    b = copy.deepcopy(a)
    for sw in b.values():
        sw["host_clock"] = {"supported": True, "undisturbed": {
            "value": value, "ci_low": value * (1 - half), "ci_high": value * (1 + half)}}
    return b


def test_the_host_clock_measured_apart_takes_out_the_hosts_move():
    # The host ran user code 4% slower in run B, every cell moved with it: measured by
    # hostclock, the shift is 4% and nothing is left; a clock that did not move leaves
    # every cell's 4% standing.
    a = with_clock(analysed(), 1.0)
    b = with_clock(scaled(analysed(), 1.04), 1.04)
    h = sweepcheck.clock_shift(a, b)["sweep_seed"]
    assert h["shift"] == pytest.approx(0.04)
    assert h["shift_half_width"] == pytest.approx(0.002 * 2 ** 0.5)
    assert h["residual_move_median"] == pytest.approx(0.0, abs=1e-9)
    assert h["agree_after_shift"] == 1.0
    still = sweepcheck.clock_shift(a, with_clock(scaled(analysed(), 1.04), 1.0))["sweep_seed"]
    assert still["residual_move_median"] == pytest.approx(math.log(1.04))
    text = "\n".join(present.lines(sweepcheck.figures(a, b)))
    assert "hostclock, no kernel entry) moved +4.00% ± 0.28%" in text


def test_a_sweep_without_the_host_clock_says_why():
    a = analysed()
    a["sweep_seed"]["host_clock"] = sweeps.host_clock(None)
    h = sweepcheck.clock_shift(a, copy.deepcopy(a))
    assert h["sweep_seed"]["shift"] is None and "without hostclock" in h["sweep_seed"]["why"]
    assert h["sweep_tlpi"]["shift"] is None
    text = "\n".join(present.lines(sweepcheck.figures(a, a)))
    assert "the host's own speed: unknown (this sweep was recorded without hostclock" in text


def test_the_host_clock_figure_is_the_fastest_batches_over_rounds():
    # 12 rounds of 20 batches: the per-round best wanders by a known amount, and a round
    # hostclock could not run is told with its reason.
    batches, rnd = [], []
    for r in range(12):
        best = 100_000 * (1 + 0.01 * (r % 3))
        batches += [best] + [best * 1.05] * 19
        rnd += [r] * 20
    c = sweeps.host_clock({"iterations": 100_000, "batch_ns": batches, "round": rnd,
                           "supported": True})
    assert c["supported"] and c["rounds"] == 12 and c["unit"] == "ns per multiply-add"
    assert 1.0 <= c["undisturbed"]["value"] <= 1.02
    assert c["wander_low"] == pytest.approx(1.00 / 1.01 - 1)
    assert c["wander_high"] == pytest.approx(1.02 / 1.01 - 1)
    no = sweeps.host_clock({"supported": False, "reason": "hostclock is not built (run make)"})
    assert no["supported"] is False and no["why"] == "hostclock is not built (run make)"
