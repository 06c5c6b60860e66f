"""Damaged and hostile results directories, built as data here: reading is validation, and
writing stays inside the directory.

Why it can break: a reader that trusts a stage file turns a truncated file into a traceback
that does not name it, a NaN into "Verdict: REFUTED ... costs nan ns", a string where a number
belongs into a crash deep in numpy, a variant named "foo" into int("fo"); a report that writes
with open() follows a symbolic link planted in the directory (report.md -> ~/.bashrc, plots ->
/etc) and writes outside it; `tw report` on any directory at all overwrites its report.md; a
stage file that is a FIFO blocks the reader forever.  Each case checks: a non-zero exit with
one line naming the file and what is wrong, no traceback, nothing written anywhere (the
directory and a decoy outside it are compared before and after).

The first tests run `tw report` / `tw compare` as a user would; the last one feeds many
mutations of a real stage file straight to the loader, which is where every reader's checks
live, and requires each to be either read or refused with DataError, never a crash.
"""
import copy
import zlib
import json
import os
import random
import shutil
import warnings

import pytest

from conftest import ROOT
from faults_util import one_line_error, snapshot, tw
from twtools.analyse import results, verdict
from twtools.core import files
from twtools.core.ui import DataError
from twtools.present import tables

FIX = ROOT / "tests" / "fixtures" / "results-fixture"
Infinity_ = -0.0123456789     # a placeholder the text edit replaces


@pytest.fixture
def world(tmp_path):
    """A copy of a real results directory, and a decoy directory outside it that nothing
    may touch."""
    d = tmp_path / "res"
    shutil.copytree(FIX, d)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "precious").write_text("not tw's\n")
    return d, outside


def edit(path, fn, text=None):
    """Change a stage file in place: fn(obj) edits the parsed document; text(s) then edits
    its JSON text (for what json.dumps cannot write, such as 1e999)."""
    obj = json.loads(path.read_text())
    fn(obj)
    out = json.dumps(obj)
    path.write_text(text(out) if text else out)


def refused(d, outside, needles, cmd="report", code=3):
    """tw report (or compare) on d fails with one line holding every needle, writes
    nothing in d or outside."""
    before, out_before = snapshot(d), snapshot(outside)
    args = ["report", d] if cmd == "report" else ["compare", d, "--out", d.parent / "cmp"]
    p = tw(*args)
    line = one_line_error(p, *needles)
    assert p.returncode == code, (p.returncode, line)
    assert snapshot(d) == before, "the directory was written"
    assert snapshot(outside) == out_before, "something outside was written"
    return line


# ---- damaged files: one line naming the file and what is wrong ---------------------------

DAMAGE = {
    "truncated": ("percall.json", lambda p: p.write_bytes(p.read_bytes()[:len(p.read_bytes()) // 2]),
                  ["percall.json: not valid JSON", "truncated"]),
    "empty": ("sweep_seed.json", lambda p: p.write_bytes(b""), ["sweep_seed.json: empty"]),
    "not-utf8": ("stdio.json", lambda p: p.write_bytes(b"\xff\xfe{}"), ["stdio.json: not UTF-8"]),
    "nan": ("percall.json", lambda p: p.write_text(p.read_text().replace("[", "[NaN, ", 1)),
            ["percall.json: NaN is not a number JSON allows"]),
    "infinity-literal": ("observer.json",
                         lambda p: edit(p, lambda o: o["rows"][0].update(samples=[Infinity_]),
                                        lambda t: t.replace("-0.0123456789", "Infinity")),
                         ["observer.json: Infinity is not a number JSON allows"]),
    "overflowing-float": ("observer.json",
                          lambda p: edit(p, lambda o: o["rows"][0].update(samples=[1.0, Infinity_]),
                                         lambda t: t.replace("-0.0123456789", "1e999")),
                          ["observer.json: rows[0].samples[1]: inf is not a finite number"]),
    "string-sample": ("percall.json", lambda p: edit(p, lambda o: o["cells"][0].update(
        samples=["abc"])), ["percall.json: cells[0].samples[0]: expected a number"]),
    "wrong-container": ("writev.json", lambda p: edit(p, lambda o: o.update(rows={"a": 1})),
                        ["writev.json: rows: expected a list, found an object"]),
    "bool-median": ("attribution.json", lambda p: edit(p, lambda o: o["rows"][0].update(
        total_ns={"median": True, "ci_low": 1, "ci_high": 2})),
        ["attribution.json: rows[0].total_ns"]),
    "bad-variant": ("percall.json", lambda p: edit(p, lambda o: o["cells"][0].update(
        variant="foo")), ["percall.json: cells[0].variant: expected a variant name"]),
    "missing-key": ("latency.json", lambda p: edit(p, lambda o: o["runs"][0].pop("mode")),
                    ["latency.json: runs[0].mode: is missing"]),
    "ragged-samples": ("sweep_tlpi.json", lambda p: edit(p, lambda o: o["runs"][0]["rows"][0]
                       ["samples"]["real_s"].pop()),
                       ["sweep_tlpi.json: runs[0].rows[0]: samples: sample lists of different lengths"]),
    "other-stage-schema": ("percall.json", lambda p: edit(p, lambda o: o.update(
        schema="timewrite-sweep/2")), ["percall.json: schema: 'timewrite-sweep/2' is not a "
                                       "timewrite-percall file"]),
    "newer-schema": ("tracers.json", lambda p: edit(p, lambda o: o.update(
        schema="timewrite-tracers/99")), ["tracers.json: schema", "newer than this checkout",
                                          "git pull"]),
    "meta-without-schema": ("meta.json", lambda p: edit(p, lambda o: o.pop("schema")),
                            ["meta.json: not a results directory's meta.json"]),
    "huge-int": ("percall.json", lambda p: edit(p, lambda o: o.update(tsc_hz=10 ** 400)),
                 ["percall.json: tsc_hz: an integer too large"]),
}


@pytest.mark.parametrize("case", sorted(DAMAGE))
def test_damaged_file_is_one_line(world, case):
    d, outside = world
    name, damage, needles = DAMAGE[case]
    damage(d / name)
    refused(d, outside, [str(d / name)] + needles)


def test_damaged_file_in_compare(world):
    d, outside = world
    DAMAGE["nan"][1](d / "percall.json")
    refused(d, outside, [str(d / "percall.json"), "NaN"], cmd="compare")
    assert not (d.parent / "cmp").exists()


# ---- hostile directories: nothing read or written outside ---------------------------------

def test_not_a_results_directory(tmp_path):
    """`tw report` on a directory that tw did not make refuses it, and writes no report.md."""
    d = tmp_path / "docs"
    d.mkdir()
    (d / "notes.txt").write_text("mine\n")
    line = refused(d, tmp_path / "docs", ["not a results directory", "no meta.json"])
    assert not (d / "report.md").exists(), line
    f = tmp_path / "file"
    f.write_text("x")
    one_line_error(tw("report", f), "is not a directory")
    one_line_error(tw("report", tmp_path / "absent"), "no such directory")


@pytest.mark.parametrize("link", ["report.md", "report.html", "verdict.json", "plots", "tables"])
def test_symlink_out_is_refused(world, link):
    """A symbolic link planted where the report writes (a file or a directory) is refused,
    not followed: the decoy outside stays untouched."""
    d, outside = world
    target = outside / ("precious" if link.endswith((".md", ".html", ".json")) else "")
    (d / link).symlink_to(target)
    line = refused(d, outside, [str(d / link), "refusing to write through it"])
    assert "symbolic link" in line


def test_symlinked_stage_file_out_is_refused(world, tmp_path):
    """A stage file that is a symbolic link out of the directory is not read (it could be any
    file of the reader's); one inside the directory is."""
    d, outside = world
    (outside / "percall.json").write_text((d / "percall.json").read_text())
    (d / "percall.json").unlink()
    (d / "percall.json").symlink_to(outside / "percall.json")
    refused(d, outside, [str(d / "percall.json"), "symbolic link", "outside"])
    (d / "percall.json").unlink()
    (d / "keep").mkdir()
    shutil.copy(FIX / "percall.json", d / "keep" / "percall.json")
    (d / "percall.json").symlink_to("keep/percall.json")
    assert results.load(d)["percall"]["cells"]


def test_fifo_stage_file_is_refused_not_waited_on(world):
    d, outside = world
    (d / "stdio.json").unlink()
    os.mkfifo(d / "stdio.json")
    refused(d, outside, [str(d / "stdio.json"), "is a FIFO, not a regular file"])


def test_writes_are_confined(tmp_path):
    """core.files.confined: the writer itself, for every way out (.., an absolute path, a
    symlinked directory, a symlinked file)."""
    root = tmp_path / "root"
    root.mkdir()
    out = tmp_path / "out"
    out.mkdir()
    (root / "sub").symlink_to(out)
    (root / "f.md").symlink_to(out / "f.md")
    with files.confined(root):
        files.write_text(root / "ok" / "a.txt", "fine")
        for bad in (root / ".." / "out" / "x", out / "x", root / "sub" / "x", root / "f.md"):
            with pytest.raises(DataError):
                files.write_text(bad, "no")
    assert (root / "ok" / "a.txt").read_text() == "fine"
    assert list(out.iterdir()) == []


def test_legacy_files_are_read_and_said_so(world):
    """A stage file without a schema field is the legacy form: read, and listed."""
    d, _ = world
    data = results.load(d)
    assert "percall.json" in data["analysis"]["legacy"]
    edit(d / "percall.json", lambda o: o.update(schema="timewrite-percall/2"))
    assert "percall.json" not in results.load(d)["analysis"]["legacy"]


# ---- every mutation is read or refused, never a crash ------------------------------------

def _paths(o, here=()):
    """Every (path, value) in a JSON document."""
    yield here, o
    if isinstance(o, dict):
        for k, v in o.items():
            yield from _paths(v, here + (k,))
    elif isinstance(o, list):
        for i, v in enumerate(o):
            yield from _paths(v, here + (i,))


MUTANTS = 25       # per stage file, a fixed seed each (200 each, and other seeds, ran clean offline)
REPLACEMENTS = [None, "x", -1, 0, 1e300, True, [], {}, [None], ["x"], {"median": 1}]


def _mutants(stem, count, seed):
    """count documents, each the fixture's stem file with one value replaced."""
    doc = json.loads((FIX / f"{stem}.json").read_text())
    where = [p for p, _ in _paths(doc) if p]
    rng = random.Random(seed)
    for _ in range(count):
        path = rng.choice(where)
        new = copy.deepcopy(doc)
        parent = new
        for k in path[:-1]:
            parent = parent[k]
        parent[path[-1]] = copy.deepcopy(rng.choice(REPLACEMENTS))
        yield path, new


# Every stage file the fixture holds (diagnose.json, written by the field-example stage, is
# not in the recorded fixture).
@pytest.mark.parametrize("stem", [s for s in results.STEMS
                                  if s != "meta" and (FIX / f"{s}.json").exists()])
def test_mutations_are_read_or_refused(tmp_path, stem):
    """A fixed-seed sample of one-value mutations per stage file: load, the verdict and every
    table either work or stop at DataError naming the file.  A crash anywhere else means a
    field some reader uses is not checked on load."""
    d = tmp_path / "res"
    shutil.copytree(FIX, d)
    crashes = []
    for path, doc in _mutants(stem, MUTANTS, seed=zlib.crc32(stem.encode())):
        (d / f"{stem}.json").write_text(json.dumps(doc))
        try:
            with warnings.catch_warnings():
                # 1e300 is a finite number, so it is read; numpy overflows on its square, and
                # the analysis turns the inf into "unknown" (what the test checks is no crash)
                warnings.simplefilter("ignore", RuntimeWarning)
                data = results.load(d)
                verdict.decide(data, None)
                tables.all_tables(data)
        except DataError as e:
            assert f"{stem}.json" in str(e)
        except Exception as e:  # noqa: BLE001 - what the test is looking for
            crashes.append(f"{'.'.join(map(str, path))}: {type(e).__name__}: {e}")
    assert not crashes, "\n".join(crashes[:10])
