"""tw watch's windows name the programs that run behind a seccomp filter, and say on /metrics
how many processes, how many calls a second, and what the wall added to them where this
machine measured it (issue 60: who pays a wall, found by the watch as by tw census).

A program behind a filter is started first (syscost under an allow-all filter installed twice:
Seccomp 2 with 2 filters in its status), then the watch, whose first window opens as it starts;
/metrics must then give the program with its 2 filters, one process or more behind seccomp
with native calls a second above 0, and no audit count (the window does not read the calls'
work flags, so that figure is absent, never 0).  The window's summary is also built from a
recorded census with a measured wall, where the price must be the calls a second times the
measured ns a call.

Why it can break: the window's snapshot loses /proc's Seccomp fields, the summary drops the
census's walls, a program's filter count is taken from another process, a price is given where
no wall was measured, or an unknown figure is exported as 0.  Skips: those of need_watch (not
root, no BTF, no tracefs).
"""
import subprocess
import sys
import time

import pytest

from conftest import BUILD, ROOT, need_watch
from test_census_walls import census_with_walls, walls
from test_watch_live import free_port, get, wait_for
from twtools.analyse import watch as awatch


def test_the_window_summary_keeps_the_walls_and_their_price():
    raw, pid = census_with_walls()
    w = awatch.window_summary(raw, walls=walls())
    s = w["walls"]["seccomp"]
    assert s["processes"] == 1
    n, c = s["native_calls_per_s"], s["compat_calls_per_s"]
    assert n + c > 0
    assert s["ns_per_s"]["median"] == pytest.approx(n * 40 + c * 80)
    assert s["ns_per_s"]["ci_high"] == pytest.approx(n * 42 + c * 90)
    # the census fixture read the work flags: the audit context is counted
    assert w["walls"]["audit"]["processes"] == 1 and w["walls"]["audit_enabled"] == 0
    behind = [p for p in w["programs"] if p["seccomp_filters"]]
    assert [p["seccomp_filters"] for p in behind] == [3]
    # without a measured wall: counted, not priced
    u = awatch.window_summary(census_with_walls()[0], walls=None)["walls"]["seccomp"]
    assert u["ns_per_s"] is None and "was not measured" in u["why"]
    # a window that read no work flags has no audit count, and says why
    raw2, _ = census_with_walls()
    raw2["trace"].pop("work")
    a = awatch.window_summary(raw2, walls=walls())["walls"]["audit"]
    assert a["processes"] is None and "work flags" in a["why"]
    assert a["native_calls_per_s"] is None and a["ns_per_s"] is None


def _metric(text, name, **labels):
    for ln in text.splitlines():
        if ln.startswith(name + "{") or ln.startswith(name + " "):
            if all(f'{k}="{v}"' in ln for k, v in labels.items()):
                return float(ln.split()[-1])
    return None


def test_live_window_names_a_filtered_program(build, tmp_path):
    need_watch()
    allow = tmp_path / "allow.bpf"
    allow.write_bytes(bytes.fromhex("060000000000ff7f"))    # ret ALLOW
    prog = BUILD / "syscost-64-syscall"
    p = subprocess.Popen([str(prog), "--op", "getppid", "--batches", "10000", "--batch-ms",
                          "30", "--seccomp", str(allow), "--seccomp-times", "2"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    state = tmp_path / "state"
    state.mkdir()
    port = free_port()
    log = open(tmp_path / "watch.err", "w")
    w = None
    try:
        end = time.monotonic() + 60                 # a hang guard: until its filter is on
        while "Seccomp:\t2" not in open(f"/proc/{p.pid}/status").read():
            assert p.poll() is None and time.monotonic() < end, p.stderr.read()
            time.sleep(0.01)
        w = subprocess.Popen([sys.executable, ROOT / "scripts" / "tw", "watch", "--state", state,
                              "--listen", f"127.0.0.1:{port}", "--interval", "1",
                              "--window", "2", "--window-period", "600"],
                             stdout=subprocess.DEVNULL, stderr=log, start_new_session=True)
        url = f"http://127.0.0.1:{port}/metrics"

        def windowed():
            assert w.poll() is None, open(log.name).read()[-2000:]
            t = get(url)
            return t if (_metric(t, "timewrite_watch_windows_total") or 0) >= 1 else None
        text = wait_for(windowed, 400, "the watch's first window")
    finally:
        p.kill()
        p.wait()
        if w is not None:
            w.terminate()
            w.wait(timeout=120)
        log.close()
    assert _metric(text, "timewrite_program_seccomp_filters", program=str(prog), bits="64") == 2, \
        [ln for ln in text.splitlines() if "seccomp" in ln]
    assert _metric(text, "timewrite_window_wall_processes", wall="seccomp") >= 1
    assert _metric(text, "timewrite_window_wall_calls_per_second", wall="seccomp",
                   abi="native") > 0
    # the window reads no work flags: no audit figure at all, rather than a 0
    assert not [ln for ln in text.splitlines() if 'wall="audit"' in ln], text
    err = (tmp_path / "watch.err").read_text()
    assert "processes behind seccomp filters" in err, err[-2000:]
