"""The live evidence of `tw lesson`: what this machine shows of each way into the kernel, now.

Per mechanism, its syscost build is run for two calls (getppid, or time() for the vDSO and the
vsyscall page, which make no system call to see):
  strace   the first line strace prints for that call (`getppid() = 1234`), or what ended the
           program (a 32-bit `syscall` on Intel dies of SIGILL: #UD), or that strace saw no
           call at all (the vDSO answers in user space; the vsyscall page is emulated in the
           page-fault handler, where no syscall stop happens);
  event    one raw_syscalls:sys_enter event from the same kind of run, with its number in the
           ABI's own table (getppid is 64 in the i386 table, 110 in the x86_64 one) and whether
           the kernel marked the call compat (TS_COMPAT): one bpftrace session for every
           mechanism, as root;
  vdso32   the bytes of the live 32-bit __kernel_vsyscall (machine.entrypath.vdso32);
  vdso64   the first bytes of this process's own 64-bit vDSO's __vdso_time;
  ia32     the running processes that need IA32 emulation (machine.process.snapshot).
Each instrument that cannot run here says why instead ("unknown: ..."), never a guess.
"""
import os
import re
import subprocess
import tempfile
import time
from pathlib import Path

from ..core import paths, proc
from ..machine import entrypath, process, registry

ARGS = ["--calls", "2", "--batches", "1", "--warmup-ms", "0", "--calibrate-ms", "1",
        "--max-redo", "0", "--clock", "monotonic"]
ATTACH_TIMEOUT = 90.0
# The system calls whose numbers the events are matched on, by ABI: getppid and time.
NUMBERS = {"i386": {"getppid": 64, "time": 13}, "x86_64": {"getppid": 110, "time": 201}}


def op_of(m):
    """The operation a chapter shows: getppid (the cheapest call that returns something), or
    time for the mechanisms that make no system call."""
    return "getppid" if "getppid" in m.ops else "time"


def _program(m):
    return paths.BUILD / f"syscost-{m.name}"


def strace_line(m, tmp):
    """{line, calls, why} for one mechanism: strace's first line for its call."""
    if not proc.which("strace"):
        return {"line": None, "calls": None, "why": "strace is not installed"}
    prog = _program(m)
    if not prog.exists():
        return {"line": None, "calls": None, "why": f"{prog.name} is not built (run make)"}
    op = op_of(m)
    out = Path(tmp) / f"strace-{m.name}.txt"
    # -f: syscost tries a mechanism in a child first, and a CPU that refuses the instruction
    # kills that child (SIGILL, the #UD), which is the evidence
    p = proc.run(["strace", "-f", "-qq", "-e", f"trace={op}", "-o", str(out), str(prog), "--op",
                  op, *ARGS], timeout=60)
    text = out.read_text(errors="replace") if out.exists() else ""
    lines = [re.sub(r"^\d+ +", "", ln.strip()) for ln in text.splitlines() if ln.strip()]
    calls = [ln for ln in lines if ln.startswith(f"{op}(")]
    died = next((ln for ln in lines if ln.startswith("+++ killed by") or
                 (ln.startswith("--- SIG") and not ln.startswith("--- SIGCHLD"))), None)
    if calls:
        return {"line": calls[0], "calls": len(calls), "why": None}
    if died:
        return {"line": died, "calls": 0, "why": f"the program did not make the call (exit "
                                                  f"{p.returncode})"}
    return {"line": None, "calls": 0,
            "why": f"strace saw no {op}() call: no system call was made"}


BT = """
BEGIN { printf("ready\\n"); }
tracepoint:raw_syscalls:sys_enter
/ strncmp(comm, "syscost-", 8) == 0 && (args->id == %(ids)s) /
{
	printf("%%d %%d %%d\\n", pid, args->id, (curtask->thread_info.status & 2) ? 1 : 0);
}
"""


def raw_events(mechs, tmp):
    """{variant: {id, abi, compat, why}}: one raw_syscalls event per mechanism's run, from one
    bpftrace session; or {variant: {why}} for every one when bpftrace cannot run here."""
    why = None
    if not proc.is_root():
        why = "tracing other processes needs root (bpftrace)"
    elif not proc.which("bpftrace"):
        why = "bpftrace is not installed"
    if why:
        return {m.name: {"id": None, "why": why} for m in mechs}
    ids = sorted({n for t in NUMBERS.values() for n in t.values()})
    script = Path(tmp) / "lesson.bt"
    script.write_text(BT % {"ids": " || args->id == ".join(map(str, ids))})
    out, err = Path(tmp) / "bt.out", Path(tmp) / "bt.err"
    with open(out, "w") as o, open(err, "w") as e:
        bt = subprocess.Popen(["bpftrace", str(script)], stdout=o, stderr=e,
                              start_new_session=True)
    try:
        deadline = time.monotonic() + ATTACH_TIMEOUT
        while "ready" not in (out.read_text() if out.exists() else ""):
            if bt.poll() is not None or time.monotonic() > deadline:
                msg = [ln for ln in err.read_text().split("\n") if ln.strip()
                       and "WARNING" not in ln and "RLIMIT_MEMLOCK" not in ln]
                why = f"bpftrace could not attach: {msg[-1] if msg else 'no message'}"
                return {m.name: {"id": None, "why": why} for m in mechs}
            time.sleep(0.05)
        pids = {}
        for m in mechs:
            prog = _program(m)
            if not prog.exists():
                continue
            p = subprocess.Popen([str(prog), "--op", op_of(m), *ARGS], stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL)
            p.wait(timeout=60)
            pids[p.pid] = m
        time.sleep(0.5)            # the last events reach bpftrace's output
    finally:
        proc.interrupt(bt, 30, again=True)
    got = {}
    for line in out.read_text().split("\n"):
        parts = line.split()
        if len(parts) == 3 and all(x.isdigit() for x in parts):
            pid, nr, compat = map(int, parts)
            m = pids.get(pid)
            # the mechanism's own call: its ABI's number (the program's set-up may make the
            # same call the ordinary way first)
            if m and m.name not in got and nr == NUMBERS[_abi(m)][op_of(m)]:
                got[m.name] = (nr, compat)
    res = {}
    for m in mechs:
        abi = _abi(m)
        if m.name in got:
            nr, compat = got[m.name]
            res[m.name] = {"id": nr, "abi": abi, "compat": bool(compat), "why": None,
                           "call": next((k for k, v in NUMBERS[abi].items() if v == nr), None)}
        else:
            res[m.name] = {"id": None, "abi": abi, "why": (
                f"no raw_syscalls event: {op_of(m)}() made no system call here"
                if m.entry in ("vdso-call", "vsyscall-call") else
                "no raw_syscalls event: the program did not make the call here "
                "(see the strace line)")}
    return res


def vdso64_function(name="__vdso_time", n=24):
    """{function, offset, bytes, why}: the first bytes of one function of this process's own
    64-bit vDSO, read from /proc/self/mem (the vDSO is linked at 0: a symbol's value is its
    offset in the image)."""
    from ..machine import elf
    try:
        own = process.own_vdso()
        if own is not None:
            lo, image = own
            v = elf.Elf(image, "the 64-bit vDSO").symbol_table().get(name)
            if not v or not 0 <= v[0] < len(image):
                return {"function": name, "bytes": None, "why": f"this vDSO exports no {name}"}
            return {"function": name, "offset": hex(v[0]), "address": hex(lo + v[0]),
                    "bytes": image[v[0]:v[0] + n].hex(" "), "why": None}
    except (OSError, elf.ElfError) as e:
        return {"function": name, "bytes": None, "why": f"cannot read this process's vDSO: {e}"}
    return {"function": name, "bytes": None, "why": "no [vdso] mapping in this process (vdso=0?)"}


def _abi(m):
    return "i386" if m.abi == "i386" else "x86_64"


def gather(tmp_dir=None):
    """Every live fact the lesson shows: {strace, events, vdso32, ia32_processes, pid}."""
    mechs = list(registry.mechanisms())
    with tempfile.TemporaryDirectory(prefix="tw-lesson-", dir=tmp_dir) as tmp:
        st = {m.name: strace_line(m, tmp) for m in mechs}
        ev = raw_events(mechs, tmp)
    vd = entrypath.vdso32()
    running = [r for r in process.snapshot() if r.get("needs_ia32")]
    return {"strace": st, "events": ev,
            "vdso32": {k: vd.get(k) for k in ("available", "instruction", "bytes", "why",
                                               "kernel_vsyscall", "landing_pad", "form")},
            "vdso64": vdso64_function(),
            "ia32_processes": [{"pid": r["pid"], "exe": r.get("exe"), "comm": r.get("comm")}
                               for r in running],
            "own_pid": os.getpid()}
