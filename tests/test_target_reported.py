"""`tw bench --target` judges its last line on the figures it reports, not on the matrix's moment.

Why it can break: the stopping rule (percall.target_status) counts a cell within the target
from the matrix's rounds; afterwards the run prices the VM exit again and widens the cells that
pay exits to hold the move (analyse/exitdrift.hold).  A cell counted within can so end up
reported wider than the target, and a line that still said "48 of 48 within" would promise
what the table does not show.  percall.reported_status judges the widened figures and names
each wider cell with why; this test replays the recorded Zen 4 pair whose rerun met an exit
price 1.2% lower (tests/fixtures/machines/amd-epyc-zen4-kvm/aa-runs).
"""
import pytest

from test_exit_drift import PAYING, _dir, _doc, _stage_of
from twtools.analyse import exitdrift, percall, results
from twtools.cli import bench as cli_bench


@pytest.fixture(scope="module")
def widened(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("reported")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(exitdrift, "FAST_PROCESSES", 16)
        return results.load(_dir(tmp, "r1", _stage_of(_doc("r2"))))


def _half(c):
    return (c["undisturbed_ci_high"] - c["undisturbed_ci_low"]) / 2 / c["undisturbed_ns"]


def test_each_fast_cell_is_counted_once_by_its_reported_width(widened):
    a = widened["percall"]
    fast = [c for c in a["cells"] if c.get("supported") and c["op"] in percall.FAST_OPS]
    target = 0.01
    st = percall.reported_status(a, target)
    assert st["cells"] == len(fast) > 0
    assert st["within"] + len(st["wide"]) == st["cells"]
    assert st["within"] == sum(1 for c in fast if c.get("undisturbed_ns")
                               and _half(c) <= target)
    assert [w["half_width"] for w in st["wide"]] == sorted(
        (w["half_width"] for w in st["wide"]), reverse=True)


def test_a_cell_wide_by_the_exits_move_says_so(widened):
    a = widened["percall"]
    held = [c for c in a["cells"] if c.get("exit_drift") and c["op"] in percall.FAST_OPS]
    assert held and all(c["variant"] in PAYING for c in held)
    # the narrowest target that leaves one exit-paying cell outside
    target = min(_half(c) for c in held) * 0.99
    st = percall.reported_status(a, target)
    by_cell = {w["cell"]: w for w in st["wide"]}
    for c in held:
        w = by_cell[" ".join(str(x) for x in percall.key(c) if x is not None)]
        assert "VM exit's move" in w["why"] and "more rounds do not narrow" in w["why"]
        assert w["half_width"] == pytest.approx(_half(c))
    # cells that pay no exit are never blamed on it
    assert not any("VM exit" in w["why"] for w in st["wide"]
                   if w["cell"].split()[0] not in PAYING)


def test_the_last_line_and_the_json_carry_it(widened, capsys):
    a = dict(widened["percall"])
    st = cli_bench.reported_line(a, 0.005)
    assert a["target_reported"] is st
    err = capsys.readouterr().err
    assert f"as reported, {st['within']} of {st['cells']} fast cells within ±0.5%" in err
    if st["wide"]:
        assert "wider: " + st["wide"][0]["cell"] in err


# -- the stopping rule leaves the host's drift its share of the target --------------------------

def _drifted(doc, amount):
    """The document's host probes with the fast level rising by `amount` over the run."""
    pr = doc["host_state"]["probes"]
    for i, p in enumerate(pr):
        p["floor_ns"] *= 1 + amount * i / len(pr)
    return doc


def test_the_plan_aims_below_the_target_by_the_drift():
    from twtools.analyse import stats
    assert percall.sampling_target(0.01, None) == (0.01, None, False)
    aimed, d, held = percall.sampling_target(0.01, {"rel": 0.003})
    assert not held and d == pytest.approx(stats.Z * 0.003)
    assert aimed == pytest.approx((0.01 ** 2 - d ** 2) ** 0.5) and aimed < 0.01
    assert percall.sampling_target(0.01, {"rel": 0.005})[2]     # 0.98% of 1%: held


@pytest.mark.parametrize("amount", [0.0, 0.006, 0.01])
def test_a_cell_the_rule_calls_met_is_reported_within_the_target(amount):
    """The rule judged the sampling interval alone, and the run then folded the host's drift in
    (percall.hold_host_drift): a `tw bench --target 1%` beside the neighbour stopped with 48 of
    48 met and reported 11 of them at 1.01-1.10%."""
    from test_quiet_first import _cell, _doc
    for seed in (4, 5, 6):
        a = percall.analyse(_drifted(_doc(0.6, n_rounds=120, seed=seed, target=0.01), amount))
        c = _cell(a)
        sq = c["undisturbed"]["sequential"]
        assert sq["met"] and not sq["held_by_drift"]
        assert sq["target_sampling"] <= 0.01
        assert _half(c) <= 0.01 * (1 + 1e-9)
        assert percall.key(c) in percall.target_status(a, 0.01)["met_keys"]


def test_a_cell_whose_drift_alone_takes_the_target_is_done_and_named():
    from test_quiet_first import _cell, _doc
    a = percall.analyse(_drifted(_doc(0.6, n_rounds=120, seed=4, target=0.01), 0.03))
    c = _cell(a)
    assert c["undisturbed"]["sequential"]["held_by_drift"] and _half(c) > 0.01
    # done once its plan for the whole target is met: more rounds would narrow nothing the
    # run reports, and the stop is not held up by it
    assert percall.key(c) in percall.target_status(a, 0.01)["met_keys"]
    name = " ".join(str(x) for x in percall.key(c) if x is not None)
    (w,) = [w for w in percall.reported_status(a, 0.01)["wide"] if w["cell"] == name]
    assert "host's drift over the run" in w["why"] and "more rounds do not narrow" in w["why"]


def test_a_run_made_before_the_drift_aware_rule_is_read_by_the_plan_it_stopped_by():
    """A stored run planned each cell for the whole target: reading it with the new plan would
    move its intervals (and the fleet's digest off the report's) after the fact."""
    from test_quiet_first import _cell, _doc
    doc = _drifted(_doc(0.6, n_rounds=120, seed=4, target=0.01), 0.006)
    doc["host_state"].pop("target_plan")
    sq = _cell(percall.analyse(doc))["undisturbed"]["sequential"]
    assert sq["target_sampling"] == 0.01 and sq["drift_rel"] is None
