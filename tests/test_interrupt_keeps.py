"""An interrupted long run keeps what it measured: `tw bench` (with and without --target),
`tw sweep` and `tw legs`, stopped by SIGTERM or SIGINT mid-run, leave their raw rounds so far
in their stage file, marked interrupted, and a meta.json that says so; `tw report` and
`tw compare` read them and say so (issue 61, finding 9; the README's exit-status table
promises "the results directory marked interrupted").

Why it can break: a runner that writes its stage file only at its end (as tw bench did: a
Ctrl-C at minute 9 of a 10-minute --target run left an empty directory) loses every round; a
stage command that writes no meta.json leaves a directory tw report refuses; an interrupted
stage taken as unusable makes tw compare decide nothing on it.  The signals are real: each
command runs as its own process, and the signal is sent once its progress shows a few
rounds done.  Nothing about a time is asserted.
"""
import json
import os
import signal
import subprocess
import time

import pytest

from conftest import ROOT, need_root, need_tool  # noqa: F401
from faults_util import TW, env

from twtools.analyse import results, schema


def _stop_after(args, needle, count, sig, tmp_path):
    """Run `tw ARGS`, send sig once `needle` has appeared `count` times on its stderr; the
    process's return code and stderr."""
    err_path = tmp_path / "stderr.txt"
    with open(err_path, "w") as err:
        p = subprocess.Popen(TW + [str(a) for a in args], cwd=ROOT, stdout=subprocess.DEVNULL,
                             stderr=err, text=True, start_new_session=True,
                             env=env(TMPDIR=tmp_path))
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and p.poll() is None:
            if err_path.read_text().count(needle) >= count:
                break
            time.sleep(0.05)
        assert p.poll() is None, f"it ended before the signal: {err_path.read_text()[-2000:]}"
        if sig == signal.SIGINT:
            os.killpg(p.pid, sig)       # Ctrl-C: the terminal signals the foreground group
        else:
            os.kill(p.pid, sig)
        p.wait(timeout=120)
    return p.returncode, err_path.read_text()


def _meta(out, stage, sig, kept):
    m = json.loads((out / "meta.json").read_text())
    schema.check(schema.META, m)
    assert m["state"] == "interrupted" and m["signal"] == signal.Signals(sig).name, m
    st = m["stages"][stage]
    assert st["interrupted"] and not st["ok"] and st["kept"] == kept, st
    return m


def _ends_with_one_line(rc, err, sig, out, kept):
    assert rc == 128 + sig, (rc, err[-2000:])
    assert "Traceback" not in err, err[-3000:]
    last = err.strip().splitlines()[-1]
    assert f"interrupted by {signal.Signals(sig).name}" in last, last
    assert str(out) in last and "marked interrupted" in last and kept in last, last


def _report_says(out, *needles):
    p = subprocess.run(TW + ["report", str(out)], cwd=ROOT, capture_output=True, text=True,
                       timeout=600, env=env())
    assert p.returncode == 0, p.stderr[-2000:]
    text = (out / "report.md").read_text()
    for n in needles:
        assert n in text, (n, text[:3000])
    return text


@pytest.mark.parametrize("target,sig", [(True, signal.SIGTERM), (False, signal.SIGINT)],
                         ids=["target-SIGTERM", "default-SIGINT"])
def test_an_interrupted_bench_keeps_its_rounds(build, tmp_path, target, sig):
    out = tmp_path / "bench"
    args = ["bench", "--variants", "64-syscall", "--ops", "null,getppid", "--out", out]
    args += ["--target", "0.05%", "--budget", "5m"] if target else ["--rounds", "400"]
    rc, err = _stop_after(args, "bench: round ", 4, sig, tmp_path)
    _ends_with_one_line(rc, err, sig, out, "percall.json")
    _meta(out, "bench", sig, "percall.json")
    doc = json.loads((out / "percall.json").read_text())
    schema.check(schema.PERCALL, doc)
    cut = doc["interrupted"]
    assert cut["signal"] == signal.Signals(sig).name and cut["rounds"] >= 3, cut
    assert doc["host_state"]["stopped"] == "interrupted"
    ref = next(c for c in doc["cells"] if c["op"] == "null" and c["shape"] == "ret")
    assert {r["round"] for r in ref["rounds"]} >= set(range(cut["rounds"]))
    # tw report reads the rounds and says they are an interrupted matrix's
    _report_says(out, "was interrupted by", "are kept (percall.json) and shown",
                 "The matrix was interrupted by")
    data = results.load(out)
    assert data["percall"]["measured"] > 0
    assert results.stage_problem(data, "percall") is None
    # tw compare decides on the kept rounds, and says the run was interrupted
    p = subprocess.run(TW + ["compare", str(out), str(out), "--json"], cwd=ROOT,
                       capture_output=True, text=True, timeout=600, env=env())
    assert p.returncode == 0, p.stderr[-2000:]
    decided = [d for d in json.loads(p.stdout)["decisions"] if d["op"] == "null"]
    assert decided and all(d["no_decision"] is None for d in decided), decided[:2]
    page = tmp_path / "cmp"
    p = subprocess.run(TW + ["compare", str(out), str(out), "--out", str(page)], cwd=ROOT,
                       capture_output=True, text=True, timeout=600, env=env())
    assert p.returncode == 0 and "was interrupted by" in (page / "compare.md").read_text()


def test_an_interrupted_sweep_keeps_its_rounds(build, tmp_path):
    out = tmp_path / "sweep"
    rc, err = _stop_after(["sweep", "--only", "seed", "--quick", "--variants", "64-libc",
                           "--reps", "5000", "--out", out],
                          "seed sweep: round ", 3, signal.SIGTERM, tmp_path)
    _ends_with_one_line(rc, err, signal.SIGTERM, out, "sweep_seed.json")
    _meta(out, "seed-sweep", signal.SIGTERM, "sweep_seed.json")
    doc = json.loads((out / "sweep_seed.json").read_text())
    assert doc["interrupted"]["signal"] == "SIGTERM" and doc["stopped"] == "interrupted"
    assert doc["rounds_done"] >= 3
    rows = [r for run in doc["runs"] if run["mode"] == "async" for r in run["rows"]]
    assert rows and all(len(set(r["samples"]["round"])) >= 3 for r in rows)
    _report_says(out, "are kept (sweep_seed.json)", "This sweep was interrupted by SIGTERM")


@pytest.mark.root
def test_an_interrupted_legs_keeps_its_blocks(build, tmp_path):
    need_root()
    need_tool("bpftrace")
    out = tmp_path / "legs"
    rc, err = _stop_after(["legs", "--variants", "64-syscall,32-vdso", "--target", "0.01%",
                           "--budget", "5m", "--out", out],
                          "legs: block ", 3, signal.SIGTERM, tmp_path)
    _ends_with_one_line(rc, err, signal.SIGTERM, out, "legs.json")
    _meta(out, "legs", signal.SIGTERM, "legs.json")
    doc = json.loads((out / "legs.json").read_text())
    schema.check(schema.LEGS, doc)
    done = doc["interrupted"]["blocks"]
    assert done >= 3 and doc["stopped"] == "interrupted"
    for v in doc["variants"].values():
        # whole blocks only: each kept block has both twins of every mechanism
        for side in ("traced", "untraced"):
            assert sorted(r["block"] for r in v[side]) == list(range(done)), side
    _report_says(out, "are kept (legs.json)")
