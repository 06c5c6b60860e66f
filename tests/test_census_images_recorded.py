"""A census recorded here, with a shell that exec'd a 32-bit program and a pid that went to a
second process, is analysed into one row per program: no root or bpftrace needed.

tests/fixtures/census/images.json is `tw census --json`'s raw half from
tests/test_census_images.py on the project's AMD guest (the loop's temporary path replaced by
/tmp/images/loop32).  Pid `shell` ran /bin/sh (dash), then exec'd the loop; pid `dd` ran dd,
which exited, and then the loop, forked from the test's Python.

Why it can break: processes keyed by pid alone in analyse.census (the shell's row then says
32-bit under dash's path, and dd enters by int 0x80); /proc's row naming an image whose start
time is not its own; the fork's parent image not followed for the child's calls before its
execve; a census written before images (timewrite-census/1) no longer read by pid.
"""
import json
import os

from conftest import ROOT
from twtools.analyse import census as analyse

FIXTURE = ROOT / "tests" / "fixtures" / "census" / "images.json"


def recorded():
    d = json.loads(FIXTURE.read_text())
    return d, analyse.processes(d["raw"])


def named(procs, pid):
    return {(p["exe"], p["gen"]): p for p in procs if p["pid"] == pid}


def test_the_shells_calls_and_the_programs_are_apart():
    d, procs = recorded()
    rows = named(procs, d["shell"])
    dash = [p for (exe, gen), p in rows.items() if exe and os.path.basename(exe) == "dash"]
    assert len(rows) == 2 and len(dash) == 1, list(rows)
    assert dash[0]["bits"] == 64 and dash[0]["gen"] == 0 and dash[0]["exe_from"] == "/proc"
    assert {r["abi"] for r in dash[0]["rows"]} == {"native"}
    prog = rows[(d["loop"], 1)]
    assert prog["bits"] == 32 and prog["needs_ia32"] and prog["started"] and prog["alive_at_end"]
    assert {r["insn"] for r in prog["rows"]} == {"int80"}


def test_a_reused_pid_is_each_process_in_turn():
    d, procs = recorded()
    rows = named(procs, d["dd"])
    dd = [p for (exe, gen), p in rows.items() if exe and os.path.basename(exe) == "dd"]
    assert len(dd) == 1 and dd[0]["bits"] == 64 and dd[0]["exited"] and dd[0]["seen_at_start"]
    assert not dd[0]["alive_at_end"]
    prog = rows[(d["loop"], 1)]
    assert prog["bits"] == 32 and prog["start"] != dd[0]["start"] and not prog["seen_at_start"]
    # the child's calls before its execve ran its parent's image, the test's Python
    before = [p for (exe, gen), p in rows.items() if gen == 0 and p["start"] == prog["start"]]
    assert len(before) == 1 and before[0]["exe_from"] == "parent"
    assert "python" in os.path.basename(before[0]["exe"])


def test_the_readiness_answer_names_the_program_not_the_pid():
    d, _ = recorded()
    doc = analyse.analyse(d["raw"], None, "none")
    stop = {(p["pid"], os.path.basename(p["exe"] or "?")) for p in doc["readiness"]["stop"]}
    assert (d["shell"], "loop32") in stop and (d["dd"], "loop32") in stop
    assert not any(exe in ("dash", "dd") for _, exe in stop)


def test_a_census_without_images_is_matched_by_pid():
    """timewrite-census/1 rows have no start or gen: the shell is one row, as it was."""
    d, _ = recorded()
    raw = json.loads(json.dumps(d["raw"]))
    raw["schema"] = "timewrite-census/1"
    for k in ("calls", "nr", "exec", "vsyscall", "fork"):
        for r in raw["trace"][k]:
            r.pop("start", None)
            r.pop("gen", None)
    raw["trace"]["exit"] = [e["pid"] for e in raw["trace"]["exit"]]
    for s in raw["snapshot"] + raw["snapshot_end"]:
        s.pop("start", None)
    rows = [p for p in analyse.processes(raw) if p["pid"] == d["shell"]]
    assert len(rows) == 1 and rows[0]["calls"] == sum(
        r["calls"] for r in d["raw"]["trace"]["calls"] if r["pid"] == d["shell"])
