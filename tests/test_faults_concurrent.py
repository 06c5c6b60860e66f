"""Runs at the same time, and --out onto a directory that exists: a results directory belongs
to one run, whole.

Why it can break: directory names with one-second resolution and mkdir(exist_ok=True) put two
runs started in the same second into one directory, where one deletes the other's scratch
files and both meta.json writes race; --out onto an existing directory merges the old run's
files into the new one's report; --force that deletes whatever it is pointed at deletes a
user's directory.  Checked with real runs started together, through a barrier, so that they
really start in the same second.
"""
import os
import subprocess
import threading

import pytest

from conftest import ROOT
from faults_util import TW, env, meta, one_line_error, run_dirs, snapshot, tw

STAGES = "doctor,variants,writev,stdio"      # the two stages with scratch files, and cheap


def test_runs_started_together_get_their_own_directories(tmp_path, build):
    root = tmp_path / "results"
    n = 3
    gate = threading.Barrier(n)
    procs = [None] * n

    def start(i):
        gate.wait()
        procs[i] = subprocess.run(TW + ["run", "--quick", "--only", STAGES, "--no-report"],
                                  capture_output=True, text=True, timeout=600, cwd=ROOT,
                                  env=env(TW_RESULTS=root))
    threads = [threading.Thread(target=start, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for p in procs:
        assert p.returncode == 0, p.stderr[-2000:]
    dirs = [d for d in run_dirs(root) if d.name != "latest"]
    assert len(dirs) == n, dirs
    # each run printed its own directory, and each directory is one whole complete run
    printed = sorted(p.stdout.strip().splitlines()[-1] for p in procs)
    assert printed == sorted(str(d) for d in dirs)
    pids = set()
    for d in dirs:
        m = meta(d)
        assert m["state"] == "complete" and all(v["ok"] for v in m["stages"].values()), m
        assert set(m["stages"]) == set(STAGES.split(","))
        pids.add(m["pid"])
        for f in ("writev.json", "stdio.json"):
            assert (d / f).exists(), f"{d.name}: {f} missing: another run deleted it?"
        assert not (d / ".sweep-scratch").exists()
    assert len(pids) == n
    assert os.readlink(root / "latest") in {d.name for d in dirs}


def test_out_onto_an_existing_directory_is_refused(tmp_path, build):
    """--out DIR that exists: refused before anything is measured, with what to do."""
    d = tmp_path / "old"
    d.mkdir()
    (d / "sweep_seed.json").write_text("{}")
    before = snapshot(d)
    p = tw("run", "--quick", "--only", "doctor", "--no-report", "--out", d)
    one_line_error(p, f"--out {d} already exists", "--force")
    assert p.returncode == 2
    assert "[1/" not in p.stderr
    assert snapshot(d) == before


def test_force_replaces_a_results_directory_never_merges(tmp_path, build):
    d = tmp_path / "run"
    p = tw("run", "--quick", "--only", "doctor,variants", "--no-report", "--out", d)
    assert p.returncode == 0, p.stderr
    (d / "sweep_seed.json").write_text('{"runs": []}')   # the old run's extra file
    first = meta(d)["created_utc"], meta(d)["pid"]
    p = tw("run", "--quick", "--only", "doctor", "--no-report", "--out", d, "--force")
    assert p.returncode == 0, p.stderr
    assert not (d / "sweep_seed.json").exists(), "merged: the old run's file is still there"
    assert not (d / "variants.json").exists()
    assert (meta(d)["created_utc"], meta(d)["pid"]) != first
    assert list(tmp_path.glob(".run.replaced-*")) == []


@pytest.mark.parametrize("what", ["user-directory", "file", "symlink"])
def test_force_refuses_what_is_not_a_results_directory(tmp_path, what):
    """--force deletes only what tw made (a results directory) or an empty directory."""
    d = tmp_path / "target"
    if what == "user-directory":
        d.mkdir()
        (d / "thesis.tex").write_text("years of work\n")
        needle = "--force replaces only a results directory or an empty one"
    elif what == "file":
        d.write_text("x")
        needle = "exists and is not a directory"
    else:
        (tmp_path / "real").mkdir()
        d.symlink_to(tmp_path / "real")
        needle = "is a symbolic link"
    before = snapshot(tmp_path)
    p = tw("run", "--quick", "--only", "doctor", "--no-report", "--out", d, "--force")
    one_line_error(p, needle)
    assert p.returncode == 2
    assert snapshot(tmp_path) == before
