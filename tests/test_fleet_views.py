"""tw fleet's views are drawn from its database, and a warm database reads only what changed.

Why it can break: a digest that loses a field on its way through DuckDB (a cell's estimator,
the cost model's brief, a fact), so the view drawn from the database differs from the one drawn
from the digests themselves; a source key that misses a change (a rewritten percall.json then
shows its old figures); a warm view that reads every directory again anyway.  Built from the
atlas's own runs (data/machines), read as `tw fleet --atlas` reads them.
"""
import copy
import json
import os
import shutil

import pytest

from conftest import ROOT  # noqa: F401  (puts scripts/ on the path)
from twtools.analyse import fleet as afleet
from twtools.store import fleetdb
from twtools.cli import fleet as cli_fleet


def _json(v):
    return json.dumps(v, sort_keys=True, default=str)


def copies(tmp_path, which=slice(None)):
    """[(label, a copy of the run in tmp_path)] of the atlas's runs, atlas_jobs()[which]."""
    out = []
    for label, d in cli_fleet.atlas_jobs()[which]:
        c = tmp_path / "runs" / label.replace("/", "_")
        shutil.copytree(d, c)
        out.append((label, c))
    return out


@pytest.fixture
def jobs(tmp_path):
    return copies(tmp_path)


def test_the_view_from_the_database_is_the_view_from_the_digests(jobs, tmp_path, monkeypatch):
    # The digests the database is filled from, as cli_fleet.compare made them (a copy, taken
    # before they are stored), are the ones the direct view is drawn from: digesting the
    # runs a second time for it would give the same ones.
    made = []
    real = cli_fleet.compare

    def keeping(js, *a, **k):
        got = real(js, *a, **k)
        made.append(copy.deepcopy(got))
        return got
    monkeypatch.setattr(cli_fleet, "compare", keeping)
    con = fleetdb.connect(tmp_path / "f.duckdb")
    loaded, bad, added, labelled = cli_fleet._via_database(con, jobs, 1, "null")
    assert added == len(jobs) and bad == []
    [(digests, refused)] = made
    assert len(digests) == len(jobs) and refused == []
    direct = afleet.view(digests, refused, "null")
    # The database hands over the view's own cells and names the others (all_columns).
    assert {c["op"] for d in loaded for c in d["cells"].values()} == {"null"}
    cols = fleetdb.all_columns(con, labelled)
    assert _json(afleet.view(loaded, bad, "null", all_columns=cols)) == _json(direct)
    # fleet.csv, written by the database, has every machine's every 'ret' cell
    fleetdb.write_csv(con, labelled, tmp_path / "fleet.csv")
    rows = (tmp_path / "fleet.csv").read_text().splitlines()[1:]
    want = sum(1 for d in digests for c in d["cells"].values() if c["shape"] == "ret")
    assert len(rows) == want and want > len(direct["columns"]) * len(jobs)


def test_a_warm_database_reads_only_what_changed(tmp_path, monkeypatch):
    # Three machines' runs (an AMD EPYC family 26, a Zen 4 and an Intel Ice Lake guest: the
    # atlas's three quickest to digest) show it as the six do: one directory changed beside
    # others that did not, then every one read again for a view of every cell.  7 digests
    # where the six runs took 13.
    jobs = copies(tmp_path, slice(2, 5))
    con = fleetdb.connect(tmp_path / "f.duckdb")
    first, _, _, _ = cli_fleet._via_database(con, jobs, 1, "null")
    read = []
    real = cli_fleet.compare

    def counting(js, *a, **k):
        read.extend(h for h, _ in js)
        return real(js, *a, **k)
    monkeypatch.setattr(cli_fleet, "compare", counting)
    again, _, added, _ = cli_fleet._via_database(con, jobs, 1, "null")
    assert read == [] and added == 0
    assert _json(afleet.view(again, [], "null")) == _json(afleet.view(first, [], "null"))
    # one directory's fingerprint rewritten: that one is read again, the rest are not
    label, d = jobs[0]
    fp = json.loads((d / "fingerprint.json").read_text())
    fp["kernel"]["release"] = "9.9.9-changed"
    (d / "fingerprint.json").write_text(json.dumps(fp))
    third, _, _, _ = cli_fleet._via_database(con, jobs, 1, "null")
    assert read == [label]
    assert next(x for x in third if x["host"] == label)["facts"]["kernel"] == "9.9.9-changed"
    # a view of every cell needs every cell's interval: the runs digested for null alone are read again
    read.clear()
    cli_fleet._via_database(con, jobs, 1, None)
    assert sorted(read) == sorted(h for h, _ in jobs)
    read.clear()
    cli_fleet._via_database(con, jobs, 1, "getppid")
    assert read == []


def test_without_db_the_database_is_temporary(tmp_path, monkeypatch, capsys):
    # two machines' runs make a view through a database as six do
    jobs = copies(tmp_path, slice(2, 4))
    # A temporary folder of this test's own: in the shared /tmp another worker's tw fleet
    # has its own tw-fleet-db-* at any moment (seen failing this test with four workers).
    import tempfile
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    opened = []
    connect = fleetdb.connect
    monkeypatch.setattr(fleetdb, "connect", lambda path, **kw: opened.append(path) or
                        connect(path, **kw))
    view, out = cli_fleet.run([str(d) for _, d in jobs], str(tmp_path / "view"), "null", 1,
                              False)
    assert len(view["machines"]) == len(jobs)
    # the view came from a database in the temporary folder, and nothing of it is left
    assert len(opened) == 1 and opened[0].parent.parent == tmp, opened
    assert os.listdir(tmp) == []
