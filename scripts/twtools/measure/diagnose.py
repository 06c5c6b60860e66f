"""The live half of `tw diagnose`: run a program (or watch a process) under a tracer, raw.

How a command is traced, with bpftrace (traces/diagnose.bt, the default where it can run):

  1. the command is started stopped at its first instruction (PTRACE_TRACEME: the kernel stops
     it right after execve), so nothing it does escapes the tracer;
  2. its auxiliary vector, memory map and vDSO are read from /proc/<pid> (AT_SYSINFO says where
     __kernel_vsyscall is; the vDSO image says which instruction the kernel patched into it);
  3. bpftrace attaches to that pid (and its children) and says so;
  4. the program runs: PTRACE_CONT with PTRACE_O_TRACEEXIT, so that it stops once more as it
     exits, with its memory map still readable: the shared libraries it loaded, to resolve
     instruction pointers in them.  Signals it receives are passed on untouched; the run
     time is taken from the continue to that exit stop;
  5. bpftrace is stopped and prints its maps as JSON (bpftrace -f json).

Where bpftrace cannot run (not root, not installed, no tracefs), strace does the same job
less well: `strace -f -i -T -- CMD`, strace the program's parent so that Yama's ptrace_scope
1 allows it.  strace -i gives each call's instruction pointer and -T its enter->exit time
(with ptrace's two stops inside), but no memory map: the layout is read from a first copy of
the program stopped at execve and killed before it runs, and both copies run with
address-space randomisation off, so that the program, its loader and the vDSO lie where that
copy had them; the libraries' addresses come from the mmap calls strace prints.  Which tracer
ran, and why not the other, is part of the result.

A running process (--pid) is traced the same way without the start and exit stops: its map is
read at the start and again while it lives.

What the tracer costs per call is measured the same day: build/syscost-<variant> bare, then
under the same tracer (tracer_overhead), so that the analysis can take it out of the run time.
The per-call cost of each entry path comes from a results directory, or from a short per-call
matrix measured here (percall_on_the_spot).  This module only measures: every figure is
computed by twtools.analyse.diagnose.
"""
import ctypes
import os
import re
import shlex
import signal
import struct
import subprocess
import tempfile
import time
from pathlib import Path

from ..core import paths, proc
from ..machine import entrypath, sysnr
from ..machine.tracers import bpftrace
from .trace import tmp_dir

SCRIPT = "diagnose.bt"
TRACERS = ("bpftrace", "strace")
PTRACE_TRACEME, PTRACE_CONT, PTRACE_SETOPTIONS = 0, 7, 0x4200
PTRACE_O_TRACEEXIT, PTRACE_EVENT_EXIT = 0x40, 6
AT_NULL, AT_SYSINFO, AT_SYSINFO_EHDR = 0, 32, 33
ATTACH_TIMEOUT = 90.0      # bpftrace parses BTF before it attaches: seconds on a small VM


class DiagnoseError(RuntimeError):
    """The program could not be traced: the message says why, in one line.  usage: the
    user named something that is not there (a command, a process), exit status 2."""

    def __init__(self, msg, usage=False):
        super().__init__(msg)
        self.usage = usage


def _libc():
    lib = ctypes.CDLL(None, use_errno=True)
    lib.ptrace.argtypes = [ctypes.c_long, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]
    lib.ptrace.restype = ctypes.c_long
    return lib


def _ptrace(req, pid, data=0):
    lib = _libc()
    if lib.ptrace(req, pid, None, ctypes.c_void_p(data)) == -1:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))


# ---------------------------------------------------------------- which tracer

def tracefs():
    for d in ("/sys/kernel/tracing", "/sys/kernel/debug/tracing"):
        if os.path.isdir(f"{d}/events/raw_syscalls"):
            return d
    return None


def why_not(tracer):
    """None when `tracer` can run here, else the reason."""
    if tracer == "bpftrace":
        if not proc.is_root():
            return "bpftrace needs root"
        if not proc.which("bpftrace"):
            return "bpftrace is not installed"
        if tracefs() is None:
            return ("no raw_syscalls tracepoints under /sys/kernel/tracing (mount it: "
                    "mount -t tracefs nodev /sys/kernel/tracing)")
        if not os.path.exists("/sys/kernel/btf/vmlinux"):
            return "the kernel has no BTF (/sys/kernel/btf/vmlinux): diagnose.bt reads task_struct"
        return None
    if tracer == "strace":
        return None if proc.which("strace") else "strace is not installed"
    raise ValueError(f"unknown tracer {tracer}")


def choose(requested="auto"):
    """(tracer, {tracer: why not}) : the first of TRACERS that can run, or requested."""
    whys = {t: why_not(t) for t in TRACERS}
    if requested != "auto":
        if whys[requested]:
            raise DiagnoseError(f"{requested} cannot run here: {whys[requested]}")
        return requested, {t: w for t, w in whys.items() if w}
    for t in TRACERS:
        if whys[t] is None:
            return t, {k: w for k, w in whys.items() if w}
    raise DiagnoseError("no tracer can run here: " + "; ".join(f"{t}: {w}" for t, w in whys.items()))


# ---------------------------------------------------------------- the process

def parse_maps(text):
    """/proc/<pid>/maps -> [{lo, hi, perms, offset, path}]."""
    out = []
    for line in text.splitlines():
        f = line.split(None, 5)
        if len(f) < 5:
            continue
        lo, hi = (int(x, 16) for x in f[0].split("-"))
        out.append({"lo": lo, "hi": hi, "perms": f[1], "offset": int(f[2], 16),
                    "path": f[5].strip() if len(f) > 5 else ""})
    return out


def read_process(pid):
    """What /proc says about a process: {exe, bits, maps, auxv, vdso}; the 32-bit vDSO's
    __kernel_vsyscall classified from the live image (entrypath.classify_vdso32)."""
    out = {"pid": pid, "exe": None, "bits": None, "maps": [], "auxv": {}, "vdso": None,
           "why": None}
    try:
        out["exe"] = os.readlink(f"/proc/{pid}/exe")
        with open(f"/proc/{pid}/exe", "rb") as f:
            out["bits"] = 32 if f.read(5)[4] == 1 else 64
        out["maps"] = parse_maps(Path(f"/proc/{pid}/maps").read_text())
        raw = Path(f"/proc/{pid}/auxv").read_bytes()
    except OSError as e:
        out["why"] = f"cannot read /proc/{pid}: {e.strerror}"
        return out
    fmt = "<II" if out["bits"] == 32 else "<QQ"
    size = struct.calcsize(fmt)
    for off in range(0, len(raw) - size + 1, size):
        t, v = struct.unpack_from(fmt, raw, off)
        if t == AT_NULL:
            break
        out["auxv"][t] = v
    v = next((m for m in out["maps"] if m["path"] == "[vdso]"), None)
    if v is None:
        out["vdso"] = {"base": None, "why": "no [vdso] mapping (vdso=0 or vdso32=0?)"}
        return out
    vd = {"base": v["lo"], "end": v["hi"], "image": None}
    try:
        with open(f"/proc/{pid}/mem", "rb", buffering=0) as mem:
            mem.seek(v["lo"])
            vd["image"] = mem.read(v["hi"] - v["lo"])
    except OSError as e:
        vd["why"] = f"cannot read the vDSO from /proc/{pid}/mem: {e.strerror}"
    if out["bits"] == 32 and vd["image"]:
        si = out["auxv"].get(AT_SYSINFO)
        c = entrypath.classify_vdso32(vd["image"], v["lo"], None if si is None else si - v["lo"])
        vd.update({k: c.get(k) for k in ("form", "instruction", "landing_pad", "kernel_vsyscall",
                                          "why")})
    out["vdso"] = vd
    return out


ADDR_NO_RANDOMIZE = 0x0040000


def _norandom():
    """In a child before exec: turn address-space randomisation off (personality(2), kept
    across exec), so that two runs of a program get the same layout."""
    lib = ctypes.CDLL(None, use_errno=True)
    lib.personality.argtypes = [ctypes.c_ulong]
    cur = lib.personality(0xFFFFFFFF)
    if cur != -1:
        lib.personality(cur | ADDR_NO_RANDOMIZE)


def _traceme():
    _libc().ptrace(PTRACE_TRACEME, 0, None, None)


def _traceme_norandom():
    _norandom()
    _traceme()


def start_stopped(cmd, stdin=None, stdout=None, stderr=None, norandom=False):
    """Popen(cmd) stopped at its first instruction; DiagnoseError with the reason if not.
    norandom: with address-space randomisation off (see _norandom)."""
    try:
        p = subprocess.Popen(cmd, stdin=stdin, stdout=stdout, stderr=stderr,
                             preexec_fn=_traceme_norandom if norandom else _traceme,
                             close_fds=True)
    except FileNotFoundError:
        raise DiagnoseError(f"{cmd[0]}: command not found", usage=True)
    except PermissionError:
        raise DiagnoseError(f"{cmd[0]}: permission denied", usage=True)
    except OSError as e:
        raise DiagnoseError(f"cannot run {cmd[0]}: {e.strerror}")
    _, status = os.waitpid(p.pid, 0)
    if not os.WIFSTOPPED(status):
        code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else -os.WTERMSIG(status)
        p.returncode = code
        raise DiagnoseError(f"{cmd[0]} did not stop at execve (exit {code}): ptrace was refused "
                            "(kernel.yama.ptrace_scope 3, or a seccomp filter)")
    return p


def run_to_exit(p):
    """Continue a process stopped by start_stopped, pass its signals on, stop it once more as
    it exits to read its map.  {wall_s, status, maps_at_exit}."""
    pid = p.pid
    _ptrace(PTRACE_SETOPTIONS, pid, PTRACE_O_TRACEEXIT)
    t0 = time.monotonic()
    _ptrace(PTRACE_CONT, pid, 0)
    t1, maps, status = None, [], None
    while True:
        try:
            _, st = os.waitpid(pid, 0)
        except InterruptedError:
            continue
        if os.WIFEXITED(st) or os.WIFSIGNALED(st):
            status = os.WEXITSTATUS(st) if os.WIFEXITED(st) else -os.WTERMSIG(st)
            t1 = t1 or time.monotonic()
            break
        if os.WIFSTOPPED(st):
            sig, event = os.WSTOPSIG(st), st >> 16
            if sig == signal.SIGTRAP and event == PTRACE_EVENT_EXIT:
                t1 = time.monotonic()
                try:
                    maps = parse_maps(Path(f"/proc/{pid}/maps").read_text())
                except OSError:
                    maps = []
                sig = 0
            elif sig == signal.SIGTRAP:
                sig = 0
            try:
                _ptrace(PTRACE_CONT, pid, sig)
            except OSError:
                pass
    p.returncode = status
    return {"wall_s": t1 - t0, "status": status, "maps_at_exit": maps}


# ---------------------------------------------------------------- bpftrace

def _start_bpftrace(pid, tmp):
    out = Path(tmp) / "diagnose.ndjson"
    err = open(Path(tmp) / "bpftrace.err", "w")
    bt = subprocess.Popen(["bpftrace", "-f", "json", "-o", str(out), str(paths.TRACES / SCRIPT),
                           str(pid)], stdout=subprocess.DEVNULL, stderr=err,
                          start_new_session=True)
    deadline = time.monotonic() + ATTACH_TIMEOUT
    try:
        while time.monotonic() < deadline:
            if bt.poll() is not None:
                err.close()
                msg = [l for l in (Path(tmp) / "bpftrace.err").read_text().splitlines()
                       if "RLIMIT_MEMLOCK" not in l]
                raise DiagnoseError(f"bpftrace exited before attaching ({bt.returncode}): "
                                    f"{msg[-1] if msg else 'no message'}")
            if out.exists() and '"printf"' in out.read_text():
                return bt, out, err
            time.sleep(0.05)
    except BaseException:
        # An interrupt while bpftrace attaches (tw run's SIGTERM) must not leave it behind:
        # its caller never gets it to stop.
        proc.kill_group(bt, grace=0.5)
        err.close()
        raise
    proc.kill_group(bt, grace=0.5)
    raise DiagnoseError(f"bpftrace did not attach within {ATTACH_TIMEOUT:.0f} s")


def _stop_bpftrace(bt, out, err):
    if bt.poll() is None:
        bt.send_signal(signal.SIGINT)
        try:
            bt.wait(timeout=60)
        except subprocess.TimeoutExpired:
            bt.kill()
            bt.wait()
    err.close()
    text = out.read_text() if out.exists() else ""
    return text, bpftrace.parse_json(text)


def bpftrace_maps(maps):
    """diagnose.bt's maps as plain rows: sites, latency histograms, the pt_regs check."""
    sites = []
    for k, n in maps.get("@site", {}).items():
        # pid, comm, abi, origin, insn, id, cs, ip, ret12, ret0
        if len(k) != 10:
            continue
        sites.append({"pid": int(k[0]), "comm": k[1], "abi": k[2], "origin": k[3], "insn": k[4],
                      "id": int(k[5]), "cs": int(k[6]), "ip": int(k[7]), "ret12": int(k[8]),
                      "ret0": int(k[9]), "calls": int(n)})
    lat = []
    for k, buckets in maps.get("@lat", {}).items():
        pid, abi, nr = int(k[0]), k[1], int(k[2])
        lat.append({"pid": pid, "abi": abi, "id": nr, "log2": bpftrace.hist_buckets(buckets),
                    "exits": int(maps.get("@exits", {}).get(k, 0)),
                    "sum_ns": maps.get("@sum_ns", {}).get(k)})
    wlin = [{"pid": int(k[0]), "abi": k[1], "linear": bpftrace.hist_buckets(b)}
            for k, b in maps.get("@wlin", {}).items()]
    regs = maps.get("@regs_ok", {})
    return {"sites": sites, "latency": lat, "write_linear": wlin,
            "regs_ok": {"ok": int(regs.get(("1",), 0)), "bad": int(regs.get(("0",), 0))}}


# ---------------------------------------------------------------- strace

_ST_LINE = re.compile(r"^(\d+)\s+\[([0-9a-f?]+)\]\s+(.*)$")
_ST_CALL = re.compile(r"^(\w+)\((.*?)(?:\)\s+=\s+(0x[0-9a-f]+|-?\d+|\?)(.*?))?(?:\s+<(\d+\.\d+)>)?\s*$")
_ST_UNFIN = re.compile(r"^(\w+)\((.*)<unfinished \.\.\.>$")
_ST_RESUMED = re.compile(r"^<\.\.\. (\w+) resumed>(.*?)\)\s+=\s+(0x[0-9a-f]+|-?\d+|\?).*?(?:<(\d+\.\d+)>)?\s*$")
_ST_MODE = re.compile(r"\[ Process PID=(\d+) runs in (32|64) bit mode\. \]")


def parse_strace(text, bits0, skip_until_exec=False):
    """strace -f -i -T output -> {calls: [{pid, abi, name, id, ip, us}], mmaps: [...]}.

    The ABI of a call follows strace's "[ Process PID=N runs in 32 bit mode. ]" notes (bits0
    until the first); numbers come from the UAPI tables (twtools.machine.sysnr).  The
    libraries' mappings come from openat/open and mmap/mmap2 calls with a file descriptor.
    skip_until_exec: the output of `strace -- CMD`, whose first process makes its execve
    (and, when the first fails, more) before it is the program: those calls are left out."""
    mode, calls, pending, fds, mmaps = {}, [], {}, {}, []
    first, execd = None, not skip_until_exec    # strace -- CMD: its child's calls before execve
    tables = {"compat": sysnr.syscall_numbers("i386"), "native": sysnr.syscall_numbers("x86_64")}
    for line in text.splitlines():
        m = _ST_MODE.search(line)
        if m:
            mode[int(m.group(1))] = int(m.group(2))
            continue
        m = _ST_LINE.match(line.strip())
        if not m:
            continue
        pid, ip, rest = int(m.group(1)), m.group(2), m.group(3)
        if first is None:
            first = pid
        if not execd and pid == first:
            # the forked strace child until its execve returns: not the program yet
            if re.match(r"^execve\(.*\)\s+=\s+0\b", rest):
                execd = True
            continue
        abi = "compat" if mode.get(pid, bits0) == 32 else "native"
        u = _ST_UNFIN.match(rest)
        if u:
            pending[pid] = (u.group(1), int(ip, 16) if "?" not in ip else None, abi, u.group(2))
            continue
        r = _ST_RESUMED.match(rest)
        if r and pid in pending:
            name, ipv, abi, args = pending.pop(pid)
            ret, secs = r.group(3), r.group(4)
        else:
            c = _ST_CALL.match(rest)
            if not c or "?" in ip:
                continue
            name, ipv, args, ret, secs = c.group(1), int(ip, 16), c.group(2), c.group(3), c.group(5)
        nr = tables[abi].get(name)
        calls.append({"pid": pid, "abi": abi, "name": name, "id": nr, "ip": ipv,
                      "us": float(secs) * 1e6 if secs else None})
        _track_files(name, args, ret, fds, mmaps, pid)
    return {"calls": calls, "mmaps": mmaps}


def _track_files(name, args, ret, fds, mmaps, pid):
    if ret is None or ret == "?":
        return
    try:
        rv = int(ret, 0)
    except ValueError:
        return
    if name in ("open", "openat") and rv >= 0:
        m = re.search(r'"([^"]+)"', args)
        if m:
            fds[(pid, rv)] = m.group(1)
    elif name in ("mmap", "mmap2") and rv > 0:
        f = [x.strip() for x in args.split(",")]
        if len(f) >= 6:
            try:
                fd, length, off = int(f[4]), int(f[1], 0), int(f[5], 0)
            except ValueError:
                return
            if (pid, fd) in fds:
                # mmap2's offset is in pages
                mmaps.append({"lo": rv, "hi": rv + length, "perms": f[2],
                              "offset": off * (4096 if name == "mmap2" else 1),
                              "path": fds[(pid, fd)]})


def log2_buckets(values_ns):
    """[{lo_ns, hi_ns, count}] in powers of two, as bpftrace's hist() prints them."""
    counts = {}
    for v in values_ns:
        b = 0 if v < 1 else 1 << (int(v).bit_length() - 1)
        counts[b] = counts.get(b, 0) + 1
    return [{"lo_ns": b, "hi_ns": (b * 2 if b else 1), "count": counts[b]} for b in sorted(counts)]


def strace_rows(parsed):
    """strace calls in the rows bpftrace gives: sites, latency, write_linear."""
    sites, lat = {}, {}
    for c in parsed["calls"]:
        if c["id"] is None:
            continue
        k = (c["pid"], c["abi"], c["id"], c["ip"])
        sites[k] = sites.get(k, 0) + 1
        if c["us"] is not None:
            lat.setdefault((c["pid"], c["abi"], c["id"]), []).append(c["us"] * 1000)
    rows = [{"pid": k[0], "comm": None, "abi": k[1], "origin": None, "insn": None, "id": k[2],
             "cs": None, "ip": k[3], "ret12": 0, "ret0": 0, "calls": n} for k, n in sites.items()]
    lrows, wlin = [], []
    for (pid, abi, nr), v in lat.items():
        lrows.append({"pid": pid, "abi": abi, "id": nr, "log2": log2_buckets(v), "exits": len(v),
                      "sum_ns": sum(v)})
        if (abi, nr) in (("compat", 4), ("native", 1)):
            step = 250
            cnt = {}
            for x in v:
                b = min(int(x // step), 80) * step
                cnt[b] = cnt.get(b, 0) + 1
            wlin.append({"pid": pid, "abi": abi, "linear": [
                {"lo_ns": b, "hi_ns": (b + step if b < 20000 else None), "count": cnt[b]}
                for b in sorted(cnt)]})
    return {"sites": rows, "latency": lrows, "write_linear": wlin, "regs_ok": None}


# ---------------------------------------------------------------- one traced run

def trace_command(cmd, tracer="auto", stdin=None, stdout=None, stderr=None):
    """Run cmd under the tracer; the raw result (see the module's docstring):

      {tracer, not_used: {tracer: why}, cmd, pid, status, wall_s, process (read_process at
       execve), maps_at_exit, rows (sites, latency, write_linear, regs_ok),
       raw (the tracer's own output)}

    With tracer 'auto', a bpftrace that fails to attach is replaced by strace: the program
    has not run yet (it is stopped at execve), so it is started again under strace."""
    first, not_used = choose(tracer)
    order = [first] if tracer != "auto" else [t for t in TRACERS if t not in not_used]
    for i, t in enumerate(order):
        try:
            return _trace_once(cmd, t, dict(not_used), stdin, stdout, stderr)
        except _AttachFailed as e:
            if i + 1 == len(order):
                raise DiagnoseError(str(e))
            not_used[t] = str(e)
    raise DiagnoseError("no tracer left to try")


class _AttachFailed(DiagnoseError):
    """The tracer could not attach to the stopped program (which has been killed)."""


class _Quiet:
    """While the program runs, Ctrl-C is the program's: it gets the terminal's SIGINT itself
    (passed on by the ptrace loop or by strace) and its exit ends the trace normally."""

    def __enter__(self):
        self.interrupted = False
        try:
            self.old = signal.signal(signal.SIGINT, self._note)
        except ValueError:          # not the main thread
            self.old = None
        return self

    def _note(self, *_):
        self.interrupted = True

    def __exit__(self, *exc):
        if self.old is not None:
            signal.signal(signal.SIGINT, self.old)
        return False


def _trace_once(cmd, tracer, not_used, stdin, stdout, stderr):
    if tracer == "strace":
        return _strace_command(cmd, not_used, stdin, stdout, stderr)
    with tempfile.TemporaryDirectory(prefix="tw-diagnose-", dir=tmp_dir()) as tmp:
        p = start_stopped(cmd, stdin=stdin, stdout=stdout, stderr=stderr)
        try:
            info = read_process(p.pid)
            if tracer == "bpftrace":
                try:
                    bt, out, err = _start_bpftrace(p.pid, tmp)
                except DiagnoseError as e:
                    _kill(p)
                    raise _AttachFailed(str(e))
                try:
                    with _Quiet():
                        run = run_to_exit(p)
                finally:
                    text, maps = _stop_bpftrace(bt, out, err)
                rows = bpftrace_maps(maps)
            else:
                raise ValueError(f"unknown tracer {tracer}")
        except BaseException:
            _kill(p)
            raise
    return {"tracer": tracer, "not_used": not_used, "cmd": list(cmd), "pid": p.pid,
            "status": run["status"], "wall_s": run["wall_s"], "process": info,
            "maps_at_exit": run.get("maps_at_exit") or [], "rows": rows, "raw": text,
            "mode": "command"}


def _kill(p):
    try:
        os.kill(p.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    try:
        p.wait(timeout=10)
    except (subprocess.TimeoutExpired, ChildProcessError):
        pass


def _strace_command(cmd, not_used, stdin, stdout, stderr):
    """cmd under `strace -f -i -T`, strace its parent (so Yama's ptrace_scope 1 allows it).

    strace gives instruction pointers but no memory map, so the layout is read from a first
    copy of the program started stopped at execve and killed before its first instruction,
    and both copies run with address-space randomisation off: the program, its loader and
    the vDSO are then where that copy had them.  The libraries' addresses come from the mmap
    calls strace prints."""
    if not proc.which("strace"):
        raise _AttachFailed("strace is not installed")
    first = start_stopped(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL, norandom=True)
    try:
        info = read_process(first.pid)
    finally:
        _kill(first)
    with tempfile.TemporaryDirectory(prefix="tw-diagnose-", dir=tmp_dir()) as tmp:
        out = Path(tmp) / "strace.txt"
        with _Quiet():
            t0 = time.monotonic()
            try:
                st = subprocess.Popen(["strace", "-f", "-i", "-T", "-o", str(out), "--", *cmd],
                                      stdin=stdin, stdout=stdout, stderr=stderr,
                                      preexec_fn=_norandom, close_fds=True)
            except OSError as e:
                raise _AttachFailed(f"cannot run strace: {e.strerror}")
            rc = st.wait()
            wall = time.monotonic() - t0
        text = out.read_text() if out.exists() else ""
    if not text.strip():
        raise _AttachFailed(f"strace wrote nothing (exit {rc}): ptrace refused?")
    parsed = parse_strace(text, info["bits"], skip_until_exec=True)
    status = rc       # strace exits with the program's status (or its signal, negated)
    return {"tracer": "strace", "not_used": not_used, "cmd": list(cmd), "pid": None,
            "status": status, "wall_s": wall, "process": info, "maps_at_exit": parsed["mmaps"],
            "rows": strace_rows(parsed), "raw": text, "mode": "command",
            "note": "address-space randomisation was off for the traced run (strace gives no "
                    "memory map; the layout is read from an identical stopped copy); the run "
                    "time includes strace's own start"}


def trace_pid(pid, seconds=None, tracer="auto"):
    """Trace a running process (and the children it starts) until it exits, `seconds` pass
    or the user interrupts; the same raw result as trace_command, with mode 'pid'."""
    tracer, not_used = choose(tracer)
    if not Path(f"/proc/{pid}").exists():
        raise DiagnoseError(f"no process {pid}", usage=True)
    info = read_process(pid)
    if info["why"]:
        raise DiagnoseError(info["why"])
    with tempfile.TemporaryDirectory(prefix="tw-diagnose-", dir=tmp_dir()) as tmp:
        if tracer == "bpftrace":
            bt, out, err = _start_bpftrace(pid, tmp)
        else:
            out = Path(tmp) / "strace.txt"
            errf = open(Path(tmp) / "strace.err", "w")
            bt = subprocess.Popen(["strace", "-f", "-i", "-T", "-o", str(out), "-p", str(pid)],
                                  stdout=subprocess.DEVNULL, stderr=errf, start_new_session=True)
        t0 = time.monotonic()
        maps = info["maps"]
        try:
            while seconds is None or time.monotonic() - t0 < seconds:
                if not Path(f"/proc/{pid}").exists():
                    break
                try:
                    maps = parse_maps(Path(f"/proc/{pid}/maps").read_text()) or maps
                except OSError:
                    break
                time.sleep(0.2)
        except KeyboardInterrupt:
            pass
        wall = time.monotonic() - t0
        if tracer == "bpftrace":
            text, m = _stop_bpftrace(bt, out, err)
            rows = bpftrace_maps(m)
        else:
            if bt.poll() is None:
                bt.send_signal(signal.SIGINT)
                bt.wait(timeout=60)
            errf.close()
            text = out.read_text() if out.exists() else ""
            rows = strace_rows(parse_strace(text, info["bits"]))
    return {"tracer": tracer, "not_used": not_used, "cmd": None, "pid": pid, "status": None,
            "wall_s": wall, "process": info, "maps_at_exit": maps, "rows": rows, "raw": text,
            "mode": "pid"}


# ---------------------------------------------------------------- what the tracer costs

OVERHEAD_OP = "getppid"


def tracer_command(tracer, cmd):
    """cmd run under the same tracer, as diagnose runs it: an argument list, with the command
    quoted into one word for bpftrace's -c."""
    if tracer == "bpftrace":
        return ["bpftrace", "-o", "/dev/null", str(paths.TRACES / SCRIPT), "-c",
                shlex.join(str(c) for c in cmd)]
    return ["strace", "-f", "-i", "-T", "-o", "/dev/null", "--"] + [str(c) for c in cmd]


def tracer_overhead(variant, tracer, batches=10, rounds=3):
    """syscost-<variant> --op getppid bare and under the tracer, alternated `rounds` times:
    {variant, op, tracer, bare: [samples], traced: [samples]} or {why} when it cannot run."""
    from .syscost import SyscostError, measure
    out = {"variant": variant, "op": OVERHEAD_OP, "tracer": tracer, "bare": [], "traced": [],
           "why": None}
    try:
        for _ in range(rounds):
            for key, wrap in (("bare", None), ("traced", lambda c: tracer_command(tracer, c))):
                r = measure(variant, OVERHEAD_OP, batches=batches, command_wrapper=wrap,
                            batch_ms=2, warmup_ms=5, timeout=180)
                if not r["supported"]:
                    out["why"] = f"syscost-{variant} cannot run here: {r['reason']}"
                    return out
                out[key].extend(r["samples_ns"])
    except SyscostError as e:
        out["why"] = f"measuring the tracer failed: {str(e)[-200:]}"
    return out


def percall_on_the_spot(variants, rounds=10):
    """A short per-call matrix (op null, ret shape) over `variants`, measured here in
    interleaved rounds with build/syscost-*: the percall.json document (raw rounds)."""
    from . import bench
    return bench.run_matrix(None, mode="quick", variants=list(variants), ops=["null"],
                            shapes=["ret"], rounds=rounds)


# The Go program's prime count of writes: every tracer must see exactly this many.
FIELD_WRITES = 997


def field_example(out_dir, mode="default"):
    """The report's field example: a program nobody here wrote (Go, GOARCH=386, static: it
    enters by inline int 0x80), traced as `tw diagnose` would, raw.  The report prices its
    paths with this results directory's own per-call matrix.  diagnose.json holds the raw
    trace and the tracer's measured overhead, or why there is no example."""
    from . import goprog
    from ..core import files
    doc = {"schema": "timewrite-diagnose/1", "program": f"Go, GOARCH=386, {FIELD_WRITES} one-byte "
                                                        "writes to /dev/null", "raw": None,
           "overhead": None, "why": None}
    try:
        path, why = goprog.build("386")
    except goprog.GoBuildError as e:
        path, why = None, str(e)
    if path is None:
        doc["why"] = why
    else:
        try:
            raw = trace_command([str(path), str(FIELD_WRITES)])
            vd = (raw.get("process") or {}).get("vdso") or {}
            if isinstance(vd.get("image"), bytes):     # JSON has no bytes: the image as hex
                vd["image"] = vd["image"].hex()
            doc["raw"] = raw
            dominant = "32-int80"
            doc["overhead"] = tracer_overhead(dominant, raw["tracer"],
                                              batches=5 if mode == "quick" else 10)
        except DiagnoseError as e:
            doc["why"] = f"could not be traced: {e}"
    files.write_json(Path(out_dir) / "diagnose.json", doc)
    return doc
