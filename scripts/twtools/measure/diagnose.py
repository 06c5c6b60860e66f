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
matrix measured here (percall_on_the_spot).  This module only orchestrates: the process is
started and read by twtools.machine.process, the tracers' output is parsed by
twtools.machine.tracers (bpftrace, strace), and every figure is computed by
twtools.analyse.diagnose.
"""
import os
import shlex
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from ..core import paths, proc
from ..machine import process
from ..machine.tracers import bpftrace, strace
from .trace import tmp_dir

SCRIPT = "diagnose.bt"
TRACERS = ("bpftrace", "strace")
ATTACH_TIMEOUT = 90.0      # bpftrace parses BTF before it attaches: seconds on a small VM


class DiagnoseError(RuntimeError):
    """The program could not be traced: the message says why, in one line.  usage: the
    user named something that is not there (a command, a process), exit status 2."""

    def __init__(self, msg, usage=False):
        super().__init__(msg)
        self.usage = usage


# ---------------------------------------------------------------- which tracer

def tracefs():
    for d in ("/sys/kernel/tracing", "/sys/kernel/debug/tracing"):
        if os.path.isdir(f"{d}/events/raw_syscalls"):
            return d
    return None


def bpftrace_why_not(script, not_root="bpftrace needs root"):
    """None when a bpftrace script on raw_syscalls that reads task_struct (diagnose.bt,
    census.bt) can run here, else the reason; not_root is the reason for a user."""
    if not proc.is_root():
        return not_root
    if not proc.which("bpftrace"):
        return "bpftrace is not installed"
    if tracefs() is None:
        return ("no raw_syscalls tracepoints under /sys/kernel/tracing (mount it: "
                "mount -t tracefs nodev /sys/kernel/tracing)")
    if not os.path.exists("/sys/kernel/btf/vmlinux"):
        return f"the kernel has no BTF (/sys/kernel/btf/vmlinux): {script} reads task_struct"
    return None


def why_not(tracer):
    """None when `tracer` can run here, else the reason."""
    if tracer == "bpftrace":
        return bpftrace_why_not("diagnose.bt")
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

def read_process(pid):
    """What /proc says about a process (machine.process.read, with its vDSO)."""
    return process.read(pid)


def start_stopped(cmd, stdin=None, stdout=None, stderr=None, norandom=False):
    """machine.process.start_stopped, its failures as DiagnoseError with the reason."""
    try:
        return process.start_stopped(cmd, stdin=stdin, stdout=stdout, stderr=stderr,
                                     norandom=norandom)
    except FileNotFoundError:
        raise DiagnoseError(f"{cmd[0]}: command not found", usage=True)
    except PermissionError:
        raise DiagnoseError(f"{cmd[0]}: permission denied", usage=True)
    except OSError as e:
        raise DiagnoseError(f"cannot run {cmd[0]}: {e.strerror}")
    except process.ProcessError as e:
        raise DiagnoseError(str(e))


# ---------------------------------------------------------------- bpftrace

def _start_bpftrace(pid, tmp):
    out = Path(tmp) / "diagnose.ndjson"
    bt, err = spawn_attached(["bpftrace", "-f", "json", "-o", str(out),
                              str(paths.TRACES / SCRIPT), str(pid)],
                             out, Path(tmp) / "bpftrace.err", "bpftrace")
    return bt, out, err


def spawn_attached(argv, out, errp, what, env=None, error=DiagnoseError):
    """A tracer that writes NDJSON to `out` and prints one printf record once attached: started
    in its own session, returned once that record is there: (Popen, stderr file).  Its
    failure to attach (it exits, or ATTACH_TIMEOUT passes) raises `error` with the last line
    it said.  bpftrace for diagnose and the census, build/watchbpf for tw watch's window."""
    err = open(errp, "w")
    bt = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err, start_new_session=True,
                          env=env)
    deadline = time.monotonic() + ATTACH_TIMEOUT
    try:
        while time.monotonic() < deadline:
            if bt.poll() is not None:
                err.close()
                msg = [ln for ln in Path(errp).read_text().split("\n")
                       if "RLIMIT_MEMLOCK" not in ln and "WARNING" not in ln and ln.strip()
                       and not ln.lstrip().startswith(("/", "~"))]
                raise error(f"{what} exited before attaching ({bt.returncode}): "
                            f"{msg[-1] if msg else 'no message'}")
            if out.exists() and '"printf"' in out.read_text():
                return bt, err
            time.sleep(0.05)
    except BaseException:
        # An interrupt while it attaches (tw run's SIGTERM) must not leave it behind: its
        # caller never gets it to stop.
        proc.kill_group(bt, grace=0.5)
        err.close()
        raise
    proc.kill_group(bt, grace=0.5)
    err.close()
    raise error(f"{what} did not attach within {ATTACH_TIMEOUT:.0f} s")


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
    return text, bpftrace.parse_json(text, stderr=read_stderr(err))


def read_stderr(err, limit=1 << 20):
    """What a tracer printed on the stderr file it was given (closed), bounded, or ''."""
    try:
        with open(err.name, "rb") as f:
            return f.read(limit).decode("utf-8", "replace")
    except OSError:
        return ""


# diagnose.bt's integer codes (traces/diagnose.bt, "Maps"), and the names the rows carry.  A
# key recorded before the codes (strings: "compat", "vdso", "int80") reads as it is.
ABI = {"1": "compat", "0": "native"}
ORIGIN = {"1": "vdso", "2": "text", "3": "other"}
INSN = {"1": "int80", "2": "syscall", "3": "sysenter", "4": "unknown"}


def decode(codes, field):
    return codes.get(field, field)


def bpftrace_maps(maps):
    """diagnose.bt's maps as plain rows: sites, latency histograms, the pt_regs check, and the
    witnesses (twtools.analyse.diagnose.witnesses checks them): what the reader merged, and
    each count's total as the three maps that count at entry and at exit give it."""
    sites = []
    for k, n in maps.get("@site", {}).items():
        # pid, comm, abi, origin, insn, id, cs, ip, ret12, ret0; a comm may hold a comma: it
        # is rejoined
        if len(k) < 10:
            continue
        comm = ",".join(k[1:len(k) - 8])
        abi, origin, insn, nr, cs, ip, ret12, ret0 = k[len(k) - 8:]
        sites.append({"pid": int(k[0]), "comm": comm, "abi": decode(ABI, abi),
                      "origin": decode(ORIGIN, origin), "insn": decode(INSN, insn),
                      "id": int(nr), "cs": int(cs), "ip": int(ip), "ret12": int(ret12),
                      "ret0": int(ret0), "calls": int(n)})
    lat = []
    for k, buckets in maps.get("@lat", {}).items():
        pid, abi, nr = int(k[0]), decode(ABI, k[1]), int(k[2])
        lat.append({"pid": pid, "abi": abi, "id": nr, "log2": bpftrace.hist_buckets(buckets),
                    "exits": int(maps.get("@exits", {}).get(k, 0)),
                    "sum_ns": maps.get("@sum_ns", {}).get(k)})
    wlin = [{"pid": int(k[0]), "abi": decode(ABI, k[1]), "linear": bpftrace.hist_buckets(b)}
            for k, b in maps.get("@wlin", {}).items()]
    regs = maps.get("@regs_ok", {})
    witness = maps.witness() if isinstance(maps, bpftrace.Maps) else {}
    witness.update(sites_total=maps.total("@site") if isinstance(maps, bpftrace.Maps) else
                   sum(s["calls"] for s in sites),
                   regs_total=sum(int(v) for v in regs.values()),
                   exits_total=sum(int(v) for v in maps.get("@exits", {}).values()))
    return {"sites": sites, "latency": lat, "write_linear": wlin,
            "regs_ok": {"ok": int(regs.get(("1",), 0)), "bad": int(regs.get(("0",), 0))},
            "witness": witness}


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
                    process.kill(p)
                    raise _AttachFailed(str(e))
                try:
                    with _Quiet():
                        run = process.run_to_exit(p)
                finally:
                    text, maps = _stop_bpftrace(bt, out, err)
                rows = bpftrace_maps(maps)
            else:
                raise ValueError(f"unknown tracer {tracer}")
        except BaseException:
            process.kill(p)
            raise
    return {"tracer": tracer, "not_used": not_used, "cmd": list(cmd), "pid": p.pid,
            "status": run["status"], "wall_s": run["wall_s"], "process": info,
            "maps_at_exit": run.get("maps_at_exit") or [], "rows": rows, "raw": text,
            "mode": "command"}


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
        process.kill(first)
    with tempfile.TemporaryDirectory(prefix="tw-diagnose-", dir=tmp_dir()) as tmp:
        out = Path(tmp) / "strace.txt"
        with _Quiet():
            t0 = time.monotonic()
            try:
                st = process.popen_norandom(["strace", "-f", "-i", "-T", "-o", str(out), "--", *cmd],
                                            stdin=stdin, stdout=stdout, stderr=stderr)
            except OSError as e:
                raise _AttachFailed(f"cannot run strace: {e.strerror}")
            rc = st.wait()
            wall = time.monotonic() - t0
        text = out.read_text() if out.exists() else ""
    if not text.strip():
        raise _AttachFailed(f"strace wrote nothing (exit {rc}): ptrace refused?")
    parsed = strace.parse_strace(text, info["bits"], skip_until_exec=True)
    status = rc       # strace exits with the program's status (or its signal, negated)
    return {"tracer": "strace", "not_used": not_used, "cmd": list(cmd), "pid": None,
            "status": status, "wall_s": wall, "process": info, "maps_at_exit": parsed["mmaps"],
            "rows": strace.strace_rows(parsed), "raw": text, "mode": "command",
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
                    maps = process.maps(pid) or maps
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
            rows = strace.strace_rows(strace.parse_strace(text, info["bits"]))
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
    from .syscost import Launch, Sampling, SyscostError, measure
    out = {"variant": variant, "op": OVERHEAD_OP, "tracer": tracer, "bare": [], "traced": [],
           "why": None}
    try:
        for _ in range(rounds):
            for key, wrap in (("bare", None), ("traced", lambda c: tracer_command(tracer, c))):
                r = measure(variant, OVERHEAD_OP,
                            sampling=Sampling(batches=batches, batch_ms=2, warmup_ms=5),
                            launch=Launch(command_wrapper=wrap, timeout=180))
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
    return bench.run(None, bench.Settings(mode="quick", variants=list(variants), ops=["null"],
                                          shapes=["ret"], rounds=rounds))


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
