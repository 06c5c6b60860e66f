"""tw bench and tw diagnose refuse bad usage before they measure or trace anything: exit 2,
one line naming the command and the problem, no traceback, nothing created.

Why it can break: an option checked only when it is first used (after the matrix started,
or after bpftrace attached) costs a user the time before it, and leaves a half-made results
directory; a check that raises instead of calling the parser's error prints a traceback.
These tests start nothing live and trace nothing, so they are not in the serial group
(tests/conftest.py SERIAL) with the files that measure: the refusals come first.
"""
import sys

import pytest

from conftest import ROOT, run

TW = ROOT / "scripts" / "tw"


@pytest.mark.parametrize("args", [["--sizes", "abc"], ["--variants", "64-nosuch"],
                                  ["--ops", "fsync"], ["--rounds", "0"], ["--cpu", "999"],
                                  ["--dir", "/nonexistent"], ["--shapes", "sideways"]])
def test_bench_bad_usage(build, tmp_path, args):
    p = run([sys.executable, TW, "bench", "--quick", "--out", tmp_path / "x"] + args, text=True)
    assert p.returncode == 2 and "tw bench: error:" in p.stderr, (args, p.returncode, p.stderr)
    assert not (tmp_path / "x").exists()         # refused before any work


@pytest.mark.parametrize("args,msg", [
    ([], "give a command after --"),
    (["--pid", "1", "--", "true"], "exclude each other"),
    (["--seconds", "1", "--", "true"], "--seconds needs --pid"),
    (["--", "/no/such/program"], "command not found"),
    (["--pid", "0"], "out of range"),
    (["--pid", "4194000"], "no process 4194000"),
    (["--results", "/no/such/dir", "--", "true"], "is not a directory"),
])
def test_diagnose_bad_usage_is_one_line_exit_2(args, msg):
    p = run([str(TW), "diagnose", *args], text=True, timeout=120)
    assert p.returncode == 2, (p.returncode, p.stderr)
    assert msg in p.stderr and "Traceback" not in p.stderr, p.stderr
    assert len([l for l in p.stderr.splitlines() if l.startswith("tw diagnose")]) == 1, p.stderr


def test_diagnose_help():
    p = run([str(TW), "diagnose", "--help"], text=True)
    assert p.returncode == 0 and "--pid" in p.stdout and "strace" in p.stdout
