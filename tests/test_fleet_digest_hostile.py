"""A host's digest.json whose causes are hostile, and `tw fleet --verify` (issue 34, class 6).

Why it can break: digest.json comes from a host the user does not control, and its `causes`
(the exit price, the int 0x80 fit) was checked only for being an object.  A list, a price
that is a string, a string inside exits_per_call, a negative or a 1e300 price each stopped the
whole fleet (exit 70) or went into the database; a second "causes" key was taken silently
(only a second "cells" was caught).  Each must cost that host one line, and the rest be
compared.  And the sha256 binds a digest to its rounds but cannot prove its figures honest:
`tw fleet --verify` recomputes each digest from its rounds and lists those that disagree.
"""
import json
import shutil

import duckdb
import pytest

from conftest import ROOT
from faults_util import tw
from twtools.analyse import rundigest

RUNS = sorted(p for p in (ROOT / "data" / "machines").glob("*/runs/*") if p.is_dir())[:3]


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    """A collection folder of three hosts, each with the digest.json tw run writes."""
    coll = tmp_path_factory.mktemp("tpl") / "coll"
    for i, r in enumerate(RUNS):
        d = coll / f"host{i}" / r.name
        shutil.copytree(r, d)
        rundigest.write(d)
    return coll


@pytest.fixture
def coll(template, tmp_path):
    c = tmp_path / "coll"
    shutil.copytree(template, c)
    return c


def _digest(coll):
    d = next((coll / "host0").iterdir())
    return d / "digest.json"


PRICE = {"value": 4500.0, "ci_low": 4400.0, "ci_high": 4600.0, "why": None}


@pytest.mark.parametrize("causes,needle", [
    ([], "causes: not an object"),
    ({"exit_price": dict(PRICE, value="4500"), "int80": None}, "causes.exit_price.value"),
    ({"exit_price": dict(PRICE, value=-4500.0, ci_low=-4600.0), "int80": None},
     "causes.exit_price.value"),
    ({"exit_price": dict(PRICE, value=1e300, ci_high=1e300), "int80": None},
     "causes.exit_price.value"),
    ({"exit_price": PRICE, "int80": {"variant": "32-int80", "exits_per_call":
                                     {"value": "1", "ci_low": 0.9, "ci_high": 1.1}}},
     "causes.int80.exits_per_call.value"),
    ({"exit_price": PRICE, "int80": {"variant": "32-int80", "exits_per_call":
                                     {"value": 1e300, "ci_low": 0.9, "ci_high": 1.1}}},
     "causes.int80.exits_per_call.value"),
    ({"exit_price": PRICE, "int80": ["32-int80"]}, "causes.int80: not an object"),
])
def test_hostile_causes_cost_that_host_one_line(coll, tmp_path, causes, needle):
    f = _digest(coll)
    dg = json.loads(f.read_text())
    dg["causes"] = causes
    f.write_text(json.dumps(dg))
    db = tmp_path / "f.duckdb"
    p = tw("fleet", coll, "--db", db, "--out", tmp_path / "out", "--json", cwd=tmp_path,
           timeout=300)
    assert p.returncode == 3 and "Traceback" not in p.stderr, p.stderr[-2000:]
    view = json.loads(p.stdout)
    assert [r["host"] for r in view["refused"]] == ["host0"]
    assert needle in view["refused"][0]["why"], view["refused"]
    assert sorted(m["host"] for m in view["machines"]) == ["host1", "host2"]
    con = duckdb.connect(str(db), read_only=True)
    assert con.execute("SELECT count(*) FROM runs").fetchone()[0] == 2


def test_a_second_causes_key_is_refused(coll, tmp_path):
    f = _digest(coll)
    text = f.read_text()
    forged = json.dumps({"exit_price": PRICE, "int80": None})
    f.write_text(text.replace('"causes":', f'"causes": {forged}, "causes":', 1))
    assert text.count('"causes":') == 1
    p = tw("fleet", coll, "--out", tmp_path / "out", "--json", cwd=tmp_path, timeout=300)
    assert p.returncode == 3, p.stderr[-2000:]
    view = json.loads(p.stdout)
    assert [r["host"] for r in view["refused"]] == ["host0"]
    assert "the key 'causes' appears twice" in view["refused"][0]["why"]


def test_verify_lists_the_forged_digest(coll, tmp_path):
    p = tw("fleet", "--verify", coll, cwd=tmp_path, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "3 agree, 0 disagree" in p.stdout
    # host1 claims a cheaper 64-bit syscall than its rounds give
    d = next((coll / "host1").iterdir())
    dg = json.loads((d / "digest.json").read_text())
    name = next(n for n in dg["cells"] if n.startswith("64-syscall null"))
    c = dg["cells"][name]
    for k in ("value", "ci_low", "ci_high"):
        c[k] = c[k] / 2
    (d / "digest.json").write_text(json.dumps(dg))
    # the fleet itself cannot tell (the figures are plausible, the sha256 is the rounds')
    p = tw("fleet", coll, "--out", tmp_path / "out", cwd=tmp_path, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    p = tw("fleet", "--verify", coll, "--json", cwd=tmp_path, timeout=300)
    assert p.returncode == 3, p.stdout + p.stderr
    rows = {r["host"]: r for r in json.loads(p.stdout)["verified"]}
    assert rows["host1"]["state"] == "disagrees" and name in rows["host1"]["why"]
    assert rows["host0"]["state"] == rows["host2"]["state"] == "agrees"
    assert not (tmp_path / "results").exists()


def test_verify_refuses_to_write(tmp_path):
    p = tw("fleet", "--verify", RUNS[0], "--db", tmp_path / "f.duckdb", cwd=tmp_path)
    assert p.returncode == 2 and "only reads" in p.stderr
    assert not (tmp_path / "f.duckdb").exists()
