"""tw attribute on real runs (quick mode, two variants): the parts add up by
construction where they must, every figure has an interval, blind is null."""
import json

import pytest

from conftest import need_root, need_tool
from twtools.machine import probe
from twtools.measure import attribution


@pytest.fixture(scope="module")
def doc(build, tmp_path_factory):
    need_root()
    need_tool("bpftrace")
    vs = [v for v in ("64-syscall", "32-int80") if probe.check("syscost", v)[0]]
    if not vs:
        pytest.skip("neither 64-syscall nor 32-int80 works here")
    out = tmp_path_factory.mktemp("attr")
    d = attribution.attribute(out, mode="quick", variants=vs)
    assert json.loads((out / "attribution.json").read_text())["rows"] == \
        json.loads(json.dumps(d["rows"]))
    assert (out / "attribution.csv").read_text().count("\n") == len(d["rows"]) + 1
    return d


def test_rows_cover_ops(doc):
    ops = {(r["variant"], r["op"]) for r in doc["rows"] if r["supported"]}
    for v in {r["variant"] for r in doc["rows"]}:
        assert {(v, o) for o, _ in attribution.OPS} <= ops


def test_sums_and_intervals(doc):
    for r in doc["rows"]:
        if not r["supported"]:
            continue
        for k in ("total_ns", "loop_ns", "entry_exit_ns"):
            s = r[k]
            assert s["ci_low"] <= s["median"] <= s["ci_high"], (r["variant"], r["op"], k)
        assert r["entry_exit_ns"] == next(x["total_ns"] for x in doc["rows"]
                                          if x["variant"] == r["variant"] and x["op"] == "null")
        b = r["body_ns"]
        assert b.get("median") is not None, b.get("why")
        # residual = total - entry/exit - body, exactly
        assert r["residual_ns"]["median"] == pytest.approx(
            r["total_ns"]["median"] - r["entry_exit_ns"]["median"] - b["median"], abs=1e-6)
        if r["op"] == "null":
            assert r["consistent"] is None and b["median"] == pytest.approx(0, abs=1e-9)
        else:
            lo, hi = r["residual_ns"]["ci_low"], r["residual_ns"]["ci_high"]
            assert r["consistent"] == (lo <= 0 <= hi)


def test_waiting_only_for_writes(doc):
    for r in doc["rows"]:
        if not r["supported"]:
            continue
        if r["op"] in ("write-sync", "write-file"):
            assert r["waiting_ns"]["n"] >= 2
        else:
            assert r["waiting_ns"] is None
    for r in doc["rows"]:
        if r["supported"] and r["op"] != "null":
            # the body is the traced interval minus the traced null interval
            assert r["body_ns"]["median"] == pytest.approx(
                r["traced_interval_ns"]["median"] - r["traced_null_interval_ns"]["median"])
