"""An interrupted tw ab keeps what it measured.

A default tw ab --wall runs for minutes; a Ctrl-C late in it must not lose them (issue 61:
`tw bench --target`'s --out directory was empty after SIGTERM).  This breaks if SIGINT or
SIGTERM leaves no ab.json, an ab.json without the rounds measured so far or not marked
interrupted, if tw ab then exits with anything but 128 + the signal, or if the wall stays up
(the tracer stays attached) after the interrupt."""
import json
import signal
import subprocess
import sys
import time

import pytest

from conftest import ROOT, need_root, need_supported, need_tool
from twtools.machine import hostwalls

TW = [sys.executable, str(ROOT / "scripts" / "tw")]


def interrupt(tmp_path, sig, wall):
    out = tmp_path / "ab"
    p = subprocess.Popen(TW + ["ab", "--wall", wall, "--variants", "64-syscall", "--ops",
                               "getppid", "--rounds", "10000", "--out", str(out)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    seen = ""
    end = time.monotonic() + 120
    while time.monotonic() < end and "round " not in seen:
        seen += p.stderr.readline()
    assert "round " in seen, seen
    time.sleep(1.0)
    p.send_signal(sig)
    stdout, stderr = p.communicate(timeout=120)
    return p.returncode, stdout, seen + stderr, out


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_interrupted_run_keeps_its_rounds(build, tmp_path, sig):
    need_supported("syscost", "64-syscall")
    rc, stdout, stderr, out = interrupt(tmp_path, sig, "seccomp:allow")
    assert rc == 128 + sig, stderr
    doc = json.loads((out / "ab.json").read_text())
    assert doc["interrupted"] == signal.Signals(sig).name
    assert doc["rounds_done"] >= 1 and doc["rounds"] == 10000
    (cell,) = doc["cells"]
    assert len(cell["a"]["rounds"]) >= doc["rounds_done"]
    assert "marked interrupted" in stderr.splitlines()[-1]
    assert "getppid" in stdout          # the decisions on the rounds kept are printed


def test_an_interrupted_tracer_wall_comes_down(build, tmp_path):
    need_root()
    need_tool("bpftool")
    rc, _, stderr, out = interrupt(tmp_path, signal.SIGINT, "tracer:raw_syscalls")
    assert rc == 130, stderr
    doc = json.loads((out / "ab.json").read_text())
    assert doc["wall"]["down"]["attaches"] >= 1
    rows, why = hostwalls.raw_syscalls_tracers()
    assert rows is not None, why
    assert [r for r in rows if r["comm"] == "tracerbpf"] == []
