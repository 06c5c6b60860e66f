"""A fleet's results come from machines the user does not fully control: damaged and hostile
directories and archives, built as data here, each costing only its own host.

Why it can break: a fleet reader that trusts a directory follows a percall.json that is a
symbolic link to a file elsewhere, reads a 2 GiB "stage file" whole, turns NaN or 1e308 into
a heat map of nan, accepts a schema from the future as if it knew it, or prints a host name
that holds a terminal escape or a shell command as it is (and a careless script runs it).
An archive a host sends can hold a link, an absolute name or '..' that writes outside the
collection.  Each case checks: one line naming the host and what is wrong, the others still
compared, nothing written outside --out, nothing run.
"""
import functools
import io
import json
import lzma
import os
import shutil
import tarfile

import pytest

from conftest import ROOT
from faults_util import snapshot, tw
from twtools.cli import fleet as cfleet
from twtools.cli.unpack import folder_name
from twtools.core import unpack
from twtools.core.ui import DataError

ATLAS = ROOT / "data" / "machines"
RUNS = sorted(p for p in ATLAS.glob("*/runs/*") if p.is_dir())
HOSTILE_NAME = "evil$(touch PWNED)`touch PWNED2`;x\x1b]0;owned\x07"


@functools.lru_cache(maxsize=None)
def _percall_bytes(run):
    """An atlas run's percall.json, decompressed once however many hosts copy it."""
    return lzma.decompress((run / "percall.json.xz").read_bytes())


def materialise(run, dest):
    """An atlas run as a results directory (meta, fingerprint, percall.json)."""
    dest.mkdir(parents=True)
    shutil.copy(run / "meta.json", dest / "meta.json")
    shutil.copy(run / "fingerprint.json", dest / "fingerprint.json")
    (dest / "percall.json").write_bytes(_percall_bytes(run))
    return dest


def edit_json(path, fn):
    obj = json.loads(path.read_text())
    fn(obj)
    path.write_text(json.dumps(obj))


def first_samples(doc):
    cell = next(c for c in doc["cells"] if c.get("supported") and c.get("rounds"))
    return cell["rounds"][0]["samples_ns"]


@pytest.fixture(scope="module")
def fleet_world(tmp_path_factory):
    """A collection of good hosts and one host for each hostile case, and a decoy outside,
    built once for the file's fleet runs (they only read it)."""
    tmp_path = tmp_path_factory.mktemp("fleet-world")
    coll = tmp_path / "collected"
    for i, run in enumerate(RUNS):
        materialise(run, coll / f"good{i}" / run.name)
    base = RUNS[0]
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "precious.json").write_text('{"schema": "timewrite-percall/2", "cells": []}\n')

    d = materialise(base, coll / "linked" / "run")
    (d / "percall.json").unlink()
    os.symlink(outside / "precious.json", d / "percall.json")

    d = materialise(base, coll / "huge" / "run")
    with open(d / "percall.json", "r+b") as f:      # sparse: 2 GiB on paper, nothing on disk
        f.truncate(2 << 30)

    d = materialise(base, coll / "nan" / "run")
    text = (d / "percall.json").read_text()
    doc = json.loads(text)
    v = first_samples(doc)[0]
    (d / "percall.json").write_text(text.replace(json.dumps(v), "NaN", 1))

    d = materialise(base, coll / "huge-figure" / "run")
    edit_json(d / "percall.json", lambda o: first_samples(o).__setitem__(0, 1e308))

    d = materialise(base, coll / "future" / "run")
    edit_json(d / "meta.json", lambda o: o.__setitem__("schema", "timewrite-results/99"))

    d = materialise(base, coll / "future-percall" / "run")
    edit_json(d / "percall.json", lambda o: o.__setitem__("schema", "timewrite-percall/99"))

    # Shapes no check foresaw (issue 25, class 6): each stopped the whole fleet with exit 70.
    d = materialise(base, coll / "bad-params" / "run")
    def legacy_bad_params(o):
        # A legacy matrix (flat samples, cut into rounds by params.batches) whose params
        # is a list, not the object tw writes.
        for c in o["cells"]:
            c["samples"] = [x for rd in c.pop("rounds", []) for x in rd["samples_ns"]]
        o["params"] = [1, 2]
    edit_json(d / "percall.json", legacy_bad_params)
    d = materialise(base, coll / "bad-reference" / "run")
    edit_json(d / "percall.json", lambda o: o.__setitem__("reference", ["x"]))

    # Issue 25, classes 5 and 7: nothing measured, a key said twice, a -100 ns machine, and
    # more cells than any run measures.
    d = materialise(base, coll / "empty" / "run")
    edit_json(d / "percall.json", lambda o: o.__setitem__("cells", []))
    d = materialise(base, coll / "dup-cells" / "run")
    text = (d / "percall.json").read_text().rstrip()
    assert text.endswith("}")
    (d / "percall.json").write_text(text[:-1] + ', "cells": []}')
    d = materialise(base, coll / "negative" / "run")
    edit_json(d / "percall.json", lambda o: first_samples(o).__setitem__(0, -100.0))
    d = materialise(base, coll / "many-cells" / "run")
    edit_json(d / "percall.json", lambda o: o.__setitem__("cells", o["cells"] * 100))
    d = materialise(base, coll / "twice" / "run")
    edit_json(d / "percall.json", lambda o: o["cells"].append(
        next(c for c in o["cells"] if c.get("supported"))))

    materialise(base, coll / HOSTILE_NAME / "run")
    materialise(base, coll / "=cmd()" / "run")        # a host name a spreadsheet would run
    os.symlink(outside, coll / "folder-link")
    return tmp_path, coll, outside


@pytest.fixture(scope="module")
def summary_run(fleet_world):
    """`tw fleet` over the world as a person runs it (the terminal summary, the CSV): one run,
    read by each test that checks what it printed or wrote."""
    tmp, coll, _ = fleet_world
    return tmp / "v2", tw("fleet", coll, "--out", tmp / "v2", cwd=tmp, timeout=600)


EXPECTED = {
    "linked": "symbolic link",
    "huge": "larger than any stage file",
    "nan": "NaN",
    "huge-figure": "not a measurement",
    "future": "newer than this checkout reads",
    "future-percall": "newer than this checkout reads",
    "folder-link": "symbolic link",
    "bad-params": "",
    "bad-reference": "",
    "empty": "no measured cell",
    "dup-cells": "appears twice",
    "negative": "not a measurement",
    "many-cells": "more than the",
    "twice": "a second cell",
}


def test_each_hostile_host_is_one_line_and_the_rest_are_compared(fleet_world):
    tmp, coll, outside = fleet_world
    before_coll, before_out = snapshot(coll), snapshot(outside)
    p = tw("fleet", coll, "--out", tmp / "view", "--json", cwd=tmp, timeout=600)
    assert p.returncode == 3, p.stderr[-3000:]
    assert "Traceback" not in p.stderr
    view = json.loads(p.stdout)
    refused = {r["host"]: r["why"] for r in view["refused"]}
    for host, needle in EXPECTED.items():
        assert needle in refused.get(host, ""), (host, refused.get(host))
        lines = [ln for ln in p.stderr.splitlines() if ln.startswith(f"tw fleet: {host}: ")]
        assert len(lines) == 1, (host, p.stderr[-3000:])
    compared = sorted(m["host"] for m in view["machines"])
    assert compared == sorted([f"good{i}" for i in range(len(RUNS))] + [HOSTILE_NAME, "=cmd()"])
    # Nothing written outside --out, nothing run.
    assert snapshot(coll) == before_coll and snapshot(outside) == before_out
    assert not any(tmp.rglob("PWNED*")) and not (ROOT / "PWNED").exists()
    # The host name reaches the terminal with its escape shown, not sent.
    assert "\x1b" not in p.stderr and "\x07" not in p.stderr
    html = (tmp / "view" / "fleet.html").read_text()
    assert "\x1b" not in html and "$(touch PWNED)" in html
    assert "<script" not in html


def test_the_terminal_summary_escapes_host_names(fleet_world, summary_run):
    tmp, coll, _ = fleet_world
    jobs, refused = cfleet.discover([coll])
    assert HOSTILE_NAME in [h for h, _ in jobs]
    _, p = summary_run
    assert p.returncode == 3, p.stderr[-2000:]
    assert "\x1b" not in p.stdout and "\\x1b]0;owned\\x07" in p.stdout
    assert "\x1b" not in p.stderr


def test_csv_cells_are_never_formulas(summary_run):
    out, p = summary_run
    assert p.returncode == 3, p.stderr[-2000:]
    rows = (out / "fleet.csv").read_text().splitlines()
    assert any(r.startswith("'=cmd()") for r in rows) and not any(r.startswith("=") for r in rows)


def test_out_must_be_new_or_empty(fleet_world):
    tmp, coll, _ = fleet_world
    (tmp / "busy").mkdir()
    (tmp / "busy" / "x").write_text("mine\n")
    p = tw("fleet", coll / "good0", "--out", tmp / "busy", cwd=tmp)
    assert p.returncode == 2 and "outputs never merge" in p.stderr
    assert (tmp / "busy" / "x").read_text() == "mine\n"


# ---- archives a host sends (tw unpack) ------------------------------------------------------

def _tar(path, members):
    """members: (TarInfo, bytes or None)."""
    with tarfile.open(path, "w") as t:
        for info, data in members:
            t.addfile(info, io.BytesIO(data) if data is not None else None)
    return path


def _file(name, data=b"{}"):
    i = tarfile.TarInfo(name)
    i.size = len(data)
    return i, data


def _link(name, target, kind=tarfile.SYMTYPE):
    i = tarfile.TarInfo(name)
    i.type, i.linkname = kind, target
    return i, None


@pytest.mark.parametrize("members,needle", [
    ([_file("run/meta.json"), _link("run/percall.json", "/etc/passwd")], "symbolic link"),
    ([_file("run/meta.json"), _link("run/x", "run/meta.json", tarfile.LNKTYPE)], "hard link"),
    ([_file("/tmp/tw-fleet-abs/meta.json")], "absolute name"),
    ([_file("run/../../escaped.json")], "'..'"),
    ([_file("run/meta.json"), _file("other/meta.json")], "outside the archive's one folder"),
    ([_file("loose.json")], "outside the archive's one folder"),
])
def test_unpack_refuses_hostile_archives_before_writing(tmp_path, members, needle):
    arc = _tar(tmp_path / "a.tar", members)
    into = tmp_path / "collected"
    before = snapshot(tmp_path)
    p = tw("unpack", arc, "--into", into, "--host", "h;rm -rf /", cwd=tmp_path)
    assert p.returncode == 3, p.stderr
    assert needle in p.stderr and "host h;rm -rf /" in p.stderr
    assert snapshot(tmp_path) == before
    assert not os.path.exists("/tmp/tw-fleet-abs")


def test_unpack_refuses_a_2gib_member_without_reading_it(tmp_path):
    info = tarfile.TarInfo("run/percall.json")
    info.size = 2 << 30
    with open(tmp_path / "big.tar", "wb") as f:
        f.write(info.tobuf())
        # Its data and the end-of-archive blocks as a hole: 2 GiB on paper, nothing on disk.
        f.truncate(512 + (2 << 30) + 1024)
    with pytest.raises(DataError, match="larger than any stage file"):
        unpack.unpack(tmp_path / "big.tar", tmp_path / "collected")
    assert not (tmp_path / "collected" / "run").exists()


def test_unpack_writes_a_good_archive_whole_and_never_merges(tmp_path):
    src = materialise(RUNS[0], tmp_path / "src" / "vm-run")
    arc = tmp_path / "good.tar.gz"
    with tarfile.open(arc, "w:gz") as t:
        t.add(src, arcname="vm-run")
    p = tw("unpack", arc, "--into", tmp_path / "coll", "--host", "a b/../c", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    # The name rule of tw unpack and the playbook (cli/unpack.folder_name): not plain, so its
    # plain characters after a '_' and a hash, never a path.
    got = tmp_path / "coll" / folder_name("a b/../c") / "vm-run"
    assert folder_name("a b/../c").startswith("_a_b____c-")
    assert (got / "percall.json").read_bytes() == (src / "percall.json").read_bytes()
    p = tw("unpack", arc, "--into", tmp_path / "coll", "--host", "a b/../c", cwd=tmp_path)
    assert p.returncode == 3 and "never merges" in p.stderr


def test_out_inside_an_input_results_directory_is_refused(tmp_path):
    """--out inside a host's results would write the view into them (issue 25, class 15)."""
    d = materialise(RUNS[0], tmp_path / "host")
    before = snapshot(d)
    p = tw("fleet", d, "--out", d / "view", cwd=tmp_path)
    assert p.returncode == 2 and "inside the input results directory" in p.stderr, p.stderr
    assert "Traceback" not in p.stderr and snapshot(d) == before


def test_the_atlas_is_one_command_away(tmp_path):
    """tw fleet --atlas compares the shipped atlas as it is stored (percall.json.xz), and so
    does tw fleet over the atlas's run folders themselves."""
    p = tw("fleet", "--atlas", "--json", "--out", tmp_path / "a", cwd=tmp_path, timeout=600)
    assert p.returncode == 0, p.stderr[-2000:]
    view = json.loads(p.stdout)
    assert len(view["machines"]) == len(RUNS) and not view["refused"]
    p = tw("fleet", *RUNS, "--json", "--out", tmp_path / "b", cwd=tmp_path, timeout=600)
    assert p.returncode == 0, p.stderr[-2000:]
    assert len(json.loads(p.stdout)["machines"]) == len(RUNS)


# ---- digests (issue 27): a host's digest.json gets the same one way in -----------------------

SQL_NAME = "db'); DROP TABLE runs;--$(id)\x1b[2J"


@pytest.fixture(scope="module")
def digested(tmp_path_factory):
    """One atlas run as a results directory with the digest tw report writes."""
    from twtools.present import report
    d = materialise(RUNS[-1], tmp_path_factory.mktemp("dg") / "base")
    report.write_digest(d)
    assert (d / "digest.json").is_file()
    return d


def test_the_digest_holds_what_the_fleet_computes_from_the_raw_rounds(digested, tmp_path):
    """The digest a run writes gives the fleet the figures the raw rounds give it."""
    from twtools.analyse import fleet, rundigest
    dg = rundigest.load(digested, "h")
    raw = fleet.digest_doc(json.loads((digested / "percall.json").read_text()),
                           json.loads((digested / "fingerprint.json").read_text()),
                           None, "h")
    assert dg["method"] == rundigest.METHOD and dg["schema"] == rundigest.SCHEMA
    assert set(dg["cells"]) == set(raw["cells"])
    for name, c in raw["cells"].items():
        assert dg["cells"][name]["value"] == pytest.approx(c["value"])
        t = dg["cells"][name]["typical"]
        assert t["ci_low"] <= t["value"] <= t["ci_high"]
    assert dg["facts"] == raw["facts"] and dg["causes"] == raw["causes"]


def _digest_case(base, dest, fn=None, text=None):
    shutil.copytree(base, dest)
    if fn:
        edit_json(dest / "digest.json", fn)
    if text:
        text(dest / "digest.json")
    return dest


def _cell0(o):
    return o["cells"][next(iter(o["cells"]))]


def test_each_hostile_digest_is_one_line_and_the_rest_are_compared(digested, tmp_path):
    coll = tmp_path / "coll"
    coll.mkdir()
    _digest_case(digested, coll / "good")
    _digest_case(digested, coll / SQL_NAME)
    # An older method is recomputed from the raw rounds, never trusted: its figure is ignored.
    _digest_case(digested, coll / "old", lambda o: (o.__setitem__("method", 0),
                                                    _cell0(o).__setitem__("value", 1.0)))
    d = _digest_case(digested, coll / "disagrees")
    edit_json(d / "percall.json", lambda o: first_samples(o).__setitem__(0, 12345.0))
    _digest_case(digested, coll / "future", lambda o: o.__setitem__("method", 99))
    _digest_case(digested, coll / "future-schema",
                 lambda o: o.__setitem__("schema", "timewrite-digest/99"))
    _digest_case(digested, coll / "huge", lambda o: _cell0(o).__setitem__("value", 1e308))
    # below zero further than any empty loop a process subtracts (analyse.fleet.MAX_LOOP_NS)
    _digest_case(digested, coll / "negative", lambda o: _cell0(o).__setitem__("value", -5000.0))
    _digest_case(digested, coll / "empty", lambda o: o.__setitem__("cells", {}))
    _digest_case(digested, coll / "facts", lambda o: o["facts"].__setitem__("kernel", ["x"]))
    _digest_case(digested, coll / "nan", text=lambda p: p.write_text(
        p.read_text().replace('"value": ', '"value": NaN, "x": ', 1)))
    expected = {"disagrees": "disagrees with its raw rounds", "future": "newer than this",
                "future-schema": "is not timewrite-digest/1", "huge": "not a measurement",
                "negative": "not a measurement", "empty": "has no cells",
                "facts": "facts", "nan": "not valid strict JSON"}
    p = tw("fleet", coll, "--out", tmp_path / "view", "--json", cwd=tmp_path, timeout=600)
    assert p.returncode == 3, p.stderr[-3000:]
    assert "Traceback" not in p.stderr and "\x1b" not in p.stderr
    view = json.loads(p.stdout)
    refused = {r["host"]: r["why"] for r in view["refused"]}
    for host, needle in expected.items():
        assert needle in refused.get(host, ""), (host, refused.get(host))
        assert len([ln for ln in p.stderr.splitlines()
                    if ln.startswith(f"tw fleet: {host}: ")]) == 1, host
    assert sorted(m["host"] for m in view["machines"]) == sorted(["good", "old", SQL_NAME])
    assert set(refused) == set(expected)
