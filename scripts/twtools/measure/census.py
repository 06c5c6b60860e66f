"""The live half of `tw census`: every process on the machine for a few seconds, raw.

How it runs, as root:

  1. /proc is read (machine.process.snapshot): which processes run now, their executables and
     bitness (read again once bpftrace has attached, so that none is missed in between).  This is all that is possible without root, and then all the census gives:
     which running processes are 32-bit, with no call counts, and why not more;
  2. syscost getppid is measured bare (64-bit syscall, 32-bit int 0x80): the tracer's cost is
     the difference once it is attached;
  3. one bpftrace session, traces/census.bt, attaches to every process (raw_syscalls, the
     sched exec/exit tracepoints, the vsyscall page's faults);
  4. the same syscost runs are measured under it (children of tw: the census leaves their calls
     out), then the window: `seconds` of the machine as it is;
  5. bpftrace is stopped and prints its maps (bpftrace -f json); /proc is read again, so that
     processes that started during the window get their executables and those that ended are
     known.

The per-call matrix that prices each path is a results directory's percall.json or a short one
measured here (measure.diagnose.percall_on_the_spot).  This module only measures: every figure
is computed by twtools.analyse.census.
"""
import os
import platform
import socket
import tempfile
import time
from pathlib import Path

from ..core import files, paths, proc, ui
from ..machine import doctor, entrypath, hostwalls, process, registry
from ..machine.tracers import bpftrace
from . import diagnose
from .diagnose import bpftrace_why_not, tracefs
from .trace import tmp_dir

SCRIPT = "census.bt"
SCHEMA = "timewrite-census/3"
ATTACH_TIMEOUT = diagnose.ATTACH_TIMEOUT   # bpftrace parses BTF before it attaches
# bpftrace's maps hold 4096 keys by default; a busy machine has more (pid, path) pairs than that
# in a few seconds.  A full map drops updates silently, so the census makes room and checks.
MAP_KEYS = 131072
VSYSCALL_EVENT = "events/exceptions/page_fault_user"
OVERHEAD_OP = "getppid"


class CensusError(RuntimeError):
    """The census could not trace: the message says why, in one line."""


def why_not():
    """None when census.bt can run here, else the reason."""
    return bpftrace_why_not(SCRIPT, "tracing every process needs root (bpftrace)")


def _script(tmp):
    """census.bt, without its vsyscall probe where the kernel has no exceptions:page_fault_user
    tracepoint (bpftrace refuses a script naming a missing one): (path, why the vsyscall page
    is not visible or None)."""
    src = (paths.TRACES / SCRIPT).read_text()
    if os.path.exists(f"{tracefs()}/{VSYSCALL_EVENT}"):
        return paths.TRACES / SCRIPT, None
    cut = src.index("tracepoint:exceptions:page_fault_user")
    p = Path(tmp) / SCRIPT
    p.write_text(src[:cut])
    return p, ("this kernel has no exceptions:page_fault_user tracepoint, so a call through the "
               "vsyscall page (emulated in the page-fault handler, with no syscall tracepoint) "
               "cannot be seen")


def _start(script, tmp, keys=None, arg=None, out_name="census.ndjson"):
    """bpftrace on `script`, once attached (its BEGIN has printed): (Popen, output path, stderr
    file).  keys: each map's key limit (BPFTRACE_MAP_KEYS_MAX, MAP_KEYS by default; bpftrace
    preallocates every map to it); arg: the script's $1 (tw's own pid by default); out_name:
    the JSON output's file in tmp.  The census and tw legs start bpftrace here."""
    out = Path(tmp) / out_name
    env = dict(os.environ, BPFTRACE_MAP_KEYS_MAX=str(keys or MAP_KEYS))
    bt, err = spawn_attached(["bpftrace", "-f", "json", "-o", str(out), str(script),
                              str(os.getpid() if arg is None else arg)],
                             out, Path(tmp) / "bpftrace.err", "bpftrace", env=env)
    return bt, out, err


def spawn_attached(argv, out, errp, what, env=None):
    """measure.diagnose.spawn_attached, its failure to attach as CensusError.  bpftrace for the
    census, build/watchbpf for tw watch's window."""
    return diagnose.spawn_attached(argv, out, errp, what, env=env, error=CensusError)


def _stop(bt, out, err):
    """SIGINT, so that bpftrace's END prints the maps; its output's text."""
    try:
        proc.interrupt(bt, 120, again=True)
    finally:
        err.close()
    return out.read_text() if out.exists() else ""


# census.bt's window is opened and closed by two calls of tw's own that its probe sees (its
# header says why BEGIN and END cannot mark it): getpgid of a pid no process has.
WINDOW_CALLS = {"open": 0x74770001, "closed": 0x74770002}


def window(out, what, timeout=None):
    """Open or close census.bt's window (what: "open" or "closed"): make the call until the
    script prints that it saw it (the probe may still be attaching when BEGIN has printed).
    CensusError when it never does."""
    deadline = time.monotonic() + (timeout or ATTACH_TIMEOUT)
    mark = f'"window {what}'
    while True:
        try:
            os.getpgid(WINDOW_CALLS[what])
        except OSError:
            pass                # ESRCH: no such process, as meant
        if out.exists() and mark in out.read_text(errors="replace"):
            return
        if time.monotonic() > deadline:
            raise CensusError(f"census.bt did not see the window {what} within "
                              f"{timeout or ATTACH_TIMEOUT:.0f} s")
        time.sleep(0.02)


# /proc/PID/stat gives a process's start in clock ticks since boot, census.bt in ns: the rows
# keep /proc's unit, the kernel's own rounding (nsec_to_clock_t, a division), so that the two
# compare equal.
NS_PER_TICK = 10**9 // os.sysconf("SC_CLK_TCK")


def _image(k, at=1):
    """A key's image, (start, gen) from k[at], k[at + 1]: the group leader's start_boottime
    (in clock ticks, as /proc shows it) and the number of execve calls inside the window."""
    return {"start": int(k[at]) // NS_PER_TICK, "gen": int(k[at + 1])}


# census.bt's integer codes (its "Maps"); a name recorded before the codes reads as it is.
ORIGIN = {"1": "vdso", "2": "text", "3": "other"}
INSN = {"0": "vdso", "1": "int80", "2": "syscall", "3": "sysenter", "4": "unknown"}


def rows(maps, keys=None):
    """census.bt's maps as plain rows (strings from the kernel kept as they came).  Every row
    names its process's image: pid, start and gen (census.bt's header says why a pid alone
    does not name a program).  keys: the maps' key limit they ran with (MAP_KEYS when None),
    to tell which filled up: judged on the entries bpftrace printed, before any that print
    alike are summed.  witness: the totals of the three maps that count every call at the
    same probe (@calls by path, @nr by number, @regs_ok), and what the reader merged."""
    calls = []
    for k, n in maps.get("@calls", {}).items():
        # pid, start, gen, comm, compat, cs, origin, insn, own; a comm may hold a comma: it is
        # rejoined
        if len(k) < 9:
            continue
        comm = ",".join(k[3:len(k) - 5])
        pid, (compat, cs, origin, insn, own) = k[0], k[len(k) - 5:]
        calls.append({"pid": int(pid), **_image(k), "comm": comm,
                      "abi": "compat" if compat == "1" else "native", "cs": int(cs),
                      "origin": ORIGIN.get(origin, origin), "insn": INSN.get(insn, insn),
                      "own": own == "1", "calls": int(n)})
    nrs = [{"pid": int(k[0]), **_image(k), "abi": "compat" if k[3] == "1" else "native",
            "id": int(k[4]), "calls": int(n)} for k, n in maps.get("@nr", {}).items() if len(k) == 5]
    # @exec[pid, start, gen] = filename; recorded before: @exec[pid, start, gen, filename]
    execs = [{"pid": int(k[0]), **_image(k), "filename": v if len(k) == 3 else ",".join(k[3:])}
             for k, v in maps.get("@exec", {}).items() if len(k) >= 3]
    exits = [{"pid": int(k[0]), "start": int(k[1]) // NS_PER_TICK}
             for k in maps.get("@exit", {}) if len(k) == 2]
    forks = [{"pid": int(k[0]), "parent": int(k[1]), **_image(k, 2)}
             for k in maps.get("@fork", {}) if len(k) == 4]
    vsys = [{"pid": int(k[0]), **_image(k), "comm": ",".join(k[3:]), "faults": int(n)}
            for k, n in maps.get("@vsys", {}).items() if len(k) >= 4]
    regs = maps.get("@regs_ok", {})
    entries = getattr(maps, "entries", None) or {name: len(m) for name, m in maps.items()}
    full = sorted(name for name, n in entries.items() if n >= (keys or MAP_KEYS))
    work = [{"pid": int(k[0]), **_image(k), "work": int(v)}
            for k, v in maps.get("@work", {}).items() if len(k) == 3]
    witness = maps.witness() if hasattr(maps, "witness") else {}
    witness.update(calls_total=sum(c["calls"] for c in calls),
                   nr_total=sum(r["calls"] for r in nrs),
                   regs_total=sum(int(v) for v in regs.values()),
                   map_keys=keys or MAP_KEYS)
    return {"calls": calls, "nr": nrs, "exec": execs, "exit": exits, "vsyscall": vsys,
            "work": work,
            "fork": forks, "regs_ok": {"ok": int(regs.get(("1",), 0)), "bad": int(regs.get(("0",), 0))},
            "maps_full": full, "witness": witness}


def _window(doc, maps):
    """The window as census.bt counted it: from the call that opened it to the one that closed
    it (@window, CLOCK_MONOTONIC ns, the clock of time.monotonic()), where the calls it counted
    entered; the wall time this process took around it is a little longer at each end.
    wall_s and window_utc take census.bt's ends where it printed them."""
    w = maps.get("@window") or {}
    t0, t1 = w.get(("0",)), w.get(("1",))
    if not (isinstance(t0, int) and isinstance(t1, int) and t1 > t0):
        return
    off = time.time() - time.monotonic()
    doc["wall_s"] = (t1 - t0) / 1e9
    doc["window_utc"] = [t0 / 1e9 + off, t1 / 1e9 + off]
    doc["window_from"] = "census.bt's stamps of the calls that opened and closed it (CLOCK_MONOTONIC)"


# How census.bt's maps that hold no count are combined where two entries print alike: the
# SYSCALL_WORK flags a process had (OR: any flag either entry saw), a file name (the first).
COMBINE = {"@work": "or", "@exec": "first", "@gen": "max"}


def _overhead_variants():
    """The probe's variants: 64-bit syscall (a native call), and 32-bit int 0x80 (a compat
    call from outside the vDSO, which census.bt also reads two bytes of user memory for)."""
    return [v for v in (registry.find(64, "syscall"), registry.find(32, "int80")) if v]


def _syscost(variant, batches):
    from .syscost import Launch, Sampling, SyscostError, measure
    try:
        r = measure(variant, OVERHEAD_OP,
                    sampling=Sampling(batches=batches, batch_ms=2, warmup_ms=5),
                    launch=Launch(timeout=120))
    except SyscostError as e:
        return None, f"measuring the tracer failed: {str(e)[-200:]}"
    if not r["supported"]:
        return None, f"syscost-{variant} cannot run here: {r['reason']}"
    return r["samples_ns"], None


def host_facts():
    """What the census's readiness answer depends on: the live 32-bit vDSO (which instruction
    __kernel_vsyscall uses here) and whether IA32 emulation is on (doctor's rule)."""
    v = entrypath.vdso32()
    on, detail = doctor.Doctor().ia32(v)
    return ({k: v.get(k) for k in ("available", "instruction", "form", "why", "source")},
            {"enabled": on, "why": detail.get("why"), "cmdline": detail.get("cmdline")})


def _merge(before, after):
    """Two /proc snapshots as one list, the later row winning for a pid in both."""
    rows = {r["pid"]: r for r in before}
    rows.update({r["pid"]: r for r in after})
    return sorted(rows.values(), key=lambda r: r["pid"])


def run(seconds=5.0, batches=30):
    """The raw census: {schema, host, kernel, utc, seconds, root, tracer, why_not, snapshot,
    snapshot_end, trace (rows), overhead, vdso32, ia32, wall_s, window_utc: [start, end] in
    seconds since the epoch, where an independent counter can be read against the window}."""
    doc = {"schema": SCHEMA, "host": socket.gethostname(), "kernel": platform.release(),
           "utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "seconds": seconds,
           "root": proc.is_root(), "own_pid": os.getpid(), "cpus": os.cpu_count(),
           "clk_tck": os.sysconf("SC_CLK_TCK"), "tracer": None, "why_not": why_not(),
           "script": f"traces/{SCRIPT}", "vsyscall_why": None, "snapshot": process.snapshot(),
           "snapshot_end": None, "trace": None, "overhead": {}, "wall_s": None}
    doc["vdso32"], doc["ia32"] = host_facts()
    # read before this census's own tracer attaches
    doc["host_walls"] = hostwalls.host_walls()
    if doc["why_not"]:
        ui.progress(f"census: {doc['why_not']}: reading /proc only")
        return doc
    bare = {v: _syscost(v, batches) for v in _overhead_variants()}
    with tempfile.TemporaryDirectory(prefix="tw-census-", dir=tmp_dir()) as tmp:
        script, doc["vsyscall_why"] = _script(tmp)
        ui.progress("census: attaching bpftrace to every process (traces/census.bt)")
        try:
            bt, out, err = _start(script, tmp)
        except CensusError as e:
            doc["why_not"] = str(e)
            doc["failed"] = True        # it should have run here: tw census exits 1
            return doc
        # /proc again once attached: a process started while bpftrace attached (seconds) is
        # then either in this list or has an exec or fork event in the trace.
        doc["snapshot"] = _merge(doc["snapshot"], process.snapshot())
        try:
            window(out, "open")
        except CensusError as e:
            _stop(bt, out, err)
            doc["why_not"] = str(e)
            doc["failed"] = True
            return doc
        t0 = time.monotonic()       # the maps count from here to the window's close
        doc["window_utc"] = [time.time(), None]   # its ends on the wall clock, for a witness
        try:
            for v, (samples, why) in bare.items():
                traced, why2 = _syscost(v, batches) if samples else (None, why)
                doc["overhead"][v] = {"variant": v, "op": OVERHEAD_OP, "bare": samples or [],
                                      "traced": traced or [], "why": why or why2,
                                      "order": "bare before bpftrace attached and after it "
                                               "stopped, traced while attached"}
            ui.progress(f"census: watching every process for {seconds:g} s")
            time.sleep(seconds)
        finally:
            try:
                window(out, "closed", timeout=10)
            except CensusError as e:
                # the counts then run to bpftrace's stop, and the window is this process's
                doc["window_from"] = f"tw's own clock: {e}"
            doc["wall_s"] = time.monotonic() - t0
            doc["window_utc"][1] = time.time()
            text = _stop(bt, out, err)
            errtext = diagnose.read_stderr(err)
    # The bare figure again, after the session: before and after together take a drift of the
    # machine's load out of the difference (one attach costs too much to alternate).
    for v, o in doc["overhead"].items():
        if o["bare"] and o["traced"]:
            samples, why = _syscost(v, batches)
            o["bare"] += samples or []
            o["bare_after"] = len(samples or [])
    doc["tracer"] = "bpftrace"
    maps = bpftrace.parse_json(text, COMBINE, stderr=errtext)
    doc["trace"] = rows(maps)
    _window(doc, maps)
    doc["snapshot_end"] = process.snapshot()
    return doc


# tw run's census stage watches the machine this long, by mode: a short look, not a survey.
STAGE_SECONDS = {"quick": 2.0, "default": 5.0, "long": 10.0}


def stage(out_dir, mode="default"):
    """tw run's census stage: census.json in out_dir, raw; tw report prices it with the same
    directory's percall.json."""
    doc = run(seconds=STAGE_SECONDS.get(mode, 5.0))
    files.write_json(Path(out_dir) / "census.json", doc)
    if doc.get("failed"):
        # The file says what /proc showed; the stage still failed, as meta.json will say.
        raise RuntimeError(f"bpftrace could not trace every process: {doc['why_not']}")
    return doc
