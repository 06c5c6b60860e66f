"""tw run --target reaches the seed and TLPI sweeps (issue 62, item 6): their rounds go on past
the plan, at the sizes the judge names, until their vs_ref rows are within the target, or more
rounds narrow nothing, or the budget ends; and the run records the target it measured to.

Why it can break: tw run takes --target and drops it on the way to its stages (the sweeps
then measure the mode's rounds and say nothing); the sweeps measured together
(measure.sweep.Together, as tw run measures them) ignore it, or add rounds to the O_SYNC runs,
which lead with their typical figure; a round past the plan measures the mechanisms at
different sizes, so that no vs_ref pairs them (a ratio needs every mechanism at its size in
the same round); the stopping reason disagrees with the judge's reading of the file;
meta.json's command to measure again leaves the target out; or --target and --budget where
they cannot apply give a traceback or start measuring.  No timing is asserted beyond the
budget being a lower bound of a stop at the budget.
"""
import subprocess
import sys

import pytest

from conftest import ROOT

from twtools.cli import stages
from twtools.core import files

TW = [sys.executable, str(ROOT / "scripts" / "tw"), "run"]


@pytest.fixture(scope="module")
def targeted(build, tmp_path_factory):
    out = tmp_path_factory.mktemp("runt") / "o"
    p = subprocess.run(TW + ["--quick", "--only", "doctor,variants,seed-sweep,tlpi-sweep",
                             "--target", "0.5%", "--budget", "10s", "--no-report",
                             "--out", str(out)],
                       capture_output=True, text=True, timeout=900)
    return p, out


def test_the_sweeps_measure_to_the_run_target(targeted):
    p, out = targeted
    assert p.returncode == 0, p.stderr
    meta = files.read_json(out / "meta.json")
    assert meta["target"] == 0.005 and meta["target_budget_s"] == 10
    assert meta["budget_s"] is None
    assert "--target 0.5%" in meta["command"] and "--budget 10s" in meta["command"]
    for stem, label in (("sweep_seed", "seed sweep"), ("sweep_tlpi", "TLPI sweep")):
        raw = files.read_json(out / f"{stem}.json")
        assert raw["target"] == 0.005 and raw["budget_s"] == 10
        assert raw["stopped"] in ("target", "reach", "budget")
        met, words, sizes = stages.sweep_judge(0.005)(raw)
        if raw["stopped"] == "target":
            assert met
        elif raw["stopped"] == "reach":
            assert not met and sizes == []
        else:
            assert raw["seconds"] >= 10
        # the progress line said how many vs_ref rows are within the target
        assert any(ln.startswith(f"tw: {label}: after ") and "vs_ref rows within ±0.5%" in ln
                   for ln in p.stderr.splitlines()), p.stderr
        plan = raw["rounds_by_mode"]
        for run in raw["runs"]:
            if not run["supported"]:
                continue
            for row in run["rows"]:
                n = len(set(row["samples"]["round"]))
                if run["mode"] == "sync":
                    assert n == plan["sync"]
                else:
                    assert n >= plan["async"]
        # each round past the plan measured every async mechanism at the same sizes
        extra = {}
        for run in raw["runs"]:
            if run["mode"] != "async" or not run["supported"]:
                continue
            at = {}
            for row in run["rows"]:
                for r in set(row["samples"]["round"]):
                    if r >= plan["async"]:
                        at.setdefault(r, set()).add(row["buffsize"])
            extra[run["variant"]] = at
        assert len({tuple(sorted((r, tuple(sorted(s))) for r, s in at.items()))
                    for at in extra.values()}) == 1
        if raw["rounds_done"] > raw["rounds"]:
            assert all(len(at) == raw["rounds_done"] - raw["rounds"] for at in extra.values())


@pytest.mark.parametrize("argv,words", [
    (["--only", "doctor,bench", "--target", "2%"], "--target is for the seed and TLPI sweeps"),
    (["--budget", "1m"], "--budget is the time a --target run may take"),
    (["--target", "nine"], "is not a precision"),
])
def test_target_where_it_cannot_apply_is_one_line(tmp_path, argv, words):
    p = subprocess.run(TW + [*argv, "--out", str(tmp_path / "o")], capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 2 and words in p.stderr and "Traceback" not in p.stderr
    assert not (tmp_path / "o").exists()
