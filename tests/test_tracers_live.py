"""One real traced run per instrument: every tool counts the 23 file writes of
timewrite writing 22*256+17 bytes in 256-byte chunks."""
import tempfile
from pathlib import Path

import pytest

from conftest import need_root, need_supported, need_tool
from twtools.measure import tracers

EXPECTED = 23


@pytest.fixture(scope="module")
def work(build):
    with tempfile.TemporaryDirectory() as tmp:
        inp, expected = tracers._workload(tmp, "quick")
        assert expected == EXPECTED and inp.stat().st_size == 22 * 256 + 17
        yield Path(tmp), inp


@pytest.mark.parametrize("variant", ["64-libc", "32-int80"])
def test_strace_counts_23(work, variant):
    need_tool("strace")
    need_supported("timewrite", variant)
    tmp, inp = work
    r = tracers.strace_T(variant, tmp, inp)
    assert r["timewrite_calls"] == EXPECTED
    assert r["calls"] == EXPECTED
    assert r["write_us"]["n"] == EXPECTED
    c = tracers.strace_c(variant, tmp, inp)
    table = "32" if variant.startswith("32") else "64"
    w = {x["syscall"]: x for x in c["tables"][table]}
    assert w["write"]["calls"] == EXPECTED + 1      # plus the report line on stdout


@pytest.mark.root
@pytest.mark.parametrize("variant", ["64-syscall", "32-libc", "64-int80"])
def test_perf_stat_counts_23(work, variant):
    need_root()
    need_tool("perf")
    need_supported("timewrite", variant)
    tmp, inp = work
    r = tracers.perf_stat(variant, tmp, inp)
    assert r["timewrite_calls"] == EXPECTED
    assert r["file_writes"] == EXPECTED
    assert r["events"]["raw_syscalls:sys_enter"] > EXPECTED
    for k in ("cycles", "instructions"):           # no PMU: null with a reason, never 0
        assert r["events"][k] is None and r["why"][k] or r["events"][k] > 0


@pytest.mark.root
def test_bpftrace_counts_23_and_classifies(work):
    need_root()
    need_tool("bpftrace")
    tmp, inp = work
    vs = [v for v in ("64-libc", "64-int80", "32-int80", "32-sysenter")
          if tracers.probe.check("timewrite", v)[0]]
    runs, counts, _ = tracers.bpftrace_latency(vs, tmp, inp, "quick")
    assert counts == {v: EXPECTED for v in vs}
    assert {(r["variant"], r["mode"]) for r in runs if r["count"] == EXPECTED} == \
        {(v, m) for v in vs for m in ("async", "sync")}
    rows, _ = tracers.bpftrace_entry(vs, tmp, inp)
    by = {r["variant"]: r for r in rows}
    w = {v: {(x["abi"], x["origin"], x["id"]): x["calls"] for x in by[v]["writes"]} for v in vs}
    if "64-int80" in vs:
        assert w["64-int80"][("compat", "text", 4)] == EXPECTED   # int 0x80 from 64-bit text
    if "32-int80" in vs:
        assert w["32-int80"][("compat", "text", 4)] == EXPECTED
    if "64-libc" in vs:
        assert w["64-libc"][("native", "other", 1)] == EXPECTED + 1
        assert by["64-libc"]["counts"]["compat"] == 0
    if "32-sysenter" in vs:   # sysenter returns through the vDSO landing pad
        assert w["32-sysenter"][("compat", "vdso", 4)] == EXPECTED + 1


@pytest.mark.root
def test_perf_trace_64bit_only(work):
    need_root()
    need_tool("perf")
    tmp, inp = work
    r = tracers.perf_trace("32-int80", tmp, inp)
    assert r["supported"] is False and "x86-64 table" in r["reason"]
    r = tracers.perf_trace("64-libc", tmp, inp)
    assert r["supported"], r["reason"]
    w = {x["syscall"]: x for x in r["rows"]}
    assert w["write"]["calls"] == EXPECTED + 1


def test_perf_stat_without_root_keeps_software_counters(work):
    """A non-root run still counts task-clock etc.; only tracepoint counters are blind (not 0)."""
    need_tool("perf")
    need_supported("timewrite", "64-libc")
    tmp, inp = work
    r = tracers.perf_stat("64-libc", tmp, inp, root=False)
    assert r["events"]["task-clock"] and r["events"]["task-clock"] > 0
    assert r["events"]["page-faults"] and r["events"]["page-faults"] > 0
    for n in ("raw_syscalls:sys_enter", "write_exit_ret_256", "write_exit_ret_17"):
        assert r["events"][n] is None and "root" in r["why"][n]
    assert r["file_writes"] is None
