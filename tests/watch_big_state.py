"""Make a large tw watch state for measuring the watch's memory and time against it (issue 43,
class 7: a 515 MB state of a million programs, as a host that ran 100,000 distinct programs a
day for weeks leaves behind).  Repeatable: the same arguments make the same rows.

  python tests/watch_big_state.py DIR [--programs 1000000] [--share32 0.01] [--days 30]

DIR/watch.sqlite is made by the watch's own code (store.watchdb.create, so the state passes
its checks), then filled in SQL: `programs` (one row a program, one in 1/share32 32-bit),
`days` (one row a program on one of the last --days days), `calls` (one native row a
program), and a window with its `paths` rows for every 32-bit program.  Prints the file's
size.  Used by tests/test_watch_store.py (small) and by hand for the figures in
docs/watch.md ("What it costs", a million programs).
"""
import argparse
import os
import sqlite3
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts"))
from twtools.store import watchdb  # noqa: E402


def make(state_dir, programs=1_000_000, share32=0.01, days=30, now=None):
    now = now or time.time()
    os.makedirs(state_dir, exist_ok=True)
    db = watchdb.path_in(state_dir)
    watchdb.create(db)
    every32 = max(1, round(1 / share32)) if share32 else 0
    con = sqlite3.connect(db, isolation_level=None)
    con.execute("PRAGMA journal_mode = OFF")
    con.execute("PRAGMA synchronous = OFF")
    con.execute("BEGIN")

    def rows():
        for i in range(programs):
            is32 = bool(every32) and i % every32 == 0
            t = now - (i % days) * 86400 - (i % 3600)
            yield (f"/srv/build/job-{i % 997:03d}/tool-{i:07d}/bin/x{'32' if is32 else '64'}",
                   int(is32), 1 + i % 50, t - 60, t)

    for name, is32, execs, first, last in rows():
        day = time.strftime("%Y-%m-%d", time.gmtime(last))
        con.execute("INSERT INTO programs (program, is32, execs, first_seen, last_seen) "
                    "VALUES (?, ?, ?, ?, ?)", (name, is32, execs, first, last))
        con.execute("INSERT INTO days VALUES (?, ?, ?, ?, ?, ?)", (day, name, is32, execs, first, last))
        con.execute("INSERT INTO calls VALUES (?, ?, ?, ?)", (name, is32, "native_syscall"
                                                              if not is32 else "compat_int80_text", execs * 100))
        if is32:
            con.execute("INSERT INTO paths VALUES (?, 5.0, ?, 1, 'compat_int80_text', ?, 1e6, 9e5, "
                        "1.1e6, NULL, '32-bit', NULL, NULL, NULL)", (now - 600, name, execs * 100))
    con.execute("INSERT INTO windows VALUES (?, ?, 5.0, 100.0, 90.0, 110.0, NULL)",
                (now - 605, now - 600))
    con.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)",
                    [("intervals", "1000"), ("windows", "1"), ("window_seconds", "5.0"),
                     ("started", str(now - days * 86400)), ("saved", str(now))])
    con.execute("COMMIT")
    con.close()
    return db


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir")
    ap.add_argument("--programs", type=int, default=1_000_000)
    ap.add_argument("--share32", type=float, default=0.01)
    ap.add_argument("--days", type=int, default=30)
    a = ap.parse_args()
    t = time.monotonic()
    db = make(a.dir, a.programs, a.share32, a.days)
    print(f"{db}: {os.path.getsize(db) / 2 ** 20:.0f} MiB, {a.programs} programs, "
          f"{time.monotonic() - t:.0f} s")


if __name__ == "__main__":
    main()
