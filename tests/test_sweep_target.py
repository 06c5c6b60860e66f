"""tw sweep --target: the seed and TLPI sweeps measure until every async cell is precise enough
(issue 42, item 3), by the rule whose coverage the stopping does not spoil.

Why it can break: the judge reads a sweep whose raw samples it has taken, so the sweep goes on
without them (snapshot must leave the runs whole); a cell is called met before Stein's plan is
reached, or while its first stage is incomplete; the O_SYNC runs are extended too, though
they lead with their typical figure; the stopping reason is not recorded; `--target` for a
sweep that has no rounds (writev, stdio) is accepted and ignored.  No timing is asserted.
"""
import json
import lzma
import random
import subprocess
import sys

import pytest

from conftest import ROOT

from twtools.analyse import sweeps
from twtools.core import files


def _obj(n_runs, spread, target, seed=3, power=1.0):
    """A sweep file with one async run of 64-libc at 256 and 512 B: n_runs runs of 4 passes,
    each run's floor drawn within `spread` of 1000 ns per call (u ** power of it, u uniform:
    a power below 1 makes the low end rare)."""
    rng = random.Random(seed)
    rows = []
    for size in (256, 512):
        calls = 1000
        real, rnd = [], []
        for r in range(n_runs):
            base = 1000e-9 * calls * (1 + rng.random() ** power * spread)
            for _ in range(4):
                real.append(base * (1 + rng.random() * 0.05))
                rnd.append(r)
        rows.append({"buffsize": size, "calls": calls, "calls_expected": calls,
                     "samples": {"user_s": [x / 4 for x in real], "sys_s": [x / 2 for x in real],
                                 "real_s": real, "round": rnd}})
    return {"schema": "timewrite-sweep/2", "input_bytes": 256000, "mode": "default",
            "sizes": [256, 512], "target": target,
            "runs": [{"variant": "64-libc", "bits": 64, "mechanism": "libc", "mode": "async",
                      "supported": True, "reason": None, "rows": rows}]}


def test_a_cell_is_met_only_once_the_rule_says_so():
    st = sweeps.target_status(sweeps.sweep(_obj(8, 0.004, 0.01)), 0.01)
    # 8 runs, all within the screen: the first stage needs 12, so 4 more at least
    assert st == {"met": 0, "judged": 2, "missing": ["64-libc 256 B", "64-libc 512 B"],
                  "more_runs": 4, "first_stage_incomplete": 2, "wide": 0}
    a = sweeps.sweep(_obj(40, 0.004, 0.01))
    st = sweeps.target_status(a, 0.01)
    assert st["met"] == st["judged"] == 2
    u = a["runs"][0]["rows"][0]["undisturbed"]
    assert u["sequential"]["met"] and u["ci_high"] - u["value"] <= 0.01 * u["value"]
    assert "Stein" in u["method"]


PAIR = ROOT / "tests" / "fixtures" / "machines" / "amd-epyc-zen4-kvm" / \
    "sweep-target-pair-64syscall-32k.json.xz"


def test_a_row_gives_the_figure_over_its_runs_which_holds_the_rerun():
    # Two back-to-back --target 2% seed sweeps on the AMD EPYC guest, 64-syscall at 32 KiB:
    # Stein's own figure (the runs within 5% of the first stage's lowest) was 6747 [6727, 6766]
    # ns, then 7003 [6939, 7066]; over the 70 async rows the two runs' intervals overlapped in
    # 42.  The figure over the runs, its interval holding the host's drift over the sweep,
    # overlapped in 70 of 70 on the same rounds.  Stein's rule still says when the runs are
    # enough, and a row is met only when that interval is within the target too.
    pair = json.loads(lzma.decompress(PAIR.read_bytes()))
    u1, u2 = (sweeps.sweep(pair[r])["runs"][0]["rows"][0]["undisturbed"] for r in ("s1", "s2"))
    s1, s2 = u1["sequential"]["stein"], u2["sequential"]["stein"]
    assert s1["ci_high"] < s2["ci_low"]
    assert u1["ci_low"] <= u2["ci_high"] and u2["ci_low"] <= u1["ci_high"]
    for u, r, st in ((u1, "s1", s1), (u2, "s2", s2)):
        row = pair[r]["runs"][0]["rows"][0]
        plain = sweeps.sweep(dict(pair[r], target=None))["runs"][0]["rows"][0]["undisturbed"]
        assert (u["value"], u["ci_low"], u["ci_high"]) == \
            (plain["value"], plain["ci_low"], plain["ci_high"])
        assert "Stein" in u["method"] and len(set(row["samples"]["round"])) == u["n_rounds"]
        half = (u["ci_high"] - u["ci_low"]) / 2 / u["value"]
        assert u["sequential"]["met"] == (st["met"] and half <= 0.02)


def test_without_a_target_the_figure_is_the_usual_one():
    a = sweeps.sweep(_obj(40, 0.004, None))
    u = a["runs"][0]["rows"][0]["undisturbed"]
    assert "sequential" not in u and u["value"] is not None


@pytest.fixture(scope="module")
def targeted(build, tmp_path_factory):
    out = tmp_path_factory.mktemp("swt") / "o"
    p = subprocess.run([sys.executable, str(ROOT / "scripts" / "tw"), "sweep", "--quick",
                        "--only", "seed", "--variants", "64-libc", "--target", "50%",
                        "--budget", "8s", "--out", str(out)],
                       capture_output=True, text=True, timeout=600)
    return p, out


def test_tw_sweep_target_measures_past_the_mode_and_says_why_it_stopped(targeted):
    p, out = targeted
    assert p.returncode == 0, p.stderr
    raw = files.read_json(out / "sweep_seed.json")
    assert raw["target"] == 0.5 and raw["stopped"] in ("target", "budget")
    runs = {(r["variant"], r["mode"]): r for r in raw["runs"]}
    a_rounds = {len(set(row["samples"]["round"])) for row in runs[("64-libc", "async")]["rows"]}
    s_rounds = {len(set(row["samples"]["round"])) for row in runs[("64-libc", "sync")]["rows"]}
    # the target or the budget decides the async runs, not the mode: met only past Stein's
    # first stage (12 runs), else only once the budget was spent; the O_SYNC ones kept the
    # mode's 3
    if raw["stopped"] == "target":
        assert min(a_rounds) >= 12
    else:
        assert raw["seconds"] >= 8
    assert max(s_rounds) <= 3
    line = [ln for ln in p.stderr.splitlines() if "seed: target ±50%" in ln][-1]
    assert "async cells within it" in line
    st = sweeps.target_status(sweeps.sweep(raw), 0.5)
    assert (st["met"] == st["judged"]) == (raw["stopped"] == "target")


@pytest.mark.parametrize("argv,words", [
    (["--only", "writev", "--target", "2%"], "--target is for the seed and TLPI sweeps"),
    (["--budget", "1m"], "--budget is the time a --target run may take"),
])
def test_target_where_it_cannot_apply_is_one_line(tmp_path, argv, words):
    p = subprocess.run([sys.executable, str(ROOT / "scripts" / "tw"), "sweep", *argv, "--out",
                        str(tmp_path / "o")], capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and words in p.stderr and "Traceback" not in p.stderr
    assert not (tmp_path / "o").exists()
