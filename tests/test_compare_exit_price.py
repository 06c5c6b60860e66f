"""tw compare takes the host's price of a VM exit out of a comparison of two runs of one host.

Why it can break: the host sets what one VM exit costs and moves it between runs minutes
apart (tests/fixtures/machines/amd-epyc-zen4-kvm/aa-runs: 3600 then 3556 ns a cpuid), and
int 0x80 pays one exit a call on a KVM guest since Linux 6.7, so an A/A comparison of two
byte-identical runs called every int 0x80 cell faster.  If the exit's move is not taken out,
tw compare calls the host's moment a difference of the kernel; if it is taken out where no
exit is paid (a host that virtualises the APIC read fits 0 exits), or between two machines,
a real difference is hidden; if the exit's price is taken out with no uncertainty, the
interval undercovers.  The recorded pair is replayed, and synthetic cells with a known
difference check that one beyond the exit's move is still called.
"""
import json
import lzma

import pytest

from conftest import ROOT, recorded_run
from twtools.analyse import basemodel, causes, compare as decide, percall
from twtools.present import compare

AA = ROOT / "tests" / "fixtures" / "machines" / "amd-epyc-zen4-kvm" / "aa-runs"
INT80 = [(v, op) for v in ("64-int80", "32-int80") for op in ("null", "getppid")]


@pytest.fixture(scope="module")
def aa(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("aa")
    sets = [compare.ResultSet.from_dir(recorded_run(AA, tmp, r)) for r in ("r1", "r2")]
    return sets, compare.decisions_json(sets)


def _row(doc, variant, op):
    return next(r for r in doc["decisions"] if (r["variant"], r["op"]) == (variant, op))


def test_the_recorded_runs_priced_the_exit_apart(aa):
    sets, _ = aa
    x = [decide.figure(s.cells("cpuid")[compare.REF_KEY], "undisturbed") for s in sets]
    assert x[0]["median"] == pytest.approx(3600.4, abs=0.5)
    assert x[1]["median"] == pytest.approx(3555.6, abs=0.5)
    assert x[1]["ci_high"] < x[0]["ci_low"]
    for s in sets:
        for v in ("64-int80", "32-int80"):
            assert causes.exits_paid(s.data["causes"], v) == 1
        assert causes.exits_paid(s.data["causes"], "64-syscall") is None


def test_an_aa_pair_calls_no_int80_cell_at_one_exit_price(aa):
    sets, doc = aa
    as_measured = 0
    for v, op in INT80:
        row = _row(doc, v, op)
        assert row["exits_per_call"] == 1
        assert row["exit_shift_pct"] == pytest.approx(-1.24, abs=0.01)
        d = row["absolute"]
        assert d["at_a_exit_price"] and d["as_measured"]["decision"] is not None
        as_measured += d["as_measured"]["decision"] in (decide.SLOWER, decide.FASTER)
        assert d["decision"] in (decide.SAME, "within drift"), (v, op, d["sentence"])
        lo, hi = d["pct_ci"]
        assert lo <= 0 <= hi
        # what the way adds over its baseline, each run's exits taken out at its own price
        # (analyse/basemodel.py: the column that replaced the ratio to each run's base)
        p = row["premium"]
        assert p["decision"] == decide.SAME and not p["exits_in"], (v, op, p["sentence"])
        assert p["diff"]["ci_low"] <= 0 <= p["diff"]["ci_high"]
        # the same premium with the exits left in, as measured
        raw = basemodel.premium_change(*(s.data["percall"]["cells"] for s in sets),
                                       (v, op, None, "ret"))
        as_measured += raw["decision"] in (decide.SLOWER, decide.FASTER)
    # as measured, the host's move was called in most of them
    assert as_measured >= 5
    fam = doc["families"]["r2 (vm)"]
    assert fam["called"] <= 1


def test_cells_that_pay_no_exit_are_decided_as_measured(aa):
    _, doc = aa
    for op in ("null", "getppid"):
        row = _row(doc, "64-syscall", op)
        assert row["exits_per_call"] is None and row["exit_shift_pct"] is None
        assert not row["absolute"]["at_a_exit_price"]


def _cell(v, h, ratio=None, rh=None):
    c = {"supported": True, "undisturbed_ns": v, "undisturbed_ci_low": v - h,
         "undisturbed_ci_high": v + h, "primary": "undisturbed"}
    if ratio is not None:
        c["undisturbed_ratio"] = {"median": ratio, "ci_low": ratio - rh, "ci_high": ratio + rh}
    return c


REF_A, REF_B = _cell(100.0, 0.3), _cell(100.0, 0.3)
EXIT_A, EXIT_B = _cell(3600.0, 8.0), _cell(3550.0, 8.0)


@pytest.mark.parametrize("path_b,expect", [(400.0, "within drift"), (600.0, decide.SLOWER)])
def test_a_difference_beyond_the_exits_move_is_still_called(path_b, expect):
    """A is 400 ns of path and one 3600-ns exit; B the same exit at 3550 and a path of 400
    (the host's move alone) or 600 ns (a kernel that does 200 ns more work)."""
    a = _cell(4000.0, 10.0, 40.0, 0.1)
    vb = path_b + 3550.0
    b = _cell(vb, 10.0, vb / 100.0, 0.1)
    cmp = decide.between_runs(a, b, REF_A, REF_B, same_host=True, a_exit=EXIT_A, b_exit=EXIT_B,
                              exits=1)
    assert cmp["exit_shift_pct"] == pytest.approx(-1.39, abs=0.01)
    assert cmp["absolute"]["decision"] == expect
    assert cmp["relative"]["decision"] == expect
    if expect == decide.SLOWER:
        # at A's exit price B is 4200 against 4000: +5%
        assert cmp["absolute"]["pct"] == pytest.approx(5.0, abs=0.01)


def test_the_exits_price_carries_its_uncertainty():
    """B at A's exit price: B's half-width and both prices' in quadrature, never B's alone."""
    fb = {"median": 3950.0, "ci_low": 3940.0, "ci_high": 3960.0}
    got = decide.at_a_exit_price(fb, {"median": 3600.0, "ci_low": 3592.0, "ci_high": 3608.0},
                                 {"median": 3550.0, "ci_low": 3542.0, "ci_high": 3558.0}, 1)
    assert got["median"] == 4000.0
    assert got["ci_high"] - got["median"] == pytest.approx((10 ** 2 + 8 ** 2 + 8 ** 2) ** 0.5)


def test_between_two_hosts_or_without_exits_nothing_is_taken_out():
    a, b = _cell(4000.0, 10.0, 40.0, 0.1), _cell(3950.0, 10.0, 39.5, 0.1)
    for kw in ({"same_host": False, "exits": 1}, {"same_host": True, "exits": None},
               {"same_host": True, "exits": 0}):
        cmp = decide.between_runs(a, b, REF_A, REF_B, a_exit=EXIT_A, b_exit=EXIT_B, **kw)
        assert cmp["exit_shift_pct"] is None and not cmp["absolute"].get("at_a_exit_price")


def test_a_host_that_virtualises_the_apic_read_pays_no_exit_to_take_out():
    """1 predicted, 0.02 fitted: the verdict fails, and no exit's price is taken out."""
    doc = {"mechanisms": {"32-int80": {"predicted_exits": {"value": 1},
                                       "verdict": {"holds": False, "text": "fails here"}}}}
    assert causes.exits_paid(doc, "32-int80") is None
    assert causes.exits_paid({}, "32-int80") is None
    assert causes.exits_paid(None, "32-int80") is None


def test_the_report_says_int80_carries_the_exit_price_of_its_moment(aa):
    sets, _ = aa
    from twtools.present import report
    note = report._exit_note(sets[0].data["causes"])
    assert note.startswith(" 32-int80 and 64-int80 pay a VM exit a call here")
    assert "(one cpuid: 3600 ns [3592, 3609])" in note and "`tw compare`" in note
    # no exit paid (bare metal, APICv/AVIC, a kernel before 6.7): nothing to say
    assert report._exit_note({"exit_price_ns": {"value": 100.0}, "mechanisms": {}}) == ""
    assert report._exit_note(None) == ""


def test_the_bench_selfcheck_says_its_overlap_at_one_exit_price():
    """tw bench --selfcheck's two runs, as tw compare decides them: the fixture's int 0x80
    cells miss each other as measured and overlap at the first run's exit price."""
    from twtools.analyse import selfcheck
    runs = []
    for r in ("r1", "r2"):
        doc = json.loads(lzma.open(AA / f"{r}-percall.json.xz").read())
        runs.append((doc, percall.analyse(doc)))
    fp = json.loads((AA / "fingerprint.json").read_text())
    u = selfcheck.figures(runs, fp)["undisturbed"]
    assert u["exit_shift_pct"] == pytest.approx(-1.24, abs=0.01)
    # as measured 2 of the 8 cells miss (the cpuid cell, whose move is the exit's, and 64-int80
    # getppid); at one exit price only the cpuid cell itself
    assert u["overlap_share"] == 6 / 8 and u["overlap_share_one_exit_price"] == 7 / 8
    # one call: the cpuid cell, the exit's own price, which did move (tw compare, whose
    # operations leave cpuid out, calls none)
    assert u["compare"]["called"] == 1
    # without the machine's facts nothing is priced, and it says nothing of it
    bare = selfcheck.figures(runs)["undisturbed"]
    assert bare["exit_shift_pct"] is None
    assert bare["overlap_share_one_exit_price"] == bare["overlap_share"]
