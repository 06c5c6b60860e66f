"""tw attribute on real runs (quick mode, two variants): the stage keeps traced bodies raw,
and the analysis composes each call so that the parts add up by construction, every figure
has an interval, and a blind part is null with its reason.

Why it can break: body.bt's maps changing under the parser; the wrong ABI's syscall number
picked for a body; the analysis subtracting the wrong null (another mechanism's, or the ret
shape where a jmp shape exists, which would book the post-return penalty as kernel work)."""
import json

import pytest

from conftest import need_root, need_tool
from twtools.analyse import attribution as analyse, percall
from twtools.machine import probe, registry
from twtools.measure import attribution, bench


@pytest.fixture(scope="module")
def doc(build, tmp_path_factory):
    need_root()
    need_tool("bpftrace")
    vs = [v for v in ("64-syscall", "32-int80") if probe.check("syscost", v)[0]]
    if not vs:
        pytest.skip("neither 64-syscall nor 32-int80 works here")
    out = tmp_path_factory.mktemp("attr")
    pc = bench.run_matrix(out, mode="quick", variants=vs, ops=[o for o, _ in attribution.OPS],
                          sizes=[256])
    raw = attribution.attribute(out, mode="quick", variants=vs)
    on_disk = json.loads((out / "attribution.json").read_text())
    assert on_disk["bodies"] == json.loads(json.dumps(raw["bodies"]))
    assert "rows" not in on_disk                    # raw only: the analysis composes
    return raw, analyse.analyse(raw, percall.analyse(pc))


def test_bodies_are_one_sample_per_process(doc):
    raw, _ = doc
    for b in raw["bodies"]:
        want = 2 if b["op"] == "write-sync" else attribution.PLAN["quick"]["body_runs"]
        assert len(b["samples_ns"]) == want and all(x > 0 for x in b["samples_ns"])


def test_rows_cover_ops(doc):
    _, a = doc
    ops = {(r["variant"], r["op"]) for r in a["rows"] if r["supported"]}
    for v in {r["variant"] for r in a["rows"]}:
        assert {(v, o) for o, _ in attribution.OPS} <= ops


def test_sums_and_intervals(doc):
    _, a = doc
    for r in a["rows"]:
        if not r["supported"]:
            continue
        for k in ("total_ns", "entry_exit_ns"):
            s = r[k]
            assert s["ci_low"] <= s["median"] <= s["ci_high"], (r["variant"], r["op"], k)
        want_shape = "jmp" if "jmp" in registry.get(r["variant"]).shapes else \
            "inline" if "inline" in registry.get(r["variant"]).shapes else "ret"
        assert r["entry_exit_shape"] == want_shape
        b, pen = r["body_ns"], r["penalty_ns"]
        assert b.get("median") is not None, b.get("why")
        if r["op"] == "null":
            assert r["consistent"] is None and b["median"] == 0
            continue
        expect = r["total_ns"]["median"] - r["entry_exit_ns"]["median"] - b["median"] \
            - (pen["median"] if pen.get("median") is not None else 0)
        assert r["residual_ns"]["median"] == pytest.approx(expect, abs=1e-6)
        lo, hi = r["residual_ns"]["ci_low"], r["residual_ns"]["ci_high"]
        assert r["consistent"] == (lo <= 0 <= hi)
        if want_shape == "ret":
            assert pen.get("median") is None and "post-return penalty" in r["note"]


def test_waiting_only_for_writes_and_body_is_a_difference(doc):
    _, a = doc
    for r in a["rows"]:
        if not r["supported"]:
            continue
        if r["op"] in ("write-sync", "write-file"):
            assert r["waiting_ns"]["n"] >= 2
        else:
            assert r["waiting_ns"] is None
        if r["op"] != "null":
            assert r["body_ns"]["median"] == pytest.approx(
                r["traced_interval_ns"]["median"] - r["traced_null_interval_ns"]["median"])
