"""`tw watch`'s state on disk: --state DIR/watch.sqlite, SQLite from Python's standard library.

Not DuckDB, the fleet's database (analyse.fleetdb), although the watch was first written on it:
a service that runs for months on every host has a memory budget (100 MB, docs/watch.md), and
DuckDB's module and runtime took 46 MB of the watch's process, which closing the connection
does not give back, where SQLite takes about 1 MB.  The state is a few small tables written
once an interval and read by --report: SQLite's row store, its transactions and its
crash-safety (a rollback journal, synced) are what it needs; the fleet's analytics stay on
DuckDB.

Tables:
  programs  (program, is32) -> execs, first_seen, last_seen (Unix seconds): the readiness log
  days      (day, program, is32) -> execs, first_seen, last_seen that UTC day: what
            `tw watch --report --since 30d` counts within its period
  calls     (program, is32, path) -> calls counted by every window so far
  windows   one row per duty-cycle window: t0, t1, seconds, the ns per call it added (interval)
  paths     (window t1, program, is32, path) -> calls, excess CPU ns per second with its
            interval, or why unknown, and why the program would stop
  wlat      (window t1, program, kind, sync, hi_ns) -> writes; wlat_sum the ns they took
  folded    reason -> count (cap, map_full)
  meta      key -> value (started, intervals, windows, window_seconds, schema)

Crash safety: each interval is one transaction, opened, committed and the file closed again
(journal_mode DELETE, synchronous FULL: the journal and the file are synced before COMMIT
returns).  A `kill -9` therefore loses at most the interval being gathered.  A writer holds an
exclusive flock on the file while it is open and a reader a shared one, so `tw watch --report`
reads a committed state while the watch runs, waiting up to LOCK_WAIT_S.
Bounds: windows, paths and wlat rows older than `keep_days` are deleted, days rows too; if the
file is still above `max_bytes`, the oldest half of the window rows go, and the file is
compacted (VACUUM, itself one transaction): SQLite does not give freed pages back otherwise.
Every value reaches SQLite as a bound parameter (program names come from the machine).
"""
import fcntl
import os
import sqlite3
import time

SCHEMA = "timewrite-watch-state/2"
FILE = "watch.sqlite"
LOCK_WAIT_S = 20.0
Error = sqlite3.Error

SCHEMA_SQL = (
    """CREATE TABLE IF NOT EXISTS programs (program VARCHAR NOT NULL, is32 BOOLEAN NOT NULL,
        execs BIGINT, first_seen DOUBLE, last_seen DOUBLE, PRIMARY KEY (program, is32))""",
    """CREATE TABLE IF NOT EXISTS days (day VARCHAR NOT NULL, program VARCHAR NOT NULL,
        is32 BOOLEAN NOT NULL, execs BIGINT, first_seen DOUBLE, last_seen DOUBLE,
        PRIMARY KEY (day, program, is32))""",
    """CREATE TABLE IF NOT EXISTS calls (program VARCHAR NOT NULL, is32 BOOLEAN NOT NULL,
        path VARCHAR NOT NULL, calls BIGINT, PRIMARY KEY (program, is32, path))""",
    """CREATE TABLE IF NOT EXISTS windows (t0 DOUBLE, t1 DOUBLE NOT NULL, seconds DOUBLE,
        added_ns DOUBLE, added_lo DOUBLE, added_hi DOUBLE, added_why VARCHAR)""",
    """CREATE TABLE IF NOT EXISTS paths (t DOUBLE NOT NULL, seconds DOUBLE, program VARCHAR,
        is32 BOOLEAN, path VARCHAR, calls BIGINT, ns_per_s DOUBLE, ns_lo DOUBLE, ns_hi DOUBLE,
        why VARCHAR, stops VARCHAR, exits_per_s DOUBLE, exits_lo DOUBLE, exits_hi DOUBLE)""",
    """CREATE TABLE IF NOT EXISTS wlat (t DOUBLE NOT NULL, program VARCHAR, kind VARCHAR,
        sync BOOLEAN, hi_ns DOUBLE, writes BIGINT)""",
    """CREATE TABLE IF NOT EXISTS wlat_sum (t DOUBLE NOT NULL, program VARCHAR, kind VARCHAR,
        sync BOOLEAN, sum_ns DOUBLE)""",
    """CREATE TABLE IF NOT EXISTS folded (reason VARCHAR PRIMARY KEY, n BIGINT)""",
    """CREATE TABLE IF NOT EXISTS meta (key VARCHAR PRIMARY KEY, value VARCHAR)""",
)
WINDOW_TABLES = ("windows", "paths", "wlat", "wlat_sum")


class StateLocked(RuntimeError):
    """Another process holds the state file for longer than LOCK_WAIT_S."""


def path_in(state_dir):
    return os.path.join(str(state_dir), FILE)


class _Con:
    """A SQLite connection and the flock that stands for it (exclusive for a writer, shared for
    a reader), closed together; execute() as sqlite3's."""

    def __init__(self, con, fd):
        self.con, self.fd = con, fd

    def execute(self, sql, params=()):
        return self.con.execute(sql, params)

    def close(self):
        try:
            self.con.close()
        finally:
            os.close(self.fd)


def connect(path, read_only=False, wait=LOCK_WAIT_S):
    """A connection, waiting while another process (the watch, during its interval's save, or
    a report) holds the file; StateLocked past `wait` seconds."""
    path = str(path)
    if read_only and not os.path.exists(path):
        raise OSError(f"{path}: no such file")
    fd = os.open(path, (os.O_RDONLY if read_only else os.O_RDWR | os.O_CREAT) | os.O_CLOEXEC
                 | os.O_NOFOLLOW, 0o640)
    deadline = time.monotonic() + wait
    while True:
        try:
            fcntl.flock(fd, (fcntl.LOCK_SH if read_only else fcntl.LOCK_EX) | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            if time.monotonic() > deadline:
                os.close(fd)
                raise StateLocked(f"{path} is held by another process") from None
            time.sleep(0.2)
    try:
        if read_only:
            con = sqlite3.connect(f"file:{path}?mode=ro", uri=True, isolation_level=None,
                                  timeout=wait)
        else:
            con = sqlite3.connect(path, isolation_level=None, timeout=wait)
            con.execute("PRAGMA journal_mode = DELETE")
            con.execute("PRAGMA synchronous = FULL")
            for sql in SCHEMA_SQL:
                con.execute(sql)
            con.execute("INSERT OR IGNORE INTO meta VALUES ('schema', ?)", [SCHEMA])
        con.execute("SELECT count(*) FROM sqlite_master").fetchone()   # a foreign file fails here
    except BaseException:
        os.close(fd)
        raise
    return _Con(con, fd)


def _meta(con):
    return dict(con.execute("SELECT key, value FROM meta").fetchall())


def load(path, state):
    """The state kept on disk into `state` (analyse.watch.State): programs, folded counts,
    calls, window totals.  Nothing when there is no file yet."""
    if not os.path.exists(path):
        return False
    con = connect(path)
    try:
        for prog, is32, execs, first, last in con.execute(
                "SELECT program, is32, execs, first_seen, last_seen FROM programs").fetchall():
            state.programs[(prog, bool(is32))] = {"execs": int(execs or 0), "first": first, "last": last}
        for reason, n in con.execute("SELECT reason, n FROM folded").fetchall():
            state.folded[reason] = int(n)
        for prog, is32, pth, n in con.execute("SELECT program, is32, path, calls FROM calls").fetchall():
            state.calls[(prog, bool(is32), pth)] = int(n)
        m = _meta(con)
        state.windows["n"] = int(m.get("windows", 0))
        state.windows["seconds"] = float(m.get("window_seconds", 0.0))
        state.intervals = int(m.get("intervals", 0))
        state.started = float(m["started"]) if m.get("started") else None
        for (kind,) in con.execute("SELECT DISTINCT kind FROM wlat WHERE kind LIKE 'file:%'").fetchall():
            if len(state.kinds) < state.max_kinds:
                state.kinds.add(kind)
    finally:
        con.close()
    return True


CHUNK = 256


def _many(con, sql, rows):
    """Rows inserted a few hundred to a statement (DuckDB's executemany runs one statement a
    row, 30 ms each here), every value a bound parameter.  sql ends in VALUES (?, ...)."""
    head, _, one = sql.rpartition("VALUES")
    one = one.strip()
    for i in range(0, len(rows), CHUNK):
        part = rows[i:i + CHUNK]
        con.execute(f"{head}VALUES {', '.join([one] * len(part))}", [v for r in part for v in r])


def save(path, state, windows=()):
    """One interval, in one transaction: every program row, the days seen since the last
    save, the folded counts, and each window given as (summary, rows, lat) from
    State.add_window.  The state's pending days are cleared once committed."""
    con = connect(path)
    try:
        con.execute("BEGIN IMMEDIATE")
        _many(con, "INSERT OR REPLACE INTO programs VALUES (?, ?, ?, ?, ?)",
              [[p, is32, r["execs"], r["first"], r["last"]] for (p, is32), r in state.programs.items()
               if (p, is32) in state.dirty])
        rows = [[d, p, is32, r["execs"], r["first"], r["last"]] for (d, p, is32), r in state.days.items()]
        for i in range(0, len(rows), CHUNK):
            part = rows[i:i + CHUNK]
            con.execute(
                f"""INSERT INTO days VALUES {', '.join(['(?, ?, ?, ?, ?, ?)'] * len(part))}
                    ON CONFLICT (day, program, is32) DO UPDATE SET
                    execs = days.execs + excluded.execs,
                    first_seen = min(days.first_seen, excluded.first_seen),
                    last_seen = max(days.last_seen, excluded.last_seen)""",
                [v for r in part for v in r])
        _many(con, "INSERT OR REPLACE INTO folded VALUES (?, ?)",
                        [[k, v] for k, v in state.folded.items()])
        _many(con, "INSERT OR REPLACE INTO calls VALUES (?, ?, ?, ?)",
              [[p, is32, pth, n] for (p, is32, pth), n in state.calls.items()
               if (p, is32) in state.dirty])
        for w, rows, lat in windows:
            a = w.get("added_ns") or {}
            con.execute("INSERT INTO windows VALUES (?, ?, ?, ?, ?, ?, ?)",
                        [w.get("t0"), w.get("t1"), w.get("seconds"), a.get("median"),
                         a.get("ci_low"), a.get("ci_high"), w.get("added_why")])
            _many(con, 
                "INSERT INTO paths VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [[w["t1"], w.get("seconds"), r["program"], r["is32"], r["path"], r["calls"],
                  *(((r["ns_per_s"] or {}).get(k)) for k in ("median", "ci_low", "ci_high")),
                  r["why"], r["stops"],
                  *(((r.get("exits_per_s") or {}).get(k)) for k in ("median", "ci_low", "ci_high"))]
                 for r in rows])
            _many(con, 
                "INSERT INTO wlat VALUES (?, ?, ?, ?, ?, ?)",
                [[w["t1"], x["program"], x["kind"], x["sync"],
                  b["hi_ns"] if b["hi_ns"] is not None else float("inf"), b["count"]]
                 for x in lat for b in x["buckets"] if b["count"]])
            _many(con, "INSERT INTO wlat_sum VALUES (?, ?, ?, ?, ?)",
                            [[w["t1"], x["program"], x["kind"], x["sync"], x["sum_ns"]] for x in lat])
        meta = {"intervals": state.intervals, "windows": state.windows["n"],
                "window_seconds": state.windows["seconds"], "saved": time.time()}
        if state.started:
            meta["started"] = state.started
        _many(con, "INSERT OR REPLACE INTO meta VALUES (?, ?)",
                        [[k, str(v)] for k, v in meta.items()])
        con.execute("COMMIT")
        state.days.clear()
        state.dirty.clear()
    except BaseException:
        try:
            con.execute("ROLLBACK")
        except Exception:
            pass
        raise
    finally:
        con.close()


def bound(path, keep_days, max_bytes, now=None):
    """Rotation: window and day rows older than keep_days deleted; above max_bytes, the oldest
    half of the window rows too, and the file rewritten.  Returns what was done, as words."""
    now = now or time.time()
    done = []
    cut = now - keep_days * 86400
    con = connect(path)
    try:
        n = 0
        for t in WINDOW_TABLES:
            col = "t1" if t == "windows" else "t"
            n += con.execute(f"DELETE FROM {t} WHERE {col} < ?", [cut]).rowcount
        n += con.execute("DELETE FROM days WHERE day < ?",
                         [time.strftime("%Y-%m-%d", time.gmtime(cut))]).rowcount
        if n:
            done.append(f"{n} rows older than {keep_days:g} days deleted")
    finally:
        con.close()
    if done:
        _rewrite(path)
    # Above the cap: the older half of the windows, then of the days, until it fits or only
    # the readiness log (programs, bounded by --max-programs) is left.
    while os.path.getsize(path) > max_bytes:
        con = connect(path)
        try:
            cut = None
            for table, col, what in (("windows", "t1", "windows"), ("days", "day", "days")):
                row = con.execute(f"SELECT {col} FROM {table} ORDER BY {col} LIMIT 1 OFFSET "
                                  f"(SELECT count(*) / 2 FROM {table})").fetchone()
                cut = row[0] if row else None
                if cut is not None:
                    break
            if cut is None:
                done.append(f"still {os.path.getsize(path)} bytes with only the readiness log "
                            "left: lower --max-programs")
                break
            tables = WINDOW_TABLES if what == "windows" else ("days",)
            for t in tables:
                c = "t1" if t == "windows" else ("day" if t == "days" else "t")
                con.execute(f"DELETE FROM {t} WHERE {c} <= ?", [cut])
            done.append(f"the older half of the {what} deleted (size cap)")
        finally:
            con.close()
        _rewrite(path)
    if done:
        done.append(f"now {os.path.getsize(path)} bytes")
    return done


def _rewrite(path):
    """Give the deleted rows' pages back to the file system: VACUUM rebuilds the file in one
    transaction (crash-safe, as every commit)."""
    con = connect(path)
    try:
        con.execute("VACUUM")
    finally:
        con.close()


def programs(con):
    return [{"program": p, "is32": bool(b), "execs": int(e or 0), "first_seen": f, "last_seen": last}
            for p, b, e, f, last in con.execute(
                "SELECT program, is32, execs, first_seen, last_seen FROM programs ORDER BY program").fetchall()]


def programs_since(con, since_t):
    """Programs with their execs counted per day since since_t's day, first and last seen."""
    day = time.strftime("%Y-%m-%d", time.gmtime(since_t))
    rows = con.execute(
        """SELECT program, is32, sum(execs), min(first_seen), max(last_seen) FROM days
           WHERE day >= ? GROUP BY program, is32""", [day]).fetchall()
    return [{"program": p, "is32": bool(b), "execs": int(e or 0), "first_seen": f, "last_seen": last}
            for p, b, e, f, last in rows if last is not None and last >= since_t]


def paths_since(con, since_t):
    return [{"t": t, "seconds": s, "program": p, "is32": bool(b), "path": pth, "calls": int(n),
             "ns_per_s": None if m is None else {"median": m, "ci_low": lo, "ci_high": hi},
             "why": why, "stops": stops,
             "exits_per_s": None if em is None else {"median": em, "ci_low": elo, "ci_high": ehi}}
            for t, s, p, b, pth, n, m, lo, hi, why, stops, em, elo, ehi in con.execute(
                "SELECT * FROM paths WHERE t >= ? ORDER BY t", [since_t]).fetchall()]


def meta(con):
    return _meta(con)


def windows_since(con, since_t):
    return con.execute("SELECT count(*), coalesce(sum(seconds), 0) FROM windows WHERE t1 >= ?",
                       [since_t]).fetchone()


OLD_FILE = "watch.duckdb"      # the state before watch-state/2
_MIGRATE = r"""
import sys, duckdb, sqlite3
old, new, tables = sys.argv[1], sys.argv[2], sys.argv[3].split(",")
src = duckdb.connect(old, read_only=True)
dst = sqlite3.connect(new, isolation_level=None)
dst.execute("BEGIN IMMEDIATE")
for t in tables:
    rows = src.execute(f"SELECT * FROM {t}").fetchall()
    if rows:
        marks = ", ".join(["?"] * len(rows[0]))
        dst.executemany(f"INSERT OR REPLACE INTO {t} VALUES ({marks})", rows)
dst.execute("COMMIT")
"""


def migrate(state_dir, python):
    """A state folder from before watch-state/2 (DuckDB's watch.duckdb, no watch.sqlite): its
    rows copied into a new watch.sqlite by a child process (DuckDB's memory then goes with the
    child), the old file left in place.  Returns what was done as words, or None."""
    import subprocess
    old, new = os.path.join(str(state_dir), OLD_FILE), path_in(state_dir)
    if not os.path.exists(old) or os.path.exists(new):
        return None
    con = connect(new)            # the schema, so that every table is there to insert into
    con.close()
    tables = "programs,days,calls,windows,paths,wlat,wlat_sum,folded"
    p = subprocess.run([python, "-c", _MIGRATE, old, new, tables], capture_output=True,
                       text=True, timeout=600)
    if p.returncode != 0:
        os.unlink(new)
        last = (p.stderr.strip().splitlines() or ["no message"])[-1][:300]
        return f"{old} could not be copied into {FILE} ({last}); starting a new state"
    return f"{old} copied into {new} (the old file is left in place)"
