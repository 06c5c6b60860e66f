"""tw fleet --db: the fleet's DuckDB database (store/fleetdb.py).  Ingesting is idempotent,
a host's new run is kept beside its earlier one, outside text only ever travels as a bound
parameter, and the documented queries run."""

import duckdb
import pytest

from conftest import ROOT
from faults_util import tw
from twtools.analyse import rundigest
from twtools.store import fleetdb

RUNS = sorted(p for p in (ROOT / "data" / "machines").glob("*/runs/*") if p.is_dir())
EVIL = "x'); DROP TABLE runs; --\x1b[2J"




@pytest.fixture(scope="module")
def digests():
    return [rundigest.digest(r, f"{r.parent.parent.name}/{r.name}") for r in RUNS]


def test_ingest_is_idempotent_and_keeps_every_run_of_a_host(digests, tmp_path):
    con = fleetdb.connect(tmp_path / "f.duckdb")
    assert fleetdb.ingest(con, digests[:2]) == 2
    assert fleetdb.ingest(con, digests[:2]) == 0          # the same runs again: nothing
    later = dict(digests[2], host=digests[0]["host"])      # the same host, a new run
    assert fleetdb.ingest(con, [later]) == 1
    rows = con.execute("SELECT count(*) FROM runs WHERE host = ?", [digests[0]["host"]]).fetchone()
    assert rows[0] == 2
    n = con.execute("SELECT count(*) FROM cells").fetchone()[0]
    assert n == sum(len(d["cells"]) for d in digests[:3])


def test_hostile_host_names_are_data(digests, tmp_path):
    con = fleetdb.connect(tmp_path / "f.duckdb")
    fleetdb.ingest(con, [dict(digests[0], host=EVIL)])
    assert con.execute("SELECT host FROM runs").fetchall() == [(EVIL,)]
    assert con.execute("SELECT count(*) FROM cells").fetchone()[0] == len(digests[0]["cells"])


def test_the_documented_queries_run(digests, tmp_path):
    con = fleetdb.connect(tmp_path / "f.duckdb")
    fleetdb.ingest(con, digests)
    by_kernel = con.execute(fleetdb.QUERIES["int80-by-kernel"]).fetchall()
    kernels = {d["facts"]["kernel"] for d in digests if "32-int80 null" in d["cells"]}
    assert {r[0] for r in by_kernel} == kernels and all(r[2] > 1 for r in by_kernel)
    con.execute(fleetdb.QUERIES["exit-price-outliers"]).fetchall()
    # Every atlas run is a host of its own, so no host has runs on both sides of a date: one
    # machine measured before and after, every figure three times dearer after, is what the
    # query must find, and it alone.
    base = digests[0]

    def run(when, k, sha):
        cells = {n: dict(c, **{f: c[f] * k for f in ("value", "ci_low", "ci_high")
                               if c.get(f) is not None}) for n, c in base["cells"].items()}
        return dict(base, host="twice", created_utc=when, cells=cells,
                    raw=dict(base["raw"], sha256=sha))
    fleetdb.ingest(con, [run("2026-11-20T00:00:00+00:00", 1, "b" * 64),
                         run("2026-11-28T00:00:00+00:00", 3, "a" * 64)])
    regress = con.execute(fleetdb.QUERIES["regressions-since"],
                          {"since": "2026-11-24T00:00:00Z"}).fetchall()
    dearer = {n for n, c in base["cells"].items() if (c.get("ci_low") or 0) * 3 > c["value"]}
    assert dearer and {r[0] for r in regress} == {"twice"} and {r[1] for r in regress} == dearer, regress
    assert all(r[4] == pytest.approx(3) for r in regress)


def test_tw_fleet_db_adds_a_run_once(tmp_path):
    db = tmp_path / "f.duckdb"
    # two runs of two machines (an AMD EPYC family 26 and a Zen 4 guest): the atlas's two
    # quickest to digest
    for out in ("v1", "v2"):
        p = tw("fleet", *RUNS[2:4], "--db", db, "--out", tmp_path / out, "--json",
               cwd=tmp_path, timeout=600)
        assert p.returncode == 0, p.stderr[-2000:]
    con = duckdb.connect(str(db))
    assert con.execute("SELECT count(*) FROM runs").fetchone()[0] == 2
    assert "0 new run(s), 2 in all" in p.stderr
