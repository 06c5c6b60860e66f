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
            ino, gen (its device, inode and generation: a reused inode number is another
            file; gen is stored as a signed 64-bit integer), note (why it is named by them, or
            what a row from schema /2 is), started (the name it was last started by: a
            label): the readiness log.  A program is its file, named by its absolute path
            (analyse.watch)
  days      (day, program, is32) -> execs, first_seen, last_seen that UTC day: what
            `tw watch --report --since 30d` counts within its period
  calls     (program, is32, path) -> calls counted by every window so far
  windows   one row per duty-cycle window: t0, t1, seconds, the ns per call it added (interval)
  paths     (window t1, program, is32, path) -> calls, excess CPU ns per second with its
            interval, or why unknown, and why the program would stop
  wlat      (window t1, program, kind, sync, hi_ns) -> writes; wlat_sum the ns they took
  folded    (reason, is32) -> count (cap, map_full), by bitness
  mapfull   (day, is32) -> intervals in which the kernel's exec map dropped execs of that
            bitness, the execs dropped, first and last time: when and how often it filled
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
table or column of its own), another schema version (a newer one said as such, StateNewer),
a failed quick_check, or a value the watch never writes (execs 'abc', an infinite time, a
BLOB name).  A /2 or /3 state is upgraded only once every row of it passes the same checks.
A state folder or file that another user owns, or that group or others may write, is refused
(check_trust(), StateUntrusted, as sshd's StrictModes refuses such files) unless the caller
allows it: that user could erase or forge the history, or plant a journal that a roll-back
replays.  A writer checks the file's
objects again every time it opens it, before it writes, so that no trigger planted in the
file ever runs.  The file is created whole (built beside it and linked into place), so a full
disk leaves either no state or a complete empty one.
Memory: load() keeps at most max_programs programs of each budget (those that entered a
compat path: 32-bit, or 64-bit with a compat row in calls; and the others), the most recently
seen first, whatever the file holds; the rest stay on disk, counted.  The report's queries
select in SQL only what could stop (32-bit, or a compat entry path).
Every value reaches SQLite as a bound parameter (program names come from the machine).
"""
import contextlib
import fcntl
import os
import sqlite3
import stat
import time

VERSION = 4
SCHEMA_PREFIX = "timewrite-watch-state/"
SCHEMA = f"{SCHEMA_PREFIX}{VERSION}"
SCHEMA_3 = f"{SCHEMA_PREFIX}3"     # upgraded in place at the start (upgrade())
SCHEMA_2 = f"{SCHEMA_PREFIX}2"     # the same
UPGRADES = (2, 3)
FILE = "watch.sqlite"
LOCK = "watch.lock"
LOCK_WAIT_S = 20.0
Error = sqlite3.Error

# Each table as the watch makes it; the older versions' differences in _schema_sql.
_TABLES = {
    "programs": """CREATE TABLE IF NOT EXISTS programs (program VARCHAR NOT NULL,
        is32 BOOLEAN NOT NULL, execs BIGINT, first_seen DOUBLE, last_seen DOUBLE, dev BIGINT,
        ino BIGINT, note VARCHAR, started VARCHAR, gen BIGINT, PRIMARY KEY (program, is32))""",
    "days": """CREATE TABLE IF NOT EXISTS days (day VARCHAR NOT NULL, program VARCHAR NOT NULL,
        is32 BOOLEAN NOT NULL, execs BIGINT, first_seen DOUBLE, last_seen DOUBLE,
        PRIMARY KEY (day, program, is32))""",
    "calls": """CREATE TABLE IF NOT EXISTS calls (program VARCHAR NOT NULL, is32 BOOLEAN NOT NULL,
        path VARCHAR NOT NULL, calls BIGINT, PRIMARY KEY (program, is32, path))""",
    "windows": """CREATE TABLE IF NOT EXISTS windows (t0 DOUBLE, t1 DOUBLE NOT NULL, seconds DOUBLE,
        added_ns DOUBLE, added_lo DOUBLE, added_hi DOUBLE, added_why VARCHAR)""",
    "paths": """CREATE TABLE IF NOT EXISTS paths (t DOUBLE NOT NULL, seconds DOUBLE, program VARCHAR,
        is32 BOOLEAN, path VARCHAR, calls BIGINT, ns_per_s DOUBLE, ns_lo DOUBLE, ns_hi DOUBLE,
        why VARCHAR, stops VARCHAR, exits_per_s DOUBLE, exits_lo DOUBLE, exits_hi DOUBLE)""",
    "wlat": """CREATE TABLE IF NOT EXISTS wlat (t DOUBLE NOT NULL, program VARCHAR, kind VARCHAR,
        sync BOOLEAN, hi_ns DOUBLE, writes BIGINT)""",
    "wlat_sum": """CREATE TABLE IF NOT EXISTS wlat_sum (t DOUBLE NOT NULL, program VARCHAR, kind VARCHAR,
        sync BOOLEAN, sum_ns DOUBLE)""",
    "folded": """CREATE TABLE IF NOT EXISTS folded (reason VARCHAR NOT NULL, is32 BOOLEAN NOT NULL,
        n BIGINT, PRIMARY KEY (reason, is32))""",
    "mapfull": """CREATE TABLE IF NOT EXISTS mapfull (day VARCHAR NOT NULL, is32 BOOLEAN NOT NULL,
        intervals BIGINT, execs BIGINT, first_seen DOUBLE, last_seen DOUBLE,
        PRIMARY KEY (day, is32))""",
    "meta": """CREATE TABLE IF NOT EXISTS meta (key VARCHAR PRIMARY KEY, value VARCHAR)""",
}
# Schema /3 and /2's tables, where they differ: /3 had no gen, folded by reason alone and no
# mapfull; /2 had none of the file's columns either.
_V3_PROGRAMS = """CREATE TABLE IF NOT EXISTS programs (program VARCHAR NOT NULL,
        is32 BOOLEAN NOT NULL, execs BIGINT, first_seen DOUBLE, last_seen DOUBLE, dev BIGINT,
        ino BIGINT, note VARCHAR, started VARCHAR, PRIMARY KEY (program, is32))"""
_V2_PROGRAMS = """CREATE TABLE IF NOT EXISTS programs (program VARCHAR NOT NULL,
        is32 BOOLEAN NOT NULL, execs BIGINT, first_seen DOUBLE, last_seen DOUBLE,
        PRIMARY KEY (program, is32))"""
_V3_FOLDED = "CREATE TABLE IF NOT EXISTS folded (reason VARCHAR PRIMARY KEY, n BIGINT)"


def _schema_sql(version=VERSION):
    """The CREATE statements of a schema version (4, 3 or 2)."""
    t = dict(_TABLES)
    if version < 4:
        t.update(programs=_V3_PROGRAMS if version == 3 else _V2_PROGRAMS, folded=_V3_FOLDED)
        del t["mapfull"]
    return tuple(t.values())


SCHEMA_SQL = _schema_sql()
WINDOW_TABLES = ("windows", "paths", "wlat", "wlat_sum")


OTHER = "other"          # analyse.watch.OTHER (not imported: the layers)
CHECK_S = 60.0           # the most time quick_check may take before the file is taken as read


class StateLocked(RuntimeError):
    """Another process holds the state file for longer than LOCK_WAIT_S."""


class StateRefused(ValueError):
    """The file is not a state this watch wrote, or it is damaged: the reason, one line."""


class StateNewer(StateRefused):
    """The state was written by a newer tw (a later schema version): the reason, one line."""


class StateUntrusted(StateRefused):
    """The state folder or a file of it may be changed by another user: the reason, one line."""


# What each column holds, as the watch writes it: every row of a file is checked in SQL.
_T, _TN, _B, _N = "text", "text?", "bool", "count"
_TIME, _TIMEN, _NUM, _HI, _NN = "time", "time?", "num?", "hi", "count?"
_IN = "int?"
COLUMNS = {
    "programs": {"program": _T, "is32": _B, "execs": _N, "first_seen": _TIMEN, "last_seen": _TIMEN,
                 "dev": _NN, "ino": _NN, "note": _TN, "started": _TN, "gen": _IN},
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
    "folded": {"reason": _T, "is32": _B, "n": _N},
    "mapfull": {"day": "day", "is32": _B, "intervals": _N, "execs": _N, "first_seen": _TIME,
                "last_seen": _TIME},
    "meta": {"key": _T, "value": _T},
}


def _columns(version=VERSION):
    """COLUMNS as a schema version had them."""
    if version == VERSION:
        return COLUMNS
    cols = {t: dict(c) for t, c in COLUMNS.items() if t != "mapfull"}
    del cols["programs"]["gen"]
    cols["folded"] = {"reason": _T, "n": _N}
    if version == 2:
        for c in V2_DROPPED:
            del cols["programs"][c]
    return cols


MAX_TEXT = 16384         # bytes: a path is at most 4096, escaped four times over
_FINITE = "BETWEEN -1e300 AND 1e300"


# A kind that may be NULL is its kind or NULL.
_OR_NULL = {_TN: _T, _NN: _N, _TIMEN: _TIME, _IN: "int"}


# The SQL each other kind's column must satisfy: {c} the column, {num} "it is a number".
_CONDS = {
    _T: f"(typeof({{c}}) = 'text' AND length(CAST({{c}} AS BLOB)) <= {MAX_TEXT})",
    _B: "(typeof({c}) = 'integer' AND {c} IN (0, 1))",
    _N: "(typeof({c}) = 'integer' AND {c} >= 0)",
    "int": "(typeof({c}) = 'integer')",
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


_expected = {}


def _expected_objects(version=VERSION):
    """sqlite_master's (type, name, tbl_name) and each table's columns, as the watch makes
    them in a schema version."""
    if version not in _expected:
        con = sqlite3.connect(":memory:")
        for sql in _schema_sql(version):
            con.execute(sql)
        objs = set(con.execute("SELECT type, name, tbl_name FROM sqlite_master").fetchall())
        cols = {t: [tuple(r[1:3]) for r in con.execute(f"PRAGMA table_info({t})").fetchall()]
                for t in _columns(version)}
        con.close()
        _expected[version] = objs, cols
    return _expected[version]


# Schema /2's programs table: /3's without the file's columns (added at its end by upgrade()).
V2_DROPPED = ("dev", "ino", "note", "started")
V2_NOTE = ("from state /2: named as it was started (execve's argument, maybe relative) or as "
           "/proc showed it, not by its file; no device and inode")


def _check_objects(con, version=VERSION):
    """None, or why the file's objects are not the watch's (a trigger, a view, another table
    or column) in a schema version: read from sqlite_master before anything is written."""
    objs, cols = _expected_objects(version)
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


def _version(con):
    """(version number, schema text) from the file's meta table, or (None, text or None) when
    it names none this watch knows the form of.  Read in a way a foreign file cannot make fail."""
    try:
        row = con.execute("SELECT value FROM meta WHERE key = 'schema' AND typeof(value) = "
                          "'text'").fetchone()
    except sqlite3.Error:
        return None, None
    text = row[0] if row else None
    if text and text.startswith(SCHEMA_PREFIX) and text[len(SCHEMA_PREFIX):].isdigit() \
            and len(text) < 64:
        return int(text[len(SCHEMA_PREFIX):]), text
    return None, text


def _newer(path, text):
    return StateNewer(f"{path} was written by a newer tw (state schema {text!r}); this tw reads "
                      f"{SCHEMA} and upgrades /2 and /3, and never writes a newer one")


def _check_rows(con, path, version=VERSION):
    """StateRefused unless every value of every row is of the kind the watch writes (in the
    schema version given), and every meta value is a number where one is kept."""
    for t, want in _columns(version).items():
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
        version, found = _version(con)
        if version is not None and version > VERSION:
            raise _newer(path, found)
        why = _check_objects(con)
        if why:
            if version in UPGRADES and _check_objects(con, version) is None:
                raise StateRefused(f"{path} has state schema {found!r}; this watch reads "
                                   f"{SCHEMA} (tw watch upgrades a /{version} state when it "
                                   "starts)")
            raise StateRefused(f"{path} is not a watch state: {why}")
        if found != SCHEMA:
            raise StateRefused(f"{path} has state schema {repr(found[:80]) if found else 'none'}; "
                               f"this watch reads {SCHEMA}")
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
        _check_rows(con, path)
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


def _owner(uid):
    import pwd
    try:
        return f"uid {uid} ({pwd.getpwuid(uid).pw_name})"
    except KeyError:
        return f"uid {uid}"


def check_trust(state_dir, uid=None):
    """StateUntrusted (one line) unless no user but root and `uid` (this process's effective
    user by default) can change the state: the folder and every folder above it, and the
    files in it the watch reads (watch.sqlite, its journal, watch.lock, the old watch.duckdb),
    owned by root or uid and writable by neither group nor others; a folder above it may be
    writable by all when it is sticky (/tmp: no one can rename or remove what they do not
    own there).  As sshd's StrictModes: another user who may write there could erase or
    forge the history, or plant a journal that the next opening replays.  PermissionError
    when this user may not look into the folder (the caller says so)."""
    uid = os.geteuid() if uid is None else uid
    ok = (0, uid)
    top = os.path.realpath(str(state_dir))

    def why(p, st, kind):
        if st.st_uid not in ok:
            return f"{p} ({kind}) is owned by {_owner(st.st_uid)}, not by root" + (
                f" or {_owner(uid)}" if uid else "")
        if st.st_mode & 0o022:
            return (f"{p} ({kind}) may be written by its group or by others (mode "
                    f"{stat.S_IMODE(st.st_mode):04o})")
        return None

    p = top
    while True:
        st = os.stat(p)
        w = why(p, st, "the state folder" if p == top else "a folder above the state")
        if w and not (p != top and st.st_uid in ok and st.st_mode & stat.S_ISVTX):
            raise StateUntrusted(f"{w}: another user could change the watch's state")
        if p == os.path.dirname(p):
            break
        p = os.path.dirname(p)
    for name in (FILE, FILE + "-journal", LOCK, OLD_FILE):
        f = os.path.join(top, name)
        try:
            st = os.lstat(f)
        except FileNotFoundError:
            continue
        w = why(f, st, "a state file")
        if w:
            raise StateUntrusted(f"{w}: another user could change the watch's state")


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
    """A schema /2 or /3 state upgraded to /4 in place, in one transaction; returns what was
    done as words, or None when the file is neither (check() then judges it).  Nothing is
    written unless the file holds exactly that version's objects (no trigger runs), passes
    quick_check and every value of every row is of the kind the watch writes: a damaged old
    state is refused as it is, never half upgraded and then refused (an older tw could still
    read it).  /2 keyed programs by the name they were started by (or /proc's path): its rows
    are kept, each marked (note V2_NOTE, started = that name), with no device and inode.  /3's
    files had no generation: their rows keep device and inode, gen NULL (such a row's file is
    never matched by a new exec, whose file is then named by its path again); its folded
    counts were by reason alone: map_full ones were counted as 64-bit then, and stay so;
    the cap's 32-bit ones are what its 32-bit "other" row holds."""
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
                version, found = _version(con)
            finally:
                con.close()
        except sqlite3.Error:
            return None                 # not SQLite, or no meta: check() says why
        if version not in UPGRADES:
            return None
        con = sqlite3.connect(path, isolation_level=None, timeout=LOCK_WAIT_S)
        try:
            why = _check_objects(con, version)
            if why:
                raise StateRefused(f"{path} is not a watch state: {why}")
            bad = con.execute("PRAGMA quick_check(1)").fetchone()[0]
            if bad != "ok":
                raise StateRefused(f"{path} is damaged (SQLite's quick_check: {str(bad)[:160]})")
            try:
                _check_rows(con, path, version)
            except StateRefused as e:
                raise StateRefused(f"{e}; not upgraded (the file is as it was)") from None
            con.execute("PRAGMA journal_mode = DELETE")
            con.execute("PRAGMA synchronous = FULL")
            con.execute("BEGIN IMMEDIATE")
            n = con.execute("SELECT count(*) FROM programs WHERE program != ?",
                            [OTHER]).fetchone()[0]
            if version == 2:
                for col, kind in (("dev", "BIGINT"), ("ino", "BIGINT"), ("note", "VARCHAR"),
                                  ("started", "VARCHAR")):
                    con.execute(f"ALTER TABLE programs ADD COLUMN {col} {kind}")
                con.execute("UPDATE programs SET note = ?, started = program WHERE program != ?",
                            [V2_NOTE, OTHER])
            con.execute("ALTER TABLE programs ADD COLUMN gen BIGINT")
            old = dict(con.execute("SELECT reason, n FROM folded").fetchall())
            other32 = con.execute("SELECT coalesce(sum(execs), 0) FROM programs WHERE "
                                  "program = ? AND is32", [OTHER]).fetchone()[0]
            cap32 = min(old.get("cap", 0), other32)
            con.execute("DROP TABLE folded")
            con.execute(_TABLES["folded"])
            con.execute(_TABLES["mapfull"])
            _many(con, "INSERT INTO folded VALUES (?, ?, ?)",
                  [["cap", 0, old.get("cap", 0) - cap32], ["cap", 1, cap32],
                   ["map_full", 0, old.get("map_full", 0)], ["map_full", 1, 0]])
            con.execute("INSERT OR REPLACE INTO meta VALUES ('schema', ?)", [SCHEMA])
            con.execute("COMMIT")
        except sqlite3.Error as e:
            raise StateRefused(f"{path} is damaged ({_first(e)})") from None
        finally:
            con.close()
    finally:
        os.close(fd)
    return (f"{path} upgraded from {found} to {SCHEMA}: its {n} program(s) kept"
            + (", marked as named by how they were started (no device and inode)"
               if version == 2 else ", their files without a generation (named by path anew "
               "at their next exec)")
            + "; new execs are counted by file")


def signed64(v):
    """A generation (maps.h: up to 2^64 - 1, bit 63 marking a change time) as SQLite's signed
    64-bit integer; None stays None."""
    return None if v is None else v - (1 << 64) if v >= 1 << 63 else v


def unsigned64(v):
    return None if v is None else v + (1 << 64) if v < 0 else v


def load(path, state):
    """The state kept on disk into `state` (analyse.watch.State): programs, folded counts,
    calls, window totals.  Nothing when there is no file yet.  Memory is bounded by the
    state's caps whatever the file holds: at most state.max_programs programs of each budget
    are read (those that entered a compat path, 32-bit or a 64-bit one with a compat row in
    calls, and the others; the most recently seen of each; sorted and cut by SQLite), so that
    no number of 64-bit programs on disk crowds a 32-bit one out of memory; the rest are
    counted in state.on_disk_only ({is32: [programs, execs]}); they stay in the file and in
    the report, and new execs of theirs fold into "other"."""
    if not os.path.lexists(path):
        return False
    con = connect(path)
    try:
        cap = state.max_programs
        compat = ("(is32 OR EXISTS (SELECT 1 FROM calls c WHERE c.program = programs.program "
                  "AND c.is32 = programs.is32 AND c.path LIKE 'compat%'))")
        for in_compat in (True, False):
            for prog, is32, execs, first, last, dev, ino, gen, note, started in con.execute(
                    f"""SELECT program, is32, execs, first_seen, last_seen, dev, ino, gen, note,
                              started FROM programs WHERE program != ?1 AND
                              {'' if in_compat else 'NOT '}{compat}
                       ORDER BY last_seen DESC LIMIT ?2""", [OTHER, cap]):
                gen = unsigned64(gen)
                state.programs[(prog, bool(is32))] = {"execs": int(execs or 0), "first": first,
                                                      "last": last, "dev": dev, "ino": ino,
                                                      "gen": gen, "note": note,
                                                      "started": started}
                state.named[in_compat] += 1
                if in_compat and not is32:
                    state.compat.add((prog, False))
                if dev is not None and ino is not None:
                    state.files[(dev, ino, gen)] = prog
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
        for reason, is32, n in con.execute("SELECT reason, is32, n FROM folded").fetchall():
            state.folded[(reason, bool(is32))] = int(n)
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
        _many(con, "INSERT OR REPLACE INTO programs VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
              [[p, is32, r["execs"], r["first"], r["last"], r.get("dev"), r.get("ino"),
                r.get("note"), r.get("started"), signed64(r.get("gen"))]
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
        _many(con, "INSERT OR REPLACE INTO folded VALUES (?, ?, ?)",
              [[r, b, v] for (r, b), v in state.folded.items()])
        rows = [[d, b, f["intervals"], f["execs"], f["first"], f["last"]]
                for (d, b), f in state.full.items()]
        if rows:
            con.execute(
                f"""INSERT INTO mapfull VALUES {', '.join(['(?, ?, ?, ?, ?, ?)'] * len(rows))}
                    ON CONFLICT (day, is32) DO UPDATE SET
                    intervals = mapfull.intervals + excluded.intervals,
                    execs = mapfull.execs + excluded.execs,
                    first_seen = min(mapfull.first_seen, excluded.first_seen),
                    last_seen = max(mapfull.last_seen, excluded.last_seen)""",
                [v for r in rows for v in r])
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
    state.full.clear()
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
        for t in ("days", "mapfull"):
            n += con.execute(f"DELETE FROM {t} WHERE day < ?",
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


def full_since(con, since_t):
    """When and how often the kernel's exec map filled in the period (by whole UTC days from
    since_t's): {intervals: {"64", "32"} (the intervals in which it dropped execs of that
    bitness), execs: {"64", "32"} (the execs it dropped), first, last}."""
    day = time.strftime("%Y-%m-%d", time.gmtime(since_t))
    out = {"intervals": {"64": 0, "32": 0}, "execs": {"64": 0, "32": 0}, "first": None,
           "last": None}
    for is32, intervals, execs, first, last in con.execute(
            "SELECT is32, sum(intervals), sum(execs), min(first_seen), max(last_seen) FROM "
            "mapfull WHERE day >= ? GROUP BY is32", [day]):
        out["intervals"]["32" if is32 else "64"] = int(intervals or 0)
        out["execs"]["32" if is32 else "64"] = int(execs or 0)
        out["first"] = first if out["first"] is None else min(out["first"], first)
        out["last"] = last if out["last"] is None else max(out["last"], last)
    return out


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
    # the first version's folded was by reason alone: its counts were 64-bit "other"
    cur = src.execute("SELECT reason, false AS is32, n FROM folded" if t == "folded" else
                      f"SELECT * FROM {t}")
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
