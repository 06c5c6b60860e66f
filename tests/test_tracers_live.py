"""One real traced run per tracer plug-in: every tool counts the 23 file writes of timewrite
writing 22*256+17 bytes in 256-byte chunks.

Why it can break: a tracer's command line or output format changing under its parser, a
write filter keyed on the wrong ABI's number (write is 4 for i386, 1 for x86-64), a 32-bit
process's calls landing in the wrong strace table, or a plug-in that stops saying why it is
blind.  The counts are exact: a known workload with a known count."""
import tempfile

import pytest

from conftest import need_root, need_supported, need_tool
from twtools.machine import registry, tracers
from twtools.machine.tracers import bpftrace, perf_stat, perf_trace, strace
from twtools.measure import trace

EXPECTED = 23


@pytest.fixture(scope="module")
def work(build):
    with tempfile.TemporaryDirectory() as tmp:
        w = trace.workload(tmp, "quick")
        assert w.expected == EXPECTED and w.input.stat().st_size == 22 * 256 + 17
        yield tmp, w


def test_every_plugin_is_found():
    names = [t.name for t in tracers.plugins()]
    assert names == ["perf-stat", "strace", "perf-trace", "bpftrace"]


@pytest.mark.parametrize("variant", ["64-libc", "32-int80"])
def test_strace_counts_23(work, variant):
    need_tool("strace")
    need_supported("timewrite", variant)
    tmp, w = work
    got = strace.TRACER.trace([variant], w, tmp, root=True)
    assert got["own"][variant] == EXPECTED
    assert got["counts"][variant] == EXPECTED
    (rec,) = got["records"]["strace_T"]
    assert len(rec["write_us_samples"]) == EXPECTED
    (c,) = got["records"]["strace_c"]
    table = "32" if registry.get(variant).bits == 32 else "64"
    calls = {x["syscall"]: x for x in c["tables"][table]}
    assert calls["write"]["calls"] == EXPECTED + 1      # plus the report line on stdout


@pytest.mark.root
@pytest.mark.parametrize("variant", ["64-syscall", "32-libc", "64-int80"])
def test_perf_stat_counts_23(work, variant):
    need_root()
    need_tool("perf")
    need_supported("timewrite", variant)
    tmp, w = work
    got = perf_stat.TRACER.trace([variant], w, tmp, root=True)
    (r,) = got["records"]["perf_stat"]
    assert got["own"][variant] == EXPECTED
    assert r["file_writes"] == EXPECTED == got["counts"][variant]
    assert r["events"]["raw_syscalls:sys_enter"] > EXPECTED
    for k in ("cycles", "instructions"):           # no PMU: null with a reason, never 0
        assert r["events"][k] is None and r["why"][k] or r["events"][k] > 0


@pytest.mark.root
def test_bpftrace_counts_23_and_classifies(work):
    need_root()
    need_tool("bpftrace")
    tmp, w = work
    vs = [v for v in ("64-libc", "64-int80", "32-int80", "32-sysenter")
          if trace.probe.check("timewrite", v)[0]]
    runs, counts = bpftrace.TRACER.latency(vs, w, tmp)
    assert counts == {v: EXPECTED for v in vs}
    assert {(r["variant"], r["mode"]) for r in runs if r["count"] == EXPECTED} == \
        {(v, m) for v in vs for m in ("async", "sync")}
    by = {r["variant"]: r for r in bpftrace.TRACER.entry(vs, w, tmp)}
    got = {v: {(x["abi"], x["origin"], x["id"]): x["calls"] for x in by[v]["writes"]} for v in vs}
    if "64-int80" in vs:
        assert got["64-int80"][("compat", "text", 4)] == EXPECTED   # int 0x80 from 64-bit text
    if "32-int80" in vs:
        assert got["32-int80"][("compat", "text", 4)] == EXPECTED
    if "64-libc" in vs:
        assert got["64-libc"][("native", "other", 1)] == EXPECTED + 1
        assert by["64-libc"]["counts"]["compat"] == 0
    if "32-sysenter" in vs:   # sysenter returns through the vDSO landing pad
        assert got["32-sysenter"][("compat", "vdso", 4)] == EXPECTED + 1


@pytest.mark.root
def test_perf_trace_runs_for_the_x86_64_abi_only(work):
    need_root()
    need_tool("perf")
    tmp, w = work
    # perf trace can drop an event without printing LOST (seen once in a CI run on an AMD
    # guest: 23 of 24 writes, and 0 times in 450 runs by hand).  The plug-in must then say
    # how many it missed; and since such a drop is rare and random while a broken count is
    # not, one of three traced runs must count exactly.
    seen = []
    for _ in range(3):
        got = perf_trace.TRACER.trace(["32-int80", "64-libc"], w, tmp, root=True)
        rec = {r["variant"]: r for r in got["records"]["perf_trace"]}
        assert rec["32-int80"]["supported"] is False and "x86-64 table" in rec["32-int80"]["reason"]
        r = rec["64-libc"]
        assert r["supported"], r["reason"]
        assert r["own_writes"] == EXPECTED
        calls = {x["syscall"]: x["calls"] for x in r["rows"]}
        seen.append(calls["write"])
        assert r["missed_writes"] == EXPECTED + 1 - calls["write"] >= 0, r.get("note")
        assert (r["missed_writes"] > 0) == ("note" in r), r
        if r["missed_writes"] == 0:
            break
    assert seen[-1] == EXPECTED + 1, f"perf trace counted {seen} writes in three runs"


def test_perf_stat_without_root_keeps_software_counters(work):
    """A non-root run still counts task-clock etc.; only tracepoint counters are blind (not 0)."""
    need_tool("perf")
    need_supported("timewrite", "64-libc")
    tmp, w = work
    got = perf_stat.TRACER.trace(["64-libc"], w, tmp, root=False)
    (r,) = got["records"]["perf_stat"]
    assert r["events"]["task-clock"] and r["events"]["task-clock"] > 0
    assert r["events"]["page-faults"] and r["events"]["page-faults"] > 0
    for n in perf_stat.WRITE_EVENTS:
        assert r["events"][n] is None and "root" in r["why"][n]
    assert r["file_writes"] is None


@pytest.mark.parametrize("plugin", tracers.plugins(), ids=lambda t: t.name)
def test_every_plugin_says_why_it_is_blind(plugin):
    """Without root every tracer here is blind to something, and says what."""
    m = registry.get("64-syscall")
    why = plugin.blind(m, root=False)
    assert why is None or "root" in why
    assert plugin.blind(m, root=True) is None          # it sees a plain 64-bit syscall
