"""tw census names the processes that run behind a wall, and prices their calls with the walls
this machine measured.

Who pays for a wall is what an operator asks of tw census: the processes behind a seccomp
filter (Seccomp 2 in their status), those whose calls carry an audit context (the
SYSCALL_AUDIT flag, read by census.bt at their calls; the silent case is audit off now with the
flag still there, since it was enabled once in the boot), and every process when a program is
attached to raw_syscalls.  This breaks if a filtered process is not named or its filters are
miscounted, if the price is not calls per second times the measured added ns per call (native
calls at the 64-bit syscall's, compat calls at int 0x80's), if a price is given where no wall
was measured, or if an older census (without walls) is read as one that saw none."""
import copy
import json
import subprocess
import sys
import time

import pytest

from conftest import BUILD, ROOT, need_root
from twtools.analyse import census as analyse
from twtools.present import census as present

FIXTURE = ROOT / "tests" / "fixtures" / "census" / "census.json"


def walls(native=(40.0, 38.0, 42.0), compat=(80.0, 70.0, 90.0)):
    row = (lambda v, x: {"variant": v, "op": "getppid",
                         "added": {"median": x[0], "ci_low": x[1], "ci_high": x[2]}})
    return {"walls": [{"spec": "seccomp:container",
                       "rows": [row("64-syscall", native), row("32-int80", compat)]}]}


def census_with_walls():
    raw = json.loads(FIXTURE.read_text())
    raw["schema"] = "timewrite-census/3"
    busy = max(raw["trace"]["calls"], key=lambda r: r["calls"] if not r.get("own") else 0)
    pid = busy["pid"]
    for r in raw["snapshot"] + (raw.get("snapshot_end") or []):
        r["seccomp"], r["seccomp_filters"] = (2, 3) if r["pid"] == pid else (0, 0)
    raw["trace"]["work"] = [{"pid": pid, "start": None, "gen": 0, "work": 1 | 2 | 16}]
    raw["host_walls"] = {"audit": {"enabled": 0, "rules": [], "why": None},
                         "tracers": {"rows": [], "why": None}}
    return raw, pid


def test_behind_a_filter_named_and_priced():
    raw, pid = census_with_walls()
    d = analyse.analyse(raw, walls=walls())
    s = d["walls"]["seccomp"]
    assert s["processes"] == 1 and s["who"][0]["pid"] == pid
    assert s["who"][0]["seccomp_filters"] == 3
    seconds = d["window_s"]
    proc = next(p for p in d["processes"] if p["pid"] == pid)
    n = sum(g["calls"] for g in proc["paths"] if g["abi"] == "native") / seconds
    c = sum(g["calls"] for g in proc["paths"] if g["abi"] == "compat") / seconds
    assert s["native_calls_per_s"] == pytest.approx(n)
    assert s["ns_per_s"]["median"] == pytest.approx(n * 40 + c * 80)
    assert s["ns_per_s"]["ci_low"] == pytest.approx(n * 38 + c * 70)
    text = "\n".join(present.walls_text(d))
    assert "1 process runs behind a seccomp filter" in text and "(3 filters)" in text


def test_audit_context_while_audit_is_off_is_the_silent_case():
    raw, pid = census_with_walls()
    d = analyse.analyse(raw, walls=walls())
    assert d["walls"]["audit"]["processes"] == 1 and d["walls"]["audit_silent"]
    assert "it was enabled once in this boot" in "\n".join(present.walls_text(d))
    # on, it is no longer silent
    raw["host_walls"]["audit"]["enabled"] = 1
    assert not analyse.analyse(raw, walls=walls())["walls"]["audit_silent"]


def test_no_measured_wall_no_price():
    raw, _ = census_with_walls()
    d = analyse.analyse(raw, walls=None)
    s = d["walls"]["seccomp"]
    assert "ns_per_s" not in s and "was not measured" in s["why"]


def test_a_census_from_before_the_walls_says_unknown():
    raw = json.loads(FIXTURE.read_text())
    d = analyse.analyse(copy.deepcopy(raw), walls=walls())
    assert "predates the walls" in d["walls"]["why"]
    assert "unknown" in present.walls_text(d)[0]


def test_live_census_names_a_filtered_process(build, tmp_path):
    need_root()
    allow = tmp_path / "allow.bpf"
    allow.write_bytes(bytes.fromhex("060000000000ff7f"))    # ret ALLOW
    p = subprocess.Popen([str(BUILD / "syscost-64-syscall"), "--op", "getppid", "--batches",
                          "10000", "--batch-ms", "1", "--seccomp", str(allow),
                          "--seccomp-times", "2"], stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE)
    try:
        # until its filter is on (Seccomp: 2), not a guess of 0.3 s; 60 s is a hang guard
        end = time.monotonic() + 60
        while "Seccomp:\t2" not in open(f"/proc/{p.pid}/status").read():
            assert p.poll() is None and time.monotonic() < end, p.stderr.read()
            time.sleep(0.01)
        c = subprocess.run([sys.executable, str(ROOT / "scripts" / "tw"), "census", "--json",
                            "--seconds", "1"], capture_output=True, text=True, timeout=300,
                           cwd=tmp_path)
    finally:
        p.kill()
        p.wait()
    assert c.returncode == 0, c.stderr
    d = json.loads(c.stdout)
    who = {w["pid"]: w for w in d["walls"]["seccomp"]["who"]}
    assert p.pid in who and who[p.pid]["seccomp_filters"] == 2
    assert d["walls"]["seccomp"]["native_calls_per_s"] > 0
