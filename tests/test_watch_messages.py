"""tw watch's one-line messages where the user, or the machine, did something odd: a --state
that is a file, a state folder on a read-only file system, the loader killed alone, a state
whose counts went negative.

Why it can break: the top-level handler's generic hints (a read-only file system said "--out
DIR, or TW_RESULTS=DIR", which tw watch has not: its state is the problem; a file given as
--state said "File exists; choose another name"), a loader killed by a signal printing nothing
("the exec tracer stopped: no message"), a count read back as -5 and printed as "-5 exec(s)".
The live tests skip for need_watch's facts (not root, no BTF or tracefs).
"""
import os
import signal
import subprocess
import sys
import time

from conftest import ROOT, need_root, need_watch
from faults_util import small_fs
from twtools.analyse import watch as analyse
from twtools.core import ui
from twtools.present import watch as present

TW = [sys.executable, str(ROOT / "scripts" / "tw"), "watch"]


def test_a_state_that_is_a_file_is_one_line(tmp_path):
    need_root()
    f = tmp_path / "state.txt"
    f.write_text("not a folder")
    p = subprocess.run(TW + ["--state", str(f), "--window", "0"], capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == ui.EXIT_USAGE or p.returncode == ui.EXIT_FAILED, p.stderr
    assert p.stderr.count("\n") == 1 and "is not a folder" in p.stderr, p.stderr
    assert "File exists" not in p.stderr and "Traceback" not in p.stderr


def test_a_read_only_state_names_the_state_not_out(tmp_path):
    need_watch()
    with small_fs(tmp_path / "ro", 1024, readonly=True) as ro:
        p = subprocess.run(TW + ["--state", str(ro / "state"), "--window", "0"],
                           capture_output=True, text=True, timeout=120)
    assert p.returncode == ui.EXIT_SYSTEM, p.stderr
    assert p.stderr.count("\n") == 1 and "read-only" in p.stderr, p.stderr
    assert "--state" in p.stderr and "--out" not in p.stderr and "TW_RESULTS" not in p.stderr


def _children(pid):
    try:
        return [int(x) for x in open(f"/proc/{pid}/task/{pid}/children").read().split()]
    except OSError:
        return []


def test_the_loader_killed_alone_is_said_as_a_kill(tmp_path):
    need_watch()
    log = tmp_path / "watch.err"
    w = subprocess.Popen(TW + ["--state", str(tmp_path / "state"), "--window", "0",
                               "--interval", "1"], stdout=subprocess.DEVNULL,
                         stderr=open(log, "w"), start_new_session=True)
    try:
        end = time.monotonic() + 120
        while "counting every exec" not in log.read_text(errors="replace"):
            assert w.poll() is None and time.monotonic() < end, log.read_text(errors="replace")
            time.sleep(0.2)
        loader = [c for c in _children(w.pid)
                  if open(f"/proc/{c}/comm", "rb").read().strip() == b"watchbpf"]
        assert len(loader) == 1, _children(w.pid)
        os.kill(loader[0], signal.SIGKILL)
        rc = w.wait(timeout=60)
    finally:
        if w.poll() is None:
            w.kill()
            w.wait()
    err = log.read_text(errors="replace")
    assert rc == ui.EXIT_FAILED, err
    assert "the exec tracer stopped: build/watchbpf was killed by SIGKILL" in err, err
    assert "Traceback" not in err


def test_a_negative_count_is_never_reported():
    progs = [{"program": "/opt/old32", "is32": True, "execs": -5, "first_seen": 10.0,
              "last_seen": 20.0}]
    paths = [{"t": 15.0, "seconds": 1.0, "program": "/opt/old32", "is32": True,
              "path": "compat_vdso", "calls": -3, "ns_per_s": None, "why": "not priced",
              "stops": "32-bit", "exits_per_s": None}]
    doc = analyse.readiness(progs, paths, 0.0, 100.0)
    assert doc["stop"][0]["execs"] == 0 and doc["stop"][0]["paths"]["compat_vdso"]["calls"] == 0
    text = present.format_text({**doc, "host": "h", "coverage": {}})
    assert "-5" not in text and "-3" not in text, text
