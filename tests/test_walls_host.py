"""The host exactly as found: tw's audit rules and nothing else taken away, however tw dies;
every program on raw_syscalls found, however it is attached; the tracer's A/A symmetric.

A wall that takes away more than it put up, or measures beside a tracer it did not see,
spoils every later measurement of the machine, or this one.  This breaks if the audit guard
deletes a host rule identical to one of tw's (auditctl answered "Rule exists" for it, so it
was never tw's), or leaves one of tw's behind when tw is SIGKILLed at any moment of adding
them; if a BPF program on raw_syscalls attached as a raw tracepoint or BTF tracepoint link
(not a perf event) goes unlisted, or is not said on screen beside the figures it spoils; or
if the tracer's own A/A detaches before one side's runs and not the other's (it is attached
once a round and kept for both).  Audit is never enabled here: rules are added and removed
with audit off, which costs no process anything."""
import json
import os
import random
import signal
import subprocess
import sys
import time

import pytest

from conftest import BUILD, ROOT, need_root, need_tool, wait_until
from twtools.machine import hostwalls

TW = [sys.executable, str(ROOT / "scripts" / "tw")]
ENV = dict(os.environ, PYTHONPATH=str(ROOT / "scripts"))


def _need_auditctl():
    need_root()
    if hostwalls.auditctl() is None:
        pytest.fail("auditctl is missing: make test unpacks it into build/auditd")
    st = hostwalls.audit_status()
    assert st["enabled"] is not None, st["why"]


def _ctl(*words):
    return subprocess.run([hostwalls.auditctl(), *words], capture_output=True, text=True)


HOST_RULE = ["-a", "always,exit", "-F", "arch=b64", "-S", "adjtimex", "-F", "key=tw-test-host"]
TW_RULES = [["-a", "always,exit", "-F", "arch=b64", "-S", "settimeofday", "-F",
             "key=tw-test-a"],
            HOST_RULE,
            ["-a", "always,exit", "-F", "arch=b32", "-S", "settimeofday", "-F",
             "key=tw-test-b"],
            ["-w", "/etc/tw-test-watch", "-p", "wa", "-k", "tw-test-w"]]
ADDER = (
    "import json, sys, time\n"
    "from twtools.measure.walls import Guard\n"
    "g = Guard()\n"
    "for w in json.loads(sys.argv[1]):\n"
    "    g.add(w)\n"
    "print('added', json.dumps(g.host_had), flush=True)\n"
    "time.sleep(120)\n")


def _remove_test_rules():
    _ctl("-d", *HOST_RULE[1:])
    for w in TW_RULES:
        _ctl(*(["-d"] + w[1:] if w[0] == "-a" else ["-W"] + w[1:]))


def test_the_guard_takes_away_only_what_tw_added_whatever_moment_tw_dies():
    _need_auditctl()
    # this test's own rules left by a run of it killed before its cleanup (a suite stopped by
    # a timeout left two, and the next suite's host rule then "exists"): the kernel keeps audit
    # rules until reboot, so they are taken away first
    _remove_test_rules()
    assert _ctl(*HOST_RULE).returncode == 0, "the test's host rule could not be added"
    try:
        before = hostwalls.rules_now()
        assert any("tw-test-host" in r for r in before)
        rng = random.Random(72)
        for i in range(10):
            p = subprocess.Popen([sys.executable, "-c", ADDER, json.dumps(TW_RULES)],
                                 stdout=subprocess.PIPE, text=True, env=ENV, cwd=ROOT)
            if i == 0:
                # once to the end: the host's rule is the guard's "exists", never its own
                line = p.stdout.readline()
                assert line.startswith("added") and "tw-test-host" in line, line
                assert len(hostwalls.rules_now()) == len(before) + len(TW_RULES) - 1
            else:
                time.sleep(rng.uniform(0.0, 0.5))     # at any moment of adding them
            os.kill(p.pid, signal.SIGKILL)
            p.wait()
            # the guard, in its own session, reads EOF and takes away what it added
            assert wait_until(lambda: hostwalls.rules_now() == before), \
                (i, hostwalls.rules_now(), before)
    finally:
        _remove_test_rules()
    assert not any("tw-test" in r for r in hostwalls.rules_now())


@pytest.mark.parametrize("how", ["raw_tp", "tp_btf"])
def test_a_bpf_link_on_raw_syscalls_is_found_and_said_beside_the_figures(build, tmp_path, how):
    need_root()
    need_tool("bpftool")
    loader = subprocess.Popen([str(BUILD / "tracerbpf"), "--attach", how,
                               str(BUILD / "walls" / "tracer.bpf.o")], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        loader.stdin.write("attach\n")
        loader.stdin.flush()
        assert loader.stdout.readline().strip() == "attached", loader.stderr.read()
        rows, why = hostwalls.raw_syscalls_tracers()
        assert rows is not None, why
        ours = [r for r in rows if r["pid"] == loader.pid]
        assert ours and ours[0]["kind"] == "BPF raw tracepoint link", rows
        assert ours[0]["tracepoint"] == "sys_enter"
        # and tw ab says so on screen before the run, and beside the figures after it
        p = subprocess.run(TW + ["ab", "--wall", "seccomp:allow", "--variants", "64-syscall",
                                 "--ops", "getppid", "--rounds", "2", "--copies", "2",
                                 "--out", str(tmp_path / "ab"), "--format", "json"],
                           capture_output=True, text=True, timeout=600, cwd=ROOT)
        assert p.returncode == 0, p.stderr
        assert f"pid {loader.pid}, BPF raw tracepoint link" in p.stderr
        (row,) = json.loads(p.stdout)
        assert f"pid {loader.pid}" in row["why"] and "NOTE" in row["why"]
        doc = json.loads((tmp_path / "ab" / "ab.json").read_text())
        assert any(r["pid"] == loader.pid for r in doc["host_tracers"]["before"])
    finally:
        loader.stdin.close()
        loader.wait(timeout=30)
    rows, _ = hostwalls.raw_syscalls_tracers()
    assert not [r for r in rows if r["pid"] == loader.pid]


def test_the_tracers_own_a_a_keeps_it_up_for_both_sides(build, tmp_path):
    need_root()
    need_tool("bpftool")
    p = subprocess.run(TW + ["ab", "--selfcheck", "1", "--wall", "tracer:raw_syscalls",
                             "--variants", "64-syscall", "--ops", "null,getppid", "--rounds",
                             "3", "--copies", "2", "--out", str(tmp_path / "aa")],
                       capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert p.returncode in (0, 1), p.stderr
    doc = json.loads((tmp_path / "aa" / "aa-001" / "ab.json").read_text())
    # attached before each round's first run, whichever side, detached at its end only:
    # one attach a round (a detach before A's runs alone made A's runs follow an attach)
    assert doc["wall"]["down"]["attaches"] == 3
