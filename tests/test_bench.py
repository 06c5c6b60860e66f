"""tw bench: a real --quick run writes percall.json with every round raw, and prints the
analysed matrix.

What can break: syscost's JSON changing under the benchmark; the measuring stage summarising
again (then a fix to the statistics would not reach old results); rounds losing their order
or their time stamps (the drift estimate needs both); an unsupported variant turning into a
crash, a silent omission or a fake number; the reference cell missing from a round (every
ratio needs it); the accuracy figures losing their blind-not-zero rule.  Timings are never
asserted, only their consistency."""
import json
import sys

import pytest

from conftest import ROOT, judged, run
from twtools.analyse import percall
from twtools.measure import bench

TW = ROOT / "scripts" / "tw"
SUMMARY = {"median", "ci_low", "ci_high", "min", "max", "cv", "n", "unstable"}


def ruled_out():
    """A variant the oracle rules out here, and its row; (None, None) when there is none."""
    for v, r in judged("syscost").items():
        if r["status"] == "unsupported":
            return v, r
    return None, None


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    bad, _ = ruled_out()
    names = ["64-syscall", "64-libc"] + ([bad] if bad else [])
    out = tmp_path_factory.mktemp("bench") / "res"
    p = run([sys.executable, TW, "bench", "--quick", "--variants", ",".join(names),
             "--out", out], text=True, timeout=600)
    return names, out, p


def test_quick_run_writes_raw_rounds(build, quick):
    names, out, p = quick
    assert p.returncode == 0, p.stderr
    doc = json.loads((out / "percall.json").read_text())
    assert doc["schema"] == "timewrite-percall/2"
    assert doc["mode"] == "quick" and doc["clock"] in ("tsc", "monotonic")
    R = bench.MODES["quick"]["rounds"]
    assert doc["params"]["rounds"] == R
    assert doc["reference"] == {"variant": "64-syscall", "op": "null", "shape": "ret"}
    good = {(c["op"], c["size"]) for c in doc["cells"] if c["variant"] == "64-syscall"}
    assert good == {("null", None), ("getppid", None), ("write-devnull", 1),
                    ("write-file", 256), ("write-sync", 256), ("gettimeofday", None),
                    ("clock_gettime", None), ("time", None),
                    # the price of one VM exit (analyse/causes.py), measured once per round
                    ("cpuid", None)}
    ref = doc["reference"]
    for c in doc["cells"]:
        assert not SUMMARY & set(c), "the measuring stage must not summarise"
        if c["supported"]:
            rounds = [r["round"] for r in c["rounds"]]
            if (c["variant"], c["op"], c["shape"]) == (ref["variant"], ref["op"], ref["shape"]):
                # the reference runs several times a round, so every cell has one close by
                assert sorted(set(rounds)) == list(range(R)) and len(rounds) > R
            elif bench.headline(percall.key(c)):
                # the headline's block runs again while few of its processes met the fast
                # state (issue 62): a round holds one block at least, at most 1 + repeats
                assert sorted(set(rounds)) == list(range(R)) and rounds == sorted(rounds)
                assert len(rounds) <= R * (1 + bench.HEADLINE_REPEATS)
            else:
                assert rounds == list(range(R))
            times = [r["t_s"] for r in c["rounds"]]
            assert times == sorted(times)
            for r in c["rounds"]:
                want = doc["params"]["sync_batches"] if c["op"] == "write-sync" else doc["params"]["batches"]
                # syscost measures one more batch per disturbed one, up to as many as asked.
                want += min(sum(r["disturbed"]), want)
                assert len(r["samples_ns"]) == len(r["loop_ns"]) == len(r["raw_ns"]) == want
                assert r["calls_per_batch"] >= 1


def test_unsupported_cells_say_why(build, quick):
    names, out, p = quick
    bad, row = ruled_out()
    if bad is None:
        pytest.skip("the oracle rules out no mechanism on this machine")
    doc = json.loads((out / "percall.json").read_text())
    cells = [c for c in doc["cells"] if c["variant"] == bad]
    assert cells and all(not c["supported"] and c["status"] == "unsupported" for c in cells)
    assert all(c["reason"] == row["reason"] and c["rounds"] == [] for c in cells)
    assert f"unsupported: {row['reason']}" in p.stdout


def test_analysis_of_the_run(build, quick):
    names, out, p = quick
    doc = json.loads((out / "percall.json").read_text())
    a = percall.analyse(doc)
    ref = percall.find(a, "64-syscall", "null")
    assert ref["ratio"]["median"] == pytest.approx(1.0)      # the reference against itself
    for c in a["cells"]:
        if not c["supported"]:
            continue
        is_ref = (c["variant"], c["op"], c["shape"]) == ("64-syscall", "null", "ret")
        R = bench.MODES["quick"]["rounds"]
        # the reference runs several times a round, and so may the headline's block (issue 62)
        assert SUMMARY <= set(c) and (c["n_rounds"] > R if is_ref else c["n_rounds"] >= R
                                      if bench.headline(percall.key(c)) else c["n_rounds"] == R)
        assert c["ci_low"] <= c["median"] <= c["ci_high"]
        assert c["ci_stat_low"] <= c["median"] <= c["ci_stat_high"]
        assert c["ratio"]["median"] > 0 and 0 < c["loop_ns"]["median"] < 100
        assert c["primary"] in ("undisturbed", "typical")
        assert c["undisturbed_ratio"]["median"] > 0
        u = c["undisturbed"]
        if c["undisturbed_ns"] is None:
            # Quiet first (issue 42): the host allowed too few quiet moments for this cell, so
            # it has no undisturbed figure, says why, and leads with the typical one.
            assert not u["host"]["used"] and "fast state" in u["why"]
            assert c["primary"] == "typical" and u["lowest_ns"] > 0
            continue
        # Both figures: the undisturbed cost lies at or below the typical one, with an interval.
        assert c["undisturbed_ci_low"] <= c["undisturbed_ns"] <= c["undisturbed_ci_high"]
        if not (u.get("host") or {}).get("used"):
            # the fastest 20% of the floors of every process: below their medians by
            # construction (a quiet-first figure rests on a subset, so it is not)
            assert c["undisturbed_ns"] <= c["median"] * 1.001
    assert ref["undisturbed_ratio"]["median"] == pytest.approx(1.0)
    assert "64-syscall   getppid" in p.stdout


def test_accuracy_figures(build, tmp_path):
    """--accuracy keeps perf bench's raw samples and prints the figures; perf bench is a
    summary or blind with a reason, never 0."""
    out = tmp_path / "acc"
    p = run([sys.executable, TW, "bench", "--quick", "--accuracy", "--variants",
             "64-libc,64-syscall", "--ops", "null,getppid,write-devnull", "--out", out],
            text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    doc = json.loads((out / "percall.json").read_text())
    pb = doc["perf_bench"]
    assert pb["loops"] > 0 and (pb["samples"] or pb["why"])
    acc = percall.accuracy(doc, percall.analyse(doc))
    if acc["perf_bench_ns"].get("median") is None:
        assert acc["perf_bench_ns"]["why"] and acc["perf_over_twin"] is None
    else:
        assert acc["perf_over_twin"]["median"] > 0 and isinstance(acc["within_5pct"], bool)
    assert acc["full_matrix"] is False
    assert {(h["variant"], h["op"]) for h in acc["fast_cells"]} == {
        (v, o) for v in ("64-libc", "64-syscall") for o in ("null", "getppid", "write-devnull")}
    assert "accuracy and precision" in p.stdout and "wall time" in p.stdout
