"""A sweep's rows that pay VM exits hold the exit's move over the run, as the matrix's cells do.

Why it can break: a write by int 0x80 pays one VM exit a call on a KVM guest since Linux 6.7,
and the host moves the exit's price over minutes.  The matrix's cells hold that move
(analyse/exitdrift.widen); the sweeps' rows, measured in the same run, did not.  Beside the
neighbour on the AMD EPYC guest (tests/fixtures/machines/amd-epyc-zen4-kvm/exit-move-sweep) the
exit's price moved +1.1% over the first run and +2.4% over the second, and the second's TLPI
sweep missed four of its 32-int80 rows (1-32 B) by 2.7-3.4%.  If the widening reached rows
that pay no exit, they would lose precision for nothing; if it went one way only, a rerun
whose price went the other way would still be missed.
"""
import json
import lzma

import pytest

from conftest import ROOT, recorded_run
from twtools.analyse import exitdrift, results, sweeps

FIX = ROOT / "tests" / "fixtures" / "machines" / "amd-epyc-zen4-kvm" / "exit-move-sweep"
SMALL = (1, 8, 16, 32)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("sweepdrift")
    return [(results.load(recorded_run(FIX, tmp, r, ("percall", "exitprice", "sweep_tlpi"))),
             sweeps.sweep(json.loads(lzma.open(FIX / f"{r}-sweep_tlpi.json.xz", "rt").read())))
            for r in ("r1", "r2")]


def _rows(doc, variant):
    run = next(r for r in doc["runs"] if r["variant"] == variant and r["mode"] == "async")
    return {row["buffsize"]: row for row in run["rows"]}


def _overlap(a, b):
    return a["ci_low"] <= b["ci_high"] and b["ci_low"] <= a["ci_high"]


def test_the_int80_rows_hold_the_rerun_that_their_moment_missed(runs):
    (a, _), (b, _) = runs
    assert a["exitprice"]["move_pct"] > 0.5 and b["exitprice"]["move_pct"] > 2
    ra, rb = _rows(a["sweep_tlpi"], "32-int80"), _rows(b["sweep_tlpi"], "32-int80")
    missed = 0
    for size in SMALL:
        ua, ub = ra[size]["undisturbed"], rb[size]["undisturbed"]
        assert _overlap(ua, ub), size
        ma, mb = ua["exit_drift"]["moment"], ub["exit_drift"]["moment"]
        missed += not _overlap(dict(ci_low=ma[0], ci_high=ma[1]), dict(ci_low=mb[0], ci_high=mb[1]))
    assert missed == 4


def test_only_the_rows_that_pay_exits_widen_by_the_move_on_each_side(runs):
    for data, plain in runs:
        ep = data["exitprice"]
        assert ep["widened_sweep_rows"] == len(SMALL) + 1       # 32-int80's five rows
        for variant in ("32-int80", "64-libc"):
            for size, row in _rows(data["sweep_tlpi"], variant).items():
                p = _rows(plain, variant)[size]
                u = row["undisturbed"]
                if variant == "64-libc":
                    assert "exit_drift" not in u and u == p["undisturbed"]
                    continue
                s = u["exit_drift"]["shift_ns"]
                assert u["exit_drift"]["exits"] == 1 and s == pytest.approx(ep["move_ns"])
                assert u["ci_low"] == pytest.approx(p["undisturbed"]["ci_low"] - abs(s))
                assert u["ci_high"] == pytest.approx(p["undisturbed"]["ci_high"] + abs(s))
                assert u["value"] == p["undisturbed"]["value"]
                # the row leads with the widened interval
                assert (row["lead"]["ci_low"], row["lead"]["ci_high"]) == (u["ci_low"], u["ci_high"])


def test_no_exit_price_no_widening(runs):
    (a, plain), _ = runs
    assert exitdrift.widen_sweep(plain, a["causes"], dict(a["exitprice"], move=None)) == 0
    assert exitdrift.widen_sweep(None, a["causes"], a["exitprice"]) == 0
