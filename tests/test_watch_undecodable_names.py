"""A running process whose executable's path (and command name) is not UTF-8: any user can
start one (`ln /bin/sleep /tmp/slp$'\\xff\\xfe'`).  /proc gives such a name as bytes; os.readlink
of a str path gives it with lone surrogates, which SQLite refuses to store (the watch died at its
/proc snapshot, exit 70, in a restart loop under systemd) and a strict UTF-8 reader of
/proc/*/stat refuses to read (the test suite's own faults_util.descendants).  Every such name is
kept as escape.name keeps it: UTF-8, a bad byte as \\xNN, a backslash doubled.

Why it can break: a new reader of /proc that decodes strictly or keeps os.fsdecode's surrogates,
a name reaching the state without escape.name.  The live test skips for need_watch's facts (not
root, no BTF or tracefs).
"""
import os
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT, need_watch, run
from faults_util import descendants
from twtools.core import escape
from twtools.machine import process

RAW = b"slp\xff\xfe\\xff"          # two bytes that are not UTF-8, and a literal backslash-x-f-f


@pytest.fixture
def odd_sleeper(tmp_path):
    """A sleep(1) running under a name that is not UTF-8."""
    exe = os.path.join(os.fsencode(tmp_path), RAW)
    shutil.copy(shutil.which("sleep"), exe)     # a file of its own: a hard link is sleep's file
    p = subprocess.Popen([exe, "900"], start_new_session=True)
    try:
        yield p, exe
    finally:
        p.kill()
        p.wait()


def test_the_name_keeps_every_byte_and_reads_back():
    for raw in (RAW, b"a\\b", b"\\x41", b"\xc3\xa9", b"x\xe2\x80\xa8y", b"\xed\xa0\x80"):
        text = escape.name(raw)
        text.encode("utf-8")                     # no lone surrogate: SQLite and JSON take it
        assert escape.name_bytes(text) == raw
    # the four characters \xff are not the byte 0xff
    assert escape.name(b"\\xff") != escape.name(b"\xff")
    assert escape.name(os.fsdecode(b"s\xff")) == escape.name(b"s\xff") == "s\\xff"


def test_the_snapshot_and_the_suites_reader_take_it(odd_sleeper):
    p, exe = odd_sleeper
    rows = {r["pid"]: r for r in process.snapshot()}
    row = rows[p.pid]
    assert row["exe"] == escape.name(exe)
    assert escape.name_bytes(row["exe"]) == exe
    assert row["comm"] == escape.name(RAW[:15])
    row["exe"].encode("utf-8")
    mine = descendants(os.getpid())
    assert p.pid in mine


def test_the_watch_starts_snapshots_and_saves_beside_it(odd_sleeper, tmp_path):
    from test_watch_live import free_port, get, start_watch, stop, wait_for
    from twtools.store import watchdb
    need_watch()
    _, exe = odd_sleeper
    state = tmp_path / "state"
    state.mkdir()
    port = free_port()
    w = start_watch(state, port, "--window", "0", "--interval", "1")
    try:
        wait_for(lambda: "slp" in get(f"http://127.0.0.1:{port}/metrics"), 30,
                 "the sleeper in the metrics")
        assert w.poll() is None
    finally:
        rc = stop(w)
    errs = "".join(p.read_text(errors="replace") for p in state.glob("watch-*.err"))
    assert rc == 0, errs
    assert "saving the state failed" not in errs, errs
    con = watchdb.connect(watchdb.path_in(state), read_only=True)
    try:
        names = [r[0] for r in con.execute("SELECT program FROM programs").fetchall()]
    finally:
        con.close()
    assert escape.name(exe) in names, [n for n in names if "slp" in n]
    r = run([sys.executable, ROOT / "scripts" / "tw", "watch", "--report", "--json",
             "--state", state], text=True)
    assert r.returncode == 0, r.stderr


def test_the_report_shows_the_name_as_kept():
    """--report shows a kept name with its escapes as they are (a backslash not doubled once
    more) and no raw control byte."""
    from twtools.present import watch as present
    name = escape.name(b"/t/a\\xff\xff\x1b[31m")
    doc = {"since": 0.0, "until": 86400.0, "host": "h", "coverage": {},
           "stop": [{"program": name, "why": "32-bit", "execs": 1, "first_seen": 1.0,
                     "last_seen": 2.0, "windows": 0, "paths": {}}]}
    text = present.format_text(doc)
    assert "\x1b" not in text
    assert "/t/a\\\\xff\\xff\\x1b[31m" in text, text
