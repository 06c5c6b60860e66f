"""The cost model (analyse/causes.py): exits per call recovered, and no exit where none is due.

Why it can break: the fit divides by the wrong cell or loses its interval (a count of exits
that no longer covers the truth); a fact read wrongly predicts an exit on a FRED kernel, a Xen
PV guest, a kernel before 6.7 or bare metal, where the kernel's source says there is none; a
results directory without a cpuid cell (every one measured before it existed, the atlas's
included) is priced as if it had one.

Synthetic matrices come from a known host: every cell's batches are its true cost times a
two-state host (the fast state in a quarter of batches, 30% slower otherwise), so the
undisturbed figures, and therefore the exits per call, are known.
"""
import json
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
from twtools.analyse import atlas, causes, percall  # noqa: E402
from twtools.present import causes as present_causes  # noqa: E402
from twtools.present.document import Doc  # noqa: E402

FACTS = ROOT / "tests" / "fixtures" / "causes"
PRICE, FAST64, FAST32 = 1000.0, 110.0, 160.0


def tail_factor(q=0.05, share=0.25):
    """The undisturbed figure of a cell whose true cost is 1 on this host: the population's
    lower-tail mean, E[X | X <= F^-1(q)], by numerical integration (not the code under test).
    scipy is imported here, not with the module: collecting the file on every worker of
    `make check` paid for scipy.stats whether or not this ran there.  The normal's cdf and pdf
    are scipy.stats.norm's own (special.ndtr of the standardised value; its density formula
    over the scale), without importing scipy.stats (half a second) for them."""
    from scipy import integrate, optimize, special

    def norm_cdf(x, mu, sd):
        return special.ndtr((x - mu) / sd)

    def norm_pdf(x, mu, sd):
        z = (x - mu) / sd
        return np.exp(-z ** 2 / 2.0) / np.sqrt(2 * np.pi) / sd

    def cdf(x):
        return share * norm_cdf(x, 1.0, 0.003) + (1 - share) * norm_cdf(x, 1.3, 0.05)

    def pdf(x):
        return share * norm_pdf(x, 1.0, 0.003) + (1 - share) * norm_pdf(x, 1.3, 0.05)
    cut = optimize.brentq(lambda x: cdf(x) - q, 0.9, 1.5)
    return integrate.quad(lambda x: x * pdf(x), 0.95, cut)[0] / q


def facts(name):
    return json.loads((FACTS / f"{name}.json").read_text())


def matrix(exits, rounds=32, seed=3, extra=0.0):
    """A raw percall.json whose int 0x80 cells cost the fast path + exits * PRICE (+ extra)."""
    rng = np.random.default_rng(seed)
    true = {("64-syscall", "null"): FAST64, ("64-syscall", "cpuid"): PRICE,
            ("32-vdso", "null"): FAST32, ("32-int80", "null"): FAST32 + exits * PRICE + extra,
            ("64-int80", "null"): FAST64 + exits * PRICE + extra}
    cells = []
    for (v, op), t in true.items():
        rds = []
        for r in range(rounds):
            slow = rng.random(4) > 0.25
            s = t * np.where(slow, rng.normal(1.3, 0.05, 4), rng.normal(1.0, 0.003, 4))
            rds.append({"round": r, "t_s": float(r), "samples_ns": [float(x) for x in s]})
        cells.append({"variant": v, "op": op, "shape": "ret", "supported": True, "rounds": rds})
    return {"schema": "timewrite-percall/2", "cells": cells,
            "reference": {"variant": "64-syscall", "op": "null", "shape": "ret"}}


@pytest.mark.parametrize("exits", [0, 1, 2])
def test_exits_per_call_recovered_with_an_interval_that_covers_them(exits):
    doc = causes.compute_from(percall.analyse(matrix(exits)), facts("kvm-6.18"))
    assert doc["schema"] == "timewrite-causes/1"
    p = doc["exit_price_ns"]
    want = PRICE * tail_factor()
    assert p["ci_low"] <= want <= p["ci_high"], (p, want)
    for v in ("32-int80", "64-int80"):
        e = doc["mechanisms"][v]["exits_per_call"]
        assert e["ci_low"] <= exits <= e["ci_high"], (v, e)
        assert e["ci_high"] - e["ci_low"] < 0.5, e  # narrow enough to tell 0, 1 and 2 apart
    m = doc["mechanisms"]["32-int80"]
    assert m["baseline"] == "32-vdso null ret"
    # The model predicts one exit on this kernel: it holds for 1 and says it fails otherwise.
    assert m["verdict"]["holds"] is (exits == 1), m["verdict"]
    if exits != 1:
        assert m["verdict"]["text"].startswith("fails here")


def test_a_residual_is_reported_with_its_interval():
    """200 ns the model does not price (int 0x80's own path) is the residual, not an exit."""
    m = causes.compute_from(percall.analyse(matrix(1, extra=200.0)), facts("kvm-6.18"))["mechanisms"]["32-int80"]
    r = m["residual_ns"]
    want = 200.0 * tail_factor()
    assert r["ci_low"] <= want <= r["ci_high"], (r, want)
    assert m["verdict"]["holds"] is True and "left to the path's own work" in m["verdict"]["text"]


@pytest.mark.parametrize("name,why", [
    ("fred-6.18", "FRED is on: fred_int80_emulation() has no int80_is_external() check"),
    ("xen-pv-6.18", "Xen PV: int80_is_external() returns early"),
    ("kvm-6.6", "older than 6.7"),
    ("bare-metal-6.18", "bare metal: the APIC read is a local access, no exit"),
])
def test_no_exit_predicted_where_the_kernel_reads_no_apic_or_none_exits(name, why):
    p = causes.predict(facts(name), "32-int80")
    assert p["value"] == 0 and why in p["why"], p
    doc = causes.compute_from(percall.analyse(matrix(0)), facts(name))
    assert doc["mechanisms"]["32-int80"]["verdict"]["holds"] is True
    assert doc["mechanisms"]["64-int80"]["predicted_exits"]["value"] == 0


def test_the_guest_predicts_one_exit_and_names_the_commit():
    p = causes.predict(facts("kvm-6.18"), "64-int80")
    assert p["value"] == 1 and "55617fb991df" in p["why"]
    assert {"FRED off", "not Xen PV"} <= set(p["facts"])
    assert causes.predict(facts("kvm-6.18"), "64-syscall")["value"] == 0


def test_unknown_facts_give_no_prediction():
    fp = facts("kvm-6.18")
    fp["kernel"] = {}
    assert causes.predict(fp, "32-int80")["value"] is None
    assert causes.predict(None, "32-int80")["value"] is None


def test_bare_metal_says_there_is_no_exit_to_pay():
    doc = causes.compute_from(percall.analyse(matrix(0)), facts("bare-metal-6.18"))
    assert "no exit to pay" in doc["exit_price_ns"]["what"]
    d = Doc()
    present_causes.section(d, {"causes": doc})
    text = " ".join(str(b) for b in d.blocks)
    assert "bare metal, so there is no exit to pay" in text


def test_a_run_without_a_cpuid_cell_has_no_price_and_no_fit():
    """Atlas runs from before the cpuid cell: the price and the fit are unknown, with why,
    instead of a division by nothing; runs since carry both with intervals."""
    runs = atlas.runs()
    assert runs, "the atlas ships runs (data/machines)"
    for _machine, run in runs:
        doc = atlas._percall_xz(run)
        fp = json.loads((run / "fingerprint.json").read_text())
        # Each cell is analysed on its own (against the reference), so only the cells the
        # price and 32-int80's entry rest on are analysed: the returning (causes._find) null,
        # getppid (the body), gettimeofday (the vsyscall premium) and cpuid cells.  The
        # figures asserted below are those of the whole matrix, to the last digit (the
        # price's and 32-int80's entries compared as JSON on the six atlas runs).
        doc["cells"] = [cell for cell in doc["cells"] if (cell.get("shape") or "ret") == "ret"
                        and cell.get("op") in ("null", "getppid", "gettimeofday", "cpuid")]
        c = causes.compute_from(percall.analyse(doc), fp)
        if any(cell["op"] == "cpuid" for cell in doc["cells"]):
            # A run measured since: the price and the fit are figures with intervals.
            p = c["exit_price_ns"]
            assert p["ci_low"] < p["value"] < p["ci_high"]
            e = c["mechanisms"]["32-int80"]["exits_per_call"]
            assert e["ci_low"] < e["value"] < e["ci_high"]
            continue
        assert c["exit_price_ns"]["value"] is None and "no cpuid cell" in c["exit_price_ns"]["why"]
        e = c["mechanisms"]["32-int80"]["exits_per_call"]
        assert e["value"] is None and e["why"]
        assert c["mechanisms"]["32-int80"]["predicted_exits"]["value"] == 1


def matrix_priced(price, extra=0.0, seed=3):
    """matrix(1) on a host whose exit costs `price`."""
    global PRICE
    old, PRICE = PRICE, price
    try:
        return matrix(1, seed=seed, extra=extra)
    finally:
        PRICE = old


def test_the_fleet_names_the_exit_price_when_it_accounts_for_the_spread():
    """Three machines whose int 0x80 ratios differ 4x only because their exits cost 500, 1000
    and 2000 ns: the measured cause accounts for the spread; a fourth whose int 0x80 carries
    2 us the model does not know is said to still differ."""
    from twtools.analyse import fleet
    fp = facts("kvm-6.18")
    ds = [fleet.digest_doc(matrix_priced(p, seed=i), fp, {}, f"h{i}")
          for i, p in enumerate((500.0, 1000.0, 2000.0))]
    e = [x for x in fleet.explain_measured(ds, ["32-int80 null"])][0]
    assert e["n"] == 3 and e["share"] > 0.95 and e["accounts"] is True, e
    assert "accounts for" in fleet.measured_sentence(e)
    ds.append(fleet.digest_doc(matrix_priced(1000.0, extra=2000.0, seed=7), fp, {}, "odd"))
    e = fleet.explain_measured(ds, ["32-int80 null"])[0]
    assert e["accounts"] is False and "still differs" in fleet.measured_sentence(e)
    # One priced machine has no spread to explain, and says so.
    e = fleet.explain_measured(ds[:1], ["32-int80 null"])[0]
    assert e["share"] is None and "too few" in e["why"]
    # Copies of one machine have one ratio: nothing to explain, said in words, never "None".
    e = fleet.explain_measured([dict(ds[0], host=f"c{i}") for i in range(3)],
                               ["32-int80 null"])[0]
    assert e["share"] is None and "no spread" in fleet.measured_sentence(e)
    assert "None" not in fleet.measured_sentence(e)


def test_a_cost_ratio_never_gets_a_negative_lower_bound():
    """The atlas once showed 0.0271x [-0.00537, 0.0595]: a cost whose interval reaches zero."""
    from twtools.analyse import stats
    a = {"median": 2.87, "ci_low": -3.42, "ci_high": 9.15}
    b = {"median": 106.0, "ci_low": 105.0, "ci_high": 107.0}
    assert stats.ratio_summary(a, b)["ci_low"] < 0          # a difference may cross zero
    r = stats.ratio_summary(a, b, positive=True)
    assert r["ci_low"] == 0.0 and r["ci_high"] > r["median"] > 0
