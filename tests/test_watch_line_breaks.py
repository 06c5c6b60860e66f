"""A program's name may hold any character Python's str.splitlines() takes for a line break:
U+2028, U+2029, U+0085 (raw in the loader's UTF-8 JSON), and \\x1c-\\x1e, \\x0b, \\x0c.  The
readers of build/watchbpf's and bpftrace's output (tracers.base.json_lines, which tw watch's
exec tracer, its window, the census, legs and diagnose all read through) must end a line at
"\\n" only: one such name cut the exec map's line in two, neither half was JSON, and every
exec of that interval went to program="other", reason=map_full.

Why it can break: a parser that goes back to splitlines() or strip() (both treat these
characters as line ends or white space), a new reader of the loader's output that does not go
through json_lines.  The live test skips for the facts need_watch and need_supported name (not
root, no BTF or tracefs, 32-bit programs cannot run here).
"""
import json
import os
import shutil

import pytest

from conftest import ROOT, need_supported, need_watch, run
from twtools.machine.tracers import bpftrace
from twtools.machine.tracers.base import json_lines
from twtools.measure import watch as mwatch

BREAKS = ["\u2028", "\u2029", "\u0085", "\x1c", "\x1d", "\x1e", "\x0b", "\x0c"]


def _loader_lines(name, n, ino, phase=0):
    """One file's exec maps as build/watchbpf prints them (keyed by the file's device, inode,
    generation and bitness; the name as started and the path as values: valid UTF-8 raw,
    control bytes as \\u00XX)."""
    key = f"2049,{ino},7,1"
    val = json.dumps(name, ensure_ascii=False)
    return [f'{{"type": "map", "data": {{"@exec{phase}": {{"{key}": {n}}}}}}}',
            f'{{"type": "map", "data": {{"@started{phase}": {{"{key}": {val}}}}}}}',
            f'{{"type": "map", "data": {{"@path{phase}": {{"{key[:-2]}": {val}}}}}}}']


@pytest.mark.parametrize("sep", BREAKS, ids=[f"U+{ord(c):04X}" for c in BREAKS])
def test_a_name_with_a_line_break_character_keeps_its_line(sep):
    name = f"/tmp/x{sep}y"
    text = "\n".join(_loader_lines("/opt/old32", 3, 13, 1) + _loader_lines(name, 1, 12)
                     + ['{"type": "map", "data": {"@n0": {"64": 0, "32": 4}}}', ""])
    maps = bpftrace.parse_json(text)
    assert maps["@started0"] == {("2049", "12", "7", "1"): name}
    assert maps["@path1"] == {("2049", "13", "7"): "/opt/old32"}
    # the exec tracer's reading of one batch: every exec in a key, nothing dropped
    cur = mwatch._batch()
    for o in json_lines(text, pairs=True):
        for k, v in o.get("data"):
            mwatch._fold(cur, k, v)
    assert cur["execs"][(2049, 12, 7, True)] == {"n": 1, "first_ns": None, "last_ns": None,
                                                 "started": name}
    assert cur["paths"][(2049, 12, 7)] == name
    assert cur["execs"][(2049, 13, 7, True)]["n"] == 3
    assert cur["n"] == {False: 0, True: 4}


def test_a_raw_separator_at_the_end_of_a_name_is_kept():
    """A name that ends in U+0085, on a line that ends in \r\n: the line is stripped of
    spaces, tabs and \r only, and the name reads back whole."""
    (o,) = list(json_lines(_loader_lines("/tmp/z\u0085", 1, 12)[1] + "\r\n"))
    assert list(o["data"]["@started0"].values()) == ["/tmp/z\u0085"]


def test_the_watch_counts_every_exec_of_an_interval_with_such_a_name(tmp_path):
    """tw watch, exec tracer only, for real: a 32-bit program run 3 times and a program named
    x<U+2028>y in the same interval; the 32-bit program is counted 3 times under its own
    name, and nothing is folded as map_full."""
    from prometheus_client.parser import text_string_to_metric_families
    from test_watch_live import free_port, get, start_watch, stop, wait_for
    need_watch()
    need_supported("syscost", "32-int80")
    prog32 = tmp_path / "tw-lb32"
    shutil.copy(ROOT / "build" / "syscost-32-int80", prog32)
    odd = os.path.join(os.fsencode(tmp_path), "x\u2028y".encode())
    shutil.copy(shutil.which("true"), odd)      # a file of its own (a hard link is true's file)
    state = tmp_path / "state"
    state.mkdir()
    port = free_port()
    w = start_watch(state, port, "--window", "0", "--interval", "1")
    try:
        # One shell runs them back to back: a few ms, inside one 1 s interval but for a few
        # runs in a thousand (children of neither the watch nor pytest's helpers).  Where
        # they straddle two, a name that cut its interval's line would still be caught: it
        # would be missing, and folded as map_full, whichever interval it fell in.
        sh = tmp_path / "run.sh"
        sh.write_bytes(b"".join([f"'{prog32}' >/dev/null 2>&1\n".encode()] * 3
                                + [b"'" + odd + b"'\n"]))
        assert run(["sh", sh]).returncode == 0

        def counted():
            """Both counted (the odd name may fall in the next interval), or an exec folded
            as map_full: what the assertions below judge."""
            text = get(f"http://127.0.0.1:{port}/metrics")
            fams = {f.name: f for f in text_string_to_metric_families(text)}
            execs = {(s.labels["program"], s.labels["bits"]): s.value
                     for s in fams["timewrite_exec"].samples if s.name.endswith("_total")}
            full = any(s.value for s in getattr(fams.get("timewrite_folded"), "samples", ())
                       if s.name.endswith("_total") and s.labels["reason"] == "map_full")
            both = execs.get((str(prog32), "32"), 0) >= 3 and (os.fsdecode(odd), "64") in execs
            return (execs, fams) if both or full else None
        execs, fams = wait_for(counted, 60, "the 32-bit program and x\u2028y counted")
    finally:
        assert stop(w) == 0
    assert execs[(str(prog32), "32")] == 3.0, execs
    odd_name = os.fsdecode(odd)
    assert execs.get((odd_name, "64")) == 1.0, [k for k in execs if "x" in k[0][-4:]]
    folded = {(s.labels["reason"], s.labels["bits"]): s.value
              for s in fams["timewrite_folded"].samples if s.name.endswith("_total")}
    assert folded.get(("map_full", "32"), 0) == folded.get(("map_full", "64"), 0) == 0, folded
