"""The report's "return after the call" finding must not call chance a penalty.

It can break because a finding picks one of several per-mechanism intervals: taking the
largest median (or the one interval that excludes zero among many) turns noise into a
claim.  At a 95% level, one of five intervals excludes zero by chance 23% of the time."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))

from twtools.analyse import findings  # noqa: E402


def pen(variant, med, lo, hi, ret=150.0):
    return {"variant": variant, "op": "null", "ret_ns": ret, "jmp_ns": ret - med,
            "penalty_ns": {"median": med, "ci_low": lo, "ci_high": hi}}


def sentence(*pens):
    return findings._return({"percall": {"penalties": list(pens)}})["sentence"]


def test_no_interval_excludes_zero():
    s = sentence(pen("64-syscall", 1.0, -2.0, 3.0), pen("32-int80", 5.0, -9.0, 26.0))
    assert s.startswith("no post-return penalty detected")
    assert "32-int80" in s and "26.0 ns" in s      # the widest interval bounds what could hide


def test_one_of_several_is_not_called_a_penalty():
    s = sentence(pen("64-syscall", 1.4, 0.3, 2.4), pen("32-int80", 5.0, -9.0, 26.0),
                 pen("32-vdso", 0.5, -1.0, 2.0))
    assert s.startswith("no clear post-return penalty") and "64-syscall" in s
    assert "14%" in s                               # 1 - 0.95**3


def test_a_penalty_seen_on_several_mechanisms_is_reported():
    s = sentence(pen("64-syscall", 40.0, 35.0, 45.0), pen("32-int80", 60.0, 50.0, 70.0),
                 pen("32-vdso", 0.5, -1.0, 2.0))
    assert s.startswith("leaving a stub by `ret`") and "32-int80" in s and "2 of 3" in s


def test_nothing_measured_says_how_to_measure_it():
    assert "tw bench --shapes ret,jmp" in sentence()
