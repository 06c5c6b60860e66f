"""`tw watch`'s state on disk: --state DIR/watch.sqlite, SQLite from Python's standard library.

Not DuckDB, the fleet's database (analyse.fleetdb), although the watch was first written on it:
a service that runs for months on every host has a memory budget (100 MB, docs/watch.md), and
DuckDB's module and runtime took 46 MB of the watch's process, which closing the connection
does not give back, where SQLite takes about 1 MB.  The state is a few small tables written
once an interval and read by --report: SQLite's row store, its transactions and its
crash-safety (a rollback journal, synced) are what it needs; the fleet's analytics stay on
DuckDB.

Tables:
  programs  (program, is32) -> execs, first_seen, last_seen (Unix seconds), and the file: dev,
            ino (its device and inode), note (why it is named by them, or what a row from
            schema /2 is), started (the name it was last started by: a label): the readiness
            log.  A program is its file, named by its absolute path (analyse.watch)
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
file is still above `max_bytes`, it is folded, never emptied (bound()): the older half of the
window rows goes, but not the rows that say a program would stop; the days of 64-bit programs
before today fold into "other"; the older half of the days before today fold into one row per
program.  Today's rows and the 32-bit programs of every day are kept whatever the cap.  The
file is compacted after each step (VACUUM, itself one transaction): SQLite does not give
freed pages back otherwise.
Trust: a state the watch did not write, or a damaged one, is refused (check(), StateRefused):
not a regular file, not SQLite, objects the watch does not create (a trigger, a view, a
table or column of its own), another schema version, a failed quick_check, or a value the
watch never writes (execs 'abc', an infinite time, a BLOB name).  A writer checks the file's
objects again every time it opens it, before it writes, so that no trigger planted in the
file ever runs.  The file is created whole (built beside it and linked into place), so a full
disk leaves either no state or a complete empty one.
Memory: load() keeps at most max_programs programs (the 32-bit ones first, then the most
recently seen) whatever the file holds; the rest stay on disk, counted.  The report's queries
select in SQL only what could stop (32-bit, or a compat entry path).
Every value reaches SQLite as a bound parameter (program names come from the machine).
"""
import contextlib
import fcntl
import os
import sqlite3
import stat
import time

SCHEMA = "timewrite-watch-state/3"
SCHEMA_2 = "timewrite-watch-state/2"     # upgraded in place at the start (upgrade())
FILE = "watch.sqlite"
LOCK_WAIT_S = 20.0
Error = sqlite3.Error

SCHEMA_SQL = (
    """CREATE TABLE IF NOT EXISTS programs (program VARCHAR NOT NULL, is32 BOOLEAN NOT NULL,
        execs BIGINT, first_seen DOUBLE, last_seen DOUBLE, dev BIGINT, ino BIGINT,
        note VARCHAR, started VARCHAR, PRIMARY KEY (program, is32))""",
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


OTHER = "other"          # analyse.watch.OTHER (not imported: the layers)
CHECK_S = 60.0           # the most time quick_check may take before the file is taken as read


class StateLocked(RuntimeError):
    """Another process holds the state file for longer than LOCK_WAIT_S."""


class StateRefused(ValueError):
    """The file is not a state this watch wrote, or it is damaged: the reason, one line."""


# What each column holds, as the watch writes it: every row of a file is checked in SQL.
_T, _TN, _B, _N = "text", "text?", "bool", "count"
_TIME, _TIMEN, _NUM, _HI, _NN = "time", "time?", "num?", "hi", "count?"
COLUMNS = {
    "programs": {"program": _T, "is32": _B, "execs": _N, "first_seen": _TIMEN, "last_seen": _TIMEN,
                 "dev": _NN, "ino": _NN, "note": _TN, "started": _TN},
    "days": {"day": "day", "program": _T, "is32": _B, "execs": _N, "first_seen": _TIMEN,
             "last_seen": _TIMEN},
    "calls": {"program": _T, "is32": _B, "path": _T, "calls": _N},
    "windows": {"t0": _TIMEN, "t1": _TIME, "seconds": _NUM, "added_ns": _NUM, "added_lo": _NUM,
                "added_hi": _NUM, "added_why": _TN},
    "paths": {"t": _TIME, "seconds": _NUM, "program": _T, "is32": _B, "path": _T, "calls": _N,
              "ns_per_s": _NUM, "ns_lo": _NUM, "ns_hi": _NUM, "why": _TN, "stops": _TN,
              "exits_per_s": _NUM, "exits_lo": _NUM, "exits_hi": _NUM},
    "wlat": {"t": _TIME, "program": _T, "kind": _T, "sync": _B, "hi_ns": _HI, "writes": _N},
    "wlat_sum": {"t": _TIME, "program": _T, "kind": _T, "sync": _B, "sum_ns": _NUM},
    "folded": {"reason": _T, "n": _N},
    "meta": {"key": _T, "value": _T},
}
MAX_TEXT = 16384         # bytes: a path is at most 4096, escaped four times over
_FINITE = "BETWEEN -1e300 AND 1e300"


# A kind that may be NULL is its kind or NULL.
_OR_NULL = {_TN: _T, _NN: _N, _TIMEN: _TIME}


# The SQL each other kind's column must satisfy: {c} the column, {num} "it is a number".
_CONDS = {
    _T: f"(typeof({{c}}) = 'text' AND length(CAST({{c}} AS BLOB)) <= {MAX_TEXT})",
    _B: "(typeof({c}) = 'integer' AND {c} IN (0, 1))",
    _N: "(typeof({c}) = 'integer' AND {c} >= 0)",
    _TIME: "({num} AND {c} BETWEEN 0 AND 1e11)",
    _NUM: f"({{c}} IS NULL OR ({{num}} AND {{c}} {_FINITE}))",
    _HI: "({num} AND {c} > 0)",
    "day": "(typeof({c}) = 'text' AND {c} GLOB '[0-9][0-9][0-9][0-9]-[0-1][0-9]-[0-3][0-9]')",
}


def _cond(col, kind):
    """SQL true when `col` holds what the watch writes there."""
    if kind in _OR_NULL:
        return f"({col} IS NULL OR {_cond(col, _OR_NULL[kind])})"
    if kind not in _CONDS:
        raise ValueError(kind)
    return _CONDS[kind].format(c=col, num=f"typeof({col}) IN ('integer', 'real')")


_expected = None


def _expected_objects():
    """sqlite_master's (type, name, tbl_name) and each table's columns, as the watch makes them."""
    global _expected
    if _expected is None:
        con = sqlite3.connect(":memory:")
        for sql in SCHEMA_SQL:
            con.execute(sql)
        objs = set(con.execute("SELECT type, name, tbl_name FROM sqlite_master").fetchall())
        cols = {t: [tuple(r[1:3]) for r in con.execute(f"PRAGMA table_info({t})").fetchall()]
                for t in COLUMNS}
        con.close()
        _expected = objs, cols
    return _expected


# Schema /2's programs table: /3's without the file's columns (added at its end by upgrade()).
V2_DROPPED = ("dev", "ino", "note", "started")
V2_NOTE = ("from state /2: named as it was started (execve's argument, maybe relative) or as "
           "/proc showed it, not by its file; no device and inode")


def _check_objects(con, v2=False):
    """None, or why the file's objects are not the watch's (a trigger, a view, another table
    or column): read from sqlite_master before anything is written.  v2: schema /2's."""
    objs, cols = _expected_objects()
    if v2:
        cols = dict(cols, programs=[c for c in cols["programs"] if c[0] not in V2_DROPPED])
    have = set(con.execute("SELECT type, name, tbl_name FROM sqlite_master").fetchall())
    extra = sorted(have - objs)
    if extra:
        t, n, _ = extra[0]
        return (f"it holds a {t} the watch does not create ({n!r}"
                + (f", and {len(extra) - 1} more" if len(extra) > 1 else "") + ")")
    missing = sorted(objs - have)
    if missing:
        return f"it lacks the watch's {missing[0][0]} {missing[0][1]!r}"
    for t, want in cols.items():
        got = [tuple(r[1:3]) for r in con.execute(f"PRAGMA table_info({t})").fetchall()]
        if got != want:
            return f"its table {t!r} has other columns than the watch's"
    return None


def _regular(path):
    """Raise StateRefused unless path is a regular file (a FIFO would hang the open, a device
    or a folder is not a state); FileNotFoundError when there is none."""
    st = os.lstat(path)
    if not stat.S_ISREG(st.st_mode):
        kind = ("a FIFO" if stat.S_ISFIFO(st.st_mode) else "a symbolic link"
                if stat.S_ISLNK(st.st_mode) else "a folder" if stat.S_ISDIR(st.st_mode)
                else "a device or socket")
        raise StateRefused(f"{path} is {kind}, not a file")
    return st


def check(path, deep_s=CHECK_S):
    """Raise StateRefused (one line) unless `path` is a state this watch wrote and whole:
    a regular SQLite file, its objects exactly the watch's, its schema this one, quick_check
    passing (for up to deep_s seconds: past that the file is taken as read so far), every
    value of every row of the kind the watch writes.  Read only, but for the rollback of a
    save cut short (_roll_back_cut_save), which SQLite's next writable opening would do."""
    path = str(path)
    st = _regular(path)
    if st.st_size == 0:
        raise StateRefused(f"{path} is empty (not a SQLite file)")
    with open(path, "rb", opener=lambda p, f: os.open(p, f | os.O_NOFOLLOW | os.O_NONBLOCK)) as f:
        head = f.read(100)
    if not head.startswith(b"SQLite format 3\x00"):
        raise StateRefused(f"{path} is not a SQLite file")
    if len(head) < 100 or st.st_size % 512:
        raise StateRefused(f"{path} is cut short ({st.st_size} bytes: not whole SQLite pages)")
    _roll_back_cut_save(path)
    try:
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True, isolation_level=None,
                              timeout=LOCK_WAIT_S)
    except sqlite3.Error as e:
        raise StateRefused(f"{path}: SQLite cannot open it ({_first(e)})") from None
    try:
        why = _check_objects(con)
        if why:
            try:
                other = con.execute("SELECT value FROM meta WHERE key = 'schema' AND "
                                    "typeof(value) = 'text'").fetchone()
            except sqlite3.Error:
                other = None
            if other and other[0] == SCHEMA_2 and _check_objects(con, v2=True) is None:
                raise StateRefused(f"{path} has state schema {SCHEMA_2!r}; this watch reads "
                                   f"{SCHEMA} (tw watch upgrades a /2 state when it starts)")
            raise StateRefused(f"{path} is not a watch state: {why}")
        m = dict(con.execute("SELECT key, value FROM meta WHERE typeof(key) = 'text' AND "
                             "typeof(value) = 'text' AND key = 'schema'").fetchall())
        if m.get("schema") != SCHEMA:
            found = repr(m["schema"][:80]) if m.get("schema") else "none"
            raise StateRefused(f"{path} has state schema {found}; this watch reads {SCHEMA}"
                               + (" (tw watch upgrades a /2 state when it starts)"
                                  if m.get("schema") == SCHEMA_2 else ""))
        deadline = time.monotonic() + deep_s
        con.set_progress_handler(lambda: time.monotonic() > deadline, 10000)
        try:
            bad = con.execute("PRAGMA quick_check(1)").fetchone()[0]
        except sqlite3.OperationalError as e:
            if "interrupt" not in str(e):
                raise
            bad = "ok"             # taken as read: the row checks below still run
        con.set_progress_handler(None, 0)
        if bad != "ok":
            raise StateRefused(f"{path} is damaged (SQLite's quick_check: {str(bad)[:160]})")
        for t, want in COLUMNS.items():
            conds = " AND ".join(_cond(c, k) for c, k in want.items())
            row = con.execute(f"SELECT {', '.join(want)} FROM {t} WHERE NOT ({conds}) LIMIT 1"
                              ).fetchone()
            if row is not None:
                c = next((c for c, v in zip(want, row)
                          if not con.execute(f"SELECT {_cond('?1', want[c])}", [v]).fetchone()[0]),
                         next(iter(want)))
                v = row[list(want).index(c)]
                shown = repr(v)[:60] if not isinstance(v, bytes) else f"a BLOB of {len(v)} bytes"
                raise StateRefused(f"{path}: a row of {t} holds {c} = {shown}, which the watch "
                                   "never writes")
        for k, v in con.execute("SELECT key, value FROM meta").fetchall():
            try:
                x = (int(v) if k in ("intervals", "windows") else
                     float(v) if k in ("started", "saved", "window_seconds") else 0)
                ok = 0 <= x < 1e11
            except ValueError:
                ok = False
            if not ok:
                raise StateRefused(f"{path}: meta {k} = {v[:60]!r}, which the watch never writes")
    except sqlite3.Error as e:
        raise StateRefused(f"{path} is damaged ({_first(e)})") from None
    finally:
        con.close()


def _first(e):
    return (str(e).splitlines() or [type(e).__name__])[0][:200]


def create(path):
    """A new, empty state, made whole: built in a file beside it, synced, then linked into
    place (a full disk leaves no file, never one without its tables).  Nothing if one is
    there already."""
    path = str(path)
    if os.path.lexists(path):
        return False
    tmp = f"{path}.new-{os.getpid()}"
    try:
        if os.path.lexists(tmp):
            os.unlink(tmp)
        con = sqlite3.connect(tmp, isolation_level=None)
        try:
            con.execute("PRAGMA journal_mode = DELETE")
            con.execute("BEGIN IMMEDIATE")
            for sql in SCHEMA_SQL:
                con.execute(sql)
            con.execute("INSERT OR IGNORE INTO meta VALUES ('schema', ?)", [SCHEMA])
            con.execute("COMMIT")
        finally:
            con.close()
        fd = os.open(tmp, os.O_RDONLY | os.O_NOFOLLOW)
        try:
            os.fchmod(fd, 0o640)
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.link(tmp, path)
        except FileExistsError:
            return False
        d = os.open(os.path.dirname(os.path.abspath(path)), os.O_RDONLY)
        try:
            os.fsync(d)
        finally:
            os.close(d)
        return True
    finally:
        for p in (tmp, tmp + "-journal"):
            try:
                os.unlink(p)
            except FileNotFoundError:
                pass


def set_aside(path, now=None):
    """--state-reset: the state (and a journal of it) renamed beside it, kept; returns the new
    name, or None when there was no state."""
    path = str(path)
    if not os.path.lexists(path):
        return None
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(now or time.time()))
    new, n = f"{path}.reset-{stamp}", 1
    while os.path.lexists(new):
        n += 1
        new = f"{path}.reset-{stamp}-{n}"
    os.rename(path, new)
    if os.path.lexists(path + "-journal"):
        os.rename(path + "-journal", new + "-journal")
    return new


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


def _roll_back_cut_save(path):
    """A save cut short (the watch killed by SIGKILL, the machine down) leaves its rollback
    journal beside the state, and SQLite must roll it back before the file can be read; a
    read-only connection cannot, and said "attempt to write a readonly database" (seen: a
    report right after kill -9 called the state damaged).  So before a read-only opening, a
    writable connection rolls the journal back, as SQLite does on any writable opening,
    holding the file alone for that moment.  Without the right to write, or with another
    process holding the file, nothing is done and the read-only opening says why as before."""
    journal = path + "-journal"
    try:
        if not os.path.isfile(journal) or os.path.getsize(journal) == 0:
            return
        fd = os.open(path, os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        if stat.S_ISREG(os.fstat(fd).st_mode):
            con = sqlite3.connect(path, isolation_level=None, timeout=1)
            try:
                con.execute("SELECT count(*) FROM sqlite_master").fetchone()
            finally:
                con.close()
    except (OSError, sqlite3.Error):
        pass
    finally:
        os.close(fd)


def connect(path, read_only=False, wait=LOCK_WAIT_S):
    """A connection, waiting while another process (the watch, during its interval's save, or
    a report) holds the file; StateLocked past `wait` seconds."""
    path = str(path)
    if read_only and not os.path.lexists(path):
        raise OSError(f"{path}: no such file")
    if not read_only:
        create(path)
    _regular(path)
    if read_only:
        _roll_back_cut_save(path)
    fd = os.open(path, (os.O_RDONLY if read_only else os.O_RDWR) | os.O_CLOEXEC
                 | os.O_NOFOLLOW | os.O_NONBLOCK)
    if not stat.S_ISREG(os.fstat(fd).st_mode):      # swapped in between: not opened by SQLite
        os.close(fd)
        raise StateRefused(f"{path} is not a regular file")
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
            # Before anything is written: a trigger or a table the watch did not make would
            # run or be written into by the statements below.
            why = _check_objects(con)
            if why:
                con.close()
                raise StateRefused(f"{path} is not a watch state: {why}")
            con.execute("PRAGMA journal_mode = DELETE")
            con.execute("PRAGMA synchronous = FULL")
        con.execute("SELECT count(*) FROM sqlite_master").fetchone()   # a foreign file fails here
    except BaseException:
        os.close(fd)
        raise
    return _Con(con, fd)


def _meta(con):
    return dict(con.execute("SELECT key, value FROM meta").fetchall())


def upgrade(path):
    """A schema /2 state upgraded to /3 in place, in one transaction; returns what was done as
    words, or None when the file is not /2 (check() then judges it).  /2 keyed programs by the
    name they were started by (or /proc's path): its rows are kept, each marked (note V2_NOTE,
    started = that name), with no device and inode; new execs are counted by file beside them.
    Written only when the file holds exactly /2's objects (no trigger runs) and passes
    quick_check."""
    path = str(path)
    if not os.path.lexists(path):
        return None
    _regular(path)
    _roll_back_cut_save(path)
    fd = os.open(path, os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK)
    try:
        deadline = time.monotonic() + LOCK_WAIT_S
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise StateLocked(f"{path} is held by another process") from None
                time.sleep(0.2)
        try:
            con = sqlite3.connect(f"file:{path}?mode=ro", uri=True, isolation_level=None)
            try:
                schema = con.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
            finally:
                con.close()
        except sqlite3.Error:
            return None                 # not SQLite, or no meta: check() says why
        if not schema or schema[0] != SCHEMA_2:
            return None
        con = sqlite3.connect(path, isolation_level=None, timeout=LOCK_WAIT_S)
        try:
            why = _check_objects(con, v2=True)
            if why:
                raise StateRefused(f"{path} is not a watch state: {why}")
            bad = con.execute("PRAGMA quick_check(1)").fetchone()[0]
            if bad != "ok":
                raise StateRefused(f"{path} is damaged (SQLite's quick_check: {str(bad)[:160]})")
            con.execute("PRAGMA journal_mode = DELETE")
            con.execute("PRAGMA synchronous = FULL")
            con.execute("BEGIN IMMEDIATE")
            for col, kind in (("dev", "BIGINT"), ("ino", "BIGINT"), ("note", "VARCHAR"),
                              ("started", "VARCHAR")):
                con.execute(f"ALTER TABLE programs ADD COLUMN {col} {kind}")
            n = con.execute("UPDATE programs SET note = ?, started = program WHERE program != ?",
                            [V2_NOTE, OTHER]).rowcount
            con.execute("INSERT OR REPLACE INTO meta VALUES ('schema', ?)", [SCHEMA])
            con.execute("COMMIT")
        except sqlite3.Error as e:
            raise StateRefused(f"{path} is damaged ({_first(e)})") from None
        finally:
            con.close()
    finally:
        os.close(fd)
    return (f"{path} upgraded from {SCHEMA_2} to {SCHEMA}: its {n} program(s) kept, marked as "
            "named by how they were started (no device and inode); new execs are counted by file")


def load(path, state):
    """The state kept on disk into `state` (analyse.watch.State): programs, folded counts,
    calls, window totals.  Nothing when there is no file yet.  Memory is bounded by the
    state's caps whatever the file holds: at most state.max_programs programs are read (the
    32-bit ones first, then the most recently seen; sorted and cut by SQLite), and the rest
    are counted in state.on_disk_only ({is32: [programs, execs]}); they stay in the file and
    in the report, and new execs of theirs fold into "other"."""
    if not os.path.lexists(path):
        return False
    con = connect(path)
    try:
        cap = state.max_programs
        for prog, is32, execs, first, last, dev, ino, note, started in con.execute(
                """SELECT program, is32, execs, first_seen, last_seen, dev, ino, note, started
                   FROM programs WHERE program != ?1 ORDER BY is32 DESC, last_seen DESC
                   LIMIT ?2""", [OTHER, cap]):
            state.programs[(prog, bool(is32))] = {"execs": int(execs or 0), "first": first,
                                                  "last": last, "dev": dev, "ino": ino,
                                                  "note": note, "started": started}
            if dev is not None and ino is not None:
                state.files[(dev, ino)] = prog
        for prog, is32, execs, first, last in con.execute(
                "SELECT program, is32, execs, first_seen, last_seen FROM programs WHERE program = ?",
                [OTHER]):
            state.programs[(prog, bool(is32))] = {"execs": int(execs or 0), "first": first, "last": last}
        n_in = {False: [0, 0], True: [0, 0]}
        for (prog, is32), r in state.programs.items():
            if prog != OTHER:
                n_in[is32][0] += 1
                n_in[is32][1] += r["execs"]
        for is32, n, execs in con.execute(
                "SELECT is32, count(*), total(execs) FROM programs WHERE program != ? GROUP BY is32",
                [OTHER]):
            left = [n - n_in[bool(is32)][0], int(execs) - n_in[bool(is32)][1]]
            if left[0] > 0:
                state.on_disk_only[bool(is32)] = left
        for reason, n in con.execute("SELECT reason, n FROM folded").fetchall():
            state.folded[reason] = int(n)
        for prog, is32, pth, n in con.execute("SELECT program, is32, path, calls FROM calls"):
            if (prog, bool(is32)) in state.programs:       # streamed: the file may hold millions
                state.calls[(prog, bool(is32), pth)] = int(n)
        m = _meta(con)
        state.windows["n"] = int(m.get("windows", 0))
        state.windows["seconds"] = float(m.get("window_seconds", 0.0))
        state.intervals = int(m.get("intervals", 0))
        state.started = float(m["started"]) if m.get("started") else None
        for (kind,) in con.execute("SELECT DISTINCT kind FROM wlat WHERE kind LIKE 'file:%' "
                                   "LIMIT ?", [state.max_kinds]).fetchall():
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


@contextlib.contextmanager
def _written(path, wait=LOCK_WAIT_S):
    """A connection to the state in one write transaction (BEGIN IMMEDIATE): committed when
    the block ends, rolled back when it raises (an interrupt too), closed either way."""
    con = connect(path, wait=wait)
    try:
        con.execute("BEGIN IMMEDIATE")
        yield con
        con.execute("COMMIT")
    except BaseException:
        try:
            con.execute("ROLLBACK")
        except Exception:
            pass
        raise
    finally:
        con.close()


def save(path, state, windows=(), wait=LOCK_WAIT_S):
    """One interval, in one transaction: every program row, the days seen since the last
    save, the folded counts, and each window given as (summary, rows, lat) from
    State.add_window.  The state's pending days are cleared once committed.  StateLocked when
    another process holds the file for longer than `wait` seconds (tw watch --save-wait)."""
    with _written(path, wait) as con:
        _many(con, "INSERT OR REPLACE INTO programs VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
              [[p, is32, r["execs"], r["first"], r["last"], r.get("dev"), r.get("ino"),
                r.get("note"), r.get("started")]
               for (p, is32), r in state.programs.items() if (p, is32) in state.dirty])
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
                  # why: the reason the cost is unknown, else the reason its VM exits are.
                  r["why"] if r["ns_per_s"] is None else r.get("exits_why"), r["stops"],
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
    state.days.clear()
    state.dirty.clear()


# A path row that says a program would stop (32-bit, or a compat way in): the report's
# evidence, kept when the cap drops the older windows.
_STOPS = "(is32 OR path LIKE 'compat%')"


def bound(path, keep_days, max_bytes, now=None):
    """Rotation: window and day rows older than keep_days deleted.  Above max_bytes the file is
    folded, a step at a time, compacted after each, until it fits: (1) the older half of the
    windows goes, but not the path rows that say a program would stop; (2) the days before
    today of 64-bit programs no window saw entering by a compat path fold into one "other"
    row a day; (3) the older half of the days before today fold into one row per program at
    the newest day of that half.  Today's rows, the 32-bit programs of every day and the
    readiness log (programs, bounded by --max-programs) are never deleted: the answer to
    "what would stop" is kept whatever the cap, and when nothing is left to fold the file
    stays above it (said).  Returns what was done, as words."""
    now = now or time.time()
    done = []
    cut = now - keep_days * 86400
    today = time.strftime("%Y-%m-%d", time.gmtime(now))
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
    step = 0
    while os.path.getsize(path) > max_bytes and step < 3:
        with _written(path) as con:
            said = _fold_step(con, step, today)
        if said is None:
            step += 1          # nothing left at this step: the next one
            continue
        done.append(f"{said} (size cap)")
        _rewrite(path)
    if os.path.getsize(path) > max_bytes:
        done.append(f"still {os.path.getsize(path)} bytes, above the cap: today's rows, the "
                    "32-bit programs of every day and the readiness log are kept whatever the "
                    "cap; raise --max-state-mb or lower --max-programs")
    elif done:
        done.append(f"now {os.path.getsize(path)} bytes")
    return done


def _compat_keys(con, since_t=None):
    """temp.compat: the (program, is32) a window saw entering by a compat path (since since_t),
    keyed, so that a million day rows are matched against it by index (a row-value IN on a
    subquery was a scan of the list per row here: minutes)."""
    con.execute("DROP TABLE IF EXISTS temp.compat")
    con.execute("CREATE TEMP TABLE compat (program, is32, PRIMARY KEY (program, is32)) "
                "WITHOUT ROWID")
    con.execute("INSERT OR IGNORE INTO temp.compat SELECT program, is32 FROM paths "
                "WHERE path LIKE 'compat%' AND t >= ?", [since_t if since_t is not None else 0])


def _fold_step(con, step, today):
    """One step of bound()'s folding, in the caller's transaction: what it did, or None when
    there was nothing to do at this step."""
    if step == 0:
        row = con.execute("SELECT t1 FROM windows ORDER BY t1 LIMIT 1 OFFSET "
                          "(SELECT (count(*) - 1) / 2 FROM windows)").fetchone()
        if row is None:
            n = con.execute(f"DELETE FROM paths WHERE NOT {_STOPS}").rowcount
            n += sum(con.execute(f"DELETE FROM {t}").rowcount for t in ("wlat", "wlat_sum"))
            return f"{n} window rows with no window left deleted" if n else None
        cut = row[0]
        n = con.execute("DELETE FROM windows WHERE t1 <= ?", [cut]).rowcount
        con.execute(f"DELETE FROM paths WHERE t <= ? AND NOT {_STOPS}", [cut])
        for t in ("wlat", "wlat_sum"):
            con.execute(f"DELETE FROM {t} WHERE t <= ?", [cut])
        return f"the older half of the windows deleted ({n}; the rows saying what would stop kept)"
    if step == 1:
        _compat_keys(con)
        keep = ("is32 OR program = ?2 OR EXISTS (SELECT 1 FROM temp.compat k WHERE "
                "k.program = days.program AND k.is32 = days.is32)")
        n = con.execute(f"SELECT count(*) FROM days WHERE day < ?1 AND NOT ({keep})",
                        [today, OTHER]).fetchone()[0]
        if not n:
            return None
        con.execute(
            f"""INSERT INTO days SELECT day, ?2, 0, sum(execs), min(first_seen), max(last_seen)
                FROM days WHERE day < ?1 AND NOT ({keep}) GROUP BY day
                ON CONFLICT (day, program, is32) DO UPDATE SET
                execs = days.execs + excluded.execs,
                first_seen = min(days.first_seen, excluded.first_seen),
                last_seen = max(days.last_seen, excluded.last_seen)""", [today, OTHER])
        con.execute(f"DELETE FROM days WHERE day < ?1 AND NOT ({keep})", [today, OTHER])
        return f"{n} day rows of 64-bit programs before today folded into \"other\""
    days = [d for (d,) in con.execute("SELECT DISTINCT day FROM days WHERE day < ? ORDER BY day",
                                      [today]).fetchall()]
    if len(days) < 2:
        return None
    first, last = days[0], days[(len(days) - 1) // 2]
    if first == last:
        last = days[1]
    n = con.execute("SELECT count(*) FROM days WHERE day BETWEEN ? AND ?", [first, last]).fetchone()[0]
    con.execute(
        """CREATE TEMP TABLE fold AS SELECT ?2 AS day, program, is32, sum(execs) AS execs,
           min(first_seen) AS first_seen, max(last_seen) AS last_seen FROM days
           WHERE day BETWEEN ?1 AND ?2 GROUP BY program, is32""", [first, last])
    con.execute("DELETE FROM days WHERE day BETWEEN ? AND ?", [first, last])
    con.execute("INSERT INTO days SELECT * FROM temp.fold")
    con.execute("DROP TABLE temp.fold")
    return f"the days {first} to {last} folded into one row a program on {last} ({n} rows)"


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
    """Programs that could stop (32-bit, or seen by a window entering by a compat path) with
    their execs counted per day since since_t's day, first and last seen.  Selected in SQL:
    a state of a million 64-bit programs is not read into memory for the report."""
    day = time.strftime("%Y-%m-%d", time.gmtime(since_t))
    _compat_keys(con, since_t)
    rows = con.execute(
        """SELECT d.program, d.is32, d.execs, d.first_seen, d.last_seen, p.dev, p.ino, p.note,
                  p.started FROM (
             SELECT program, is32, sum(execs) AS execs, min(first_seen) AS first_seen,
                    max(last_seen) AS last_seen FROM days
             WHERE day >= ?1 AND (is32 OR EXISTS (SELECT 1 FROM temp.compat k WHERE
                 k.program = days.program AND k.is32 = days.is32))
             GROUP BY program, is32 HAVING max(last_seen) >= ?2) d
           LEFT JOIN programs p ON p.program = d.program AND p.is32 = d.is32""", [day, since_t])
    return [{"program": p, "is32": bool(b), "execs": int(e or 0), "first_seen": f, "last_seen": last,
             "dev": dev, "ino": ino, "note": note, "started": started}
            for p, b, e, f, last, dev, ino, note, started in rows]


def paths_since(con, since_t):
    return [{"t": t, "seconds": s, "program": p, "is32": bool(b), "path": pth, "calls": int(n),
             "ns_per_s": None if m is None else {"median": m, "ci_low": lo, "ci_high": hi},
             "why": why if m is None else None, "stops": stops,
             "exits_per_s": None if em is None else {"median": em, "ci_low": elo, "ci_high": ehi},
             "exits_why": why if m is not None and em is None else None}
            for t, s, p, b, pth, n, m, lo, hi, why, stops, em, elo, ehi in con.execute(
                f"SELECT * FROM paths WHERE t >= ? AND {_STOPS} ORDER BY t", [since_t])]


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
    cur = src.execute(f"SELECT * FROM {t}")
    cols = ", ".join(d[0] for d in cur.description)
    rows = cur.fetchall()
    if rows:
        marks = ", ".join(["?"] * len(rows[0]))
        dst.executemany(f"INSERT OR REPLACE INTO {t} ({cols}) VALUES ({marks})", rows)
# Its programs were named as they were started, as in /2: marked so (watchdb.V2_NOTE).
dst.execute("UPDATE programs SET note = ?, started = program WHERE program != 'other' "
            "AND dev IS NULL AND note IS NULL", [sys.argv[4]])
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
    p = subprocess.run([python, "-c", _MIGRATE, old, new, tables, V2_NOTE], capture_output=True,
                       text=True, timeout=600)
    if p.returncode != 0:
        os.unlink(new)
        last = (p.stderr.strip().splitlines() or ["no message"])[-1][:300]
        return f"{old} could not be copied into {FILE} ({last}); starting a new state"
    return f"{old} copied into {new} (the old file is left in place)"
