"""analyse/sequential.py's plan, interval and projection on small hand-made inputs: the first
stage, the floors that keep an interval from zero width, the screen for mislabelled slow
processes.  Its coverage on a simulated noisy host: tests/test_sequential_coverage.py."""
import numpy as np
import pytest

from twtools.analyse import sequential

TARGET = 0.01


def test_plan_waits_for_the_first_stage():
    p = sequential.plan([100.0] * 5, TARGET)
    assert not p["ready"] and p["need_n"] == sequential.N0_MIN
    iv = sequential.interval([100.0] * 5, p)
    assert iv["value"] is None and not iv["met"]


def test_a_first_stage_the_screen_kept_short_says_how_many_it_kept():
    # 29 fast-labelled values, only 8 within the screen of the lowest: "29 fast value(s), the
    # first stage needs 12" read as a contradiction in a report
    vals = [100.0] * 8 + [130.0] * 21
    p = sequential.plan(vals, TARGET)
    assert not p["ready"] and p["why"] == ("29 fast value(s), 8 of them within 5% of the "
                                           "lowest; the first stage needs 12")


def test_one_level_never_gives_a_zero_width_interval():
    vals = [100.0] * 40
    p = sequential.plan(vals, TARGET)
    iv = sequential.interval(vals, p)
    assert iv["ci_low"] < 100.0 < iv["ci_high"]
    assert iv["met"]
    # the clock's resolution per call is a floor too
    iv = sequential.interval(vals, sequential.plan(vals, TARGET, resolution=0.5))
    assert iv["ci_high"] - iv["value"] >= 0.5


def test_mislabelled_slow_processes_are_screened():
    rng = np.random.default_rng(3)
    fast = 100 * (1 + rng.choice([0, 0.01, 0.02], 30)) + rng.normal(0, 0.1, 30)
    vals = np.insert(fast, [2, 9, 20], [130.0, 118.0, 150.0])
    p = sequential.plan(vals, TARGET)
    iv = sequential.interval(vals, p)
    assert iv["screened"] == 3 and iv["n"] == 30
    assert abs(iv["value"] - fast.mean()) < 1e-9


def test_more_spread_needs_more_values():
    rng = np.random.default_rng(4)
    tight = 100 + rng.normal(0, 0.3, 12)
    wide = 100 + rng.uniform(0, 4.0, 12)        # four levels' worth, inside the screen
    assert sequential.plan(wide, TARGET)["need_n"] > sequential.plan(tight, TARGET)["need_n"]
    assert sequential.plan(tight, TARGET / 4)["need_n"] > sequential.plan(tight, TARGET)["need_n"]


def test_plan_does_not_change_as_values_arrive():
    rng = np.random.default_rng(5)
    vals = 100 + rng.normal(0, 1.5, 60)
    first = sequential.plan(vals[:sequential.N0_MIN], TARGET)
    later = sequential.plan(vals, TARGET)
    assert first["need_n"] == later["need_n"] and first["s0"] == later["s0"]
    pr = sequential.progress(vals[:20], TARGET)
    assert pr["more_n"] == max(0, first["need_n"] - 20)


def test_projection():
    rng = np.random.default_rng(6)
    vals = 100 + rng.normal(0, 1.5, 14)
    p = sequential.plan(vals, TARGET)
    pr = sequential.projection(vals, fast_share=0.05, proc_s=1.34, target_rel=TARGET)
    assert pr["need_n"] == p["need_n"]
    assert pr["seconds"] == pytest.approx(p["need_n"] / 0.05 * 1.34)
    assert pr["more_seconds"] == pytest.approx(max(0, p["need_n"] - 14) / 0.05 * 1.34)
    never = sequential.projection(vals, fast_share=0.0, proc_s=1.34, target_rel=TARGET)
    assert never["seconds"] is None and "never" in never["why"]
    few = sequential.projection(vals[:3], fast_share=0.1, proc_s=1.0, target_rel=TARGET)
    assert few["seconds"] == pytest.approx(sequential.N0_MIN / 0.1) and "lower bound" in few["why"]


def test_bad_target_is_refused():
    with pytest.raises(ValueError):
        sequential.plan([1.0] * 20, 0)
