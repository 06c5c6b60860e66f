"""The tracer plug-ins' output parsers, on real output recorded on the project's machine
(tests/fixtures/): pinned columns, both strace tables, null for blind counters."""
from pathlib import Path

import pytest

from twtools.analyse import latency
from twtools.machine.tracers import bpftrace, perf_stat, perf_trace, strace
from twtools.machine.tracers.base import json_lines

FX = Path(__file__).resolve().parent / "fixtures"


def test_strace_c_32bit_has_both_tables():
    t = strace.parse_c((FX / "strace_c_w_32bit.txt").read_text())
    assert set(t) == {"64", "32"}
    assert [r["syscall"] for r in t["64"]] == ["execve"]       # before the exec'd 32-bit image
    w = {r["syscall"]: r for r in t["32"]}
    assert w["write"]["calls"] == 24                             # 23 to the file + the report line
    assert w["access"]["errors"] == 1 and w["write"]["errors"] == 0
    assert "total" not in w
    assert all(r["usecs_per_call"] >= 0 and r["seconds"] >= 0 for r in t["32"])


def test_strace_c_64bit_single_table():
    t = strace.parse_c((FX / "strace_c_w_64bit.txt").read_text())
    assert set(t) == {"64"}
    w = {r["syscall"]: r for r in t["64"]}
    assert w["write"]["calls"] == 24
    assert abs(sum(r["pct_time"] for r in t["64"]) - 100) < 1.0


def test_strace_T_file_writes():
    calls = strace.parse_T((FX / "strace_T_write_32int80.txt").read_text())
    assert len(calls) == 23
    assert [c["ret"] for c in calls].count(256) == 22 and calls[-1]["ret"] == 17
    assert all(c["fd"] == 3 and c["us"] > 0 for c in calls)


def test_perf_stat_json_blind_counters_are_null():
    names = perf_stat.EVENTS + ["raw_syscalls:sys_enter", "write_exit_ret_256", "write_exit_ret_17"]
    ev, why = perf_stat.parse_json((FX / "perf_stat_j_32libc.json").read_text(), names)
    assert ev["cycles"] is None and "not supported" in why["cycles"]
    assert ev["instructions"] is None
    assert ev["write_exit_ret_256"] == 22 and ev["write_exit_ret_17"] == 1
    assert ev["raw_syscalls:sys_enter"] > 23 and ev["task-clock"] > 0


def test_perf_trace_summary():
    procs = perf_trace.parse_s((FX / "perf_trace_s_64libc.txt").read_text())
    main = max(procs, key=lambda p: p["events"])
    w = {r["syscall"]: r for r in main["rows"]}
    assert w["write"]["calls"] == 24 and w["access"]["errors"] == 1
    assert w["write"]["min_ms"] <= w["write"]["avg_ms"] <= w["write"]["max_ms"]


def test_bpftrace_writelat_json_and_percentiles():
    maps = bpftrace.parse_json((FX / "bpftrace_writelat_32libc.ndjson").read_text())
    keys = [k for k in maps["@count"] if int(k[2]) >= 3]
    assert len(keys) == 1 and keys[0][1] == "i386" and maps["@count"][keys[0]] == 23
    lin = bpftrace.hist_buckets(maps["@lin_ns"][keys[0]])
    log2 = bpftrace.hist_buckets(maps["@ns"][keys[0]])
    assert sum(b["count"] for b in lin) == 23 == sum(b["count"] for b in log2)
    p = latency.percentiles([lin, log2])
    assert p["p50"] is not None and p["p50"] <= p["p90"] <= p["p99"]
    assert maps["@min_ns"][keys[0]] <= p["p50"] <= maps["@max_ns"][keys[0]]


def test_percentiles_overflow_is_unknown_not_zero():
    b = [{"lo_ns": 0, "hi_ns": 100, "count": 1}, {"lo_ns": 10000, "hi_ns": None, "count": 9}]
    p = latency.percentiles([b])
    assert p["p50"] is None and p["p99"] is None


def test_bpftrace_entrypath_sysenter_lands_in_vdso():
    maps = bpftrace.parse_json((FX / "bpftrace_entrypath_32sysenter.ndjson").read_text())
    writes = {(k[2], k[3], k[4]): n for k, n in maps["@write_like"].items()
              if k[1].startswith("timewrite")}
    # hand-written sysenter returns through the vDSO's landing pad: origin vdso
    assert writes[("compat", "vdso", "4")] == 24
    cls = {(k[2], k[3], k[4], k[5]): n for k, n in maps["@calls"].items()
           if k[1].startswith("timewrite")}
    assert cls[("compat", "vdso", "pad", "text")] >= 23      # our stub called the pad
    assert maps["@regs_ok"][("1",)] > 0 and ("0",) not in maps["@regs_ok"]


def test_perf_trace_says_what_it_missed():
    """The shortfall against the program's own count: none, a drop (said, LOST or not), and
    an over-count, which is said too rather than trusted."""
    rows = [{"syscall": "write", "calls": 23}]
    assert perf_trace.PerfTrace.shortfall(rows, 22, "") == {"own_writes": 22, "missed_writes": 0}
    d = perf_trace.PerfTrace.shortfall(rows, 23, "")
    assert d["missed_writes"] == 1 and "counted 23 of the program's 24 writes" in d["note"] \
        and "without reporting LOST" in d["note"]
    d = perf_trace.PerfTrace.shortfall(rows, 23, "LOST 3 events!")
    assert "LOST" not in d["note"]
    d = perf_trace.PerfTrace.shortfall(rows, 21, "")
    assert d["missed_writes"] == -1 and "1 more than" in d["note"]
    assert perf_trace.PerfTrace.shortfall([], 5, "")["missed_writes"] == 6
    assert perf_trace.PerfTrace.shortfall(rows, None, "") == {"own_writes": None,
                                                               "missed_writes": None}


# bpftrace v0.17.0's -f json, captured on the project's AMD guest for execs of /tmp/twé and of
# /tmp/tw<0xff>z: every byte above 0x7f comes out as a sign-extended \uffffffXX escape.
BPFTRACE_NON_ASCII = [
    (r'{"type": "map", "data": {"@": {"/tmp/tw\uffffffc3\uffffffa9": 1}}}', "/tmp/twé"),
    (r'{"type": "map", "data": {"@": {"/tmp/tw\uffffffffz": 1}}}', "/tmp/tw\\xffz"),
    # an escaped backslash followed by the same letters is a name's own text, left alone
    (r'{"type": "map", "data": {"@": {"/tmp/a\\uffffffc3b": 1}}}', "/tmp/a\\uffffffc3b"),
    (r'{"type": "map", "data": {"@": {"/tmp/a\\\uffffffc3\uffffffa9b": 1}}}', "/tmp/a\\éb"),
]


@pytest.mark.parametrize("line,name", BPFTRACE_NON_ASCII)
def test_bpftrace_non_ascii_names_read_back_as_their_bytes(line, name):
    """The census's and every bpftrace tool's names go through json_lines: "é" must read as
    "é" (not U+FFFF "ffc3" U+FFFF "ffa9"), a byte that is not UTF-8 as \\xNN."""
    (obj,) = list(json_lines(line))
    assert list(obj["data"]["@"]) == [name]


def test_a_maps_repeated_keys_are_summed_not_lost():
    # bpftrace 0.17 on Linux 6.18 (the project's guests) prints a map keyed by strings and
    # integers with entries whose keys print alike (bytes after a string's end differ): a
    # dict kept the last one, and 23 writes counted as 1.  Summed, they are every call.
    line = ('{"type": "map", "data": {"@w": {"64-libc,native,other,1": 1, '
            '"64-libc,native,other,1": 21, "64-libc,native,other,1": 1, "x,y": 4}}}')
    maps = bpftrace.parse_json(line + "\n")
    assert maps["@w"] == {("64-libc", "native", "other", "1"): 23, ("x", "y"): 4}
    # a histogram (a list) is not summed: it is never a repeated key's count
    (o,) = json_lines('{"a": [1], "a": [2], "b": true, "b": false}\n')
    assert o == {"a": [2], "b": False}
