"""tw ab runs each side from several fresh copies of its binary, and its interval replicates
over them (issue 46).

Why it can break: the same bytes cost about 1% more or less depending on which file they run
from (where the file's pages landed), for as long as the file lives.  An A/A run of tw ab
between two byte-identical files called "B faster" in 9 of 10 runs on an AMD EPYC guest: its
interval, a jackknife over rounds of one file a side, held nothing of the files' placement.
If the copies stop being fresh files, stop being spread over the rounds, or the analysis stops
replicating over them, a placement difference reads as a difference between builds again.
The figures of live runs are the host's noise and are never asserted here; the statistics are
checked on synthetic rounds with a known placement spread.

Where the copies go (issue 61): a private folder outside the build tree and the package's files
(root's `tw ab` of the installed package wrote them into /usr/lib/timewrite/build, dpkg's
tree, and a read-only build was refused although nothing is written there), named by the
run's pid and start time so that the next run sweeps what a SIGKILL left behind (8.9 MB for
--copies 64, for ever), removed whole when a copy fails on a full disk, and never named in a
message: a broken B build is named as the user's binary.
"""
import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from conftest import ROOT, need_supported, run

sys.path.insert(0, str(ROOT / "scripts"))
from twtools.analyse import compare, stats  # noqa: E402
from twtools.measure import ab, syscost  # noqa: E402

TW = ROOT / "scripts" / "tw"


def _rounds(rng, level, n_rounds, batches=4, noise=0.004, slow_share=0.5):
    """n_rounds processes whose placement puts each one's floor at `level` (one level for
    all, or one per round): each round's batches scatter a little above it, and half the
    rounds meet a slow host (+5..30%).  Drawn as one array: a coverage test below draws
    80 000 rounds."""
    level = np.broadcast_to(np.asarray(level, dtype=float), (n_rounds,))
    host = 1 + np.where(rng.random(n_rounds) < slow_share, rng.uniform(0.05, 0.3, n_rounds), 0.0)
    batch = 1 + np.abs(rng.normal(0, noise, (n_rounds, batches)))
    return ((level * host)[:, None] * batch).tolist()


def _aa(rng, copies, rounds, placement=0.007, grouped=True):
    """One synthetic A/A run: both sides the same program, each copy of each side placed at
    1 + N(0, placement); round r from copy r % copies.  Returns the B/A summary."""
    a_lv = 100 * (1 + rng.normal(0, placement, copies))
    b_lv = 100 * (1 + rng.normal(0, placement, copies))
    copy_of = np.arange(rounds) % copies
    a = _rounds(rng, a_lv[copy_of], rounds)
    b = _rounds(rng, b_lv[copy_of], rounds)
    if grouped:
        return stats.grouped_ratio([[b[r] for r in range(g, rounds, copies)] for g in range(copies)],
                                   [[a[r] for r in range(g, rounds, copies)] for g in range(copies)])
    return stats.undisturbed_ratio(b, a)


def test_one_file_a_side_calls_placement_a_difference_and_copies_do_not():
    # One copy a side: the two files' placement difference is a constant the rounds cannot
    # see, so a good share of A/A runs "find" it.  Eight copies a side: about 5% of runs.
    # Eight copies: 200 runs, so that the 8% bound sits two standard errors above the 5% a
    # sound interval misses by.  One copy: 50 runs decide "more than 30%" as surely (199 of
    # 200 missed; were it even 90%, 15 or fewer misses of 50 would have a chance of 5e-24).
    rng = np.random.default_rng(46)
    n, n_one = 200, 50
    eight = sum(1 for _ in range(n) if not (r := _aa(rng, 8, 200))["ci_low"] <= 1 <= r["ci_high"])
    one = sum(1 for _ in range(n_one)
              if not (r := _aa(rng, 1, 200, grouped=False))["ci_low"] <= 1 <= r["ci_high"])
    assert one > 0.3 * n_one, one
    assert eight <= 0.08 * n, eight


def test_no_placement_keeps_the_interval_near_the_rounds_own():
    # Without a placement spread, replicating over copies costs only the t quantile's few
    # degrees of freedom: the interval stays within about twice the rounds' jackknife.
    rng = np.random.default_rng(7)
    w_g, w_r = [], []
    for _ in range(30):
        g = _aa(rng, 8, 200, placement=0.0)
        r = _aa(rng, 8, 200, placement=0.0, grouped=False)
        w_g.append(g["ci_high"] - g["ci_low"])
        w_r.append(r["ci_high"] - r["ci_low"])
    assert np.median(w_g) < 2.2 * np.median(w_r)


def test_placement_term_is_reported():
    rng = np.random.default_rng(3)
    big = _aa(rng, 12, 600, placement=0.02)
    none = _aa(rng, 12, 600, placement=0.0)
    assert big["placement_rel"] > 0.01
    assert none["placement_rel"] < big["placement_rel"]
    assert big["groups"] == 12


def test_fewer_than_two_groups_gives_no_ratio():
    assert stats.grouped_ratio([[[1.0, 1.1]]], [[[1.0, 1.2]]]) is None


def test_decision_from_copies_in_ab_json():
    # compare.ab reads the copy of each round and decides over the copies
    rng = np.random.default_rng(11)
    rounds = 64
    a = [{"round": r, "copy": r % 8, "samples_ns": x} for r, x in
         enumerate(_rounds(rng, 100.0, rounds))]
    b = [{"round": r, "copy": r % 8, "samples_ns": x} for r, x in
         enumerate(_rounds(rng, 110.0, rounds))]
    doc = {"cells": [{"variant": "64-syscall", "op": "null", "shape": "ret",
                      "a": {"rounds": a, "reason": None}, "b": {"rounds": b, "reason": None}}]}
    (row,) = compare.ab(doc)
    assert row["decision"] == "slower"
    assert row["ratio"]["groups"] == 8


@pytest.mark.parametrize("tests,allowed", [(1, 0), (10, 2), (20, 3)])
def test_chance_allows_the_binomial_95th_percentile(tests, allowed):
    assert compare.chance_allows(tests) == allowed


def test_copies_are_fresh_files_of_the_same_bytes(tmp_path):
    src = tmp_path / "syscost-64-syscall"
    src.write_bytes(os.urandom(20000))
    src.chmod(0o4755)                     # set-user-ID: never given to a copy
    d = tmp_path / "not-a-file"
    d.mkdir()
    copied, top = syscost.make_copies({"a": src, "b": d}, 4, where=tmp_path)
    try:
        ca = copied["a"]
        assert len(ca) == 4 and len({os.stat(c).st_ino for c in ca}) == 4
        assert all(c.read_bytes() == src.read_bytes() for c in ca)
        assert len({len(str(c)) for c in ca}) == 1
        assert all(os.stat(c).st_mode & 0o7777 == 0o755 for c in ca)
        assert copied["b"] == [d] * 4          # not copied: measure() says what it is
    finally:
        import shutil
        shutil.rmtree(top)


def _build_b(build, where):
    """Another build of syscost-64-syscall: a copy of this one's, in `where`."""
    where.mkdir(exist_ok=True)
    (where / "syscost-64-syscall").write_bytes((build / "syscost-64-syscall").read_bytes())
    (where / "syscost-64-syscall").chmod(0o755)
    return where


def _copies_of(pid):
    root = syscost.copies_root()
    return sorted(n for n in os.listdir(root) if n.startswith(f"{syscost.COPIES_PREFIX}{pid}-"))


def test_ab_runs_each_side_from_its_copies_and_removes_them(build, tmp_path):
    need_supported("syscost", "64-syscall")
    other = _build_b(build, tmp_path / "build-b")
    before = set(os.listdir(build))
    out = tmp_path / "ab"
    p = subprocess.Popen([sys.executable, TW, "ab", "--build-b", other, "--rounds", "6",
                          "--copies", "3", "--ops", "null", "--out", out, "--format", "json"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _, err = p.communicate(timeout=300)
    assert p.returncode == 0, err
    doc = json.loads((out / "ab.json").read_text())
    assert doc["schema"] == ab.SCHEMA and doc["copies"] == 3
    (cell,) = doc["cells"]
    assert [r["copy"] for r in cell["a"]["rounds"]] == [0, 1, 2, 0, 1, 2]
    assert [r["copy"] for r in cell["b"]["rounds"]] == [0, 1, 2, 0, 1, 2]
    assert set(os.listdir(build)) == before              # nothing made in the build
    assert _copies_of(p.pid) == []                        # and its copies removed


def test_copies_go_to_a_private_folder_outside_the_build_and_the_package(tmp_path):
    src = tmp_path / "syscost-64-syscall"
    src.write_bytes(os.urandom(4096))
    src.chmod(0o755)
    copied, top = syscost.make_copies({"a": src}, 2)
    try:
        real = os.path.realpath(top)
        assert os.path.commonpath([real, os.path.realpath(ROOT)]) != os.path.realpath(ROOT)
        assert os.path.dirname(real) == syscost.copies_root()
        assert os.stat(top).st_mode & 0o777 == 0o700
        assert os.path.basename(real).startswith(f"{syscost.COPIES_PREFIX}{os.getpid()}-")
        assert syscost.shown_program(copied["a"][1]) == str(src)
    finally:
        import shutil
        shutil.rmtree(top)


def test_the_copies_of_a_killed_run_are_swept_by_its_pid(build, tmp_path):
    """tw ab killed with SIGKILL (nothing of it runs to remove its copies): its folder stays,
    and the next run that copies removes it, by its pid and start time; a folder of a live
    process is kept, one whose pid a later process took is not."""
    need_supported("syscost", "64-syscall")
    other = _build_b(build, tmp_path / "build-b")
    p = subprocess.Popen([sys.executable, TW, "ab", "--build-b", other, "--rounds", "10000",
                          "--copies", "4", "--ops", "null", "--out", tmp_path / "ab"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         start_new_session=True)
    try:
        deadline = time.monotonic() + 120           # a hang guard only
        while not _copies_of(p.pid):
            assert p.poll() is None and time.monotonic() < deadline, "no copies appeared"
            time.sleep(0.05)
    finally:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
    (left,) = _copies_of(p.pid)
    root = syscost.copies_root()
    me = syscost._start_of(os.getpid())
    live = os.path.join(root, f"{syscost.COPIES_PREFIX}{os.getpid()}-{me}-keep")
    reused = os.path.join(root, f"{syscost.COPIES_PREFIX}{os.getpid()}-{me + 1}-gone")
    for d in (live, reused):
        os.mkdir(d, 0o700)
    copied, top = syscost.make_copies({"a": build / "syscost-64-syscall"}, 1)
    try:
        assert not os.path.exists(os.path.join(root, left))
        assert os.path.isdir(live) and not os.path.exists(reused)
    finally:
        import shutil
        for d in (live, top):
            shutil.rmtree(d, ignore_errors=True)


def test_nothing_stays_after_a_full_disk(build, tmp_path):
    """Copies into a file system that fills: one line (exit 4) naming the program copied, and
    no folder left (the partial copies stayed)."""
    from faults_util import small_fs, tw
    need_supported("syscost", "64-syscall")
    with small_fs(tmp_path / "small", 256) as mnt:
        src = {"a": build / "syscost-64-syscall"}
        with pytest.raises(OSError) as e:
            syscost.make_copies(src, 8, where=mnt)
        assert e.value.errno == 28 and str(build / "syscost-64-syscall") in str(e.value)
        assert os.listdir(mnt) in ([], ["lost+found"])
        p = tw("ab", "--speculation", "ssbd", "--rounds", "2", "--copies", "8", "--ops", "null",
               "--out", tmp_path / "ab", TMPDIR=mnt)
        assert p.returncode == 4, p.stderr[-2000:]
        assert "Traceback" not in p.stderr and "No space left" in p.stderr.strip().splitlines()[-1]
        assert os.listdir(mnt) in ([], ["lost+found"])


def test_a_read_only_build_is_accepted(build, tmp_path):
    """--build-b on a read-only file system: its programs are read and copied elsewhere, so
    nothing needs to write there (it was refused as "not writable by this user")."""
    from faults_util import remount, small_fs
    need_supported("syscost", "64-syscall")
    with small_fs(tmp_path / "ro", 2048) as mnt:
        _build_b(build, mnt)
        remount(mnt, "ro")
        p = run([sys.executable, TW, "ab", "--build-b", mnt, "--rounds", "2", "--copies", "2",
                 "--ops", "null", "--out", tmp_path / "ab", "--format", "json"], text=True,
                timeout=300)
        assert p.returncode == 0, p.stderr[-2000:]
        (cell,) = json.loads((tmp_path / "ab" / "ab.json").read_text())["cells"]
        assert len(cell["b"]["rounds"]) == 2


def test_selfcheck_prints_calls_against_chance(build, tmp_path):
    need_supported("syscost", "64-syscall")
    p = run([sys.executable, TW, "ab", "--selfcheck", "2", "--quick", "--ops", "null",
             "--out", tmp_path / "sc"], text=True, timeout=300)
    # whether an A/A run calls a difference is chance and the host: 0 or 1, never asserted
    assert p.returncode in (0, 1), p.stderr
    last = p.stdout.strip().splitlines()[-1]
    assert last.startswith("A/A self-check: ") and "chance alone" in last
    assert sum(1 for ln in p.stdout.splitlines() if ln.startswith("A/A 1: ")) == 1
    assert (tmp_path / "sc" / "aa-001" / "ab.json").exists()


def test_selfcheck_refuses_a_b_side(tmp_path):
    p = run([sys.executable, TW, "ab", "--selfcheck", "--speculation", "ssbd"], text=True,
            timeout=60)
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert "not allowed with argument --selfcheck" in p.stderr.strip().splitlines()[-1]
