"""The cells that pay VM exits get intervals that hold the exit's price at the run's end too.

Why it can break: the host moves the price of a VM exit over minutes while the matrix, which
prices it in the moments of its cells, holds still (tests/fixtures/machines/amd-epyc-zen4-kvm/
aa-runs: one cpuid cost 3600 ns, then 3556 ns in the rerun three minutes later).  Every int 0x80
cell pays one exit a call on a KVM guest since Linux 6.7, so 4 of its 12 fast cells missed the
rerun's interval.  tw run prices the exit again at its end (the exit-price stage), and the
analysis widens those cells' intervals over the move.  If it widens where no exit is paid, the
other cells lose precision for nothing; if it widens by the wrong sign or unit, the rerun is
still missed; if `tw compare`, which takes the exit's price out itself, used the widened
intervals, it would count the move twice; and a stage that never met the host's fast state
must not pass its least slow moment off as the price.

The recorded pair is replayed: the rerun's own reference and cpuid cells stand as the first
run's exit-price stage, which is what that stage measures (the same cells, minutes later).
"""
import copy
import json
import lzma
import shutil

import pytest

from conftest import ROOT, recorded_run
from twtools.analyse import compare as decide, exitdrift, percall, results
from twtools.present import report

AA = ROOT / "tests" / "fixtures" / "machines" / "amd-epyc-zen4-kvm" / "aa-runs"
PAYING = ("64-int80", "32-int80")


def _doc(run):
    return json.loads(lzma.open(AA / f"{run}-percall.json.xz").read())


def _stage_of(doc):
    """The rerun cut to what the exit-price stage measures: the reference and cpuid ret."""
    d = copy.deepcopy(doc)
    ref = d["reference"]
    d["cells"] = [c for c in d["cells"]
                  if (c["variant"], c["op"], c.get("shape")) == (ref["variant"], ref["op"], ref["shape"])
                  or (c["variant"], c["op"], c.get("shape")) == (ref["variant"], "cpuid", "ret")]
    return d


def _dir(tmp, run, stage=None):
    d = tmp / run
    d.mkdir()
    (d / "percall.json").write_text(json.dumps(_doc(run)))
    shutil.copy(AA / f"{run}-meta.json", d / "meta.json")
    shutil.copy(AA / "fingerprint.json", d / "fingerprint.json")
    if stage is not None:
        (d / "exitprice.json").write_text(json.dumps(stage))
    return d


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("drift")
    # The stage asks 64 fast cpuid processes of its own and prices the exit from 24 when its
    # budget ends; the recorded rerun's matrix, which stands for it here, has 16.
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(exitdrift, "FAST_PROCESSES", 16)
        r1 = results.load(_dir(tmp, "r1", _stage_of(_doc("r2"))))
    r2 = results.load(_dir(tmp, "r2"))
    return r1, r2


def _fast(data):
    return {percall.key(c): c for c in data["percall"]["cells"]
            if c.get("supported") and c["op"] in percall.FAST_OPS}


def _overlap(a, b):
    return a["ci_low"] <= b["ci_high"] and b["ci_low"] <= a["ci_high"]


def test_the_stage_prices_the_move_the_rerun_met(runs):
    r1, r2 = runs
    ep = r1["exitprice"]
    assert ep["why"] is None and ep["unit"] == "cycles"
    assert ep["end"]["fast_processes"] >= 16
    # 3600 ns at the matrix, 3556 ns in the rerun: -1.2%
    assert ep["move_pct"] == pytest.approx(-1.24, abs=0.1)
    assert ep["move_ns"] == pytest.approx(3555.6 - 3600.4, abs=3)
    assert ep["paying"] == sorted(PAYING)
    # the two prices' intervals in quadrature: 3600 +-8 and 3556 +-18 ns
    assert ep["resolved"] and 15 < ep["move_half_ns"] < 30
    assert r2["exitprice"] is None


def test_the_paying_cells_hold_the_rerun_and_no_other_cell_moves(runs, tmp_path):
    r1, r2 = runs
    plain = _fast(results.load(_dir(tmp_path, "r1")))
    a, b = _fast(r1), _fast(r2)
    missed_before = missed_now = paying = 0
    for k, c in a.items():
        fa, fb = percall.figure(c, "cycles"), percall.figure(b[k], "cycles")
        if c["variant"] in PAYING:
            paying += 1
            d = c["exit_drift"]
            assert d["exits"] == 1 and d["shift_ns"] < 0
            before = percall.figure(plain[k], "cycles")
            # the figure stays the matrix's; the interval only grows, by the move on each side
            s = d["shift_ns"] * r1["percall"]["core_clock"]["cycles_per_ns"]
            assert fa["median"] == before["median"]
            assert fa["ci_low"] == pytest.approx(before["ci_low"] + s)
            assert fa["ci_high"] == pytest.approx(before["ci_high"] - s)
            assert exitdrift.at_moment(c)["undisturbed_ci_low"] == plain[k]["undisturbed_ci_low"]
            missed_before += not _overlap(before, fb)
            missed_now += not _overlap(fa, fb)
            assert c["undisturbed_ratio"]["ci_low"] < plain[k]["undisturbed_ratio"]["ci_low"]
        else:
            assert "exit_drift" not in c
            assert c == plain[k]
    # the fixture keeps four of the twelve int 0x80 fast cells; in cycles one of them missed
    assert paying == 4
    assert missed_before == 1 and missed_now == 0


def test_compare_takes_the_exit_out_at_the_matrix_moment(runs, tmp_path):
    r1, r2 = runs
    plain = results.load(_dir(tmp_path, "r1"))
    xa = percall.find(r1["percall"], "64-syscall", "cpuid")
    xb = percall.find(r2["percall"], "64-syscall", "cpuid")
    for v in PAYING:
        for op in ("null", "getppid"):
            got = decide.between_runs(percall.find(r1["percall"], v, op),
                                      percall.find(r2["percall"], v, op), same_host=True,
                                      a_exit=xa, b_exit=xb, exits=1)
            want = decide.between_runs(percall.find(plain["percall"], v, op),
                                       percall.find(r2["percall"], v, op), same_host=True,
                                       a_exit=xa, b_exit=xb, exits=1)
            assert got["absolute"]["ratio"] == want["absolute"]["ratio"]
            assert got["absolute"]["at_a_exit_price"]


WIDE = ROOT / "tests" / "fixtures" / "machines" / "amd-epyc-zen4-kvm" / "exit-price-wide-reference"


def test_a_matrix_reference_known_loosely_does_not_refuse_a_fast_stage():
    """The recorded quick run whose matrix's reference was 202 ns [171, 233] and whose stage's
    was 227 ns [226, 227]: the stage is within the matrix's fast state as far as the matrix
    knows it, so its price is given (it was refused, and the stage ran out its budget)."""
    read = lambda stem: percall.analyse(json.loads(lzma.decompress((WIDE / f"{stem}.json.xz")
                                                                   .read_bytes())))
    bench, end = read("percall"), read("exitprice")
    (bv, bh), (ev, _) = (exitdrift._value(exitdrift._ref(a), "ns") for a in (bench, end))
    assert bh > 0.1 * bv and ev > bv * (1 + exitdrift.HOST_TOL)     # the case as recorded
    p = exitdrift.end_price(end, bench, need=exitdrift.STAGE_PROCESSES["quick"])
    assert p["value"] is not None and p["why"] is None, p
    assert exitdrift.judge(bench, "quick")(json.loads(lzma.decompress(
        (WIDE / "exitprice.json.xz").read_bytes())))[0]


def test_a_stage_that_never_met_the_fast_state_gives_no_price(runs, monkeypatch):
    monkeypatch.setattr(exitdrift, "FAST_PROCESSES", 16)     # what the recorded rerun has
    bench = runs[0]["percall"]
    slow = _stage_of(_doc("r2"))
    for c in slow["cells"]:
        for rd in c["rounds"]:
            rd["samples_ns"] = [v * 1.25 for v in rd["samples_ns"]]
    p = exitdrift.end_price(percall.analyse(slow), bench)
    assert p["value"] is None and "never reached the matrix's fast state" in p["why"]
    few = _stage_of(_doc("r2"))
    for c in few["cells"]:
        c["rounds"] = c["rounds"][:6]
    p = exitdrift.end_price(percall.analyse(few), bench)
    assert p["value"] is None and "are needed" in p["why"]
    assert exitdrift.judge(bench)(few)[0] is False


def test_the_report_says_both_prices_or_why_not(runs):
    r1, r2 = runs
    s = report._exit_note(r1["causes"], r1["exitprice"], r1["raw"]["meta"])
    assert "3600 ns" in s and "(-1.2% [" in s and "hold them at both prices" in s
    assert "as far the other way" in s
    held = dict(r1["exitprice"], resolved=False)
    s = report._exit_note(r1["causes"], held, r1["raw"]["meta"])
    assert "within the two prices' uncertainty" in s and "hold them at both prices as measured" in s
    unknown = dict(r1["exitprice"], move=None, why="only 3 of its cpuid processes met it")
    s = report._exit_note(r1["causes"], unknown, r1["raw"]["meta"])
    assert "unknown (only 3 of its cpuid processes met it)" in s
    assert "matrix's moment only" in report._exit_note(r1["causes"], unknown)
    assert "tw compare" in report._exit_note(r2["causes"], None)


def test_a_move_the_prices_do_not_resolve_widens_by_the_move_alone(runs):
    # Widening only on a resolved move missed real ones (an end price +0.71% +-0.71%, the
    # rerun's +1.1%: two int 0x80 cells missed it); widening by the move's uncertainty too,
    # +-0.7-3% on a noisy host, took the fast cells' median half-width from 0.7% to 1.1% for
    # moves that were nothing.  So an unresolved move widens by itself, on each side.
    r1, _ = runs
    ep = dict(r1["exitprice"], move_half_ns=60.0, resolved=False)
    bench = r1["raw"]["percall"]
    plain = {percall.key(c): c for c in percall.analyse(bench)["cells"]}
    a = percall.analyse(bench)
    n = exitdrift.widen(a, r1["causes"], ep)
    widened = [c for c in a["cells"] if c.get("exit_drift")]
    assert n == len(widened) > 0 and {c["variant"] for c in widened} == set(PAYING)
    for c in a["cells"]:
        p = plain[percall.key(c)]
        if not c.get("exit_drift"):
            assert c == p
            continue
        s = c["exit_drift"]["shift_ns"]
        assert s == pytest.approx(ep["move_ns"]) and s < 0
        assert c["undisturbed_ci_high"] == pytest.approx(p["undisturbed_ci_high"] - s)
        assert c["undisturbed_ci_low"] == pytest.approx(p["undisturbed_ci_low"] + s)


TURNS = ROOT / "tests" / "fixtures" / "machines" / "amd-epyc-zen4-kvm" / "exit-move-turns"


def test_a_rerun_whose_price_went_the_other_way_is_held(tmp_path):
    # Two default runs beside the neighbour (tests/fixtures/.../exit-move-turns): the first's
    # end price lay 0.68% below its matrix's, and the rerun's int 0x80 cells 0.6-0.9% above the
    # first's.  Widened towards the move only, two of the four kept here missed; widened on
    # each side, every one holds the rerun.
    # the first run's exit-price stage is kept, whose move widened its cells
    r1 = results.load(recorded_run(TURNS, tmp_path, "r1", ("percall", "exitprice")))
    r2 = results.load(recorded_run(TURNS, tmp_path, "r2"))
    ep = r1["exitprice"]
    assert ep["move_pct"] < -0.5 and ep["widened"] == 4
    a, b = _fast(r1), _fast(r2)
    towards = 0
    for k, c in a.items():
        if c["variant"] not in PAYING:
            continue
        fa, fb = percall.figure(c, "cycles"), percall.figure(b[k], "cycles")
        assert fb["median"] > fa["median"] and _overlap(fa, fb), k
        m = exitdrift.at_moment(c)["undisturbed_cycles"]
        s = c["exit_drift"]["shift_ns"] * r1["percall"]["core_clock"]["cycles_per_ns"]
        towards += not _overlap({"ci_low": m["ci_low"] + s, "ci_high": m["ci_high"]}, fb)
    assert towards == 2
