"""fleet/watch.yml for real: ansible-playbook installs and starts tw watch on two inventory
hosts that are this machine (reached over ssh on 127.0.0.1, the sshd of
tests/test_fleet_ansible.py), a 32-bit program runs, the report action collects each host's
`tw watch --report --json`, `tw fleet --readiness` names both hosts and the program, and the
stop action stops both watches.

Why it can break: the role's argv (a watch that never starts, or starts twice), the wait for
its metrics, the report's JSON on its way through Ansible, tw fleet's reading of it, a stop
that leaves a watch behind.  The hosts run the watch as a process (this machine has no
systemd as PID 1: the role chooses so by ansible_service_mgr), with --window 0 and only what
the watch needs built in each host's clone (tw_setup build: `make watch-binaries`), so that
the test stays short.  Skips: those of
test_fleet_ansible.py (root, sshd, ansible), tw watch unable to run here (need_watch), or
nasm missing.
"""
import json
import subprocess
import sys

from conftest import need_watch
from test_fleet_ansible import ROOT, free_port, pytestmark, ssh_vars, sshd  # noqa: F401
from test_fleet_ansible import playbook as run_playbook
from test_watch_live import get, saved_after, short32, wait_for

PLAYBOOK = ROOT / "fleet" / "watch.yml"


def inventory(path, sshd, work, ports, action):
    inv = {"all": {"hosts": {}, "vars": {
        **ssh_vars(sshd), "tw_watch_action": action,
        "tw_dest": str(work / "dest" / "{{ tw_safe_name }}"),
        "tw_watch_state": str(work / "state" / "{{ tw_safe_name }}"),
        "tw_setup": "build", "tw_python": sys.executable,
        "tw_watch_args": "--window 0 --interval 1", "tw_watch_since": "1d",
        "tw_collect": str(work / "collected")}}}
    for h, port in ports.items():
        inv["all"]["hosts"][h] = {"ansible_host": "127.0.0.1", "ansible_port": sshd["port"],
                                  "tw_watch_listen": f"127.0.0.1:{port}"}
    path.write_text(json.dumps(inv))
    return path


def playbook(inv, work, timeout=900):
    return run_playbook(inv, work, timeout, PLAYBOOK)


def test_two_hosts_watched_reported_and_stopped(sshd, tmp_path):  # noqa: F811
    need_watch()
    work = tmp_path
    ports = {"alpha": free_port(), "beta": free_port()}
    prog = short32(work)
    r = playbook(inventory(work / "start.json", sshd, work, ports, "start"), work)
    try:
        assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
        for h, port in ports.items():
            assert "timewrite_watch_intervals_total" in get(f"http://127.0.0.1:{port}/metrics")
        p = subprocess.run([str(prog)])
        assert p.returncode == 0
        for h, port in ports.items():
            url = f"http://127.0.0.1:{port}/metrics"
            shown = wait_for(lambda: (lambda m: m if str(prog) in m else None)(get(url)), 30,
                             f"{h} counting {prog}")
            saved_after(url, shown, f"{h} counting {prog}")     # in the state, for the report
        r = playbook(inventory(work / "report.json", sshd, work, ports, "report"), work)
        assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
    finally:
        s = playbook(inventory(work / "stop.json", sshd, work, ports, "stop"), work)
    assert s.returncode == 0, s.stdout[-4000:] + s.stderr[-2000:]
    for h in ports:
        assert not (work / "state" / h / "watch.pid").exists(), h
        log = (work / "state" / h / "watch.log").read_text()
        assert "watch: stopped; state saved" in log, log[-2000:]
    f = subprocess.run([sys.executable, ROOT / "scripts" / "tw", "fleet", "--readiness",
                        work / "collected", "--json"], capture_output=True, text=True, timeout=120)
    assert f.returncode == 0, f.stderr
    doc = json.loads(f.stdout)
    assert sorted(h["host"] for h in doc["hosts"]) == ["alpha", "beta"]
    for h in doc["hosts"]:
        assert h["state"] == "not ready", h
        assert str(prog) in [p["program"] for p in h["programs"]], h
    t = subprocess.run([sys.executable, ROOT / "scripts" / "tw", "fleet", "--readiness",
                        work / "collected"], capture_output=True, text=True, timeout=120)
    assert "0 ready, 2 not ready" in t.stdout and str(prog) in t.stdout, t.stdout
