"""The fleet's embedded database (DuckDB): every compared run's digest, kept, so that a user
can ask the fleet questions in SQL and a kernel CI can add a run an hour beside the others.

Two tables:
  runs   one row per run: run_id (the sha256 of the raw rounds the digest was made from, or of
         the digest itself when computed here), host, created_utc, mode, the fingerprint facts,
         the exit price with its interval, the fitted exits per int 0x80 call, method, ingested_utc;
  cells  one row per (run_id, cell): the undisturbed value with its interval and the ratio to
         the run's reference with its interval.  No key of its own: DuckDB keeps a key's index
         in memory whole (twelve million cells of 100,000 runs did not fit in 512 MB), and
         ingest() writes a run's cells only with its row in runs, which is keyed.

Re-ingesting a run changes nothing (its run_id is there already); a new run of a host already
there is added beside the earlier ones, and both are kept.  Every value reaches DuckDB as a
bound parameter: host names and facts come from machines the user does not control, and no
outside text is ever part of an SQL string.

Why DuckDB: one file, no server, columnar scans for the fleet's group-by queries over millions
of cell rows, and a Python client on PyPI (requirements.txt pins it).  SQLite would hold the
same tables, but its row store makes the per-cell aggregations a full scan of every row.
"""
import datetime
import hashlib
import os
from pathlib import Path

import orjson

from ..core.ui import DataError

# The facts of a machine each run's row keeps (fingerprint.json; machine/doctor.py): the
# columns the fleet groups by (analyse/fleet.py takes them from here).
FACTS = ("vendor", "cpu", "hypervisor", "kernel", "mitigations", "ia32", "fred", "vdso")

SCHEMA_SQL = (
    """CREATE TABLE IF NOT EXISTS runs (
        run_id VARCHAR PRIMARY KEY, host VARCHAR NOT NULL, created_utc VARCHAR, mode VARCHAR,
        vendor VARCHAR, cpu VARCHAR, hypervisor VARCHAR, kernel VARCHAR, mitigations VARCHAR,
        ia32 VARCHAR, fred VARCHAR, vdso VARCHAR,
        exit_price_ns DOUBLE, exit_price_low DOUBLE, exit_price_high DOUBLE,
        exits_per_call DOUBLE, exits_low DOUBLE, exits_high DOUBLE,
        reference VARCHAR, method VARCHAR, ingested_utc VARCHAR,
        source_path VARCHAR, source_key VARCHAR, interval_ops VARCHAR, digest_json VARCHAR)""",
    """CREATE TABLE IF NOT EXISTS cells (
        run_id VARCHAR NOT NULL, cell VARCHAR NOT NULL, variant VARCHAR, op VARCHAR,
        size BIGINT, shape VARCHAR, value DOUBLE, ci_low DOUBLE, ci_high DOUBLE,
        ratio DOUBLE, ratio_low DOUBLE, ratio_high DOUBLE, estimator VARCHAR, pos INTEGER)""",
)
# Columns added since the first version: a database made by it gets them, empty (its runs are
# then read again once, by their source, and keep their rows).
ADDED = (("runs", "source_path", "VARCHAR"), ("runs", "source_key", "VARCHAR"),
         ("runs", "interval_ops", "VARCHAR"), ("runs", "digest_json", "VARCHAR"),
         ("cells", "estimator", "VARCHAR"), ("cells", "pos", "INTEGER"))
RUN_COLS = ("run_id", "host", "created_utc", "mode", *FACTS,
            "exit_price_ns", "exit_price_low", "exit_price_high",
            "exits_per_call", "exits_low", "exits_high", "reference", "method", "ingested_utc",
            "source_path", "source_key", "interval_ops", "digest_json")
CELL_COLS = ("run_id", "cell", "variant", "op", "size", "shape", "value", "ci_low", "ci_high",
             "ratio", "ratio_low", "ratio_high", "estimator", "pos")
CELL_KEYS = CELL_COLS[2:-1]


# DuckDB's own memory: beyond it, a sort (fleet.csv of 100,000 machines is 12 million rows)
# spills to a temporary folder (the connection's private scratch) instead of growing without bound.
MEMORY_LIMIT = "512MB"
# A DuckDB database file begins with a checksum (8 bytes), then this magic.
MAGIC, MAGIC_AT = b"DUCK", 8


def check_path(path, out=None, inputs=()):
    """Before DuckDB sees it: the --db path must be a regular DuckDB file or absent (its WAL
    beside it too), never a symbolic link, never inside --out or an input directory.
    DuckDB given a .csv, .json or .parquet opens an in-memory database over it (nothing kept),
    given a SQLite file it reaches for an extension, given a FIFO it waits forever: each is
    refused here in one line (DataError, exit 3)."""
    import stat
    from ..core import files
    from ..core.ui import DataError, UserError
    p = Path(os.path.abspath(path))
    where = Path(os.path.realpath(p.parent))
    for d, what in ([(out, "--out")] if out is not None else []) + [(d, "an input directory")
                                                                     for d in inputs]:
        d = Path(os.path.realpath(d))
        if where == d or d in where.parents:
            raise UserError(f"{path}: is inside {what} ({d}); the database never lives among "
                            "the files tw writes or reads", "give --db a file elsewhere")
    for q in (p, Path(f"{p}.wal")):
        try:
            st = os.lstat(q)
        except FileNotFoundError:
            continue
        except OSError as e:
            raise OSError(e.errno, e.strerror, str(q)) from None
        if not stat.S_ISREG(st.st_mode):
            target = f" (to {os.readlink(q)})" if stat.S_ISLNK(st.st_mode) else ""
            raise DataError(f"{q}: is {files.kind(st)}{target}, not a DuckDB database file; "
                            "refusing to open it", "give --db a regular file, or a new name")
    try:
        fd = os.open(p, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return p
    except OSError as e:
        raise OSError(e.errno, e.strerror, str(p)) from None
    try:
        head = os.pread(fd, 16, 0)
    finally:
        os.close(fd)
    if head[MAGIC_AT:MAGIC_AT + len(MAGIC)] != MAGIC:
        raise DataError(f"{path}: is not a DuckDB database ({_looks_like(head)}); refusing to "
                        "open it", "give --db a DuckDB file, or a new name for a new one")
    return p


def _looks_like(head):
    """What a file that is not a DuckDB database seems to be, from its first bytes."""
    if not head:
        return "an empty file"
    if head.startswith(b"SQLite format 3"):
        return "a SQLite database"
    if head.startswith(b"PAR1"):
        return "a Parquet file"
    if head.lstrip()[:1] in (b"{", b"["):
        return "it looks like JSON"
    return "no DuckDB header"


def connect(path, scratch=None):
    """A connection to the database at path (created if absent), with DuckDB's outward reach
    off: no extension is installed, loaded or fetched (a SQLite or a remote path must never
    make tw fetch or load code), no file outside the database and scratch is read or
    written (enable_external_access off: no COPY, no read_csv, no ATTACH, no http://), no
    setting under the user's home (home, secrets, extensions, spill all in scratch), and the
    configuration locked.  scratch: a private folder the caller removes (a new one, removed
    at exit, when None).  DuckDB's own errors become one line each (failure())."""
    import duckdb
    if scratch is None:
        import atexit
        import shutil
        import tempfile
        scratch = tempfile.mkdtemp(prefix="tw-fleet-duckdb-")
        atexit.register(shutil.rmtree, scratch, True)
    scratch = Path(os.path.realpath(scratch))
    for sub in ("spill", "csv", "ext", "repo"):
        (scratch / sub).mkdir(parents=True, exist_ok=True)
    config = {"autoinstall_known_extensions": False, "autoload_known_extensions": False,
              "allow_community_extensions": False, "allow_unsigned_extensions": False,
              "allow_persistent_secrets": False, "home_directory": str(scratch),
              "extension_directories": [str(scratch / "ext")],
              "custom_extension_repository": str(scratch / "repo"),
              "autoinstall_extension_repository": str(scratch / "repo"),
              "temp_directory": str(scratch / "spill"), "memory_limit": MEMORY_LIMIT}
    try:
        con = duckdb.connect(str(path), config=config)
    except duckdb.Error as e:
        raise failure(path, e) from None
    try:
        # Its progress bar would draw on our stderr, among tw's own progress lines.
        con.execute("SET enable_progress_bar = false")
        con.execute("SET allowed_directories = ?", [[str(scratch / "csv") + "/"]])
        con.execute("SET enable_external_access = false")
        con.execute("SET lock_configuration = true")
        _check_tables(con, path)
        for sql in SCHEMA_SQL:
            con.execute(sql)
        for table, col, typ in ADDED:
            con.execute(f"ALTER TABLE {table} ADD COLUMN IF NOT EXISTS {col} {typ}")
    except duckdb.Error as e:
        con.close()
        raise failure(path, e) from None
    except BaseException:
        con.close()
        raise
    return con


def _check_tables(con, path):
    """DataError when the database holds runs or cells as something other than the tables
    tw made: a view in their place, a column of another type, runs without its key (a
    database edited by hand or by another program)."""
    from ..core.ui import DataError
    want = {"runs": {c: t for c, t in _columns(SCHEMA_SQL[0])},
            "cells": {c: t for c, t in _columns(SCHEMA_SQL[1])}}
    kinds = dict(con.execute("SELECT table_name, table_type FROM information_schema.tables "
                             "WHERE table_schema = 'main'").fetchall())
    for table, cols in want.items():
        if table not in kinds:
            continue
        if kinds[table] != "BASE TABLE":
            raise DataError(f"{path}: {table} is a {kinds[table].lower()}, not the table tw "
                            "made; refusing to use this database",
                            "give --db another file (this one was changed by another program)")
        have = dict(con.execute("SELECT column_name, data_type FROM information_schema.columns "
                                "WHERE table_schema = 'main' AND table_name = ?",
                                [table]).fetchall())
        for c, t in cols.items():
            if c in have and have[c] != t:
                raise DataError(f"{path}: table {table}, column {c}: {have[c]}, not the {t} tw "
                                "writes; refusing to use this database",
                                "give --db another file (this one was changed by another "
                                "program)")
    if "runs" in kinds:
        keyed = con.execute("SELECT count(*) FROM duckdb_constraints() WHERE table_name = 'runs' "
                            "AND constraint_type = 'PRIMARY KEY'").fetchone()[0]
        if not keyed:
            raise DataError(f"{path}: table runs has lost its key (run_id); refusing to use this "
                            "database", "give --db another file (this one was changed by "
                            "another program)")


def _columns(sql):
    """[(column, DuckDB type name)] of one of our CREATE TABLE statements."""
    import re
    body = sql[sql.index("(") + 1:sql.rindex(")")]
    names = {"VARCHAR": "VARCHAR", "DOUBLE": "DOUBLE", "BIGINT": "BIGINT", "INTEGER": "INTEGER"}
    return [(m.group(1), names[m.group(2)])
            for m in re.finditer(r"(\w+) (VARCHAR|DOUBLE|BIGINT|INTEGER)", body)]


def failure(path, e):
    """The one line (a UserError to raise) for DuckDB's error e on the database at path: a
    lock another process holds (named by its PID), a full disk, a read-only file system or a
    refused permission (SystemRefused, exit 4); anything else is a database that is not a
    usable DuckDB database (DataError, exit 3)."""
    import re
    from ..core.ui import DataError, SystemRefused
    msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    m = re.search(r"Conflicting lock is held in (.*) \(PID (\d+)\)", str(e))
    if m:
        return SystemRefused(f"{path}: in use by another process, PID {m.group(2)} "
                             f"({_command(int(m.group(2))) or m.group(1)}); DuckDB lets one "
                             "process at a time write a database",
                             "wait for it to end, or give another --db")
    kept = "the database is as its last complete write left it"
    for words, what, hint in (
            ("No space left on device", f"the disk is full; {kept}", "free space, or give --db "
             "a file on another file system"),
            ("Disk quota exceeded", f"the disk quota is exceeded; {kept}", "free space, or give "
             "--db a file on another file system"),
            ("Read-only file system", "the file system is read-only", "give --db a file on a "
             "writable file system"),
            ("Permission denied", "permission denied", "give --db a file you may write"),
            ("No such file or directory", "its folder does not exist", "make the folder first, "
             "or give --db a file in an existing one")):
        if words in str(e):
            return SystemRefused(f"{path}: {what} (DuckDB: {msg[:300]})", hint)
    return DataError(f"{path}: not a usable DuckDB database (DuckDB: {msg[:300]})",
                     "give --db another file, or move this one away to start a new database")


class errors:
    """`with errors(path):` turns DuckDB's errors in the block into failure()'s one line (a
    full disk at COMMIT, a database damaged beyond its header)."""

    def __init__(self, path):
        self.path = path

    def __enter__(self):
        return self

    def __exit__(self, typ, e, tb):
        import duckdb
        if e is not None and isinstance(e, duckdb.Error):
            raise failure(self.path, e) from None
        return False


def _command(pid):
    """The command line of process pid, short, or None."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            words = f.read(4096).split(b"\0")
    except OSError:
        return None
    text = " ".join(w.decode(errors="replace") for w in words if w)
    return text[:200] or None


def run_id(dg):
    """The run's identity: the sha256 of the raw rounds its digest names, else of the digest's
    own figures (a digest computed on the controller from the same rounds gets the same)."""
    raw = dg.get("raw")
    if isinstance(raw, dict) and isinstance(raw.get("sha256"), str):
        return raw["sha256"]
    body = {k: dg.get(k) for k in ("facts", "created_utc", "mode", "cells")}
    return "c-" + hashlib.sha256(orjson.dumps(body, option=orjson.OPT_SORT_KEYS)).hexdigest()


def _iv(d, key):
    v = (d or {}).get(key) or {}
    return (v.get("value"), v.get("ci_low"), v.get("ci_high")) if isinstance(v, dict) \
        else (None, None, None)


def covers(stored, wanted):
    """Whether a run stored with intervals for `stored` ops ('all', or a comma list) has the
    intervals a view of `wanted` (an op, or None for every cell) needs."""
    return stored == "all" or (wanted is not None and wanted in (stored or "").split(","))


def ingest(con, digests, sources=None, ids=None, method=None):
    """Add each digest's run (bound parameters only); returns how many runs were new.

    sources: {host: (path, key)}, where each digest was read from (cli.fleet.source_key): the
    next view skips reading a directory whose files are unchanged.  ids, when given, gets
    {host: the run_id its digest is stored under}.  method: the method column of a digest
    that names none (one computed on the controller: analyse.fleet.ANALYSIS).

    A run already stored (the same raw rounds, the same facts) is not added again; its source
    is brought up to date, and its cells are replaced when this digest has intervals the
    stored one lacks.  The same rounds with other facts (a copied directory whose fingerprint
    was changed) are another row, under the rounds' id and a hash of the facts, so that
    neither hides the other."""
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    stored = {rid: (ops, js) for rid, ops, js in con.execute(
        "SELECT run_id, interval_ops, digest_json FROM runs").fetchall()}
    sources = sources or {}
    ids = {} if ids is None else ids
    new_runs, new_cells, updates, replace = [], [], [], []
    for dg in digests:
        rid = run_id(dg)
        src = sources.get(dg["host"], (None, None))
        ops = dg.get("interval_ops") or "all"
        rest = {k: v for k, v in dg.items() if k not in ("cells", "host", "interval_ops")}
        js = orjson.dumps(rest, option=orjson.OPT_SORT_KEYS).decode()
        if rid in stored and stored[rid][1] not in (js, None):
            rid = f"{rid}:{hashlib.sha256(js.encode()).hexdigest()[:12]}"
        ids[dg["host"]] = rid
        if rid in stored:
            old_ops = stored[rid][0]
            if covers(old_ops, None if ops == "all" else ops) or ops == old_ops:
                if src[0] is not None:
                    updates.append((src[0], src[1], rid))
                continue
            replace.append(rid)
        stored[rid] = (ops, js)
        cz = dg.get("causes") or {}
        f = dg["facts"]
        new_runs.append((rid, dg["host"], dg.get("created_utc"), dg.get("mode"),
                         *(f.get(k) for k in FACTS),
                         *_iv(cz, "exit_price"), *_iv(cz.get("int80"), "exits_per_call"),
                         dg.get("reference"), dg.get("method_name") or method, now,
                         src[0], src[1], ops, js))
        # pos: the cell's place in its digest, so that the view's columns keep the order of
        # the first machine that has each (analyse.fleet.columns) without loading every cell.
        for pos, (name, c) in enumerate(dg["cells"].items()):
            new_cells.append((rid, name, *(c.get(k) for k in CELL_KEYS), pos))
    if new_runs or updates:
        con.execute("BEGIN TRANSACTION")
        for rid in set(replace):
            con.execute("DELETE FROM cells WHERE run_id = ?", [rid])
            con.execute("DELETE FROM runs WHERE run_id = ?", [rid])
        if new_runs:
            _insert(con, "runs", RUN_COLS, new_runs)
            _insert(con, "cells", CELL_COLS, new_cells)
        if updates:
            con.executemany("UPDATE runs SET source_path = ?, source_key = ? WHERE run_id = ?",
                            updates)
        con.execute("COMMIT")
        # Written into the file now: DuckDB's own checkpoint at close swallows a full disk,
        # leaving the runs in the WAL beside it and tw saying nothing.
        con.execute("CHECKPOINT")
    return len(new_runs) - len(set(replace))


def sources(con):
    """{(source path, source key): (run_id, interval_ops)} of every stored run read from one."""
    return {(p, k): (rid, ops) for p, k, rid, ops in con.execute(
        "SELECT source_path, source_key, run_id, interval_ops FROM runs "
        "WHERE source_path IS NOT NULL").fetchall()}


def _want(con, labelled):
    """The temporary table want (label, run_id, rank) of a view's runs, rank being the label's
    place in the view's order (analyse.fleet.view sorts its machines by label)."""
    order = {lab: i for i, lab in enumerate(sorted({lab for lab, _ in labelled}))}
    con.execute("CREATE OR REPLACE TEMP TABLE want (label VARCHAR, run_id VARCHAR, rank BIGINT)")
    _insert(con, "want", ("label", "run_id", "rank"),
            [(lab, rid, order[lab]) for lab, rid in labelled])


def load(con, labelled, check, op=False, refused=None):
    """The digests of the runs [(host label, run_id)], from the database: what the fleet view
    is drawn from.  Each is the digest as ingested (digest_json) with its cells from the
    cells table, under this view's label.

    op: False for every cell; an op (or None, every op) for the view's own cells alone, the
    'ret' shape of that op (analyse.fleet.columns): a view of 100,000 machines cannot hold
    every machine's every cell, and fleet.csv takes them from the database (write_csv).

    The database is outside input too (another version, or a hand, may have changed it): each
    run's row is checked as a host's digest.json is (check: analyse.rundigest.checked, given
    by the caller, since what a digest must hold is the analysis's), a NULL or broken
    digest_json, a cell stored twice or a figure that is not a measurement costs that run
    one line naming the table and the row, appended to refused as {host, run_id, why}."""
    refused = [] if refused is None else refused
    if not labelled:
        return []
    _want(con, labelled)
    # One str object per distinct text: a fleet's machines repeat the same facts, variants
    # and reasons, and 100,000 private copies of each would be most of the view's memory.
    memo = {}

    def shared(o):
        if isinstance(o, str):
            return memo.setdefault(o, o)
        if isinstance(o, dict):
            return {memo.setdefault(k, k): shared(v) for k, v in o.items()}
        if isinstance(o, list):
            return [shared(v) for v in o]
        return o
    base, broken = {}, {}
    for rid, js, ops in _rows(
            con, "SELECT r.run_id, r.digest_json, r.interval_ops FROM runs r "
                 "WHERE r.run_id IN (SELECT run_id FROM want)"):
        if rid in base or rid in broken:
            broken[rid] = "stored twice"
            continue
        try:
            dg = orjson.loads(js) if isinstance(js, str) else None
        except orjson.JSONDecodeError:
            dg = None
        if not isinstance(dg, dict):
            broken[rid] = "its digest_json is " + ("NULL" if js is None else "not a JSON object")
            continue
        base[rid] = shared(dict(dg, interval_ops=ops if isinstance(ops, str) else "all"))
    where, args = "", []
    if op is not False:
        where = " AND c.shape = 'ret'" + (" AND c.op = ?" if op is not None else "")
        args = [op] if op is not None else []
    cells = {}
    for row in _rows(
            con, f"SELECT c.run_id, c.cell, {', '.join('c.' + k for k in CELL_KEYS)} FROM cells c "
                 f"WHERE c.run_id IN (SELECT run_id FROM want){where} "
                 "ORDER BY c.run_id, coalesce(c.pos, 0), c.cell", args):
        mine = cells.setdefault(row[0], {})
        if row[1] in mine:
            broken.setdefault(row[0], f"table cells holds its cell '{str(row[1])[:60]}' twice")
        mine[shared(row[1])] = dict(zip(CELL_KEYS, map(shared, row[2:])))
    out = []
    for label, rid in labelled:
        src = f"database table runs, row run_id '{str(rid)[:80]}'"
        why = broken.get(rid)
        if why is None and rid in base:
            try:
                out.append(check(dict(base[rid], host=label, cells=cells.get(rid, {})), src,
                                 some_cells=op is not False))
                continue
            except DataError as e:
                why = e.line()
        elif why is not None:
            why = f"{src}: {why}"
        if why is not None:
            refused.append({"host": label, "run_id": rid,
                            "why": f"{why}; not compared (run it again without --db, or give "
                                   "a new --db)"})
    return out


def _rows(con, sql, args=(), chunk=20000):
    """The rows of a query, a chunk at a time: a fleet's every row at once, as Python tuples,
    would double the view's peak memory."""
    cur = con.execute(sql, list(args))
    while rows := cur.fetchmany(chunk):
        yield from rows


def all_columns(con, labelled):
    """analyse.fleet.columns of the loaded runs, from the database: every cell of the 'ret'
    shape that some run has, in the order of the first run (by label) that has each."""
    if not labelled:
        return []
    _want(con, labelled)
    return [r[0] for r in con.execute(
        "SELECT c.cell, min(w.rank * 1000000 + coalesce(c.pos, 0)) AS k FROM cells c "
        "JOIN want w USING (run_id) WHERE c.shape = 'ret' GROUP BY c.cell ORDER BY k, c.cell"
        ).fetchall()]


def csv_text(s):
    """A CSV cell that a spreadsheet would run as a formula (a leading =, +, -, @, tab or
    carriage return) prefixed with a quote, as present.fleet does; None stays None."""
    if isinstance(s, str) and s[:1] in ("=", "+", "-", "@", "\t", "\r"):
        return "'" + s
    return s


def write_csv(con, labelled, path, cols=None):
    """fleet.csv, one row per machine and cell of the 'ret' shape, straight from the
    database (the cells never pass through Python): machines in label order, each machine's
    cells in the order of cols (the view's all_columns; all_columns() when None).  Host
    names, facts, cell names and the reference are outside text: each is shown with its
    control characters made visible (core.escape.controls: no ESC or BEL reaches a terminal
    that cats the file) and guarded against running as a formula (csv_text), once per
    machine and per column, in Python, before the database joins them to the cells."""
    from ..core import escape
    if cols is None:
        cols = all_columns(con, labelled)
    _want(con, labelled)
    con.execute("CREATE OR REPLACE TEMP TABLE colpos (cell VARCHAR, k BIGINT, shown VARCHAR)")
    if cols:
        _insert(con, "colpos", ("cell", "k", "shown"),
                [(c, i, csv_text(escape.controls(c))) for i, c in enumerate(cols)])
    names = ("label", *FACTS, "cpu_name", "reference")
    con.execute("CREATE OR REPLACE TEMP TABLE csvtext (run_id VARCHAR, key VARCHAR, "
                + ", ".join(f"{n} VARCHAR" for n in names) + ")")
    rows = con.execute(
        "SELECT w.run_id, w.label, w.label, " + ", ".join(f"r.{f}" for f in FACTS)
        + ", json_extract_string(r.digest_json, '$.facts.cpu_name'), r.reference "
          "FROM want w JOIN runs r USING (run_id)").fetchall()
    _insert(con, "csvtext", ("run_id", "key", *names),
            [(*r[:2], *(csv_text(escape.controls(v)) for v in r[2:])) for r in rows])
    facts = ", ".join(f"t.{f} AS {f}" for f in FACTS)
    sql = (f"SELECT t.label AS host, {facts}, t.cpu_name AS cpu_name, "
           "p.shown AS cell, c.estimator, c.value AS ns, c.ci_low AS ns_ci_low, "
           "c.ci_high AS ns_ci_high, c.ratio AS x_reference, c.ratio_low AS x_ci_low, "
           "c.ratio_high AS x_ci_high, t.reference "
           "FROM want w JOIN csvtext t ON t.run_id = w.run_id AND t.key = w.label "
           "JOIN cells c ON c.run_id = w.run_id "
           "JOIN colpos p ON p.cell = c.cell ORDER BY w.rank, w.label, p.k")
    # DuckDB writes into the connection's private scratch (the one folder it may write
    # outside the database, connect()); the file is then put in place the one way every
    # file of ours is (core.files: confined, never through a link).
    import tempfile
    from ..core import files
    scratch = Path(con.execute("SELECT current_setting('temp_directory')").fetchall()[0][0]).parent
    with tempfile.TemporaryDirectory(prefix="fleet-csv-", dir=scratch / "csv") as tmp:
        part = os.path.join(tmp, "fleet.csv")
        con.sql(sql).write_csv(part, header=True)
        files.adopt(path, part)


def _insert(con, table, cols, rows):
    """INSERT rows in one statement.  DuckDB runs an executemany row by row (about 1 ms each:
    130,000 cells took minutes), so the rows become one NumPy array per column, which DuckDB
    scans as a table: VARCHAR columns as object arrays of str or None, numbers as float64 or
    int64 arrays beside a mask of their NULLs.  The values are never SQL text."""
    import numpy as np
    types = {r[0]: r[1] for r in con.execute(
        "SELECT column_name, data_type FROM information_schema.columns WHERE table_name = ?",
        [table]).fetchall()}
    n = len(rows)
    data, select = {}, []
    for i, c in enumerate(cols):
        vals = [r[i] for r in rows]
        if types[c] == "VARCHAR":
            arr = np.empty(n, dtype=object)
            arr[:] = [v if v is None or isinstance(v, str) else str(v) for v in vals]
            data[c] = arr
            select.append(c)
            continue
        kind = float if types[c] == "DOUBLE" else np.int64
        data[c] = np.fromiter((0 if v is None else v for v in vals), kind, n)
        data[c + "_null"] = np.fromiter((v is None for v in vals), bool, n)
        select.append(f"CASE WHEN {c}_null THEN NULL ELSE {c} END")
    con.register("tw_insert_rows", data)
    try:
        con.execute(f"INSERT INTO {table} ({', '.join(cols)}) "
                    f"SELECT {', '.join(select)} FROM tw_insert_rows")
    finally:
        con.unregister("tw_insert_rows")


# The documented queries (docs/fleet.md shows them; tests/test_fleetdb.py runs them).
QUERIES = {
    "int80-by-kernel": """
        SELECT r.kernel, count(*) AS runs, median(c.ratio) AS int80_ratio,
               min(c.ratio_low) AS lowest_low, max(c.ratio_high) AS highest_high
        FROM cells c JOIN runs r USING (run_id)
        WHERE c.variant = '32-int80' AND c.op = 'null' AND c.shape = 'ret'
        GROUP BY r.kernel ORDER BY int80_ratio DESC""",
    "exit-price-outliers": """
        WITH s AS (SELECT median(exit_price_ns) AS m,
                          median(abs(exit_price_ns - (SELECT median(exit_price_ns) FROM runs)))
                              AS mad
                   FROM runs WHERE exit_price_ns IS NOT NULL)
        SELECT host, exit_price_ns, exit_price_low, exit_price_high
        FROM runs, s
        WHERE exit_price_ns IS NOT NULL AND abs(exit_price_ns - s.m) > 3 * greatest(s.mad, 0.05 * s.m)
        ORDER BY abs(exit_price_ns - s.m) DESC""",
    "regressions-since": """
        -- $since = the UTC time to compare against, e.g. '2026-11-18T00:00:00Z'
        WITH before AS (SELECT r.host, c.cell, median(c.value) AS v FROM cells c
                        JOIN runs r USING (run_id) WHERE r.created_utc < $since GROUP BY ALL),
             after AS (SELECT r.host, c.cell, min(c.ci_low) AS low, median(c.value) AS v
                       FROM cells c JOIN runs r USING (run_id) WHERE r.created_utc >= $since
                       GROUP BY ALL)
        SELECT host, cell, before.v AS before_ns, after.v AS after_ns, after.v / before.v AS times
        FROM before JOIN after USING (host, cell)
        WHERE after.low > before.v ORDER BY times DESC""",
}
