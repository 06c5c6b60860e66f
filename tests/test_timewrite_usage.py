"""timewrite's command line: the seed's usage unchanged, the new options, bad usage.

The seed assignment says the program's name and usage must not change, and
scripts/twtools parses its output by position (tsv), by header (csv) and by key
(json).  This breaks when a default changes (ten rows 256..131072, five
columns, no header), when a format gains or loses a column, when --reps stops
reporting the median with its min and max, or when bad usage creates or
truncates the output file, or exits with anything but 2 (the scripts tell
usage errors from unsupported mechanisms, 77, by status)."""
import csv
import io
import json
import statistics

import pytest

from conftest import WRITE_VARIANTS, need_supported, run

USAGE = ("usage: timewrite [-h] [-b sizes] [--dsync] [--format tsv|csv|json] "
         "[--fsync] [--probe] [--reps n] outfile [sync]")
SEED_SIZES = [256 << i for i in range(10)]
INPUT = bytes(range(256)) * 40 + b"tail"          # 10244 bytes: no size divides it


def calls_for(size, n=len(INPUT)):
    return -(-n // size)


@pytest.fixture
def infile(tmp_path):
    p = tmp_path / "f1"
    p.write_bytes(INPUT)
    return p


def tw(build, variant, args, infile, cwd):
    with open(infile, "rb") as f:
        return run([build / f"timewrite-{variant}", *args], stdin=f, cwd=cwd, text=True)


def tsv_rows(out, ncols):
    rows = [line.split("\t") for line in out.splitlines()]
    for r in rows:
        assert len(r) == ncols, r
        int(r[0]), int(r[4])
        for x in r[1:4] + r[5:]:
            assert float(x) >= 0.0, r
    return rows


@pytest.mark.parametrize("variant", WRITE_VARIANTS)
@pytest.mark.parametrize("sync", [False, True], ids=["async", "sync"])
def test_seed_usage(build, tmp_path, infile, variant, sync):
    """`timewrite f2 <f1` and `timewrite f1 sync <f2`: ten rows of five numbers."""
    need_supported("timewrite", variant)
    args = ["f2", "sync"] if sync else ["f2"]
    p = tw(build, variant, args, infile, tmp_path)
    assert p.returncode == 0, p.stderr
    assert p.stderr == ""
    rows = tsv_rows(p.stdout, 5)
    assert [int(r[0]) for r in rows] == SEED_SIZES
    assert [int(r[4]) for r in rows] == [calls_for(s) for s in SEED_SIZES]
    assert (tmp_path / "f2").read_bytes() == INPUT


@pytest.mark.parametrize("args, sizes", [
    (["--sizes", "1-65536"], [1 << i for i in range(17)]),
    (["-b", "3000,100-1000,7"], [3000, 100, 200, 400, 800, 7]),
], ids=["range-doubles", "list-and-ranges-mix"])
@pytest.mark.parametrize("variant", WRITE_VARIANTS)
def test_sizes(build, tmp_path, infile, variant, args, sizes):
    """A range doubles from its start; a list may mix sizes and ranges, in its order; each
    row's calls are the input's length over its size, rounded up."""
    need_supported("timewrite", variant)
    p = tw(build, variant, [*args, "out"], infile, tmp_path)
    assert p.returncode == 0, p.stderr
    rows = tsv_rows(p.stdout, 5)
    assert [int(r[0]) for r in rows] == sizes
    assert [int(r[4]) for r in rows] == [calls_for(s) for s in sizes]


@pytest.mark.parametrize("variant", WRITE_VARIANTS)
def test_reps_adds_min_max_columns(build, tmp_path, infile, variant):
    need_supported("timewrite", variant)
    p = tw(build, variant, ["--reps", "3", "--sizes", "256,4096", "out"], infile, tmp_path)
    assert p.returncode == 0, p.stderr
    rows = tsv_rows(p.stdout, 7)
    assert [int(r[0]) for r in rows] == [256, 4096]
    for r in rows:
        real, lo, hi = float(r[3]), float(r[5]), float(r[6])
        assert lo <= real <= hi
        assert int(r[4]) == calls_for(int(r[0]))


@pytest.mark.parametrize("reps", [1, 3])
@pytest.mark.parametrize("variant", WRITE_VARIANTS)
def test_csv(build, tmp_path, infile, variant, reps):
    need_supported("timewrite", variant)
    p = tw(build, variant, ["--format", "csv", "--reps", str(reps), "out"], infile, tmp_path)
    assert p.returncode == 0, p.stderr
    rows = list(csv.DictReader(io.StringIO(p.stdout)))
    header = ["buffsize", "user_s", "sys_s", "real_s", "calls"]
    if reps > 1:
        header += ["real_s_min", "real_s_max"]
    assert p.stdout.splitlines()[0] == ",".join(header)
    assert [int(r["buffsize"]) for r in rows] == SEED_SIZES
    assert [int(r["calls"]) for r in rows] == [calls_for(s) for s in SEED_SIZES]


@pytest.mark.parametrize("variant", WRITE_VARIANTS)
def test_json(build, tmp_path, infile, variant):
    need_supported("timewrite", variant)
    bits, mech = variant.split("-")
    name = 'we"ird\\na\tme\xe9'
    p = tw(build, variant, ["--format", "json", "--reps", "4", "--dsync", "--fsync",
                            "-b", "512,2048", name], infile, tmp_path)
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert doc["program"] == "timewrite"
    assert doc["mechanism"] == mech and doc["bits"] == int(bits)
    assert doc["outfile"] == name
    assert (tmp_path / name).read_bytes() == INPUT
    assert doc["mode"] == "dsync" and doc["fsync"] is True
    assert doc["input_bytes"] == len(INPUT) and doc["reps"] == 4
    assert [r["buffsize"] for r in doc["rows"]] == [512, 2048]
    for r in doc["rows"]:
        assert r["calls"] == calls_for(r["buffsize"])
        for k in ("user_s", "sys_s", "real_s"):
            s = r["samples"][k]
            assert len(s) == 4 and all(x >= 0 for x in s)
            # Medians of even counts are the mean of the middle two; the
            # samples are printed rounded to 1 ns, so allow that much.
            assert r[k] == pytest.approx(statistics.median(s), abs=2e-9)
        assert r["real_s_min"] == min(r["samples"]["real_s"])
        assert r["real_s_max"] == max(r["samples"]["real_s"])


@pytest.mark.parametrize("variant", WRITE_VARIANTS)
def test_json_modes(build, tmp_path, infile, variant):
    need_supported("timewrite", variant)
    for args, mode in ((["out"], "async"), (["out", "sync"], "sync")):
        p = tw(build, variant, ["--format", "json", "-b", "4096", *args], infile, tmp_path)
        assert p.returncode == 0, p.stderr
        doc = json.loads(p.stdout)
        assert doc["mode"] == mode and doc["fsync"] is False and doc["reps"] == 1
        assert len(doc["rows"][0]["samples"]["real_s"]) == 1


BAD = {
    "no-args": [],
    "synk": ["f1", "synk"],
    "extra-arg": ["f1", "sync", "more"],
    "unknown-long": ["--frobnicate", "f1"],
    "unknown-short": ["-x", "f1"],
    "sizes-zero": ["--sizes", "0", "f1"],
    "sizes-negative": ["--sizes", "-256", "f1"],
    "sizes-garbage": ["--sizes", "abc", "f1"],
    "sizes-trailing": ["--sizes", "256,", "f1"],
    "sizes-reversed": ["--sizes", "1024-256", "f1"],
    "sizes-overflow": ["--sizes", "99999999999999999999", "f1"],
    "reps-zero": ["--reps", "0", "f1"],
    "reps-garbage": ["--reps", "3x", "f1"],
    "format": ["--format", "xml", "f1"],
    "missing-optarg": ["f1", "--reps"],
}


@pytest.mark.parametrize("case", list(BAD), ids=list(BAD))
@pytest.mark.parametrize("variant", WRITE_VARIANTS)
def test_bad_usage(build, tmp_path, infile, variant, case):
    """Exit 2 with the usage line, nothing created; for every variant, since
    options are parsed before the mechanism is probed (so a 77 variant too)."""
    work = tmp_path / "work"
    work.mkdir()
    try:
        p = tw(build, variant, BAD[case], infile, work)
    except OSError as e:
        pytest.skip(f"cannot execute timewrite-{variant}: {e}")
    assert p.returncode == 2, (p.returncode, p.stderr)
    assert USAGE in p.stderr.splitlines()
    assert p.stdout == ""
    assert list(work.iterdir()) == []


@pytest.mark.parametrize("variant", WRITE_VARIANTS)
def test_help(build, tmp_path, variant):
    try:
        p = run([build / f"timewrite-{variant}", "--help"], text=True, cwd=tmp_path)
    except OSError as e:
        pytest.skip(f"cannot execute timewrite-{variant}: {e}")
    assert p.returncode == 0 and p.stderr == ""
    assert p.stdout.splitlines()[0] == USAGE
    for opt in ("--sizes", "--dsync", "--format", "--fsync", "--help", "--probe", "--reps"):
        assert opt in p.stdout
    # Writing through a link is the seed's contract (issue 19): --help must say so.
    assert "symbolic link is followed" in " ".join(p.stdout.split())
    assert list(tmp_path.iterdir()) == []


def test_outfile_link_is_followed_as_documented(build, tmp_path, infile):
    """The documented contract, held: `timewrite LINK` writes the file the link names, and
    leaves the link a link (the seed opened outfile by name)."""
    need_supported("timewrite", "64-libc")
    target, link = tmp_path / "target", tmp_path / "link"
    target.write_bytes(b"old contents, longer than nothing")
    link.symlink_to(target.name)
    p = tw(build, "64-libc", ["-b", "256", "link"], infile, tmp_path)
    assert p.returncode == 0, p.stderr
    assert link.is_symlink() and target.read_bytes() == INPUT
