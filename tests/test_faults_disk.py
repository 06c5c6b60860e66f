"""The system says no: a full disk, a read-only file system, a user who may not write, and a
results/latest that is not tw's link.  Each is one line naming the path and the errno, a
documented exit status, no partial file, and results/latest still on a complete run.

Why it can break: a writer that opens its target and writes in place (open(..., "w"),
Path.write_text, matplotlib's savefig to a path) leaves a truncated or 0-byte file when the
disk fills mid-write; a temporary file that is not removed on failure leaves .NAME.tmp; a
stage that catches the ENOSPC of one program and records the cell as "unsupported" or
"unknown" hides it; an OSError that reaches the top as a traceback, or a message without the
path, leaves the user guessing; moving results/latest before the run is complete points it at
the failed run.

The file systems are real: a small tmpfs (or a loop-mounted ext4 where tmpfs cannot be
mounted), filled or remounted read-only by the test.
"""
import json
import os
import pwd
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import ROOT
from faults_util import (TW, checkout_for_others, complete_run, fill, meta, one_line_error, remount,
                         run_dirs, small_fs, tw)

FIX = ROOT / "tests" / "fixtures" / "results-fixture"


def assert_whole_files(top):
    """Every file tw left is whole: no temporary file, no empty file, every JSON parses."""
    for p in Path(top).rglob("*"):
        if p.is_file() and p.name != ".filler":
            assert not p.name.endswith(".tmp"), f"temporary file left: {p}"
            assert p.stat().st_size > 0, f"empty file left: {p}"
            if p.suffix == ".json":
                json.loads(p.read_text())


def test_full_disk_during_a_stage(tmp_path, build):
    """ENOSPC while the per-call matrix writes: the stage records ENOSPC by name, the run
    stops with one line naming it (exit 4), and results/latest stays on the complete run."""
    with small_fs(tmp_path / "fs", 112) as fs:
        good = complete_run(fs)
        p = tw("run", "--quick", "--only", "doctor,variants,bench", "--no-report", TW_RESULTS=fs)
        line = one_line_error(p, "stage bench failed: ENOSPC", "No space left on device",
                              "still points at " + good)
        assert p.returncode == 4, (p.returncode, line)
        new = [d for d in run_dirs(fs) if d.name != good]
        assert len(new) == 1
        m = meta(new[0])
        # meta.json says what happened if the disk let it be rewritten, else still that the
        # run never finished; never "complete"
        assert m["state"] in ("aborted", "in-progress"), m["state"]
        if m["state"] == "aborted":
            assert m["stages"]["bench"]["errno"] == "ENOSPC"
            assert "ENOSPC" in m["error"]
        assert os.readlink(fs / "latest") == good
        assert_whole_files(fs)
        assert not (new[0] / "percall.json").exists()


def test_full_disk_while_reporting(tmp_path, build):
    """`tw report` on a directory whose disk is full: one line naming the file and ENOSPC,
    exit 4, and no half-written report (the old one, if any, is left whole)."""
    with small_fs(tmp_path / "fs", 2048) as fs:
        d = fs / "results"
        shutil.copytree(FIX, d)
        (d / "report.md").write_text("an older report, whole\n")
        fill(fs, leave=64 << 10)
        p = tw("report", d)
        one_line_error(p, "No space left on device (ENOSPC)", str(d))
        assert p.returncode == 4
        assert (d / "report.md").read_text() == "an older report, whole\n"
        assert_whole_files(fs)


def test_read_only_results_directory(tmp_path, build):
    """A results directory on a read-only file system: `tw report` says so in one line with
    the path (exit 4) and touches nothing; `tw run` there cannot even start its directory."""
    with small_fs(tmp_path / "fs", 2048) as fs:
        d = fs / "results"
        shutil.copytree(FIX, d)
        before = sorted(p.name for p in d.iterdir())
        remount(fs, "ro")
        p = tw("report", d)
        one_line_error(p, "Read-only file system (EROFS)", str(d), "copy the results directory")
        assert p.returncode == 4
        assert sorted(x.name for x in d.iterdir()) == before
        p = tw("run", "--quick", "--only", "doctor", "--no-report", TW_RESULTS=fs / "runs")
        one_line_error(p, "Read-only file system (EROFS)", str(fs / "runs"))
        assert p.returncode == 4


def test_latest_is_a_real_directory(tmp_path, build):
    """results/latest that is a directory (a copy, say) may hold results: tw refuses before
    measuring anything, in one line saying what to do, and leaves it alone."""
    root = tmp_path / "results"
    (root / "latest").mkdir(parents=True)
    (root / "latest" / "keep.txt").write_text("mine\n")
    p = tw("run", "--quick", "--only", "doctor", "--no-report", TW_RESULTS=root)
    one_line_error(p, f"{root / 'latest'} is a real directory", "move it away")
    assert p.returncode == 4
    assert (root / "latest" / "keep.txt").read_text() == "mine\n"
    assert [d.name for d in run_dirs(root)] == ["latest"], "it made a results directory"
    assert "[1/" not in p.stderr, "it measured before refusing"


def test_non_root_user_in_root_owned_checkout(tmp_path, build):
    """A user who may not write the checkout's results/: one line naming the directory, who
    owns it and what to do (run as that user, or --out / TW_RESULTS), exit 4.  The user
    needs a checkout it can reach: in a clone under a mode-0700 directory (root's home, a
    `mktemp -d`), faults_util.checkout_for_others gives it a copy that it can reach."""
    if os.geteuid() != 0:
        pytest.skip("needs root to run tw as another user")
    if shutil.which("setpriv") is None:
        pytest.skip("setpriv (util-linux) is not installed")
    nobody = pwd.getpwnam("nobody")
    root = tmp_path / "owned-by-root"
    root.mkdir()
    os.chmod(tmp_path, 0o755)
    os.chmod(root, 0o755)
    parents = [d for d in [tmp_path, *tmp_path.parents] if d != Path("/")]
    modes = {d: d.stat().st_mode for d in parents}
    try:
        for d in parents:               # let nobody reach the directory, not write it
            os.chmod(d, modes[d] | 0o005)
        home = tmp_path / "home"
        home.mkdir()
        os.chown(home, nobody.pw_uid, nobody.pw_gid)
        with checkout_for_others() as checkout:
            # The copy's own scripts/tw under the copy's own venv python, as TW is ROOT's.
            cmd = TW if checkout == ROOT else [str(checkout / ".venv" / "bin" / "python"),
                                               str(checkout / "scripts" / "tw")]
            p = subprocess.run(["setpriv", f"--reuid={nobody.pw_uid}", f"--regid={nobody.pw_gid}",
                                "--clear-groups", *cmd, "run", "--quick",
                                "--only", "doctor", "--no-report"], capture_output=True,
                               text=True, timeout=120, cwd=checkout,
                               env=dict(os.environ, TW_RESULTS=str(root / "results"),
                                        HOME=str(home), TMPDIR=str(home)))
    finally:
        for d, m in modes.items():
            os.chmod(d, m & 0o7777)
    if "is not importable" in p.stderr:
        pytest.skip(f"the venv is not usable by nobody here: {p.stderr.strip()}")
    line = one_line_error(p, "Permission denied (EACCES)", str(root), "belongs to root",
                          "this is nobody", "run as root")
    assert p.returncode == 4, line
    assert not (root / "results").exists()
