"""The walls the host itself puts up, for every process or for some: whatever is attached to
the raw_syscalls tracepoints (every process pays for it on every call, A and B of any
measurement alike), and audit's state (once enabled in a boot, every process started after
pays for its context, rules or not).  Read, never changed: measure.walls puts walls up.

Tracers are listed by bpftool (Debian's bpftool package: `bpftool -j perf list`, every BPF
program attached through a perf event or a raw tracepoint, with the tracepoint's name and the
process holding it; `bpftool -j link list`, the links no process holds), by tracefs (an
ftrace user's `events/raw_syscalls/*/enable`), and by /proc (a perf user on the system-call
tracepoints without BPF, perf trace: its command line and its perf event descriptors).  Audit is read with
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


def _bpftool_json(tool, *args):
    """(parsed JSON, None) of a bpftool command, or (None, why)."""
    p = proc.run([tool, "-j", *args], timeout=30, limit=16 << 20)
    if p.returncode != 0:
        msg = (p.stderr or "").strip().splitlines()
        return None, f"bpftool {' '.join(args)}: {msg[-1] if msg else p.returncode}"
    try:
        rows = json.loads(p.stdout or "[]")
    except ValueError:
        return None, f"bpftool {' '.join(args)} printed no JSON"
    return (rows if isinstance(rows, list) else []), None


# A perf user's command line that puts it on the system-call tracepoints without BPF.
_PERF_ON_SYSCALLS = re.compile(rb"(?:^|\0)trace(?:\0|$)|raw_syscalls|syscalls:")


def _perf_users(exclude):
    """Processes that hold perf events and whose command line asks for the system-call
    tracepoints (perf trace, perf record/stat -e raw_syscalls:...): a perf event without a
    BPF program, which bpftool does not list.  [{'pid', 'comm', 'kind', 'tracepoint'}]."""
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) in exclude:
            continue
        try:
            with open(f"/proc/{d}/cmdline", "rb") as f:
                cmd = f.read(4096)
            if not _PERF_ON_SYSCALLS.search(cmd):
                continue
            fds = os.listdir(f"/proc/{d}/fd")
            n = sum(1 for fd in fds[:4096]
                    if os.readlink(f"/proc/{d}/fd/{fd}") == "anon_inode:[perf_event]")
        except OSError:
            continue
        if n:
            out.append({"pid": int(d), "comm": escape.name(_comm(d)), "tracepoint": None,
                        "prog_id": None,
                        "kind": f"{n} perf event(s), no BPF (its command line names the "
                                "system-call tracepoints)"})
    return out


def raw_syscalls_tracers(exclude=()):
    """([{'pid', 'comm', 'tracepoint', 'prog_id', 'kind'}], None) for everything on the
    raw_syscalls tracepoints, every process's calls paying for it: BPF programs attached
    through a perf event or a raw tracepoint (`bpftool perf list`, with the process that
    holds it; comm as core.escape.name gives it, every byte kept), BPF links with no
    process (`bpftool link list`: a raw tracepoint link pinned or held by a link's own
    file), ftrace's own event (tracefs `enable`), and perf users on the system-call
    tracepoints without BPF (perf trace); or (None, why) where that cannot be read.
    exclude: pids to leave out (tw's own)."""
    out = []
    for base in TRACEFS:
        for ev in RAW_SYSCALLS:
            try:
                with open(f"{base}/events/raw_syscalls/{ev}/enable") as f:
                    if f.read(4).strip() not in ("0", ""):
                        out.append({"pid": None, "comm": "ftrace", "tracepoint": ev,
                                    "prog_id": None, "kind": "ftrace event"})
            except OSError:
                pass
        if out:
            break
    tool = _sbin("bpftool")
    if tool is None:
        return None, "bpftool is not installed (Debian's bpftool package)"
    if not proc.is_root():
        return None, "listing the BPF programs attached to tracepoints needs root"
    perf, why = _bpftool_json(tool, "perf", "list")
    if perf is None:
        return None, why
    held = set()
    for r in perf:
        if (isinstance(r, dict) and r.get("fd_type") in ("tracepoint", "raw_tracepoint")
                and r.get("tracepoint") in RAW_SYSCALLS):
            held.add(r.get("prog_id"))
            if r.get("pid") in exclude:
                continue
            out.append({"pid": r.get("pid"), "comm": escape.name(_comm(r.get("pid"))),
                        "tracepoint": r["tracepoint"], "prog_id": r.get("prog_id"),
                        "kind": "BPF on a perf event" if r["fd_type"] == "tracepoint" else
                                "BPF raw tracepoint link"})
    links, why = _bpftool_json(tool, "link", "list")
    if links is None:
        return None, why
    for r in links:
        if (isinstance(r, dict) and r.get("type") == "raw_tracepoint"
                and r.get("tp_name") in RAW_SYSCALLS and r.get("prog_id") not in held):
            out.append({"pid": None, "comm": "(a BPF link held by no process: pinned)",
                        "tracepoint": r["tp_name"], "prog_id": r.get("prog_id"),
                        "kind": f"BPF raw tracepoint link {r.get('id')}"})
    out += _perf_users(set(exclude) | {os.getpid()})
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
