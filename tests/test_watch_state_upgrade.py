"""A state written by the watch before programs were identified by their file (schema /2) is
upgraded to /3 when the watch starts, and nothing in it is lost.

tests/fixtures/watch/state-2.sqlite was written by the watch of commit c452880 (watchdb.save of
one exec batch: `./a.out` 32-bit run 3 times, `/opt/tw/held` 32-bit, `/usr/bin/ls`): a real /2
file, keyed by the name each program was started by.

Why it can break: a /2 file refused as a foreign schema (the package's upgrade restarts the
watch on the old state: it would stop for good), its programs dropped or taken for files (a
relative `./a.out` shown as if it were a path), the columns added in another order than a new
state's (the object check then refuses the upgraded file), a /2 file with a trigger written
into, a report on a /2 state not saying what to do.  SQLite runs for real; no tracing.
"""
import shutil
import sqlite3

import pytest

from conftest import ROOT
from twtools.analyse import watch as analyse
from twtools.store import watchdb
from twtools.service import watch as service_watch
from twtools.core import ui

FIXTURE = ROOT / "tests" / "fixtures" / "watch" / "state-2.sqlite"


@pytest.fixture
def state2(tmp_path):
    db = tmp_path / watchdb.FILE
    shutil.copy(FIXTURE, db)
    return db


def test_the_fixture_is_a_state_2(state2):
    con = sqlite3.connect(state2)
    assert con.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone() == \
        ("timewrite-watch-state/2",)
    assert [r[1] for r in con.execute("PRAGMA table_info(programs)")] == \
        ["program", "is32", "execs", "first_seen", "last_seen"]


def test_a_state_2_is_upgraded_its_rows_kept_and_marked(state2):
    said = watchdb.upgrade(state2)
    assert said and "upgraded" in said and "3 program(s)" in said
    watchdb.check(state2)                            # a whole /3 state now
    s = analyse.State()
    assert watchdb.load(state2, s)
    row = s.programs[("./a.out", True)]
    assert row["execs"] == 3 and row["dev"] is None and row["ino"] is None
    assert row["started"] == "./a.out" and row["note"] == watchdb.V2_NOTE
    assert s.programs[("/usr/bin/ls", False)]["execs"] == 7
    assert watchdb.upgrade(state2) is None           # once only
    # the report lists the old rows, each saying what it is
    doc = service_watch.report(state2.parent, 10 * 366 * 86400 - 1, now=1764115300.0)
    progs = {s["program"]: s for s in doc["stop"]}
    assert set(progs) == {"./a.out", "/opt/tw/held"}
    assert progs["./a.out"]["note"] == watchdb.V2_NOTE and progs["./a.out"]["execs"] == 3
    assert progs["./a.out"]["dev"] is None


def test_new_execs_of_the_same_program_count_by_file_beside_the_old_row(state2):
    """After the upgrade the old row stays as it was; an exec of a file, even one started as
    ./a.out again, is a program of its own, named by its path."""
    watchdb.upgrade(state2)
    s = analyse.State()
    watchdb.load(state2, s)
    b = {"execs": {("./a.out", 2049, 77, True): {"n": 1, "first_ns": 10**9, "last_ns": 10**9}},
         "paths": {(2049, 77): "/home/u/a.out"}, "why": {(2049, 77): 0}, "n": 1}
    s.add_batch(b, 1764115300.0, 1764115301.0)
    watchdb.save(state2, s)
    watchdb.check(state2)
    s2 = analyse.State()
    watchdb.load(state2, s2)
    assert s2.programs[("./a.out", True)]["execs"] == 3
    new = s2.programs[("/home/u/a.out", True)]
    assert (new["dev"], new["ino"], new["started"], new["note"]) == (2049, 77, "./a.out", None)


def test_the_watch_upgrades_a_state_2_when_it_starts_and_says_so(state2, capsys):
    """What the package's try-restart does: the watch opens its folder's /2 state, upgrades
    it, says so in one line, and loads its programs."""
    from test_watch_store import cli_watch_args
    w = service_watch.Watch(cli_watch_args(state2.parent))
    w.open_state()
    err = capsys.readouterr().err
    assert "upgraded from timewrite-watch-state/2 to timewrite-watch-state/3" in err, err
    assert w.state.programs[("./a.out", True)]["note"] == watchdb.V2_NOTE
    watchdb.check(state2)


def test_the_report_on_a_state_2_says_the_watch_upgrades_it(state2):
    with pytest.raises(ui.DataError) as e:
        service_watch.report(state2.parent, 86400.0)
    assert "upgrades a /2 state when it starts" in str(e.value)


def test_a_state_2_with_a_trigger_is_refused_not_written(state2):
    con = sqlite3.connect(state2)
    con.execute("CREATE TRIGGER t AFTER UPDATE ON programs BEGIN DELETE FROM days; END")
    con.commit()
    con.close()
    before = state2.read_bytes()
    with pytest.raises(watchdb.StateRefused, match="trigger"):
        watchdb.upgrade(state2)
    assert state2.read_bytes() == before


def test_a_state_of_another_schema_is_left_to_check(state2):
    con = sqlite3.connect(state2)
    con.execute("UPDATE meta SET value = 'timewrite-watch-state/999' WHERE key = 'schema'")
    con.commit()
    con.close()
    assert watchdb.upgrade(state2) is None
    with pytest.raises(watchdb.StateRefused, match="not a watch state"):
        watchdb.check(state2)
