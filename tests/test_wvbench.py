"""wvbench (seed 3 writev-vs-write, seed 4 stdio-vs-raw): the calls it claims are the calls made.

What is checked, and why it can break:
- The JSON contract sweep.py reads (keys, one sample per rep, positive times).
- writev with N > IOV_MAX is split into ceil(N/IOV_MAX) calls, and strace -c
  sees exactly that many writev() and exactly N write() per pass: an
  off-by-one in the split, a writev of more than IOV_MAX buffers (EINVAL),
  or a dropped remainder would change the counts.
- The file holds exactly the N*S bytes, in order: a split or short-write
  continuation that skipped or repeated a buffer would corrupt it.
- stdio: the write() count it reports (the kernel's syscw counter) equals
  what strace sees on the output file, one write per byte for `write` and
  one per st_blksize buffer for the stdio methods.
- Bad usage exits 2 with a usage line, OpenBSD style.
Both the 64-bit and the 32-bit build are checked; a 32-bit build the kernel
cannot run skips with the reason.
"""
import json
import math
import os
import re

import pytest

from conftest import BUILD, need_tool, run

IOV_MAX = os.sysconf("SC_IOV_MAX")
BITS = [64, 32]


def wvbench(bits, *args, **kw):
    path = BUILD / f"wvbench-{bits}"
    if not path.exists():
        pytest.fail(f"{path} is missing: run `make`")
    try:
        p = run([path] + [str(a) for a in args], text=True, **kw)
    except OSError as e:
        pytest.skip(f"{path.name} cannot run here: {e.strerror} (needs IA32 emulation)")
    return p


def wvjson(bits, *args):
    p = wvbench(bits, *args)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def strace_counts(text):
    """{syscall: calls} from `strace -c` output, summed over the 64- and 32-bit tables."""
    counts = {}
    for line in text.splitlines():
        t = line.split()
        if len(t) in (5, 6) and re.fullmatch(r"[\d.]+", t[0]) and t[-1] != "total":
            counts[t[-1]] = counts.get(t[-1], 0) + int(t[3])
    return counts


@pytest.mark.parametrize("bits", BITS)
def test_writev_json_contract(bits, tmp_path):
    d = wvjson(bits, "writev", "--buffers", 16, "--size", 512, "--reps", 3,
               "--file", tmp_path / "o")
    assert d["bench"] == "writev" and d["bits"] == bits
    assert (d["n_buffers"], d["size"], d["reps"]) == (16, 512, 3)
    assert d["iov_max"] == IOV_MAX
    assert d["inner"] == math.ceil(256 / 16)
    assert d["write_calls_per_op"] == 16
    assert d["writev_calls_per_op"] == 1
    for k in ("write_ns", "writev_ns"):
        assert len(d["samples"][k]) == 3
        assert all(v > 0 for v in d["samples"][k])


@pytest.mark.parametrize("bits", BITS)
def test_writev_beyond_iov_max_splits_and_strace_agrees(bits, tmp_path):
    need_tool("strace")
    n = 2 * IOV_MAX + 1                  # three writev calls: IOV_MAX, IOV_MAX, 1
    reps = 2
    out, log = tmp_path / "o", tmp_path / "strace.txt"
    wvbench(bits, "--help")             # skips if this bitness cannot run
    p = run(["strace", "-f", "-c", "-o", log, "-e", "trace=write,writev",
             BUILD / f"wvbench-{bits}", "writev", "--buffers", n, "--size", 64,
             "--reps", reps, "--file", out], text=True)
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
    assert d["inner"] == 1
    per_op = math.ceil(n / IOV_MAX)
    assert per_op == 3 and d["writev_calls_per_op"] == per_op
    counts = strace_counts(log.read_text())
    passes = reps + 1                   # one untimed warm-up pass of each method
    assert counts.get("writev") == per_op * passes, log.read_text()
    # n per pass to the file, plus the JSON on stdout (one write: it is < BUFSIZ).
    assert counts.get("write") == n * passes + 1, log.read_text()


@pytest.mark.parametrize("bits", BITS)
def test_writev_split_writes_every_byte_in_order(bits, tmp_path):
    n, size = IOV_MAX + 7, 100
    out = tmp_path / "o"
    d = wvjson(bits, "writev", "--buffers", n, "--size", size, "--reps", 1, "--file", out)
    assert d["inner"] == 1
    data = out.read_bytes()
    assert len(data) == n * size
    expect = bytes(ord("a") + i % 26 for i in range(n * size))
    assert data == expect


@pytest.mark.parametrize("bits", BITS)
def test_stdio_calls_match_strace(bits, tmp_path):
    need_tool("strace")
    nbytes, reps = 10_000, 1
    out, log = tmp_path / "o", tmp_path / "strace.txt"
    wvbench(bits, "--help")
    p = run(["strace", "-f", "-o", log, "-e", "trace=write",
             BUILD / f"wvbench-{bits}", "stdio", "--bytes", nbytes, "--reps", reps,
             "--method", "write", "--method", "fputc", "--file", out], text=True)
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
    assert d["calls_source"].startswith("syscw"), d["calls_source"]
    by = {m["method"]: m for m in d["methods"]}
    assert set(by) == {"write", "fputc"}
    assert by["write"]["calls"] == nbytes
    assert by["fputc"]["calls"] == math.ceil(nbytes / d["st_blksize"])
    # strace: writes to the output file (fd > 2), over warm-up + reps passes of each method.
    to_file = [ln for ln in log.read_text().splitlines()
               if re.match(r"\d+\s+write\((\d+),", ln) and
               int(re.match(r"\d+\s+write\((\d+),", ln).group(1)) > 2]
    passes = reps + 1
    assert len(to_file) == passes * (by["write"]["calls"] + by["fputc"]["calls"])
    assert out.stat().st_size == nbytes


@pytest.mark.parametrize("bits", BITS)
def test_stdio_json_contract(bits, tmp_path):
    d = wvjson(bits, "stdio", "--bytes", 5000, "--reps", 2, "--file", tmp_path / "o")
    assert d["bench"] == "stdio" and d["bits"] == bits and d["bytes"] == 5000
    assert [m["method"] for m in d["methods"]] == ["write", "fwrite", "fputc", "putc_unlocked"]
    for m in d["methods"]:
        for k in ("real_s", "user_s", "sys_s"):
            assert len(m["samples"][k]) == 2
            assert all(v >= 0 for v in m["samples"][k])
        assert all(v > 0 for v in m["samples"]["real_s"])


@pytest.mark.parametrize("args", [
    [], ["bogus"], ["writev"], ["writev", "--buffers", "4"], ["writev", "--buffers", "0", "--size", "8"],
    ["writev", "--buffers", "4x", "--size", "8"], ["writev", "--buffers", "4", "--size", "-1"],
    ["writev", "--buffers", "1048576", "--size", "1024"],
    ["stdio"], ["stdio", "--bytes", "10", "--method", "printf"], ["stdio", "--bytes", "ten"],
    ["stdio", "--bytes", "10", "--reps", "0"],
])
def test_bad_usage_exits_2(args):
    p = wvbench(64, *args)
    assert p.returncode == 2, (args, p.stdout, p.stderr)
    assert p.stdout == ""
    assert "wvbench-64" in p.stderr


@pytest.mark.parametrize("mode", [["writev", "--buffers", "4", "--size", "8", "--reps", "2"],
                                  ["stdio", "--bytes", "64", "--reps", "2"]])
def test_file_is_never_written_through_a_link(tmp_path, mode):
    """--file that is a symbolic link is refused, and its target is untouched (issue 25, class
    18): stdio's methods reopen the path, and fopen follows links."""
    target = tmp_path / "precious"
    target.write_text("keep me\n")
    link = tmp_path / "out"
    link.symlink_to(target)
    p = wvbench(64, *mode, "--file", link)
    assert p.returncode == 1 and "symbolic link" in p.stderr, (p.returncode, p.stderr)
    assert target.read_text() == "keep me\n"
