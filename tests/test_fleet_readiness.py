"""`tw fleet --readiness`: the fleet's ia32_emulation=0 readiness from each host's tw watch
report, as fleet/watch.yml collects them.

Why it can break: every report comes from a host the user does not control.  A report that
is not JSON, has the wrong schema, a number that is NaN or a string, a FIFO in its place (a
reader would block), a symbolic link out of the host's folder, or a program name holding a
terminal escape or a bidirectional override must be refused or escaped, one line each, and
the other hosts still shown; a number outside its plausible range (a time of 1e20) must cost
its host only; a host with no report, or whose watch did not cover the whole period, is
"unknown" with its reason, never "ready".
"""
import json
import os
import subprocess
import sys

from conftest import ROOT

REPORT = {"schema": "timewrite-watch-report/1", "since": 1.0e9, "until": 1.0e9 + 86400,
          "coverage": {"started": 1.0e9 - 10, "saved": 1.0e9 + 86400 - 30},
          "stop": [{"program": "/opt/old\x1b[2J32", "why": "32-bit", "execs": 3,
                    "first_seen": 1.0e9 + 5, "last_seen": 1.0e9 + 50, "windows": 0, "paths": {}}]}


def host(coll, name, report=None, status=None, raw=None):
    d = coll / name
    d.mkdir(parents=True)
    if report is not None:
        (d / "watch-report.json").write_text(json.dumps(report))
    if raw is not None:
        (d / "watch-report.json").write_text(raw)
    if status is not None:
        (d / "status.json").write_text(json.dumps(status))
    return d


def tw(*args):
    return subprocess.run([sys.executable, ROOT / "scripts" / "tw", "fleet", "--readiness", *args],
                          capture_output=True, text=True, timeout=120)


def test_ready_not_ready_unknown_and_refused(tmp_path):
    coll = tmp_path / "collected"
    host(coll, "alpha", REPORT)
    host(coll, "beta", {**REPORT, "stop": []})
    host(coll, "gamma", status={"state": "unreachable", "why": "ssh: connect refused"})
    host(coll, "delta", raw="{not json")
    host(coll, "eps", {**REPORT, "schema": "something-else"})
    host(coll, "zeta", {**REPORT, "stop": [{**REPORT["stop"][0], "execs": "many"}]})
    fifo = host(coll, "eta") / "watch-report.json"
    os.mkfifo(fifo)
    outside = tmp_path / "outside.json"
    outside.write_text(json.dumps(REPORT))
    (host(coll, "theta") / "watch-report.json").symlink_to(outside)
    p = tw(coll, "--json")
    assert p.returncode == 3, p.stderr            # some refused: exit 3, the rest shown
    d = json.loads(p.stdout)
    state = {h["host"]: h["state"] for h in d["hosts"]}
    assert state == {"alpha": "not ready", "beta": "ready", "gamma": "unknown"}, state
    assert sorted(r["host"] for r in d["refused"]) == ["delta", "eps", "eta", "theta", "zeta"]
    assert "unreachable: ssh: connect refused" in next(h for h in d["hosts"] if h["host"] == "gamma")["why"]
    assert len(p.stderr.strip().splitlines()) == 5 and "Traceback" not in p.stderr
    t = tw(coll)
    assert "1 ready, 1 not ready, 1 unknown, 5 refused" in t.stdout, t.stdout
    assert "\x1b" not in t.stdout and "/opt/old\\x1b[2J32 (32-bit): 3 exec(s)" in t.stdout, t.stdout


def test_no_folder_is_one_line(tmp_path):
    p = tw(tmp_path / "none")
    assert p.returncode in (2, 3, 4) and p.stderr.count("\n") == 1 and "Traceback" not in p.stderr


def test_one_hostile_report_costs_its_host_only(tmp_path):
    """A report nested 100,000 deep (Python's parser: RecursionError, and the whole command
    died with exit 70, every other host's answer lost) and one nested 33 deep are refused,
    each in one line; the good hosts are still answered."""
    coll = tmp_path / "collected"
    host(coll, "alpha", REPORT)
    host(coll, "beta", {**REPORT, "stop": []})
    host(coll, "deep", raw="[" * 100000 + "]" * 100000)
    host(coll, "deep33", raw='{"schema": "timewrite-watch-report/1", "x": ' + "[" * 33 + "]" * 33 + "}")
    p = tw(coll, "--json")
    assert p.returncode == 3 and "Traceback" not in p.stderr, p.stderr
    d = json.loads(p.stdout)
    assert {h["host"]: h["state"] for h in d["hosts"]} == {"alpha": "not ready", "beta": "ready"}
    assert sorted(r["host"] for r in d["refused"]) == ["deep", "deep33"]
    assert len(p.stderr.strip().splitlines()) == 2


def test_ready_only_on_a_complete_plausible_period(tmp_path):
    """An empty stop list is "ready" only with a period that can be: since and until present,
    since <= until, neither in the future, the watch's start not in the future."""
    coll = tmp_path / "collected"
    host(coll, "good", {**REPORT, "stop": []})
    host(coll, "noperiod", {"schema": "timewrite-watch-report/1", "stop": []})
    host(coll, "nocoverage", {k: v for k, v in {**REPORT, "stop": []}.items() if k != "coverage"})
    host(coll, "backwards", {**REPORT, "stop": [], "since": 1.0e9 + 86400, "until": 1.0e9})
    host(coll, "future", {**REPORT, "stop": [], "coverage": {"started": 5.0e9}})
    host(coll, "ahead", {**REPORT, "stop": [], "until": 5.0e9})
    host(coll, "negative", {**REPORT, "stop": [{**REPORT["stop"][0], "execs": -5}]})
    p = tw(coll, "--json")
    assert p.returncode == 3, p.stderr
    d = json.loads(p.stdout)
    assert {h["host"]: h["state"] for h in d["hosts"]} == {"good": "ready"}
    assert sorted(r["host"] for r in d["refused"]) == ["ahead", "backwards", "future", "negative",
                                                       "nocoverage", "noperiod"]


def test_why_and_path_keys_reach_the_terminal_escaped(tmp_path):
    coll = tmp_path / "collected"
    host(coll, "alpha", {**REPORT, "stop": [{**REPORT["stop"][0], "why": "32-bit\x1b]0;pwned\x07",
                                             "paths": {"compat\x1b[2Jint80": {}}}]})
    host(coll, "gamma", status={"state": "unreachable\x1b[31m", "why": "ssh\x1b[2J"})
    p = tw(coll)
    assert p.returncode == 0, p.stderr
    assert "\x1b" not in p.stdout and "\x07" not in p.stdout, p.stdout
    assert "32-bit\\x1b]0;pwned\\x07" in p.stdout and "compat\\x1b[2Jint80" in p.stdout


def test_an_implausible_number_costs_its_host_only(tmp_path):
    """A time of 1e20 or 1e300 (no clock can print it: OverflowError, exit 70, and the hosts
    after it were never printed), a first_seen of -5, a count of 1e300, a window count that is
    not whole: each refused in one line; the hosts around them are answered."""
    coll = tmp_path / "collected"
    prog = REPORT["stop"][0]
    host(coll, "a-good", REPORT)
    host(coll, "b-1e20", {**REPORT, "stop": [{**prog, "last_seen": 1e20}]})
    host(coll, "c-1e300", {**REPORT, "stop": [{**prog, "last_seen": 1e300}]})
    host(coll, "d-negative", {**REPORT, "stop": [{**prog, "first_seen": -5}]})
    host(coll, "e-huge-count", {**REPORT, "stop": [{**prog, "execs": 1e300}]})
    host(coll, "f-windows", {**REPORT, "coverage": {**REPORT["coverage"], "windows": 2.5}})
    host(coll, "g-after", {**REPORT, "stop": [{**prog, "first_seen": 1.0e9 + 50,
                                               "last_seen": 1.0e9 + 5}]})
    host(coll, "z-good", {**REPORT, "stop": []})
    for args in ((coll,), (coll, "--json")):
        p = tw(*args)
        assert p.returncode == 3 and "Traceback" not in p.stderr, p.stderr
        assert len(p.stderr.strip().splitlines()) == 6, p.stderr
        for bad in ("b-1e20", "c-1e300", "d-negative", "e-huge-count", "f-windows", "g-after"):
            assert bad in p.stderr
    d = json.loads(p.stdout)
    assert {h["host"]: h["state"] for h in d["hosts"]} == {"a-good": "not ready", "z-good": "ready"}
    assert "z-good: ready" in tw(coll).stdout


def test_ready_only_when_the_watch_covered_the_whole_period(tmp_path):
    """A watch that ran 60 s of a 30-day period, a report whose coverage is {}, a watch
    started a day after the period began (its clock a day ahead), one that stopped saving a
    week before the period's end: none is ready; each is unknown, saying why."""
    coll = tmp_path / "collected"
    since, until = 1.7e9, 1.7e9 + 30 * 86400
    full = {**REPORT, "since": since, "until": until, "stop": [],
            "coverage": {"started": since - 100, "saved": until - 30}}
    host(coll, "full", full)
    host(coll, "sixty-s", {**full, "coverage": {"started": until - 90, "saved": until - 30}})
    host(coll, "no-coverage", {**full, "coverage": {}})
    host(coll, "a-day-ahead", {**full, "coverage": {"started": since + 86400, "saved": until}})
    host(coll, "stopped", {**full, "coverage": {"started": since - 100, "saved": until - 7 * 86400}})
    p = tw(coll, "--json")
    assert p.returncode == 0, p.stderr
    hosts = {h["host"]: h for h in json.loads(p.stdout)["hosts"]}
    assert {h: x["state"] for h, x in hosts.items()} == {
        "full": "ready", "sixty-s": "unknown", "no-coverage": "unknown",
        "a-day-ahead": "unknown", "stopped": "unknown"}
    assert "started 30 days after the period began" in hosts["sixty-s"]["why"]
    assert "does not say" in hosts["no-coverage"]["why"]
    assert "last saved 7 days before the period ended" in hosts["stopped"]["why"]
    t = tw(coll).stdout
    assert "1 ready, 0 not ready, 4 unknown" in t, t


def test_bidi_controls_in_a_name_are_shown_not_obeyed(tmp_path):
    """U+202E (right-to-left override) in a program's name reversed what the terminal showed
    after it (/opt/\\u202egnp.exe reads as /opt/exe.png); and a name holding the four
    characters \\x1b (one backslash: never what a watch writes) looked like a real ESC."""
    coll = tmp_path / "collected"
    prog = REPORT["stop"][0]
    host(coll, "alpha", {**REPORT, "stop": [{**prog, "program": "/opt/\u202egnp.exe"},
                                            {**prog, "program": "/opt/lit\\x1b"},
                                            {**prog, "program": "/opt/real\x1b"},
                                            {**prog, "program": "/opt/\u2066iso\u2069\u200f"}]})
    host(coll, "gamma", status={"state": "unreachable", "why": "ssh \u202edeifirev"})
    t = tw(coll).stdout
    assert not set(t) & {"\u202e", "\u2066", "\u2069", "\u200f", "\x1b"}, ascii(t)
    assert "/opt/\\u202egnp.exe" in t and "/opt/\\u2066iso\\u2069\\u200f" in t
    assert "/opt/real\\x1b (" in t and "/opt/lit\\\\x1b (" in t, t
    assert "ssh \\u202edeifirev" in t
