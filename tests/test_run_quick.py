"""The main job end to end: `tw run --quick` measures every stage and writes a report.

This is the README's first command in its quick mode.  It breaks when any stage
stops producing its file, when a stage's output no longer matches what the
report reads, or when the report cannot be rebuilt from the directory alone
(measuring and reporting must stay separate)."""
import json
import os
import subprocess
import sys

from conftest import ROOT

TW = [sys.executable, str(ROOT / "scripts" / "tw")]
STAGE_FILES = ["meta.json", "fingerprint.json", "variants.json", "percall.json",
               "sweep_seed.json", "sweep_tlpi.json", "writev.json", "stdio.json",
               "tracers.json", "latency.json", "attribution.json", "observer.json",
               "census.json", "legs.json", "exitprice.json", "verdict.json", "results.json"]


def test_every_stage_succeeds(quick_run):
    out, p = quick_run
    meta = json.loads((out / "meta.json").read_text())
    failed = {k: v.get("error") for k, v in meta["stages"].items() if not v["ok"]}
    if os.geteuid() == 0:
        assert not failed, f"stages failed: {failed}\n{p.stderr[-3000:]}"
    assert p.returncode == (1 if failed else 0), p.stderr[-3000:]
    assert meta["mode"] == "quick"


def test_writes_every_file(quick_run):
    out, _ = quick_run
    missing = [f for f in STAGE_FILES if not (out / f).exists()]
    assert not missing, f"missing: {missing}"
    merged = json.loads((out / "results.json").read_text())
    assert merged["schema"] == "timewrite-results/1"
    assert {"percall", "fingerprint", "verdict"} <= set(merged)


def test_last_line_is_the_report(quick_run):
    out, p = quick_run
    last = p.stdout.strip().splitlines()[-1]
    # the run worked in the results directory's parent folder (conftest.quick_run)
    assert os.path.samefile(last if os.path.isabs(last) else out.parent / last, out / "report.md")
    assert (out / "report.html").exists()


def test_progress_goes_to_stderr(quick_run):
    _, p = quick_run
    assert "[1/" in p.stderr and "doctor" in p.stderr
    assert "[1/" not in p.stdout


def test_report_rebuilds_identically(quick_run):
    """Rebuilt in place from the stage files alone, the report is byte-identical."""
    out, _ = quick_run
    before = {f: (out / f).read_bytes() for f in ("report.md", "report.html", "verdict.json")}
    for f in before:
        (out / f).unlink()
    p = subprocess.run(TW + ["report", str(out)], capture_output=True, text=True,
                       timeout=300, cwd=ROOT)
    assert p.returncode == 0, p.stderr
    for f, data in before.items():
        assert (out / f).read_bytes() == data, f"{f} differs after rebuilding"


def test_verdict_is_one_of_three(quick_run):
    out, _ = quick_run
    v = json.loads((out / "verdict.json").read_text())
    assert v["verdict"] in ("supported", "refuted", "inconclusive")
    assert v["sentence"] and v["sentence"] in (out / "report.md").read_text()


def test_the_run_prices_the_exit_again_at_its_end(quick_run):
    """The exit-price stage ran last, measured cpuid for real, and the analysis gives the
    price's move over the run or says why it cannot (analyse/exitdrift.py): never a number
    from a stage that met no fast state."""
    out, _ = quick_run
    from twtools.analyse import results
    meta = json.loads((out / "meta.json").read_text())
    assert list(meta["stages"])[-1] == "exit-price"
    data = results.load(out)
    raw = data["raw"]["exitprice"]
    cpuid = [c for c in raw["cells"] if c["op"] == "cpuid"]
    assert len(cpuid) == 1 and cpuid[0]["rounds"]
    assert raw["host_state"]["stopped"] in ("target", "budget")
    ep = data["exitprice"]
    if ep["move"] is None:
        assert ep["why"]
    else:
        assert ep["why"] is None and ep["end"]["value_ns"] > 0
        widened = [c for c in data["percall"]["cells"] if c.get("exit_drift")]
        assert len(widened) == ep["widened"]
