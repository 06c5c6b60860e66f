"""tw watch's state against what it may find on disk: the size cap, a damaged or foreign file,
a full disk, special files, a state far past the caps (issue 43, classes 3, 5, 7, 8 and 9).

Why it can break: the size cap cut the days at the middle day, which is today when the state
holds one day, and deleted every row, so that `--report` said "nothing would stop" about a
machine running 6000 32-bit programs; a state file the watch did not write (random bytes, a
foreign SQLite file, a newer schema, a trigger planted in it) or a hostile value in a row
(execs 'abc', an infinite time, a BLOB name) was written into, ran the trigger, or ended in a
traceback; a damaged page gave a report with part of the data and exit 0; a failed save on a
full disk was followed by "state saved" and exit 0, and a first start on a full disk left a
file with no tables; a FIFO in place of the state hung `--report` for ever; loading read
every row of the file whatever --max-programs said, so that a big state took gigabytes.
SQLite, the file systems (a real tmpfs for the full disk) and the `tw` command run for real.
None of these attaches the watch's tracers (a damaged state is refused before them), so the
file is not in the serial group; the running watch on a full disk is test_watch_full_disk.
"""
import hashlib
import os
import random
import sqlite3
import subprocess
import sys
import time
import tracemalloc

import pytest

from conftest import ROOT, need_root
from twtools.analyse import watch as analyse
from twtools.store import watchdb
from twtools.service import watch as service_watch

TW = ROOT / "scripts" / "tw"


def tw(*args, timeout=60):
    return subprocess.run([sys.executable, TW, "watch", *map(str, args)], capture_output=True,
                          text=True, timeout=timeout)


def digest(path):
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


def batch32(names, t):
    return {"execs": {(n, True): {"n": 1, "first_ns": 1, "last_ns": 1} for n in names},
            "n": {True: len(names)}}, t


def state_with(tmp_path, names32=("/opt/a32",), names64=("/bin/ls",), t=None):
    """A real state file, written by the watch's own save."""
    t = t or time.time()
    db = watchdb.path_in(tmp_path)
    s = analyse.State(max_programs=100000)
    s.started = t - 60
    b = {"execs": {(n, True): {"n": 1, "first_ns": 1, "last_ns": 1} for n in names32}}
    b["execs"].update({(n, False): {"n": 1, "first_ns": 1, "last_ns": 1} for n in names64})
    b["n"] = {True: len(names32), False: len(names64)}
    s.add_batch(b, t - 1e-9, t)
    watchdb.save(db, s)
    return db


def report_names(state_dir, since="1d"):
    p = tw("--report", "--json", "--since", since, "--state", state_dir)
    assert p.returncode == 0, p.stderr
    import json
    return {x["program"] for x in json.loads(p.stdout)["stop"]}


# ------------------------------------------------------------------ class 3: the size cap

def test_the_size_cap_never_drops_todays_32bit_programs(tmp_path):
    """The issue's case: 6000 distinct 32-bit names, a 1 MB cap: the state cannot fit, and
    the cap must keep them (said), not delete the day."""
    names = [f"/tmp/many/prog-{i:05d}" for i in range(6000)]
    db = state_with(tmp_path, names32=names)
    assert os.path.getsize(db) > 2 ** 20
    done = watchdb.bound(db, keep_days=400, max_bytes=2 ** 20)
    assert any("above the cap" in d for d in done), done
    assert len(report_names(tmp_path)) == 6000


def test_the_size_cap_folds_older_days_and_keeps_their_32bit_programs(tmp_path):
    """Older days are folded (64-bit programs into "other", then the older half of the days
    into one row a program), never the 32-bit programs: --since 30d still names each."""
    now = time.time()
    db = watchdb.path_in(tmp_path)
    s = analyse.State(max_programs=100000)
    old32 = [f"/opt/old32-{d}" for d in range(10)]
    for d in range(10):
        t = now - (10 - d) * 86400
        b = {"execs": {(f"/usr/bin/tool-{d}-{i}", False): {"n": 3, "first_ns": 1, "last_ns": 1}
                       for i in range(800)}}
        b["execs"][(old32[d], True)] = {"n": 2, "first_ns": 1, "last_ns": 1}
        b["n"] = {is32: sum(r["n"] for k, r in b["execs"].items() if k[1] is is32)
                  for is32 in (False, True)}
        s.add_batch(b, t - 1e-9, t)
        watchdb.save(db, s)
        s.programs.clear()          # the readiness log stays small: the days are what grow
    s.add_batch({"execs": {("/opt/today32", True): {"n": 1, "first_ns": 1, "last_ns": 1}},
                 "n": {True: 1}}, now - 1e-9, now)
    watchdb.save(db, s)
    before = os.path.getsize(db)
    done = watchdb.bound(db, keep_days=400, max_bytes=before // 3, now=now)
    assert any("folded" in d for d in done), done
    con = watchdb.connect(db, read_only=True)
    try:
        execs = con.execute("SELECT sum(execs) FROM days").fetchone()[0]
        n64 = con.execute("SELECT count(*) FROM days WHERE NOT is32").fetchone()[0]
    finally:
        con.close()
    assert execs == 10 * (800 * 3 + 2) + 1          # folded, not dropped: every exec counted
    assert n64 < 10 * 800
    assert report_names(tmp_path, "30d") == set(old32) | {"/opt/today32"}


# ------------------------------------------------------------------ class 5: damaged, foreign

def _corrupt_page(db):
    """Page 3 (a table's b-tree page) overwritten with random bytes."""
    with open(db, "r+b") as f:
        f.seek(16)
        page = int.from_bytes(f.read(2), "big") or 65536
        f.seek(2 * page)
        f.write(random.Random(7).randbytes(page))


def _sql(*stmts):
    def make(db):
        con = sqlite3.connect(db)
        for st in stmts:
            con.execute(st)
        con.commit()
        con.close()
    return make


def _foreign(db):
    os.unlink(db)
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE meta (key TEXT, value TEXT, extra TEXT)")
    con.execute("INSERT INTO meta VALUES ('schema', 'x', 'y')")
    con.commit()
    con.close()


def _write(data):
    def make(db):
        with open(db, "wb") as f:
            f.write(data)
    return make


def _truncate(db):
    with open(db, "r+b") as f:
        f.truncate(os.path.getsize(db) // 2 + 100)


DAMAGES = {
    "random bytes": _write(random.Random(1).randbytes(8192)),
    "text": _write(b"this is not a database\n" * 100),
    "empty": _write(b""),
    "truncated": _truncate,
    "a corrupted page": _corrupt_page,
    "a foreign SQLite file": _foreign,
    "a future schema": _sql("UPDATE meta SET value = 'timewrite-watch-state/999' WHERE key = 'schema'"),
    "a trigger": _sql("CREATE TRIGGER boom AFTER INSERT ON programs BEGIN "
                      "INSERT INTO meta VALUES ('ran', 'the trigger'); END"),
    "a view": _sql("CREATE VIEW v AS SELECT 1"),
    "execs 'abc'": _sql("UPDATE programs SET execs = 'abc'"),
    "execs inf": _sql("UPDATE days SET execs = 1e999"),
    "last_seen inf": _sql("UPDATE programs SET last_seen = 1e999"),
    "a text timestamp": _sql("UPDATE days SET first_seen = 'yesterday'"),
    "NULL calls": _sql("INSERT INTO calls VALUES ('/bin/x', 0, 'native_syscall', NULL)"),
    "text calls": _sql("INSERT INTO calls VALUES ('/bin/x', 0, 'native_syscall', 'many')"),
    "a BLOB name": _sql("INSERT INTO programs (program, is32, execs, first_seen, last_seen) "
                        "VALUES (x'ff00', 1, 1, 1.0, 2.0)"),
    "a bad meta": _sql("UPDATE meta SET value = 'soon' WHERE key = 'started'"),
}


@pytest.fixture(params=sorted(DAMAGES), ids=lambda k: k.replace(" ", "-"))
def damaged(request, tmp_path):
    db = state_with(tmp_path, names32=[f"/opt/p{i}" for i in range(300)])
    DAMAGES[request.param](db)
    return tmp_path, db


def test_a_damaged_or_foreign_state_is_refused_by_the_report(damaged):
    d, db = damaged
    before = digest(db)
    p = tw("--report", "--state", d)
    assert p.returncode == 3, (p.returncode, p.stdout[-300:], p.stderr)
    assert p.stderr.count("\n") == 1 and "Traceback" not in p.stderr, p.stderr
    assert "--state-reset" in p.stderr
    assert digest(db) == before


def test_a_damaged_or_foreign_state_is_refused_at_start_and_not_written(damaged):
    need_root()
    d, db = damaged
    before = digest(db)
    p = tw("--state", d, "--window", "0", "--for", "2")
    assert p.returncode == 3, (p.returncode, p.stderr)
    assert p.stderr.count("\n") == 1 and "Traceback" not in p.stderr, p.stderr
    assert digest(db) == before
    assert sorted(os.listdir(d)) == ["watch.lock", "watch.sqlite"]


def test_state_reset_keeps_the_old_file_and_starts_afresh(tmp_path, capsys):
    db = state_with(tmp_path)
    DAMAGES["a trigger"](db)
    before = digest(db)
    args = cli_watch_args(tmp_path, state_reset=True)
    w = service_watch.Watch(args)
    try:
        w.open_state()
    finally:
        os.close(w._state_lock)
    err = capsys.readouterr().err
    olds = [n for n in os.listdir(tmp_path) if n.startswith("watch.sqlite.reset-")]
    assert len(olds) == 1 and digest(tmp_path / olds[0]) == before
    assert olds[0] in err and "fresh state" in err
    watchdb.check(db)                                # the new one is whole and the watch's
    assert w.state.programs == {}


def cli_watch_args(state, **kw):
    import argparse
    a = dict(state=str(state), results=None, measure=False, max_programs=500, max_state_mb=64,
             keep_days=400, window=0.0, window_period=1200.0, interval=60, listen=None,
             duration=None, state_reset=False)
    a.update(kw)
    return argparse.Namespace(**a)


# ------------------------------------------------------------------ class 9: special files

def test_a_fifo_as_the_state_is_refused_not_waited_on(tmp_path):
    os.mkfifo(watchdb.path_in(tmp_path))
    p = tw("--report", "--state", tmp_path, timeout=30)
    assert p.returncode == 3 and "FIFO" in p.stderr and p.stderr.count("\n") == 1, p.stderr


@pytest.mark.parametrize("which", ["watch.sqlite", "watch.lock"])
def test_a_fifo_as_the_state_or_lock_stops_the_watch_in_one_line(tmp_path, which):
    need_root()
    os.mkfifo(tmp_path / which)
    p = tw("--state", tmp_path, "--window", "0", "--for", "2", timeout=30)
    assert p.returncode == 3, (p.returncode, p.stderr)
    assert p.stderr.count("\n") == 1 and "Traceback" not in p.stderr, p.stderr


# ------------------------------------------------------------------ class 8: a full disk

@pytest.fixture
def small_disk(tmp_path):
    """A 256 KB tmpfs, unmounted after."""
    need_root()
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    # mode 0755: a tmpfs root is 1777 by default, which the watch refuses as a state folder
    p = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k,mode=0755", "tw-full", mnt],
                       capture_output=True, text=True)
    if p.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {p.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", mnt])


def fill(mnt):
    with open(mnt / "filler", "wb", buffering=0) as f:
        try:
            while True:
                f.write(b"\0" * 4096)
        except OSError:
            pass


def test_a_first_start_on_a_full_disk_leaves_no_half_made_state(small_disk):
    (small_disk / "watch.lock").write_text("1\n")      # the lock's page is there already
    fill(small_disk)
    p = tw("--state", small_disk, "--window", "0", "--for", "2")
    assert p.returncode == 4, (p.returncode, p.stderr)
    assert p.stderr.count("\n") == 1 and "Traceback" not in p.stderr, p.stderr
    assert "watch.sqlite" not in os.listdir(small_disk)
    assert not [n for n in os.listdir(small_disk) if n.startswith("watch.sqlite")]


def test_a_failed_save_is_said_at_the_end_and_in_the_exit_status(small_disk, capsys):
    w = service_watch.Watch(cli_watch_args(small_disk))
    try:
        w.open_state()
        w.last_bound = time.time()
        assert w.save() is True
        fill(small_disk)
        names = [f"/opt/big-name-{'x' * 150}-{i}" for i in range(3000)]
        w.state.add_batch(*batch32(names, time.time()), time.time())
        assert w.save() is False
        intervals = w.state.intervals
        assert w._end() == 4
    finally:
        os.close(w._state_lock)
    err = capsys.readouterr().err
    assert "could NOT be saved" in err and "state saved" not in err.splitlines()[-1], err
    con = watchdb.connect(watchdb.path_in(small_disk), read_only=True)
    try:
        saved = int(dict(con.execute("SELECT key, value FROM meta"))["intervals"])
    finally:
        con.close()
    assert saved == intervals == 1          # no interval counted as saved that was not


# ------------------------------------------------------------------ class 7: past the caps

def test_loading_a_big_state_keeps_to_the_program_cap(tmp_path):
    sys.path.insert(0, str(ROOT / "tests"))
    import watch_big_state
    db = watch_big_state.make(tmp_path, programs=60000, share32=0.01, days=5)
    watchdb.check(db)
    s = analyse.State(max_programs=200)
    tracemalloc.start()
    watchdb.load(db, s)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    # Each budget its own: 200 programs that entered a compat path (here the 32-bit ones) and
    # 200 others, so that 59,400 64-bit programs on disk never crowd a 32-bit one out.
    assert len(s.programs) <= 400
    assert sum(1 for (_, is32) in s.programs if is32) == 200
    assert sum(1 for (_, is32) in s.programs if not is32) == 200
    assert s.on_disk_only[False][0] == 60000 - 600 - 200 and s.on_disk_only[True][0] == 400
    assert len(s.calls) <= 400
    assert peak < 8 * 2 ** 20, peak
    from twtools.present import watch as present
    text = present.exposition(lambda: {
        "programs": s.programs, "folded": s.folded, "calls": s.calls, "cost": s.cost,
        "wlat": s.wlat, "windows": s.windows, "intervals": s.intervals,
        "max_programs": s.max_programs, "started": s.started, "share": None,
        "on_disk_only": s.on_disk_only})
    assert 'timewrite_programs_on_disk_only{bits="64"} 59200.0' in text
    assert len(text) < 200_000
    # The report reads only what could stop: the 600 32-bit programs, in bounded memory.
    tracemalloc.start()
    doc = service_watch.report(tmp_path, 30 * 86400)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert len(doc["stop"]) == 600
    assert peak < 16 * 2 ** 20, peak


def test_a_running_program_whose_path_is_not_utf8_is_saved_escaped(tmp_path):
    """/proc/PID/exe read with surrogateescape (a file named with bytes 0xff 0xfe): the save
    failed at every interval with UnicodeEncodeError, the state was never written again."""
    s = analyse.State()
    s.add_snapshot([{"exe": "/tmp/slp\udcff\udcfe", "needs_ia32": True}], time.time())
    db = watchdb.path_in(tmp_path)
    watchdb.save(db, s)
    watchdb.check(db)
    assert report_names(tmp_path) == {"/tmp/slp\\xff\\xfe"}


def test_a_save_cut_short_by_kill_9_is_rolled_back_when_the_report_reads(tmp_path):
    """A watch killed by SIGKILL during a save leaves its rollback journal beside the state.
    The report's read-only connection could not roll it back ("attempt to write a readonly
    database", seen in test_watch_live after kill -9) and called the state damaged: it must
    roll the cut save back, as the watch's next start would, and read what was saved."""
    s = analyse.State()
    s.add_batch(*batch32(["/opt/tw-before-the-kill"], time.time()), time.time())
    db = watchdb.path_in(tmp_path)
    watchdb.save(db, s)
    before = report_names(tmp_path)
    # A writer that spills its transaction to the file (a tiny page cache), then dies.
    code = ("import os, signal, sqlite3\n"
            f"con = sqlite3.connect({str(db)!r}, isolation_level=None)\n"
            "con.execute('PRAGMA cache_size = 1')\n"
            "con.execute('BEGIN IMMEDIATE')\n"
            "con.execute('UPDATE programs SET execs = execs + 1')\n"
            "con.execute('CREATE TABLE cut(x)')\n"
            "con.executemany('INSERT INTO cut VALUES (?)', [(b'x' * 4000,)] * 200)\n"
            "os.kill(os.getpid(), signal.SIGKILL)\n")
    assert subprocess.run([sys.executable, "-c", code]).returncode == -9
    assert os.path.getsize(str(db) + "-journal") > 0           # the cut save's journal
    p = tw("--report", "--since", "1d", "--state", tmp_path, "--json")
    assert p.returncode == 0, p.stderr
    assert report_names(tmp_path) == before
    assert not os.path.exists(str(db) + "-journal")
    watchdb.check(db)                                          # the cut table is gone
