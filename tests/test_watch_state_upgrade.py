"""A state written by the watch before programs were identified by their file as it is now
(schema /2: keyed by name; /3: by device and inode, no generation) is upgraded to /4 when the
watch starts, and nothing in it is lost; a damaged one is not touched; a newer one is named so.

tests/fixtures/watch/state-2.sqlite was written by the watch of commit c452880 (watchdb.save of
one exec batch: `./a.out` 32-bit run 3 times, `/opt/tw/held` 32-bit, `/usr/bin/ls`): a real /2
file, keyed by the name each program was started by.  tests/fixtures/watch/state-3.sqlite was
written by the watch of commit cf72e38 (watchdb.save of one exec batch against a cap of 3
programs: `/home/u/a.out` 32-bit run 3 times as ./a.out, `/opt/tw/held` 32-bit, `/usr/bin/ls`
7 times, `/opt/tw/over` 32-bit twice past the cap, and 5 execs a full map dropped): a real /3.

Why it can break: a /2 or /3 file refused as a foreign schema (the package's upgrade restarts
the watch on the old state: it would stop for good), its programs dropped or taken for files
(a relative `./a.out` shown as if it were a path), the columns added in another order than a
new state's (the object check then refuses the upgraded file), an old file with a trigger
written into, a damaged old file (a row with execs 'abc', -5 or a BLOB name) upgraded in place
and only then refused (an older package then refuses it too), folded counts given the wrong
bitness, a report on an old state not saying what to do, a state of a newer schema (a package
downgrade) refused with advice to reset instead of "written by a newer tw".  SQLite runs for
real; no tracing.
"""
import os
import shutil
import sqlite3

import pytest

from conftest import ROOT
from twtools.analyse import watch as analyse
from twtools.store import watchdb
from twtools.service import watch as service_watch
from twtools.core import ui

FIXTURE = ROOT / "tests" / "fixtures" / "watch" / "state-2.sqlite"
FIXTURE_3 = ROOT / "tests" / "fixtures" / "watch" / "state-3.sqlite"


@pytest.fixture
def state2(tmp_path):
    db = tmp_path / watchdb.FILE
    shutil.copy(FIXTURE, db)
    return db


@pytest.fixture
def state3(tmp_path):
    db = tmp_path / watchdb.FILE
    shutil.copy(FIXTURE_3, db)
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
    b = {"execs": {(2049, 77, 5, True): {"n": 1, "first_ns": 10**9, "last_ns": 10**9,
                                         "started": "./a.out"}},
         "paths": {(2049, 77, 5): "/home/u/a.out"}, "why": {(2049, 77, 5): 0}, "n": {True: 1}}
    s.add_batch(b, 1764115300.0, 1764115301.0)
    watchdb.save(state2, s)
    watchdb.check(state2)
    s2 = analyse.State()
    watchdb.load(state2, s2)
    assert s2.programs[("./a.out", True)]["execs"] == 3
    new = s2.programs[("/home/u/a.out", True)]
    assert (new["dev"], new["ino"], new["gen"], new["started"], new["note"]) == \
        (2049, 77, 5, "./a.out", None)


def test_the_watch_upgrades_a_state_2_when_it_starts_and_says_so(state2, capsys):
    """What the package's try-restart does: the watch opens its folder's /2 state, upgrades
    it, says so in one line, and loads its programs."""
    from test_watch_store import cli_watch_args
    w = service_watch.Watch(cli_watch_args(state2.parent))
    w.open_state()
    err = capsys.readouterr().err
    assert "upgraded from timewrite-watch-state/2 to timewrite-watch-state/4" in err, err
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


def test_a_state_3_is_upgraded_its_files_kept_and_its_folds_given_their_bitness(state3):
    said = watchdb.upgrade(state3)
    assert said and "upgraded from timewrite-watch-state/3" in said and "3 program(s)" in said
    watchdb.check(state3)
    s = analyse.State()
    watchdb.load(state3, s)
    row = s.programs[("/home/u/a.out", True)]
    assert (row["execs"], row["dev"], row["ino"], row["gen"], row["started"]) == \
        (3, 2049, 77, None, "./a.out")
    # /3 counted the cap's 32-bit folds under 32-bit "other" and every map_full as 64-bit
    assert s.folded == {("cap", True): 2, ("cap", False): 0, ("map_full", False): 5,
                        ("map_full", True): 0}
    # a /3 row's file has no generation: a new exec of (2049, 77) is not given its name
    b = {"execs": {(2049, 77, 9, True): {"n": 1, "first_ns": 10**9, "last_ns": 10**9,
                                         "started": "./evil"}},
         "paths": {(2049, 77, 9): "/home/u/evil"}, "why": {(2049, 77, 9): 0}, "n": {True: 1}}
    s.add_batch(b, 1764115300.0, 1764115301.0)
    assert s.programs[("/home/u/a.out", True)]["execs"] == 3
    assert s.programs[("/home/u/evil", True)]["execs"] == 1


DAMAGED_ROWS = {
    "execs 'abc'": "UPDATE programs SET execs = 'abc' WHERE program != 'other'",
    "execs -5": "UPDATE programs SET execs = -5 WHERE program != 'other'",
    "a BLOB name": "INSERT INTO programs (program, is32, execs, first_seen, last_seen) "
                   "VALUES (x'ff00', 1, 1, 1.0, 2.0)",
    "a text day": "UPDATE days SET execs = 'many'",
}


@pytest.mark.parametrize("version", [2, 3])
@pytest.mark.parametrize("damage", sorted(DAMAGED_ROWS), ids=lambda k: k.replace(" ", "-"))
def test_a_damaged_old_state_is_refused_before_anything_is_written(tmp_path, version, damage):
    """Every row is checked before the upgrade writes: the file stays byte for byte as it
    was (a /2 state upgraded to /3 and then refused could no longer be read by the older
    package either)."""
    db = tmp_path / watchdb.FILE
    shutil.copy(FIXTURE if version == 2 else FIXTURE_3, db)
    con = sqlite3.connect(db)
    con.execute(DAMAGED_ROWS[damage])
    con.commit()
    con.close()
    before = db.read_bytes()
    with pytest.raises(watchdb.StateRefused, match="never writes; not upgraded"):
        watchdb.upgrade(db)
    assert db.read_bytes() == before
    assert not (tmp_path / (watchdb.FILE + "-journal")).exists()


def test_a_state_of_a_newer_schema_is_said_to_be_newer(state2, capsys):
    """A package downgrade leaves a state a newer tw wrote: not upgraded, not written, and
    refused by the report and at the start as "written by a newer tw", with the advice to run
    that tw (not a reset first)."""
    from test_watch_store import cli_watch_args
    con = sqlite3.connect(state2)
    con.execute("UPDATE meta SET value = 'timewrite-watch-state/999' WHERE key = 'schema'")
    con.execute("ALTER TABLE programs ADD COLUMN later VARCHAR")     # what a newer tw may do
    con.commit()
    con.close()
    before = state2.read_bytes()
    assert watchdb.upgrade(state2) is None
    with pytest.raises(watchdb.StateNewer, match="written by a newer tw"):
        watchdb.check(state2)
    with pytest.raises(ui.DataError) as e:
        service_watch.report(state2.parent, 86400.0)
    assert "written by a newer tw" in str(e.value) and "'timewrite-watch-state/999'" in str(e.value)
    assert "run the tw that wrote it" in e.value.hint
    w = service_watch.Watch(cli_watch_args(state2.parent))
    try:
        with pytest.raises(ui.DataError, match="written by a newer tw"):
            w.open_state()
    finally:
        os.close(w._state_lock)
    assert state2.read_bytes() == before


def test_a_state_of_an_unknown_schema_is_not_a_watch_state(state2):
    con = sqlite3.connect(state2)
    con.execute("UPDATE meta SET value = 'something-else/2' WHERE key = 'schema'")
    con.commit()
    con.close()
    assert watchdb.upgrade(state2) is None
    with pytest.raises(watchdb.StateRefused, match="not a watch state"):
        watchdb.check(state2)
