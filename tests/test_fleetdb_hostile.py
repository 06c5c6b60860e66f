"""tw fleet --db FILE with a FILE that is not a database tw made, for real with DuckDB (issue 34).

Why it can break: DuckDB opens whatever it is given.  A .csv, .json or .parquet path becomes an
in-memory database over the file (tw said "2 new runs" and kept nothing); a SQLite file made it
fetch a native extension over HTTP into ~/.duckdb; a FIFO hung connect() forever; a symbolic
link was written through; a database inside --out was overwritten by the view's own files;
every DuckDB failure (truncated, corrupted, empty, a directory, read-only, locked by another
process, a full disk at COMMIT) was a traceback and exit 70; and the rows read back were
trusted (a NULL digest_json gave "0 machines compared, 0 refused").  Each file here is built by
the test, each case is run through `tw fleet` as a user would, and each must end in one line,
exit 3 or 4, with nothing written where the refusal comes first.
"""
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import time

import duckdb
import pytest

from conftest import ROOT
from faults_util import one_line_error, small_fs, tw

RUNS = sorted(p for p in (ROOT / "data" / "machines").glob("*/runs/*") if p.is_dir())[:2]


def fleet(tmp_path, db, *more, out="out", **env):
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    env.setdefault("HOME", home)
    return tw("fleet", *RUNS, "--db", db, "--out", tmp_path / out, *more, cwd=tmp_path,
              timeout=300, **env)


def good_db(tmp_path, name="good.duckdb"):
    db = tmp_path / name
    p = fleet(tmp_path, db, out="first")
    assert p.returncode == 0, p.stderr[-2000:]
    return db


# ---- class 1: a file that is not a DuckDB database ------------------------------------------

def _other_formats(tmp_path):
    csv = tmp_path / "fleet.csv"
    csv.write_text("host,cell,ns\na,64-syscall null,60\n")
    js = tmp_path / "fleet.json"
    js.write_text(json.dumps({"machines": []}))
    pq = tmp_path / "fleet.parquet"
    con = duckdb.connect()
    con.execute(f"COPY (SELECT 1 AS x) TO '{pq}' (FORMAT parquet)")
    con.close()
    empty = tmp_path / "empty.duckdb"
    empty.write_bytes(b"")
    return {"csv": csv, "json": js, "parquet": pq, "empty": empty}


@pytest.mark.parametrize("kind", ["csv", "json", "parquet", "empty"])
def test_another_format_is_refused_untouched(tmp_path, kind):
    f = _other_formats(tmp_path)[kind]
    before = f.read_bytes()
    p = fleet(tmp_path, f)
    line = one_line_error(p, "is not a DuckDB database")
    assert p.returncode == 3, line
    assert f.read_bytes() == before and not (tmp_path / "out").exists()
    assert not os.path.exists(f"{f}.wal")


# ---- class 2: a SQLite file fetches nothing --------------------------------------------------

def _sqlite(path):
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE runs (run_id TEXT)")
    con.commit()
    con.close()


def _no_network():
    """A command prefix running tw in a network namespace of its own (no route anywhere),
    so that a fetch cannot succeed even by accident; [] where unshare cannot make one."""
    r = subprocess.run(["unshare", "-n", "true"], capture_output=True)
    return ["unshare", "-n"] if r.returncode == 0 else []


def test_a_sqlite_file_is_refused_and_nothing_is_fetched(tmp_path):
    db = tmp_path / "fleet.db"
    _sqlite(db)
    home = tmp_path / "home"
    home.mkdir()
    p = subprocess.run(_no_network() + [sys.executable, str(ROOT / "scripts" / "tw"), "fleet",
                                        *map(str, RUNS), "--db", str(db), "--out",
                                        str(tmp_path / "out")],
                       capture_output=True, text=True, timeout=300, cwd=tmp_path,
                       env=dict(os.environ, HOME=str(home)))
    one_line_error(p, "a SQLite database")
    assert p.returncode == 3
    assert not list(home.rglob(".duckdb")) and not (home / ".duckdb").exists()


def test_connect_itself_never_reaches_for_an_extension(tmp_path, monkeypatch):
    """Past the header check too: connect() on a SQLite file, and INSTALL on a connection,
    find no extension anywhere but the private scratch, fetch nothing and write nothing
    under HOME."""
    from twtools.store import fleetdb
    from twtools.core.ui import DataError
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    db = tmp_path / "fleet.db"
    _sqlite(db)
    with pytest.raises(DataError, match="not a usable DuckDB database"):
        fleetdb.connect(db, scratch=tmp_path / "s1")
    con = fleetdb.connect(tmp_path / "ok.duckdb", scratch=tmp_path / "s2")
    for sql in ("INSTALL sqlite", "LOAD sqlite", "SELECT * FROM read_csv('/etc/passwd')",
                "COPY (SELECT 1) TO '/tmp/tw-fleetdb-escape.csv'",
                "SET enable_external_access = true"):
        with pytest.raises(duckdb.Error):
            con.execute(sql)
    con.close()
    assert not (home / ".duckdb").exists() and not os.path.exists("/tmp/tw-fleetdb-escape.csv")
    assert not list((tmp_path / "s2" / "ext").rglob("*.duckdb_extension"))


# ---- class 3: FIFO, link, inside --out or an input -------------------------------------------

def test_a_fifo_is_refused_at_once(tmp_path):
    fifo = tmp_path / "fleet.duckdb"
    os.mkfifo(fifo)
    p = fleet(tmp_path, fifo)
    one_line_error(p, "is a FIFO")
    assert p.returncode == 3 and not (tmp_path / "out").exists()


def test_a_symbolic_link_is_refused_and_its_target_untouched(tmp_path):
    db = good_db(tmp_path)
    before = db.read_bytes()
    link = tmp_path / "link.duckdb"
    link.symlink_to(db)
    p = fleet(tmp_path, link)
    one_line_error(p, "is a symbolic link")
    assert p.returncode == 3
    assert db.read_bytes() == before and not os.path.exists(f"{link}.wal")


def test_a_database_inside_out_or_an_input_is_refused(tmp_path):
    (tmp_path / "out").mkdir()
    p = fleet(tmp_path, tmp_path / "out" / "fleet.duckdb")
    one_line_error(p, "is inside --out")
    assert p.returncode == 2 and not any((tmp_path / "out").iterdir())
    coll = tmp_path / "coll"
    coll.mkdir()
    for r in RUNS:
        shutil.copytree(r, coll / r.name)
    p = tw("fleet", coll, "--db", coll / "fleet.duckdb", "--out", tmp_path / "o2",
           cwd=tmp_path, timeout=300)
    one_line_error(p, "is inside an input directory")
    assert not (coll / "fleet.duckdb").exists() and not (tmp_path / "o2").exists()


# ---- class 4: DuckDB's own failures, one line each -------------------------------------------

def test_truncated_and_corrupted_databases_are_one_line(tmp_path):
    db = good_db(tmp_path)
    whole = db.read_bytes()
    cases = {"truncated": whole[:5000],
             "corrupted": whole[:4096] + bytes((b ^ 0x5A) for b in whole[4096:12288])
             + whole[12288:],
             "header": whole[:12] + b"\0" * 4084 + whole[4096:]}
    for name, data in cases.items():
        f = tmp_path / f"{name}.duckdb"
        f.write_bytes(data)
        p = fleet(tmp_path, f, out=f"out-{name}")
        line = one_line_error(p, "not a usable DuckDB database")
        assert p.returncode == 3, (name, line)
        assert not (tmp_path / f"out-{name}").exists(), name


def test_a_directory_is_refused(tmp_path):
    (tmp_path / "d.duckdb").mkdir()
    p = fleet(tmp_path, tmp_path / "d.duckdb")
    one_line_error(p, "is a directory")
    assert p.returncode == 3


def test_a_read_only_file_system_is_exit_4(tmp_path):
    db = good_db(tmp_path)
    ro = tmp_path / "ro"
    with small_fs(ro, 4096):
        shutil.copy(db, ro / "fleet.duckdb")
        subprocess.run(["mount", "-o", "remount,ro", str(ro)], check=True)
        p = fleet(tmp_path, ro / "fleet.duckdb")
        line = one_line_error(p, "read-only")
        assert p.returncode == 4, line
        p = fleet(tmp_path, ro / "new.duckdb", out="out2")
        one_line_error(p, "read-only")
        assert p.returncode == 4 and not (tmp_path / "out").exists()


def test_a_missing_folder_is_exit_4(tmp_path):
    p = fleet(tmp_path, tmp_path / "no" / "such" / "fleet.duckdb")
    one_line_error(p, "its folder does not exist")
    assert p.returncode == 4 and not (tmp_path / "out").exists()


def test_a_lock_held_by_another_process_names_its_pid(tmp_path):
    db = good_db(tmp_path)
    holder = subprocess.Popen([sys.executable, "-c", "import duckdb, sys, time; "
                               "c = duckdb.connect(sys.argv[1]); print('ready', flush=True); "
                               "time.sleep(120)", str(db)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "ready"
        p = fleet(tmp_path, db)
        line = one_line_error(p, "in use by another process", f"PID {holder.pid}")
        assert p.returncode == 4, line
        assert not (tmp_path / "out").exists()
    finally:
        holder.kill()
        holder.wait()


@pytest.mark.parametrize("kib", [40, 300])
def test_a_full_disk_at_commit_is_exit_4(tmp_path, kib):
    """The database opens (it fits), then the runs' rows do not: with 40 KiB DuckDB fails
    writing its WAL at COMMIT, with 300 KiB at the checkpoint that follows (which DuckDB's
    close would have swallowed, leaving the runs in the WAL and tw saying nothing)."""
    full = tmp_path / "full"
    with small_fs(full, kib):
        p = fleet(tmp_path, full / "fleet.duckdb")
        line = one_line_error(p, "the disk is full")
        assert p.returncode == 4, line
        assert not (tmp_path / "out").exists()


def test_a_full_disk_under_out_leaves_no_lone_page(tmp_path):
    """Class 10: fleet.html, fleet.csv and fleet.json are all written or none is."""
    small = tmp_path / "small"
    with small_fs(small, 32):
        p = fleet(tmp_path, tmp_path / "f.duckdb", out="small/out")
        one_line_error(p, "No space left")
        assert p.returncode == 4
        assert not (small / "out").exists() or not any((small / "out").iterdir())


# ---- class 5: the database's own rows ---------------------------------------------------------

@pytest.mark.parametrize("edit,needle", [
    ("UPDATE runs SET digest_json = NULL WHERE run_id = $rid", "digest_json is NULL"),
    ("UPDATE runs SET digest_json = '{broken' WHERE run_id = $rid", "not a JSON object"),
    ("UPDATE runs SET digest_json = '[1, 2]' WHERE run_id = $rid", "not a JSON object"),
    ("UPDATE runs SET digest_json = json_object('facts', 7, 'reference', 'x') "
     "WHERE run_id = $rid", "facts: not what tw writes"),
    ("UPDATE cells SET value = 1e308 WHERE run_id = $rid", "is not a measurement"),
    ("UPDATE cells SET ci_low = -1e300 WHERE run_id = $rid", "is not a measurement"),
    ("INSERT INTO cells SELECT * FROM cells WHERE run_id = $rid", "twice"),
    ("UPDATE runs SET digest_json = json_merge_patch(digest_json, "
     "'{\"causes\": {\"exit_price\": {\"value\": \"cheap\"}}}') WHERE run_id = $rid",
     "is not a measurement"),
])
def test_a_bad_row_costs_its_run_one_line_naming_the_table_and_row(tmp_path, edit, needle):
    db = good_db(tmp_path)
    con = duckdb.connect(str(db))
    rid = con.execute("SELECT min(run_id) FROM runs").fetchone()[0]
    con.execute(edit, {"rid": rid})
    con.close()
    p = fleet(tmp_path, db, "--json")
    assert p.returncode == 3, p.stderr[-2000:]
    assert "Traceback" not in p.stderr
    view = json.loads(p.stdout)
    assert len(view["machines"]) == len(RUNS) - 1
    assert len(view["refused"]) == 1 and needle in view["refused"][0]["why"], view["refused"]
    assert f"run_id '{rid}'" in view["refused"][0]["why"] and "table" in view["refused"][0]["why"]


@pytest.mark.parametrize("edit,needle", [
    ("CREATE TABLE r2 AS SELECT * FROM runs; DROP TABLE runs; "
     "CREATE VIEW runs AS SELECT * FROM r2", "runs is a view"),
    ("CREATE TABLE r2 AS SELECT * FROM runs; DROP TABLE runs; "
     "CREATE TABLE runs AS SELECT * FROM r2 UNION ALL SELECT * FROM r2", "lost its key"),
    ("ALTER TABLE cells ALTER value TYPE VARCHAR", "column value: VARCHAR"),
])
def test_a_changed_table_refuses_the_database_in_one_line(tmp_path, edit, needle):
    db = good_db(tmp_path)
    con = duckdb.connect(str(db))
    for sql in edit.split("; "):
        con.execute(sql)
    con.close()
    p = fleet(tmp_path, db)
    line = one_line_error(p, needle)
    assert p.returncode == 3, line
    assert not (tmp_path / "out").exists()


def test_messages_are_escaped_once(tmp_path):
    """Class 10: a database name with a newline is shown as \\n once, not \\\\n."""
    db = tmp_path / "a\nb.duckdb"
    p = fleet(tmp_path, db)
    assert p.returncode == 0, p.stderr[-2000:]
    assert "a\\nb.duckdb: 2 new run(s)" in p.stderr and "a\\\\nb" not in p.stderr
    time.sleep(0)


def test_control_bytes_never_reach_fleet_csv(tmp_path):
    """Class 10: a kernel release and a host name holding ESC and BEL reached fleet.csv raw
    (the formula guard held; a `cat fleet.csv` retitled the terminal).  They are shown."""
    evil = "6.1\x1b]0;owned\x07"
    host = tmp_path / "coll" / "h\x1b[2Jx"
    shutil.copytree(RUNS[0], host / RUNS[0].name)
    fp = json.loads((host / RUNS[0].name / "fingerprint.json").read_text())
    fp["kernel"]["release"] = evil
    (host / RUNS[0].name / "fingerprint.json").write_text(json.dumps(fp))
    p = tw("fleet", tmp_path / "coll", "--out", tmp_path / "out", cwd=tmp_path, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    csv = (tmp_path / "out" / "fleet.csv").read_text()
    assert "\x1b" not in csv and "\x07" not in csv
    assert "6.1\\x1b]0;owned\\x07" in csv and "h\\x1b[2Jx" in csv
