"""tw ab --wall: B really runs behind the wall and A really does not, each row says what the
wall adds in ns, and the host is left as it was found, even when tw is killed.

A wall measured on the wrong side, or left up, is worse than none: every later measurement of
the machine pays for it.  This breaks if B's processes are not behind the filter (their
/proc status says Seccomp 0) or A's are, if the JSON rows lose added_ns and its interval, if
the tracer stays attached after the run or after tw is killed (bpftool then still lists a
program on raw_syscalls), if the audit rules after the run differ from the rules before, if a
rule tw added outlives a SIGKILL, or if audit is turned on without --enable-audit.  Nothing
here asserts on a figure's size: only that it is there, with its interval.  Turning audit on
is opt-in (TW_AUDIT_TEST=1): it makes every later process of the boot pay for audit."""
import json
import os
import signal
import subprocess
import sys

import pytest

from conftest import ROOT, need_root, need_supported, need_tool, wait_until
from twtools.machine import hostwalls

TW = [sys.executable, str(ROOT / "scripts" / "tw")]
SMALL = ["--variants", "64-syscall", "--ops", "getppid", "--rounds", "4", "--copies", "2"]


def tw_ab(tmp_path, *args, name="ab"):
    out = tmp_path / name
    p = subprocess.run(TW + ["ab", *args, "--out", str(out)], capture_output=True, text=True,
                       timeout=600, cwd=ROOT)
    return p, out


def ab_json(out):
    return json.loads((out / "ab.json").read_text())


def test_seccomp_wall_rows_and_sides(build, tmp_path):
    need_supported("syscost", "64-syscall")
    p, out = tw_ab(tmp_path, "--wall", "seccomp:container", *SMALL, "--format", "json")
    assert p.returncode == 0, p.stderr
    rows = json.loads(p.stdout)
    assert len(rows) == 1
    r = rows[0]
    for k in ("added_ns", "added_ci_low", "added_ci_high", "a_ns"):
        assert isinstance(r[k], (int, float)), (k, r)
    assert r["added_ci_low"] <= r["added_ns"] <= r["added_ci_high"]
    assert "cache bitmap allows 110" in r["why"]       # getppid is allowed by name: cached
    doc = ab_json(out)
    (cell,) = doc["cells"]
    assert all(x["wall"]["status"]["Seccomp"] == "0" for x in cell["a"]["rounds"])
    assert all(x["wall"]["status"]["Seccomp"] == "2" and
               x["wall"]["status"]["Seccomp_filters"] == "1" for x in cell["b"]["rounds"])
    assert (out / "wall-seccomp.bpf").stat().st_size == 8 * doc["wall"]["up"]["instructions"]
    ev = doc["wall"]["evidence"]
    if ev["a"] is None:
        assert ev["why"]          # bpftrace could not read the flags: it says why
    else:
        assert "SECCOMP" in ev["b"] and "SECCOMP" not in ev["a"]


def test_selfcheck_puts_the_wall_on_both_sides(build, tmp_path):
    need_supported("syscost", "64-syscall")
    p, out = tw_ab(tmp_path, "--selfcheck", "1", "--wall", "seccomp:allow", *SMALL)
    assert p.returncode in (0, 1), p.stderr
    doc = json.loads((out / "aa-001" / "ab.json").read_text())
    assert doc["wall_both"]
    for side in ("a", "b"):
        assert all(x["wall"]["status"]["Seccomp"] == "2" for x in doc["cells"][0][side]["rounds"])
    assert "A/A self-check:" in p.stdout


def _ours_on_raw_syscalls():
    rows, why = hostwalls.raw_syscalls_tracers()
    assert rows is not None, why
    return [r for r in rows if r["comm"] == "tracerbpf"]


def test_tracer_wall_is_up_for_b_only_and_comes_down(build, tmp_path):
    need_root()
    need_tool("bpftool")
    p, out = tw_ab(tmp_path, "--wall", "tracer:raw_syscalls", "--variants", "64-syscall",
                   "--ops", "null,getppid", "--rounds", "4", "--copies", "2")
    assert p.returncode == 0, p.stderr
    down = ab_json(out)["wall"]["down"]
    # once a round for its two B runs (4 rounds), and once for the evidence's B run
    assert down["attaches"] == 5
    assert down["calls_seen"] > 0
    assert _ours_on_raw_syscalls() == []


def _killed_mid_run(tmp_path, wall, up):
    """tw ab behind `wall`, SIGKILLed once up() says the wall is up."""
    out = tmp_path / "killed"
    p = subprocess.Popen(TW + ["ab", "--wall", wall, "--variants", "64-syscall", "--ops",
                               "getppid", "--rounds", "10000", "--out", str(out)],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT)
    try:
        assert wait_until(up, 120), f"the wall {wall} never went up"
    finally:
        os.kill(p.pid, signal.SIGKILL)
        p.wait()


def test_tracer_comes_down_when_tw_is_killed(build, tmp_path):
    need_root()
    need_tool("bpftool")
    assert _ours_on_raw_syscalls() == []
    _killed_mid_run(tmp_path, "tracer:raw_syscalls",
                    lambda: subprocess.run(["pgrep", "-x", "tracerbpf"],
                                           capture_output=True).returncode == 0)
    # its stdin was tw's: it reads EOF, detaches and exits
    assert wait_until(lambda: subprocess.run(["pgrep", "-x", "tracerbpf"],
                                        capture_output=True).returncode != 0)
    assert _ours_on_raw_syscalls() == []


def _need_auditctl():
    need_root()
    if hostwalls.auditctl() is None:
        pytest.fail("auditctl is missing: make test unpacks it into build/auditd")


def test_audit_context_wall_leaves_the_rules_as_they_were(build, tmp_path):
    _need_auditctl()
    before = hostwalls.audit_status()
    p, out = tw_ab(tmp_path, "--wall", "audit:context", *SMALL)
    assert p.returncode == 0, p.stderr
    w = ab_json(out)["wall"]
    assert w["down"]["restored"] and w["down"]["rules_after"] == before["rules"]
    assert "never,task" in w["up"]["separation"]
    after = hostwalls.audit_status()
    assert (after["enabled"], after["rules"]) == (before["enabled"], before["rules"])
    ev = w["evidence"]
    if ev["a"] is not None:
        assert "SYSCALL_AUDIT" not in ev["a"]      # tw's own children: the never rule


def test_audit_rules_need_consent_where_audit_is_off(build, tmp_path):
    _need_auditctl()
    before = hostwalls.audit_status()
    if before["enabled"] != 0:
        pytest.skip(f"audit is on here (enabled {before['enabled']}): the consent is asked "
                    "only where it is off")
    p, _ = tw_ab(tmp_path, "--wall", "audit:compliance", *SMALL)
    assert p.returncode == 2 and "--enable-audit" in p.stderr, p.stderr
    after = hostwalls.audit_status()
    assert (after["enabled"], after["rules"]) == (0, before["rules"])


def test_audit_rules_are_taken_away_when_tw_is_killed(build, tmp_path):
    _need_auditctl()
    before = hostwalls.audit_status()["rules"]
    _killed_mid_run(tmp_path, "audit:context",
                    lambda: any("never" in r for r in (hostwalls.rules_now() or []))
                    and (hostwalls.rules_now() or []) != before)
    # the guard, in its own session, reads EOF and deletes what tw added
    assert wait_until(lambda: hostwalls.rules_now() == before), hostwalls.rules_now()


@pytest.mark.skipif(not os.environ.get("TW_AUDIT_TEST"),
                    reason="opt-in (TW_AUDIT_TEST=1): turning audit on makes every process "
                           "started later in this boot pay for audit until reboot")
def test_audit_wall_with_consent(build, tmp_path):
    _need_auditctl()
    before = hostwalls.audit_status()
    p, out = tw_ab(tmp_path, "--wall", "audit:compliance", "--enable-audit", *SMALL)
    assert p.returncode == 0, p.stderr
    w = ab_json(out)["wall"]
    assert w["down"]["restored"]
    ev = w["evidence"]
    assert ev["a"] is not None, ev["why"]
    assert "SYSCALL_AUDIT" in ev["b"] and "SYSCALL_AUDIT" not in ev["a"]
    after = hostwalls.audit_status()
    assert (after["enabled"], after["rules"]) == (before["enabled"], before["rules"])
