"""tw watch's state, without tracing: the bounds, the Prometheus exposition, the SQLite file.

Why it can break: a cap that lets memory grow with every new program name (a build farm
runs 100,000 distinct short-lived programs a day), a cap that 64-bit programs fill so that a
32-bit one is never named again, a folded counter that stops adding up to what the kernel
counted or counts a 32-bit exec as 64-bit, a cached name given to another file that reuses
an inode number, an anonymous file named "/", a label value that breaks the exposition format (a path may hold a
newline, a quote, a backslash, a terminal escape), a state file that loses saved intervals
when the watch is killed with SIGKILL or restarted, a rotation that leaves the file above its
cap, a report that forgets a 32-bit program seen before a restart, a state from before
SQLite that an upgrade drops.  SQLite, DuckDB (the old state's) and prometheus_client run for
real; the SIGKILL is real, on a real writer process.
"""
import os
import signal
import subprocess
import sys
import time
import tracemalloc

import pytest

from conftest import ROOT
from twtools.analyse import watch as analyse
from twtools.store import watchdb
from twtools.present import watch as present

pytest.importorskip("prometheus_client")

HOSTILE = ['/tmp/a"b\\c\nd\x1b[31m,e/t"q', "/opt/x\\n literal", "/bin/\u00e9\u00e8", "/p/{x=\"1\"}"]


def batch(names, t_ns=10**9, is32=False, extra_n=0):
    execs = {(n, is32): {"n": 1, "first_ns": t_ns, "last_ns": t_ns} for n in names}
    return {"execs": execs, "n": {is32: len(names) + extra_n, not is32: 0}}


def _exec(started, ino, path, is32=True, gen=1, why=0):
    """One exec batch of one file (device 2049, inode ino, generation gen), as the exec tracer
    gives it."""
    return {"execs": {(2049, ino, gen, is32): {"n": 1, "first_ns": 10**9, "last_ns": 10**9,
                                               "started": started}},
            "paths": {(2049, ino, gen): path}, "why": {(2049, ino, gen): why},
            "n": {is32: 1, not is32: 0}}


def snapshot_of(state, share=None):
    return {"programs": state.programs, "folded": state.folded, "calls": state.calls,
            "cost": state.cost, "wlat": state.wlat, "windows": state.windows,
            "intervals": state.intervals, "max_programs": state.max_programs,
            "started": state.started, "share": share}


def test_cap_folds_100000_programs_and_counts_them():
    """100000 programs past a cap of 200: the state holds 201 rows, counts every exec, and
    does not grow with the programs it folds: the memory it keeps while the last 10000 come
    (traced, once the cap is long full; tracing all of them made this the tier's slowest
    test) is under the same 2 MiB per 100000 programs (about 21 bytes a program)."""
    s = analyse.State(max_programs=200)
    n, traced = 100_000, 10_000
    for i in range(0, n, 1000):
        if i == n - traced:
            tracemalloc.start()
            base = tracemalloc.get_traced_memory()[0]
        s.add_batch(batch([f"/tmp/build/p{j}" for j in range(i, i + 1000)]), 0.0, 1.0)
        s.days.clear()          # what a save does
        s.dirty.clear()
    grown = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    assert len(s.programs) == 200 + 1           # the cap, plus "other"
    assert s.programs[(analyse.OTHER, False)]["execs"] == n - 200
    assert s.folded[("cap", False)] == n - 200
    assert sum(r["execs"] for r in s.programs.values()) == n
    assert grown < 2 * 2 ** 20 * traced / n, \
        f"state grew by {grown} bytes for the last {traced} programs past a cap of 200"


def test_map_full_drops_are_counted_from_the_kernel_total():
    s = analyse.State()
    s.add_batch(batch(["/bin/a", "/bin/b"], extra_n=5), 0.0, 1.0)
    assert s.folded[("map_full", False)] == 5
    assert s.programs[(analyse.OTHER, False)]["execs"] == 5
    assert sum(r["execs"] for r in s.programs.values()) == 7


def test_file_kinds_are_bounded():
    s = analyse.State(max_kinds=2)
    kinds = [s.kind(f"file:fs{i}") for i in range(5)]
    assert kinds == ["file:fs0", "file:fs1", "file:other", "file:other", "file:other"]
    assert analyse.file_kind(1, "pipefs", 0) == "pipe"
    assert analyse.file_kind(2, "devpts", 136) == "tty"
    assert analyse.file_kind(2, "devtmpfs", 1) == "device"
    assert analyse.file_kind(12, "sockfs", 0) == "socket"
    assert analyse.file_kind(8, "ext4", 0) == "file:ext4"


def test_hostile_names_are_escaped_in_the_exposition():
    from prometheus_client.parser import text_string_to_metric_families
    s = analyse.State()
    s.add_batch(batch(HOSTILE, is32=True), 1000.0, 1001.0)
    text = present.exposition(lambda: snapshot_of(s, share=0.01))
    lines = [ln for ln in text.splitlines() if ln.startswith("timewrite_exec_total{")]
    assert len(lines) == len(HOSTILE), lines          # no name broke a line in two
    assert "\\n" in text and '\\"' in text and "\\\\" in text
    got = {smp.labels["program"] for fam in text_string_to_metric_families(text)
           if fam.name == "timewrite_exec" for smp in fam.samples}
    assert got == set(HOSTILE)                          # parsed back exactly
    for fam in text_string_to_metric_families(text):
        assert fam.name.startswith(("timewrite_", "process_")), fam.name


def test_latency_histogram_is_cumulative_with_fixed_buckets():
    from prometheus_client.parser import text_string_to_metric_families
    s = analyse.State()
    w = {"t0": 1.0, "t1": 2.0, "seconds": 1.0, "added_ns": None, "added_why": "x",
         "programs": [], "wlat": [{"program": "/bin/w", "kind": "file:ext4", "sync": True,
                                   "buckets": [{"lo_ns": 1024, "hi_ns": 2048, "count": 3},
                                               {"lo_ns": 131072, "hi_ns": 262144, "count": 2}],
                                   "sum_ns": 300000}]}
    s.add_window(w)
    text = present.exposition(lambda: snapshot_of(s))
    fam = next(f for f in text_string_to_metric_families(text)
               if f.name == "timewrite_write_latency_seconds")
    b = {smp.labels["le"]: smp.value for smp in fam.samples if smp.name.endswith("_bucket")}
    assert b["+Inf"] == 5 and b[f"{2048 / 1e9:.9g}"] == 3 and b[f"{262144 / 1e9:.9g}"] == 5
    assert b[f"{1024 / 1e9:.9g}"] == 0
    vals = [b[k] for k in sorted(b, key=lambda k: float(k))]
    assert vals == sorted(vals)
    total = next(smp.value for smp in fam.samples if smp.name.endswith("_sum"))
    assert total == pytest.approx(300000 / 1e9)


def test_saved_state_survives_a_restart_and_the_report_names_it(tmp_path):
    db = watchdb.path_in(tmp_path)
    now = time.time()
    s = analyse.State()
    s.started = now - 3600
    s.add_batch({"execs": {("/opt/old32", True): {"n": 2, "first_ns": 1, "last_ns": 2}},
                 "n": {True: 2}},
                now - 3000, now - 3000)
    s.add_batch(batch(["/bin/ls"]), now - 3000, now - 3000)
    watchdb.save(db, s)
    again = analyse.State()
    assert watchdb.load(db, again)
    assert again.programs[("/opt/old32", True)]["execs"] == 2
    assert again.started == pytest.approx(now - 3600)
    again.add_batch({"execs": {("/opt/old32", True): {"n": 1, "first_ns": 1, "last_ns": 1}},
                     "n": {True: 1}},
                    now - 10, now - 10)
    watchdb.save(db, again)
    con = watchdb.connect(db, read_only=True)
    try:
        doc = analyse.readiness(watchdb.programs_since(con, now - 86400),
                                watchdb.paths_since(con, now - 86400), now - 86400, now)
    finally:
        con.close()
    names = [x["program"] for x in doc["stop"]]
    assert names == ["/opt/old32"]
    assert doc["stop"][0]["execs"] == 3


WRITER = r"""
import sys, time
sys.path.insert(0, sys.argv[2])
from twtools.analyse import watch
from twtools.store import watchdb
s = watch.State()
i = 0
while True:
    s.add_batch({"execs": {(f"/p{i}", i % 2 == 0): {"n": 1, "first_ns": 1, "last_ns": 1}},
                 "n": {i % 2 == 0: 1}}, time.time(), time.time())
    watchdb.save(sys.argv[1], s)
    print(i, flush=True)
    i += 1
"""


def test_kill_9_loses_at_most_the_interval_being_saved(tmp_path):
    db = watchdb.path_in(tmp_path)
    p = subprocess.Popen([sys.executable, "-c", WRITER, db, str(ROOT / "scripts")],
                         stdout=subprocess.PIPE, text=True)
    done = -1
    try:
        for line in p.stdout:
            done = int(line)
            if done >= 40:
                break
    finally:
        p.send_signal(signal.SIGKILL)
        p.wait()
    # What it said it saved between our reading and the kill: a loaded machine lets it save a
    # few more before the signal lands (n was done + 4 once), so the last line it printed,
    # not the last we had read, is what it promised.
    for line in p.stdout:
        done = int(line)
    assert done >= 40
    con = watchdb.connect(db, read_only=True)      # replays the write-ahead log
    try:
        n = con.execute("SELECT count(*) FROM programs").fetchone()[0]
    finally:
        con.close()
    # Every interval the writer said it saved is there; at most the one it was in is not.
    assert done + 1 <= n <= done + 2, (done, n)


def test_rotation_keeps_the_file_under_its_cap(tmp_path):
    db = watchdb.path_in(tmp_path)
    s = analyse.State()
    now = time.time()
    s.add_batch(batch(["/bin/keep"], is32=True), now, now)
    for k in range(12):
        t = now - 86400 * 2 + k * 60
        w = {"t0": t - 10, "t1": t, "seconds": 10.0, "added_ns": None, "added_why": "x",
             "programs": [{"program": f"/bin/p{k}-{j}", "is32": False, "stops": None,
                           "paths": {"native_syscall": {"calls": j, "ns_per_s": None, "why": "x"}}}
                          for j in range(300)],
             "wlat": []}
        watchdb.save(db, s, [(w, *s.add_window(w))])
    before = os.path.getsize(db)
    cap = before * 3 // 4
    done = watchdb.bound(db, keep_days=400, max_bytes=cap, now=now)
    assert os.path.getsize(db) <= cap, (before, os.path.getsize(db), done)
    con = watchdb.connect(db, read_only=True)
    try:
        left = con.execute("SELECT count(*) FROM windows").fetchone()[0]
        kept = watchdb.programs(con)
    finally:
        con.close()
    assert 0 < left < 12
    assert ("/bin/keep", True) in {(r["program"], r["is32"]) for r in kept}
    # Rows older than keep_days go whatever the size.
    watchdb.bound(db, keep_days=1, max_bytes=10 ** 9, now=now)
    con = watchdb.connect(db, read_only=True)
    try:
        assert con.execute("SELECT count(*) FROM windows").fetchone()[0] == 0
    finally:
        con.close()


def test_report_of_a_missing_state_is_one_line(tmp_path):
    p = subprocess.run([sys.executable, ROOT / "scripts" / "tw", "watch", "--report", "--state",
                        tmp_path / "none"], capture_output=True, text=True)
    assert p.returncode == 2
    assert p.stderr.count("\n") == 1 and "holds no watch state" in p.stderr


def test_bad_since_is_a_usage_error():
    p = subprocess.run([sys.executable, ROOT / "scripts" / "tw", "watch", "--report", "--since",
                        "thirty"], capture_output=True, text=True)
    assert p.returncode == 2 and "30d" in p.stderr and "Traceback" not in p.stderr


def test_a_state_from_before_sqlite_is_carried_over(tmp_path):
    """An upgrade must not drop the readiness log: a state folder with only the old DuckDB
    file (watch-state/1) is copied into watch.sqlite by a child process, the old file left."""
    duckdb = pytest.importorskip("duckdb")
    old = tmp_path / watchdb.OLD_FILE
    con = duckdb.connect(str(old))
    for sql in watchdb.SCHEMA_SQL:
        con.execute(sql)
    con.execute("INSERT INTO programs (program, is32, execs, first_seen, last_seen) "
                "VALUES (?, ?, ?, ?, ?)", [HOSTILE[0], True, 3, 1.0, 2.0])
    con.execute("INSERT INTO days VALUES (?, ?, ?, ?, ?, ?)",
                ["1970-01-01", HOSTILE[0], True, 3, 1.0, 2.0])
    con.close()
    said = watchdb.migrate(tmp_path, sys.executable)
    assert said and "copied into" in said and old.exists()
    s = analyse.State()
    assert watchdb.load(watchdb.path_in(tmp_path), s)
    assert s.programs[(HOSTILE[0], True)]["execs"] == 3
    assert watchdb.migrate(tmp_path, sys.executable) is None      # once only


def test_the_long_lived_watch_holds_neither_duckdb_nor_numpy(tmp_path):
    """The watch runs for months within a memory budget (docs/watch.md): its process must not
    import DuckDB (46 MB) or numpy and scipy (the windows' analysis runs in a child), which a
    Python process never gives back.  A save, a load and a report in a fresh interpreter."""
    code = (
        "import sys; sys.path.insert(0, sys.argv[1])\n"
        "import twtools.cli.watch\n"
        "import twtools.service.watch as w\n"
        "from twtools.analyse import watch as a\n"
        "from twtools.store import watchdb\n"
        "s = a.State(); s.add_batch({'execs': {('/bin/x', True): {'n': 1, 'first_ns': 1, "
        "'last_ns': 1}}, 'n': {True: 1}}, 0.0, 1.0)\n"
        "db = watchdb.path_in(sys.argv[2]); watchdb.save(db, s); watchdb.load(db, a.State())\n"
        "w.report(sys.argv[2], 86400)\n"
        "print(sorted(m for m in ('duckdb', 'numpy', 'scipy') if m in sys.modules))\n")
    p = subprocess.run([sys.executable, "-c", code, str(ROOT / "scripts"), str(tmp_path)],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "[]", p.stdout


def test_one_hostile_row_does_not_break_the_exposition():
    """A program name stored as a BLOB, an integer name beside text names, a text first_seen,
    a negative count (the state is a file anyone with root's hands may have edited): each row
    is coerced or left out, and the exposition is still made (it raised on every scrape, an
    HTTP 500 for the watch's life)."""
    from prometheus_client.parser import text_string_to_metric_families
    s = analyse.State()
    s.programs[("/usr/bin/ok", True)] = {"execs": 3, "first": 1.0, "last": 2.0}
    s.programs[(b"/blob\xff", True)] = {"execs": 1, "first": 1.0, "last": 1.0}
    s.programs[(7, False)] = {"execs": 1, "first": "yesterday", "last": 1.0}
    s.programs[("/neg", False)] = {"execs": -5, "first": 1.0, "last": 1.0}
    text = present.exposition(lambda: snapshot_of(s))
    got = {(x.labels["program"], x.value) for f in text_string_to_metric_families(text)
           if f.name == "timewrite_exec" for x in f.samples if x.name.endswith("_total")}
    assert got == {("/usr/bin/ok", 3), ("/blob\\xff", 1), ("7", 1)}, got


def test_a_path_rebuilt_many_times_is_one_program_and_one_file_kept():
    """A program rebuilt in place (a new inode at each build, as `cc -o` makes): one program,
    named by its path, its newest file kept, and the file index stays one entry (it grew by one
    per build: a user rebuilding in a loop grew the watch's memory without bound)."""
    s = analyse.State(max_programs=10)
    for ino in range(1, 5001):
        b = _exec("./a.out", ino, "/home/u/a.out")
        s.add_batch(b, 0.0, 1.0)
    row = s.programs[("/home/u/a.out", True)]
    assert row["execs"] == 5000 and (row["dev"], row["ino"]) == (2049, 5000)
    assert s.files == {(2049, 5000, 1): "/home/u/a.out"}


def test_a_running_program_is_found_by_its_file_in_proc():
    """/proc's snapshot finds a running program by its file: one counted at its exec keeps its
    name when its file is deleted (/proc then says "... (deleted)", which was a program of its
    own); one never seen at an exec whose file is gone is named by device and inode, noted."""
    s = analyse.State()
    s.add_batch(_exec("./x", 5, "/home/u/x"), 0.0, 1.0)
    s.add_snapshot([{"exe": "/home/u/x (deleted)", "dev": 2049, "ino": 5, "gen": 1,
                     "needs_ia32": True},
                    {"exe": "/home/u/y (deleted)", "dev": 2049, "ino": 6, "gen": 1,
                     "needs_ia32": True}], 2.0)
    y = f"[file dev {os.major(2049)}:{os.minor(2049)} inode 6]"
    assert set(s.programs) == {("/home/u/x", True), (y, True)}
    assert s.programs[(y, True)]["note"] == "deleted while it ran (it was /home/u/y)"


def _window_of(name, is32=True):
    q = {"calls": 7, "ns_per_s": None, "why": "x", "label": "int 0x80 in text"}
    return {"t0": 1.0, "t1": 5.0, "seconds": 4.0, "added_ns": None, "added_why": "x",
            "programs": [{"program": name, "is32": is32, "stops": "32-bit",
                          "paths": {"compat_int80_text": q}}],
            "wlat": [{"program": name, "kind": "device", "sync": False,
                      "buckets": [{"lo_ns": 0, "hi_ns": 1000, "count": 3}], "sum_ns": 900}]}


def test_a_process_seen_only_inside_a_window_is_its_file():
    """A process that started and ended inside a window is named by the window with the name
    execve was given (`./a.out`): its entry paths and write latency were a row of their own
    beside the program's, under a relative name an operator cannot find.  Now they go to the
    program the exec tracer saw started by that name; with two such programs (two ./a.out in
    two folders) the name is left as it is rather than guessed."""
    s = analyse.State()
    s.add_batch(_exec("./a.out", 5, "/home/u/a/a.out"), 0.0, 1.0)
    rows, lat = s.add_window(_window_of("./a.out"))
    assert [r["program"] for r in rows] == ["/home/u/a/a.out"] and lat[0]["program"] == "/home/u/a/a.out"
    assert set(s.programs) == {("/home/u/a/a.out", True)}
    assert s.calls == {("/home/u/a/a.out", True, "compat_int80_text"): 7}
    # A second ./a.out, another file: the window cannot tell which ran, and keeps the name.
    s.add_batch(_exec("./a.out", 6, "/home/u/b/a.out"), 0.0, 2.0)
    rows, _ = s.add_window(_window_of("./a.out"))
    assert [r["program"] for r in rows] == ["./a.out"]
    # The bitness must match: a 64-bit ./tool is not the 32-bit program started so.
    s.add_batch(_exec("./tool", 7, "/home/u/tool"), 0.0, 3.0)
    rows, _ = s.add_window(_window_of("./tool", is32=False))
    assert [r["program"] for r in rows] == ["./tool"]


# ------------------------------------------------ issue 61: a program is its file, as it is now

def test_a_reused_inode_is_another_file():
    """ext4 gives a deleted file's inode number to the next file: device and inode alone then
    named a new 32-bit program after the deleted 64-bit one, in memory, in /proc's snapshots
    and, saved, after a restart.  The generation tells them apart."""
    s = analyse.State()
    s.add_batch(_exec("./usr-tool", 5, "/home/u/usr-tool", is32=False, gen=111), 0.0, 1.0)
    s.add_batch(_exec("./evil32", 5, "/home/u/evil32", is32=True, gen=222), 0.0, 2.0)
    assert set(s.programs) == {("/home/u/usr-tool", False), ("/home/u/evil32", True)}
    # a running process of the new file, seen in /proc: its own name, not the cached one
    s.add_snapshot([{"exe": "/home/u/evil32", "dev": 2049, "ino": 5, "gen": 222,
                     "needs_ia32": True}], 3.0)
    assert ("/home/u/usr-tool", True) not in s.programs


def test_a_reused_inode_is_another_file_after_a_restart(tmp_path):
    db = watchdb.path_in(tmp_path)
    s = analyse.State()
    s.add_batch(_exec("./usr-tool", 5, "/home/u/usr-tool", is32=True, gen=111), 0.0, 1.0)
    watchdb.save(db, s)
    again = analyse.State()
    watchdb.load(db, again)
    assert again.files == {(2049, 5, 111): "/home/u/usr-tool"}
    # the kernel gives the new file's path: the saved name is the old file's, not its
    again.add_batch(_exec("./evil32", 5, "/home/u/evil32", gen=222), 0.0, 2.0)
    assert again.programs[("/home/u/usr-tool", True)]["execs"] == 1
    assert again.programs[("/home/u/evil32", True)]["execs"] == 1


def test_a_memfd_is_named_by_its_memfd_not_slash():
    """memfd_create + fexecve: the kernel's walk reaches a dentry that is its own parent; the
    program is named by the memfd's name, device and inode, with a note; two memfds of one
    name are two programs."""
    s = analyse.State()
    for ino in (1029, 1030):
        s.add_batch(_exec("/proc/self/fd/3", ino, "/memfd:tw-mem", why=analyse.PATH_ANON), 0.0, 1.0)
    names = {f"[memfd:tw-mem dev {os.major(2049)}:{os.minor(2049)} inode {i}]" for i in (1029, 1030)}
    assert {p for p, _ in s.programs} == names
    assert all(r["note"] == analyse.ANON_NOTE for r in s.programs.values())


def test_a_full_maps_drops_keep_their_bitness_and_are_reported(tmp_path):
    """The kernel's exec total by bitness, less what the keys hold: 32-bit drops go to 32-bit
    "other" (they went to 64-bit "other", and the report said nothing would stop), the
    folded counter says map_full by bitness, and the state keeps when the map filled."""
    db = watchdb.path_in(tmp_path)
    now = time.time()
    s = analyse.State()
    b = _exec("./x", 5, "/home/u/x", is32=False)
    b["n"] = {False: 4, True: 3}            # 3 more 64-bit and 3 32-bit that no key holds
    s.add_batch(b, now - 10, now - 5)
    assert s.folded[("map_full", True)] == 3 and s.folded[("map_full", False)] == 3
    assert s.programs[(analyse.OTHER, True)]["execs"] == 3
    watchdb.save(db, s)
    con = watchdb.connect(db, read_only=True)
    try:
        full = watchdb.full_since(con, now - 86400)
        doc = analyse.readiness(watchdb.programs_since(con, now - 86400),
                                watchdb.paths_since(con, now - 86400), now - 86400, now, full)
    finally:
        con.close()
    assert full["intervals"] == {"64": 1, "32": 1} and full["execs"] == {"64": 3, "32": 3}
    (other,) = doc["stop"]
    assert (other["program"], other["why"], other["execs"]) == ("other", "32-bit", 3)
    assert "3 dropped by the kernel's full exec map" in other["note"]
    text = present.format_text(dict(doc, host="h"))
    assert "stopped nothing" not in text and "exec map filled" in text


def test_the_caps_keep_a_budget_for_compat_programs(tmp_path):
    """Past --max-programs of 64-bit programs, a new 32-bit program, and a 64-bit one a window
    saw entering by int 0x80, are still named (a shared cap folded every one into "other",
    for good: after a restart the reloaded 64-bit rows filled it again)."""
    db = watchdb.path_in(tmp_path)
    s = analyse.State(max_programs=5)
    s.add_batch(batch([f"/usr/bin/t{i}" for i in range(20)]), 0.0, 1.0)
    assert s.folded[("cap", False)] == 15
    s.add_batch(batch(["/opt/new32"], is32=True), 0.0, 2.0)
    assert s.programs[("/opt/new32", True)]["execs"] == 1
    rows, _ = s.add_window({"t0": 1.0, "t1": 3.0, "seconds": 2.0, "added_ns": None,
                            "added_why": "x", "wlat": [],
                            "programs": [{"program": "/opt/int80-64", "is32": False,
                                          "stops": None, "paths": {"compat_int80_text": {
                                              "calls": 4, "ns_per_s": None, "why": "x"}}}]})
    assert rows[0]["program"] == "/opt/int80-64"
    watchdb.save(db, s, [({"t0": 1.0, "t1": 3.0, "seconds": 2.0}, rows, [])])
    again = analyse.State(max_programs=5)
    watchdb.load(db, again)
    assert ("/opt/new32", True) in again.programs and ("/opt/int80-64", False) in again.programs
    assert sum(1 for p, b in again.programs if not b and p != analyse.OTHER) == 6
    again.add_batch(batch(["/opt/after-restart32"], is32=True), 0.0, 4.0)
    assert again.programs[("/opt/after-restart32", True)]["execs"] == 1
    again.add_batch(batch(["/usr/bin/late64"]), 0.0, 5.0)
    assert ("/usr/bin/late64", False) not in again.programs       # the 64-bit budget is full
