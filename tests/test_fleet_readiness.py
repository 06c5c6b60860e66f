"""`tw fleet --readiness`: the fleet's ia32_emulation=0 readiness from each host's tw watch
report, as fleet/watch.yml collects them.

Why it can break: every report comes from a host the user does not control.  A report that
is not JSON, has the wrong schema, a number that is NaN or a string, a FIFO in its place (a
reader would block), a symbolic link out of the host's folder, or a program name holding a
terminal escape must be refused or escaped, one line each, and the other hosts still shown;
a host with no report is "unknown" with its status.json's reason.
"""
import json
import os
import subprocess
import sys

from conftest import ROOT

REPORT = {"schema": "timewrite-watch-report/1", "since": 1.0e9, "until": 1.0e9 + 86400,
          "coverage": {"started": 1.0e9 - 10},
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
