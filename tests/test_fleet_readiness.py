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
