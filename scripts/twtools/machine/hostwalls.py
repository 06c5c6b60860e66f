"""The walls the host itself puts up, for every process or for some: whatever is attached to
the raw_syscalls tracepoints (every process pays for it on every call, A and B of any
measurement alike), and audit's state (once enabled in a boot, every process started after
pays for its context, rules or not).  Read, never changed: measure.walls puts walls up.

Tracers are listed by bpftool (Debian's bpftool package: `bpftool -j perf list`, every BPF
program attached through a perf event, with the tracepoint's name and the process holding
it) and by tracefs (an ftrace user's `events/raw_syscalls/*/enable`).  Audit is read with
auditctl (Debian's auditd package, or the copy `make test` unpacks into build/auditd).
"""
import json
import os
import re
import shutil

from ..core import escape, paths, proc

RAW_SYSCALLS = ("sys_enter", "sys_exit")
TRACEFS = ("/sys/kernel/tracing", "/sys/kernel/debug/tracing")


def _comm(pid):
    try:
        with open(f"/proc/{pid}/comm", "rb") as f:
            return f.read(64).rstrip(b"\n")
    except OSError:
        return None


def _sbin(name, *more):
    """An administrator's tool: on PATH, else in /sbin or /usr/sbin (not on a user's PATH),
    else at one of `more`; None when none is executable."""
    for p in (shutil.which(name), f"/sbin/{name}", f"/usr/sbin/{name}", *map(str, more)):
        if p and os.access(p, os.X_OK):
            return p
    return None


def raw_syscalls_tracers(exclude=()):
    """([{'pid', 'comm', 'tracepoint', 'prog_id'}], None) for every BPF program attached to
    raw_syscalls through a perf event (comm as core.escape.name gives it, every byte kept),
    plus {'pid': None, 'comm': 'ftrace',
    ...} where ftrace has the event enabled; or (None, why) where that cannot be read.
    exclude: pids to leave out (tw's own probes)."""
    out = []
    for base in TRACEFS:
        for ev in RAW_SYSCALLS:
            try:
                with open(f"{base}/events/raw_syscalls/{ev}/enable") as f:
                    if f.read(4).strip() not in ("0", ""):
                        out.append({"pid": None, "comm": "ftrace", "tracepoint": ev,
                                    "prog_id": None})
            except OSError:
                pass
        if out:
            break
    tool = _sbin("bpftool")
    if tool is None:
        return None, "bpftool is not installed (Debian's bpftool package)"
    if not proc.is_root():
        return None, "listing the BPF programs attached to tracepoints needs root"
    p = proc.run([tool, "-j", "perf", "list"], timeout=30, limit=16 << 20)
    if p.returncode != 0:
        msg = (p.stderr or "").strip().splitlines()
        return None, f"bpftool perf list: {msg[-1] if msg else p.returncode}"
    try:
        rows = json.loads(p.stdout or "[]")
    except ValueError:
        return None, "bpftool perf list printed no JSON"
    for r in rows if isinstance(rows, list) else []:
        if (isinstance(r, dict) and r.get("fd_type") == "tracepoint"
                and r.get("tracepoint") in RAW_SYSCALLS and r.get("pid") not in exclude):
            out.append({"pid": r.get("pid"), "comm": escape.name(_comm(r.get("pid"))),
                        "tracepoint": r["tracepoint"], "prog_id": r.get("prog_id")})
    return out, None


# ---- audit ----------------------------------------------------------------------------

def auditctl():
    """The auditctl to run: the system's (Debian's auditd package), else the one scripts/deps.sh
    unpacked from that package into build/auditd (installing the package would start auditd,
    which turns audit on for the rest of the boot), else None."""
    return _sbin("auditctl", paths.BUILD / "auditd" / "sbin" / "auditctl")


def ctl(*args):
    """auditctl with these words: the CompletedProcess."""
    return proc.run([auditctl(), *args], timeout=30)


def rules_now():
    """The audit rules loaded now, one auditctl line each (auditctl -l), or None unreadable."""
    p = ctl("-l")
    if p.returncode != 0:
        return None
    lines = [ln.strip() for ln in (p.stdout or "").splitlines() if ln.strip()]
    return [] if lines == ["No rules"] else lines


def audit_status():
    """{'enabled': 0|1|2 or None, 'rules': [lines] or None, 'why': None or why unknown}:
    audit as the kernel has it now (auditctl -s, -l).  Whether it was ever enabled in this
    boot is not in it: a new process's SYSCALL_AUDIT flag tells (measure.walls.work_flags)."""
    if auditctl() is None:
        return {"enabled": None, "rules": None,
                "why": "auditctl is not installed (Debian's auditd package)"}
    if not proc.is_root():
        return {"enabled": None, "rules": None, "why": "reading audit's state needs root"}
    s = ctl("-s")
    m = re.search(r"^enabled (\d)", s.stdout or "", re.M)
    if s.returncode != 0 or not m:
        msg = ((s.stderr or s.stdout or "").strip().splitlines() or ["no answer"])[-1]
        return {"enabled": None, "rules": None, "why": f"auditctl -s: {msg}"}
    return {"enabled": int(m.group(1)), "rules": rules_now(), "why": None}


def host_walls():
    """The walls the host puts up for every process, as a census, a watch window and tw run's
    walls stage record them: {'audit': audit_status(), 'tracers': {'rows', 'why'}} (read before
    the reader's own tracer attaches)."""
    tracers, why = raw_syscalls_tracers()
    return {"audit": audit_status(), "tracers": {"rows": tracers, "why": why}}
