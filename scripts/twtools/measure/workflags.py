"""What the kernel put on a process: its SYSCALL_WORK flags, read by bpftrace at one of its
calls (curtask->thread_info.syscall_work).  tw ab --wall reads them for one A process and one
B process, as the evidence that B's calls, and not A's, leave the fast path for the wall."""
import time
from pathlib import Path

from ..core import proc
from ..machine.walldefs import WORK_BITS, work_names  # noqa: F401 (the names, defined once)


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


def audit_host(tmp):
    """What audit gives a process started now, read from a fresh /bin/true's SYSCALL_WORK
    flags at its exit_group: {'enabled': audit's flag (auditctl -s) or None, 'context': True,
    False or None (unknown), 'why'}.  audit_alloc() gives every new task a context once
    audit has been enabled in this boot (audit_ever_enabled), which auditctl -s does not
    say: the flag does.  bpftrace's own probe sets SYSCALL_TRACEPOINT, never SYSCALL_AUDIT."""
    import subprocess
    from ..machine import hostwalls, seccomp
    st = hostwalls.audit_status()
    out = {"enabled": st.get("enabled"), "rules": st.get("rules"), "context": None}
    nr = seccomp.number("exit_group", seccomp.AUDIT_ARCH_X86_64)

    def one():
        p = subprocess.Popen(["/bin/true"])
        p.wait()
        return {"pid": p.pid}

    flags, (r,), why = work_flags("true", nr, [one], tmp)
    if flags is None or r["pid"] not in flags:
        out["why"] = why or "bpftrace did not see the new process's exit_group"
        return out
    has = bool(flags[r["pid"]] & 16)
    out["context"] = has
    out["why"] = (("audit is on" if st.get("enabled") == 1 else
                   "audit is off now but was enabled once in this boot") +
                  ": a new process carries SYSCALL_AUDIT" if has else
                  "a new process carries no SYSCALL_AUDIT flag (read by bpftrace at its "
                  "exit_group): audit was never enabled in this boot, or a task rule says "
                  "never")
    return out
