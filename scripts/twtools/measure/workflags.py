"""What the kernel put on a process: its SYSCALL_WORK flags, read by bpftrace at one of its
calls (curtask->thread_info.syscall_work).  tw ab --wall reads them for one A process and one
B process, as the evidence that B's calls, and not A's, leave the fast path for the wall."""
import time
from pathlib import Path

from ..core import proc

# SYSCALL_WORK_* bits (include/linux/thread_info.h, enum syscall_work_bit): what sends a call
# off the fast path at entry (syscall_trace_enter) and into the exit work.
WORK_BITS = {1: "SECCOMP", 2: "SYSCALL_TRACEPOINT", 4: "SYSCALL_TRACE", 8: "SYSCALL_EMU",
             16: "SYSCALL_AUDIT", 32: "SYSCALL_USER_DISPATCH", 64: "SYSCALL_EXIT_TRAP"}


WORK_SCRIPT = r"""
tracepoint:raw_syscalls:sys_enter /comm == str($1) && args->id == $2 && @seen[pid] == 0/
{
	@seen[pid] = 1;
	printf("%d %d\n", pid, curtask->thread_info.syscall_work);
}
BEGIN { printf("ready\n"); }
END { clear(@seen); }
"""


def work_flags(comm, nr, runs, tmp):
    """The SYSCALL_WORK flags of the processes named comm, read by bpftrace at their first call
    of number nr (the caller's exit_group: made once the wall is up), while runs (callables)
    run one after another: ({pid: bits}, [what each run returned], None), or (None, [...],
    why not) (curtask->thread_info.syscall_work).  bpftrace's own tracepoint sets
    SYSCALL_TRACEPOINT on every task while it is attached: the caller leaves that bit out."""
    from . import diagnose
    from .census import why_not as census_why_not
    why = census_why_not()
    if why:
        return None, [r() for r in runs], why
    script = Path(tmp) / "work.bt"
    script.write_text(WORK_SCRIPT)
    out = Path(tmp) / "work.ndjson"
    try:
        bt, err = diagnose.spawn_attached(["bpftrace", "-f", "json", "-o", str(out),
                                           str(script), comm[:15], str(nr)], out,
                                          Path(tmp) / "work.err", "bpftrace")
    except diagnose.DiagnoseError as e:
        return None, [r() for r in runs], str(e)
    try:
        results = [r() for r in runs]
        time.sleep(0.2)
    finally:
        proc.interrupt(bt, 30, again=True)
        err.close()
    from ..machine.tracers.base import json_lines
    flags = {}
    for o in json_lines(out.read_text() if out.exists() else ""):
        if o.get("type") == "printf":
            parts = str(o.get("data", "")).split()
            if len(parts) == 2 and all(p.isdigit() for p in parts):
                flags[int(parts[0])] = int(parts[1])
    return flags, results, None


def work_names(bits, drop=2):
    """The SYSCALL_WORK flags set in bits, by name (SYSCALL_TRACEPOINT left out: the probe
    that read them sets it)."""
    return [n for b, n in sorted(WORK_BITS.items()) if bits & b and not b & drop]


