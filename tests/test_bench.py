"""tw bench: a real --quick run writes a percall.json that follows docs/results-schema.md,
with summaries for supported cells and a reason for unsupported ones.

What can break: syscost's JSON changing under bench.py; the schema drifting (a report
reading percall.json would then fail); summaries losing their CI or sample counts;
an unsupported variant turning into a crash, a silent omission or a fake number; the
CSV export diverging from the JSON; the accuracy block losing its blind-not-zero rule.
Timings are never asserted, only their consistency."""
import csv
import json
import sys

import pytest

from conftest import ROOT, VARIANTS, probe, run

TW = ROOT / "scripts" / "tw"
SUMMARY = {"median", "ci_low", "ci_high", "min", "max", "cv", "n", "unstable"}


def unsupported_variant():
    for v in VARIANTS:
        ok, why = probe.check("syscost", v)
        if not ok:
            return v, why
    return None, None


def supported_variant():
    for v in ("64-syscall", "64-libc"):
        if probe.check("syscost", v)[0]:
            return v
    pytest.skip("neither 64-syscall nor 64-libc runs here")


def check_supported_cell(c):
    assert SUMMARY <= set(c), c
    assert c["reason"] is None
    assert c["n"] == len(c["samples"]) > 0
    eps = 1e-9 * c["max"]      # bootstrap percentiles interpolate: allow rounding
    assert c["min"] - eps <= c["ci_low"] <= c["median"] + eps
    assert c["median"] - eps <= c["ci_high"] <= c["max"] + eps
    assert c["median"] > 0 and c["cv"] >= 0
    assert isinstance(c["unstable"], bool) and ("unstable" in c["flags"]) == c["unstable"]
    assert SUMMARY <= set(c["loop_ns"]) and 0 < c["loop_ns"]["median"] < 100
    assert c["n_calls"] >= c["n"] and c["calls_per_batch"] >= 1


def test_quick_run_writes_percall(build, tmp_path):
    good = supported_variant()
    bad, why = unsupported_variant()
    names = [good] + ([bad] if bad else [])
    out = tmp_path / "res"
    p = run([sys.executable, TW, "bench", "--quick", "--variants", ",".join(names),
             "--out", out], text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    doc = json.loads((out / "percall.json").read_text())
    assert doc["mode"] == "quick" and doc["clock"] in ("tsc", "monotonic")
    assert {"batches", "calls_per_batch", "rounds"} <= set(doc["params"])
    assert doc["params"]["rounds"] == 2
    cells = doc["cells"]
    # Every variant x (null, getppid, write-devnull, write-file 256, write-sync 256).
    assert len(cells) == 5 * len(names)
    ops = {(c["op"], c["size"]) for c in cells if c["variant"] == good}
    assert ops == {("null", None), ("getppid", None), ("write-devnull", 1),
                   ("write-file", 256), ("write-sync", 256)}
    for c in cells:
        assert c["variant"] in names and c["bits"] in (32, 64) and c["abi"] in ("i386", "x86_64")
        if c["variant"] == good:
            assert c["supported"] is True, c
            check_supported_cell(c)
        else:
            assert c["supported"] is False and c["reason"] and c["median"] is None
            assert c["samples"] == [] and c["reason"] == why
    # The CSV is the same table, flat.
    with open(out / "percall.csv") as f:
        rows = list(csv.DictReader(f))
    assert [(r["variant"], r["op"]) for r in rows] == [(c["variant"], c["op"]) for c in cells]
    med = {(c["variant"], c["op"], c["size"]): c["median"] for c in cells}
    for r in rows:
        m = med[(r["variant"], r["op"], int(r["size"]) if r["size"] else None)]
        assert (r["median"] == "") if m is None else float(r["median"]) == pytest.approx(m)
    # The table on stdout: one row per cell, unsupported ones saying why.
    assert f"{good:<12} getppid" in p.stdout
    if bad:
        assert f"unsupported: {why}" in p.stdout
    assert doc["accuracy"] is None      # only with --accuracy


def test_accuracy_block(build, tmp_path):
    """--accuracy fills 'accuracy'; perf bench is a summary or blind with a reason, never 0."""
    out = tmp_path / "acc"
    p = run([sys.executable, TW, "bench", "--quick", "--accuracy", "--variants",
             "64-libc,64-syscall", "--ops", "null,getppid,write-devnull", "--out", out],
            text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    acc = json.loads((out / "percall.json").read_text())["accuracy"]
    for key in ("perf_bench_ns", "ours_getppid_64_ns", "ratio", "within_5pct",
                "write_devnull_64_ns", "loop_ns", "libc_vs_syscall_null_pct", "ci_half_widths",
                "wall_s"):
        assert key in acc, key
    pb = acc["perf_bench_ns"]
    if pb.get("median") is None:
        assert pb["value"] is None and pb["why"] and acc["ratio"] is None
    else:
        assert pb["median"] > 0 and acc["ratio"] > 0 and isinstance(acc["within_5pct"], bool)
    assert acc["wall_is_full_matrix"] is False       # two variants, three ops
    assert {(h["variant"], h["op"]) for h in acc["ci_half_widths"]} == {
        ("64-libc", "null"), ("64-libc", "getppid"), ("64-syscall", "null"),
        ("64-syscall", "getppid")}
    assert "accuracy and precision" in p.stdout and "wall time" in p.stdout


@pytest.mark.parametrize("args", [["--sizes", "abc"], ["--variants", "64-nosuch"],
                                  ["--ops", "fsync"], ["--rounds", "0"]])
def test_bad_usage(build, tmp_path, args):
    p = run([sys.executable, TW, "bench", "--quick", "--out", tmp_path / "x"] + args, text=True)
    assert p.returncode == 2 and "tw bench:" in p.stderr, (args, p.returncode, p.stderr)
