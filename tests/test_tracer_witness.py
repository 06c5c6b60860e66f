"""Nothing a tracer saw is lost in reading it, and every count has a second witness (issue 70).

On a Linux 6.18 build (6.18.44-fc-v1300, recorded in tests/fixtures/machines/amd-epyc-zen3-kvm-tsa)
bpftrace printed the entries of one map under keys that print alike but differ in bytes that
do not print (a string chosen by ?: in the key): 1333 entries of diagnose.bt's @site as 33 keys.
A reader that loaded bpftrace's JSON into a dict kept one entry per printed key, 184 of the 2115
calls, and tw diagnose said "this run made 82 system calls" for dd's 997 one-byte copies.

Why it can break: a reader that goes back to json.loads into a dict (or dict(pairs)), a merge
that keeps the last entry instead of combining by the map's aggregation, a "map full" judged on
the keys left after merging, a key built from a string chosen by ?: in a traces/*.bt script, a
witness that is computed but not said, a statement of absence ("no program entered by int
0x80") made from counts that disagree, a perf or strace reader that takes one line for another.
Every test here reads recorded or constructed tool output: no root, no tracing (the live
half is tests/test_tracer_counts_live.py).
"""
import copy
import json
import lzma
import re
from pathlib import Path

import pytest

from twtools.analyse import census as acensus, diagnose as adiagnose
from twtools.machine.tracers import bpftrace, perf_stat, strace
from twtools.machine.tracers.base import json_lines
from twtools.measure import census as mcensus, diagnose as mdiagnose
from twtools.present import census as pcensus, diagnose as pdiagnose

ROOT = Path(__file__).resolve().parents[1]
FX = ROOT / "tests" / "fixtures"
TSA = FX / "machines" / "amd-epyc-zen3-kvm-tsa" / "bpftrace-diagnose-dd-997.json.xz"


def recorded():
    return lzma.open(TSA, "rt").read()


# ------------------------------------------------------------------ the recorded kernel

def test_recorded_dd_gives_every_call_as_the_probe_counted_it():
    """The recorded output: 1333 entries of @site under 33 printed keys, summed to 2115 calls,
    which is what @regs_ok counted at the same probe; a dict kept 184 of them."""
    text = recorded()
    naive = sum(sum(json.loads(ln)["data"]["@site"].values()) for ln in text.split("\n")
                if ln.startswith("{") and '"@site"' in ln)
    assert naive == 184                     # what a dict made of it: the fault itself
    maps = bpftrace.parse_json(text)
    assert maps.total("@site") == 2115 == maps.total("@regs_ok")
    assert maps.entries["@site"] == 1333 and len(maps["@site"]) == 33
    assert maps.collapsed == {"@site": 1300}
    rows = mdiagnose.bpftrace_maps(maps)
    by_id = {}
    for r in rows["sites"]:
        by_id[r["id"]] = by_id.get(r["id"], 0) + r["calls"]
    assert by_id[1] == 997 and by_id[0] == 1000          # x86-64 write, read
    raw = {"tracer": "bpftrace", "rows": rows, "mode": "command"}
    w = adiagnose.witnesses(raw)
    assert w["agree"] and w["entries"] == 2115 and w["regs_ok"] == 2115
    assert w["exits"] == 2114 and w["no_return"] == 1   # exit_group never comes back
    assert w["collapsed"] == {"@site": 1300}


def test_the_witness_line_says_what_was_merged():
    rows = mdiagnose.bpftrace_maps(bpftrace.parse_json(recorded()))
    d = {"tracer": {"name": "bpftrace"},
         "witness": adiagnose.witnesses({"tracer": "bpftrace", "rows": rows, "mode": "command"})}
    line = pdiagnose.witness_line(d)
    assert "2115 calls" in line and "1300 more entries of @site" in line and "agree" in line


# ------------------------------------------------------------------ the reader's merge

def _line(kind, name, members):
    """One bpftrace -f json line whose map has these (key, value) members, repeats kept."""
    body = ", ".join(f"{json.dumps(k)}: {json.dumps(v)}" for k, v in members)
    return f'{{"type": "{kind}", "data": {{"{name}": {{{body}}}}}}}'


def test_entries_printed_alike_are_combined_by_their_aggregation():
    text = "\n".join([
        _line("map", "@n", [("7,a", 3), ("7,a", 4), ("8,a", 1)]),
        _line("map", "@lo", [("1", 9), ("1", 5)]),
        _line("map", "@hi", [("1", 9), ("1", 5)]),
        _line("map", "@flags", [("1", 1), ("1", 16)]),
        _line("map", "@name", [("1", "a"), ("1", "b")]),
        _line("hist", "@h", [("1", [{"min": 0, "max": 1, "count": 2}]),
                             ("1", [{"min": 0, "max": 1, "count": 3},
                                    {"min": 2, "max": 3, "count": 1}])]),
        _line("stats", "@s", [("1", {"count": 2, "average": 5, "total": 10}),
                              ("1", {"count": 3, "average": 10, "total": 30})]),
    ])
    m = bpftrace.parse_json(text, {"@lo": "min", "@hi": "max", "@flags": "or", "@name": "first"})
    assert m["@n"] == {("7", "a"): 7, ("8", "a"): 1}
    assert m["@lo"][("1",)] == 5 and m["@hi"][("1",)] == 9 and m["@flags"][("1",)] == 17
    assert m["@name"][("1",)] == "a" and m.conflicts == {"@name": 1}
    assert m["@h"][("1",)] == [{"min": 0, "max": 1, "count": 5}, {"min": 2, "max": 3, "count": 1}]
    assert m["@s"][("1",)] == {"count": 5, "average": 8, "total": 40}
    assert m.entries["@n"] == 3 and m.collapsed["@n"] == 1


def test_keyless_maps_and_stats_stay_keyless():
    text = "\n".join(['{"type": "map", "data": {"@c": 12}}',
                      '{"type": "stats", "data": {"@s": {"count": 2, "average": 3, "total": 6}}}',
                      '{"type": "hist", "data": {"@h": [{"min": 1, "max": 1, "count": 4}]}}'])
    m = bpftrace.parse_json(text)
    assert m["@c"] == {(): 12}
    assert m["@s"] == {(): {"count": 2, "average": 3, "total": 6}}
    assert m["@h"] == {(): [{"min": 1, "max": 1, "count": 4}]}


def test_lost_events_warnings_and_cut_lines_are_kept():
    text = "\n".join(['{"type": "lost_events", "data": {"events": 5}}',
                      _line("map", "@n", [("1", 2)]),
                      '{"type": "map", "data": {"@n": {"2": 3'])       # cut short
    m = bpftrace.parse_json(text, stderr="Lost 7 events\nWARNING: Failed to map_update_elem: -7\n"
                                         "WARNING: could not raise RLIMIT_MEMLOCK\n")
    assert m.lost == 12 and len(m.unread) == 1
    assert m.warnings == ["WARNING: Failed to map_update_elem: -7"]
    w = m.witness()
    assert w["lost_events"] == 12 and w["unread_lines"] == 1


def test_json_lines_keeps_repeated_members_only_when_asked():
    line = '{"a": 1, "a": 2}'
    assert list(json_lines(line)) == [{"a": 2}]
    assert list(json_lines(line, pairs=True)) == [[("a", 1), ("a", 2)]]


# ------------------------------------------------------------------ the keys themselves

KEY = re.compile(r"@\w+\[([^\]]*)\]\s*=")


@pytest.mark.parametrize("script", sorted(p.name for p in (ROOT / "traces").glob("*.bt")))
def test_no_key_holds_a_string_chosen_at_run_time(script):
    """A map key built from a string chosen by ?: carries bytes after its NUL that differ from
    call to call on the recorded kernel: keys hold integers (codes), the kernel's own comm, or
    a constant literal, never a ternary of strings or a variable made from one."""
    src = (ROOT / "traces" / script).read_text()
    code = re.sub(r"/\*.*?\*/", "", src, flags=re.S)
    string_vars = set(re.findall(r"(\$\w+)\s*=\s*[^;]*\?\s*\"", code))
    for m in KEY.finditer(code):
        key = m.group(1)
        assert not re.search(r"\?\s*\"", key), (script, key)
        assert not any(v in re.findall(r"\$\w+", key) for v in string_vars), (script, key)


# ------------------------------------------------------------------ the census

def _census_maps(calls_entries, nr_calls, regs, keys=None):
    lines = [_line("map", "@calls", calls_entries),
             _line("map", "@nr", [("100,5000000000,1,1,20", nr_calls)]),
             _line("map", "@regs_ok", [("1", regs)])]
    return mcensus.rows(bpftrace.parse_json("\n".join(lines), mcensus.COMBINE), keys)


def test_census_full_is_judged_on_the_entries_printed_not_the_keys_left():
    key = "100,5000000000,1,loop32,1,35,2,1,0"
    rows = _census_maps([(key, 1)] * 8, 8, 8, keys=8)
    assert rows["calls"][0]["calls"] == 8 and rows["calls"][0]["insn"] == "int80"
    assert rows["maps_full"] == ["@calls"]
    assert rows["witness"]["collapsed"] == {"@calls": 7}


def _census_doc(trace):
    return {"schema": "timewrite-census/3", "seconds": 2.0, "wall_s": 2.0, "root": True,
            "tracer": "bpftrace", "snapshot": [], "snapshot_end": [], "trace": trace,
            "overhead": {}, "vdso32": {}, "ia32": {"enabled": True}}


def test_census_counts_that_disagree_stop_the_statement_of_absence():
    """No program entered by int 0x80: said only when the counts by path, by number and the
    probe's own total agree; else the census says it cannot say, with the numbers."""
    good = _census_maps([("100,5000000000,1,x,0,51,3,2,0", 40)], 40, 40)
    d = acensus.analyse(_census_doc(good))
    assert d["witness"]["agree"]
    text = "\n".join(pcensus.readiness(d))
    assert "No program entered by int 0x80 during the window." in text
    assert "Counts checked: 40 calls by entry path, 40 by call number and 40" in pcensus.witness_text(d)
    bad = _census_maps([("100,5000000000,1,x,0,51,3,2,0", 40)], 40, 4096)
    d = acensus.analyse(_census_doc(bad))
    assert not d["witness"]["agree"]
    text = "\n".join(pcensus.readiness(d))
    assert "No program entered" not in text and "would stop nothing" not in text
    assert "cannot be said" in text and "(40)" in text and "(4096)" in text
    assert any("disagree" in b for b in d["blind"])


def test_census_per_image_counts_are_held_to_each_other():
    rows = _census_maps([("100,5000000000,1,x,1,35,2,1,0", 10)], 12, 10)
    w = acensus.witnesses(_census_doc(rows))
    assert not w["agree"] and w["images_differing"][0]["by_path"] == 10
    assert w["images_differing"][0]["by_number"] == 12


def test_census_exec_names_are_values_not_keys():
    text = '{"type": "map", "data": {"@exec": {"100,5000000000,1": "/opt/a,b"}}}'
    rows = mcensus.rows(bpftrace.parse_json(text, mcensus.COMBINE))
    assert rows["exec"] == [{"pid": 100, "start": rows["exec"][0]["start"], "gen": 1,
                             "filename": "/opt/a,b"}]


# ------------------------------------------------------------------ diagnose

def test_diagnose_disagreeing_counts_lead_the_headline():
    rows = mdiagnose.bpftrace_maps(bpftrace.parse_json("\n".join([
        _line("map", "@site", [("5,dd,0,3,2,1,51,4096,0,0", 10)]),
        _line("map", "@regs_ok", [("1", 25)]),
        _line("map", "@exits", [("5,0,1", 10)])])))
    w = adiagnose.witnesses({"tracer": "bpftrace", "rows": rows, "mode": "command"})
    assert not w["agree"] and "10 calls" in w["disagreements"][0] and "25" in w["disagreements"][0]
    d = {"calls": 10, "extra": {"calls": 0}, "witness": w}
    assert pdiagnose.headline(d).startswith("the tracer's counts disagree")


def test_diagnose_rows_read_the_codes_and_the_old_names_alike():
    new = mdiagnose.bpftrace_maps(bpftrace.parse_json(
        _line("map", "@site", [("5,my,prog,1,2,1,4,35,134551214,0,0", 3)])))
    old = mdiagnose.bpftrace_maps(bpftrace.parse_json(
        _line("map", "@site", [("5,my,prog,compat,text,int80,4,35,134551214,0,0", 3)])))
    for rows in (new, old):
        s = rows["sites"][0]
        assert (s["comm"], s["abi"], s["origin"], s["insn"], s["id"]) == \
            ("my,prog", "compat", "text", "int80", 4)


# ------------------------------------------------------------------ strace and perf

def test_strace_counts_a_call_left_unfinished():
    text = ("101 [00007f0000001000] read(0,  <unfinished ...>\n"
            "102 [00007f0000002000] write(1, \"x\", 1) = 1 <0.000010>\n"
            "102 [00007f0000002000] madeup_call(1) = 0 <0.000010>\n")
    parsed = strace.parse_strace(text, 64)
    assert [c["name"] for c in parsed["calls"]] == ["write", "madeup_call", "read"]
    rows = strace.strace_rows(parsed)
    w = rows["witness"]
    assert w["lines"] == 3 and w["sites_total"] == 2 and w["unnamed"] == {"madeup_call": 1}
    a = adiagnose.witnesses({"tracer": "strace", "rows": rows})
    assert not a["agree"] and "madeup_call x1" in a["disagreements"][0]


def test_strace_c_rows_are_held_to_their_total_row():
    text = (FX / "strace_c_w_64bit.txt").read_text()
    assert strace.check_c(text) == []
    cut = text.replace(" 12.68    0.000163           6        24           write\n", "")
    assert "sum to 54 calls" in strace.check_c(cut)[0]
    assert "no total row" in strace.check_c(text.rsplit("------", 1)[0])[0]


def test_perf_stat_lines_that_do_not_line_up_are_not_taken():
    text = (FX / "perf_stat_j_32libc.json").read_text()
    names = perf_stat.EVENTS + ["raw_syscalls:sys_enter", "write_exit_ret_256", "write_exit_ret_17"]
    lines = text.split("\n")
    drop = next(i for i, ln in enumerate(lines) if '"page-faults"' in ln)
    ev, why = perf_stat.parse_json("\n".join(lines[:drop] + lines[drop + 1:]), names)
    assert ev["task-clock"] > 0 and ev["context-switches"] == 2
    assert ev["page-faults"] is None and "do not line up" in why["page-faults"]
    assert ev["write_exit_ret_256"] is None and ev["raw_syscalls:sys_enter"] is None


# ------------------------------------------------------------------ the watch's loader

def test_watch_batch_keeps_both_entries_of_one_key():
    from twtools.measure import watch as mwatch
    text = "\n".join([_line("map", "@exec0", [("2049,12,7,1", 2), ("2049,12,7,1", 3)]),
                      _line("map", "@first0", [("2049,12,7,1", 50), ("2049,12,7,1", 20)]),
                      _line("map", "@n0", [("64", 1), ("32", 5), ("32", 1)])])
    cur = mwatch._batch()
    for o in json_lines(text, pairs=True):
        for name, val in o.get("data"):
            mwatch._fold(cur, name, val)
    row = cur["execs"][(2049, 12, 7, True)]
    assert row["n"] == 5 and row["first_ns"] == 20
    assert cur["n"] == {False: 1, True: 6}
