"""Each mechanism, in each loop shape, enters the kernel the way its registry row says
(the `seen-as` column), once per call: counted by the kernel, not inferred from timings.

syscall: every call fires raw_syscalls:sys_enter.  fault: the vsyscall page is entered by
an exception, so every call fires exceptions:page_fault_user and no system call
tracepoint (arch/x86/entry/vsyscall/vsyscall_64.c emulates the call in the page-fault
handler).  none: the 64-bit vDSO's functions enter no kernel at all, so neither fires
per call.  This breaks when a timed loop stops making its calls (optimised away, or the
inline loop running zero passes), when a stub enters by something else than its row
says (a vsyscall stub making a real system call, or calling its function through the
vDSO; a vDSO stub falling back to a system call), or when a shape's function quietly
calls the ret stub.  Counted with perf stat over syscost runs of a fixed number of calls;
the few hundred events of the program's own start-up are far below the counts checked.
Needs root (tracepoints) and perf: skipped, saying which, without them."""
import re

import pytest

from conftest import BUILD, need_root, need_supported, need_tool, run
from twtools.machine import registry

N = 4000            # calls per batch
BATCHES = 2
# The warm-up makes one pass of N calls even at --warmup-ms 0, and the probe (in a child,
# which perf stat counts too) one call: the calls the mechanism makes at least.
CALLS = N * (BATCHES + 1)
EVENTS = ("raw_syscalls:sys_enter", "exceptions:page_fault_user")
CELLS = [(m.name, s) for m in registry.mechanisms() for s in m.shapes]


def op_of(m):
    return "getppid" if "getppid" in m.ops else "time"


def counts(variant, op, shape, tmp_path):
    """{event: count} of perf stat over one syscost run of at least CALLS calls."""
    out = tmp_path / "perf.csv"
    shape_args = [] if shape == "ret" else ["--shape", shape]
    p = run(["perf", "stat", "-x", ",", "-o", out, "-e", ",".join(EVENTS), "--",
             BUILD / f"syscost-{variant}", "--op", op, *shape_args, "--calls", N,
             "--batches", BATCHES, "--warmup-ms", 0, "--calibrate-ms", 1],
            text=True, cwd=tmp_path)
    if p.returncode != 0 and not out.exists():
        pytest.skip(f"perf stat refused: {p.stderr.strip()}")
    assert p.returncode == 0, p.stderr
    got = {}
    for line in out.read_text().splitlines():
        f = line.split(",")
        if len(f) > 2 and f[2] in EVENTS:
            if not re.fullmatch(r"\d+", f[0]):
                pytest.skip(f"perf stat cannot count {f[2]} here: {f[0]}")
            got[f[2]] = int(f[0])
    assert set(got) == set(EVENTS), out.read_text()
    return got


@pytest.mark.parametrize("variant,shape", CELLS, ids=[f"{v}-{s}" for v, s in CELLS])
def test_each_call_enters_as_its_row_says(build, tmp_path, variant, shape):
    need_root()
    need_tool("perf")
    need_supported("syscost", variant)
    m = registry.get(variant)
    c = counts(variant, op_of(m), shape, tmp_path)
    sys_enter, faults = c["raw_syscalls:sys_enter"], c["exceptions:page_fault_user"]
    if m.seen_as == "syscall":
        assert sys_enter >= CALLS, c
        assert faults < N, c
    elif m.seen_as == "fault":
        assert faults >= CALLS, c
        assert sys_enter < N, c           # the system call tracepoints never see it
    else:
        assert m.seen_as == "none"
        assert faults < N and sys_enter < N, c
