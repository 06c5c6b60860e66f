"""The live half of `tw watch`: two bpftrace programs, raw.

  exec tracer  traces/watch_exec.bt, attached for the watch's whole life: one probe,
               sched:sched_process_exec, counting every exec in kernel maps keyed by file
               name and bitness.  Every interval the program flips its map set and prints the
               one it stopped writing to (bpftrace -f json on a pipe): one batch.  Nothing is
               sent to user space per exec, and the system-call path is not touched.
  window       traces/watch_window.bt, attached for `seconds` only (a duty cycle): census.bt's
               per-image entry-path counts plus write(2) latency histograms.  An attached
               raw_syscalls tracepoint slows every system call of every process, so the window
               measures its own cost as tw census does (syscost getppid bare, then under the
               window) and the watch states it with the window's share of time.

This module only measures: the batches and windows are folded, priced and kept by
twtools.analyse.watch and twtools.analyse.watchdb.
"""
import os
import platform
import queue
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from ..core import paths, proc
from ..machine import process
from ..machine.tracers import bpftrace
from . import census
from .trace import tmp_dir

EXEC_SCRIPT = "watch_exec.bt"
WINDOW_SCRIPT = "watch_window.bt"
SCHEMA = "timewrite-watch-window/1"
# bpftrace keeps at most this many keys a map (distinct programs an interval; six maps of
# 200-byte keys, 4096 keys: about 7 MB of kernel memory).  A full map drops updates; the exec program's
# keyless @n counts every exec, so the watch knows how many a full map dropped.
EXEC_MAP_KEYS = 4096
# A window's maps are keyed by process image (and the write histograms by file kind too), and
# bpftrace preallocates every map to its key limit: the census's 131072 took 195 MB of kernel
# memory for each window.  A window lasts seconds; 8192 images in one is a machine starting
# 1600 processes a second, and a map that fills is said (maps_full, the census's blind list).
WINDOW_MAP_KEYS = 8192
# File names longer than this are cut by bpftrace (its maximum string length in 0.17 is 200).
STRLEN = 200
OVERHEAD_BATCHES = 10


class WatchError(RuntimeError):
    """A tracer could not start: the message says why, in one line."""


def why_not():
    """None when both programs can run here, else the reason (census.why_not's checks)."""
    return census.why_not()


def mono_to_epoch():
    """Seconds to add to bpftrace's nsecs (CLOCK_MONOTONIC) / 1e9 to get Unix time."""
    return time.time() - time.monotonic()


def die_with_us():
    """The argv that makes a bpftrace die with the watch, however the watch ends (SIGKILL
    included, which no handler can pass on): util-linux's setpriv sets PR_SET_PDEATHSIG and
    execs bpftrace.  Without it an orphaned window would keep slowing every system call on
    the machine.  () where setpriv is missing (the watch then says so)."""
    if proc.which("setpriv"):
        return ("setpriv", "--pdeathsig", "KILL", "--")
    return ()


def _env(keys):
    return dict(os.environ, BPFTRACE_MAP_KEYS_MAX=str(keys), BPFTRACE_STRLEN=str(STRLEN))


def _error_line(text):
    msg = [ln for ln in text.splitlines() if "RLIMIT_MEMLOCK" not in ln and "WARNING" not in ln
           and ln.strip() and not ln.lstrip().startswith(("/", "~"))]
    return msg[-1] if msg else "no message"


class ExecTracer:
    """traces/watch_exec.bt running in the background; take() gives the batches printed so
    far: [{"execs": {(file, is32): {"n", "first_ns", "last_ns"}}, "n": execs, "final": bool}]."""

    def __init__(self, interval_s, tmp):
        # The tool runs as it is with a 60 s interval (tests/test_traces_dryrun.py attaches it
        # so); the watch's own interval goes in its place.
        text = (paths.TRACES / EXEC_SCRIPT).read_text()
        if text.count("interval:s:60\n") != 1:
            raise RuntimeError(f"traces/{EXEC_SCRIPT}: expected one 'interval:s:60' probe")
        text = text.replace("interval:s:60\n", f"interval:s:{int(interval_s)}\n")
        self.script = Path(tmp) / EXEC_SCRIPT
        self.script.write_text(text)
        self.errp = Path(tmp) / "exec.err"
        self.batches = queue.Queue()
        self.bt = None
        self._attached = threading.Event()
        self._ended = threading.Event()

    def start(self, timeout=census.ATTACH_TIMEOUT):
        err = open(self.errp, "w")
        with proc.deferred_signals():
            self.bt = subprocess.Popen([*die_with_us(), "bpftrace", "-f", "json", str(self.script),
                                        str(os.getpid())],
                                       stdout=subprocess.PIPE, stderr=err, stdin=subprocess.DEVNULL,
                                       start_new_session=True, env=_env(EXEC_MAP_KEYS))
        err.close()
        threading.Thread(target=self._read, daemon=True, name="watch-exec").start()
        deadline = time.monotonic() + timeout
        while not self._attached.wait(0.1):
            if self.bt.poll() is not None or self._ended.is_set():
                self.bt.wait()
                raise WatchError(f"bpftrace (exec tracer) exited before attaching "
                                 f"({self.bt.returncode}): {_error_line(self.errp.read_text())}")
            if time.monotonic() > deadline:
                self.stop()
                raise WatchError(f"bpftrace (exec tracer) did not attach within {timeout:.0f} s")

    def _read(self):
        cur = {"execs": {}, "n": 0}
        try:
            for raw in self.bt.stdout:
                line = raw.decode("utf-8", "backslashreplace")
                for o in bpftrace.json_lines(line):
                    if o.get("type") == "printf":
                        d = o.get("data") or ""
                        if d.startswith("Counting"):
                            self._attached.set()
                        elif d.startswith(("interval done", "end")):
                            cur["final"] = d.startswith("end")
                            self.batches.put(cur)
                            cur = {"execs": {}, "n": 0}
                        continue
                    if o.get("type") != "map":
                        continue
                    for name, val in (o.get("data") or {}).items():
                        _fold(cur, name, val)
        finally:
            self._ended.set()

    def alive(self):
        return self.bt is not None and self.bt.poll() is None

    def take(self):
        out = []
        while True:
            try:
                out.append(self.batches.get_nowait())
            except queue.Empty:
                return out

    def stop(self, timeout=30):
        """SIGINT: bpftrace runs END, which prints what the current set counted.  Returns the
        batches not taken yet, that last one included."""
        if self.bt is None:
            return []
        if self.bt.poll() is None:
            self.bt.send_signal(2)
            try:
                self.bt.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                proc.kill_group(self.bt, grace=0.5)
        self._ended.wait(5)
        return self.take()


def _fold(cur, name, val):
    """One printed map into the batch being read."""
    if name in ("@n0", "@n1"):
        cur["n"] += int(val or 0)
        return
    field = {"@exec": "n", "@first": "first_ns", "@last": "last_ns"}.get(name[:-1])
    if field is None or not isinstance(val, dict):
        return
    for k, v in val.items():
        # The file name may hold commas: the bitness is the last field.
        fname, _, b = k.rpartition(",")
        row = cur["execs"].setdefault((fname, b == "1"), {"n": 0, "first_ns": None, "last_ns": None})
        row[field] = int(v)


def fs_magics():
    """{statfs f_type: file system type names, '/'-joined} of every file system mounted here, from
    /proc/self/mounts and statfs(2) on each mount point (a mount point that cannot be read is
    left out).  The window keys a write's file by its super block's magic number, which is
    this f_type."""
    import ctypes
    import ctypes.util

    class Statfs(ctypes.Structure):
        _fields_ = [("f_type", ctypes.c_long), ("rest", ctypes.c_byte * 256)]
    libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
    out = {}
    try:
        lines = open("/proc/self/mounts", encoding="utf-8", errors="replace").read().splitlines()
    except OSError:
        return out
    for ln in lines[:10000]:
        f = ln.split()
        if len(f) < 3:
            continue
        where = f[1].encode().decode("unicode_escape", "replace")   # \040 for a space
        st = Statfs()
        if libc.statfs(where.encode(), ctypes.byref(st)) == 0:
            out.setdefault(st.f_type & 0xffffffff, set()).add(f[2])
    # One magic may belong to several types (tmpfs and devtmpfs share TMPFS_MAGIC): all of
    # them are named, so that the label does not claim one it cannot tell apart.
    return {k: "/".join(sorted(v)) for k, v in out.items()}


def _fs_name(magic, names):
    return names.get(int(magic) & 0xffffffff) or f"0x{int(magic) & 0xffffffff:x}"


def _wlat_rows(maps):
    sums = maps.get("@wsum", {})
    names = fs_magics() if maps.get("@wlat") else {}
    out = []
    for k, buckets in maps.get("@wlat", {}).items():
        if len(k) != 7:
            continue
        pid, start, gen, ifmt, magic, major, sync = k
        out.append({"pid": int(pid), "start": int(start) // census.NS_PER_TICK, "gen": int(gen),
                    "ifmt": int(ifmt), "fstype": _fs_name(magic, names), "major": int(major),
                    "sync": sync == "1",
                    "buckets": bpftrace.hist_buckets(buckets), "sum_ns": int(sums.get(k, 0))})
    return out


def _probe(variant):
    samples, why = census._syscost(variant, OVERHEAD_BATCHES)
    return samples, why


def window(seconds, with_overhead=True, stop=None):
    """One window (closed early when the event `stop` is set): the raw census document (measure.census.run's keys, read by
    analyse.census.analyse) plus "wlat" rows and "utc_start"/"utc_end" in Unix seconds."""
    from ..machine import registry
    doc = {"schema": SCHEMA, "host": socket.gethostname(), "kernel": platform.release(),
           "utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "seconds": seconds,
           "root": proc.is_root(), "own_pid": os.getpid(), "cpus": os.cpu_count(),
           "tracer": None, "why_not": why_not(), "script": f"traces/{WINDOW_SCRIPT}",
           "vsyscall_why": None, "snapshot": process.snapshot(), "snapshot_end": None,
           "trace": None, "overhead": {}, "wall_s": None, "wlat": [],
           "utc_start": time.time(), "utc_end": None}
    doc["vdso32"], doc["ia32"] = census.host_facts()
    if doc["why_not"]:
        return doc
    v = registry.find(64, "syscall")
    bare = _probe(v) if with_overhead and v else (None, "not measured")
    with tempfile.TemporaryDirectory(prefix="tw-watch-", dir=tmp_dir()) as tmp:
        src = (paths.TRACES / WINDOW_SCRIPT).read_text()
        script = Path(tmp) / WINDOW_SCRIPT
        if not os.path.exists(f"{census.tracefs()}/{census.VSYSCALL_EVENT}"):
            src = src[:src.index("tracepoint:exceptions:page_fault_user")] + \
                src[src.index("END\n{"):]
            doc["vsyscall_why"] = "this kernel has no exceptions:page_fault_user tracepoint"
        script.write_text(src)
        old = os.environ.get("BPFTRACE_STRLEN")
        os.environ["BPFTRACE_STRLEN"] = str(STRLEN)
        try:
            bt, out, err = census._start(script, tmp, wrapper=die_with_us(),
                                         keys=WINDOW_MAP_KEYS)
        except census.CensusError as e:
            doc["why_not"] = str(e)
            doc["failed"] = True
            return doc
        finally:
            if old is None:
                os.environ.pop("BPFTRACE_STRLEN", None)
            else:
                os.environ["BPFTRACE_STRLEN"] = old
        doc["snapshot"] = census._merge(doc["snapshot"], process.snapshot())
        t0 = time.monotonic()
        doc["utc_start"] = time.time()
        try:
            if v and with_overhead:
                samples, why = bare
                traced, why2 = _probe(v) if samples else (None, why)
                doc["overhead"][v] = {"variant": v, "op": census.OVERHEAD_OP, "bare": samples or [],
                                      "traced": traced or [], "why": why or why2,
                                      "order": "bare before the window, traced inside it"}
            left = seconds - (time.monotonic() - t0)
            if left > 0:
                # A stopping watch (SIGTERM) closes the window early: it is shorter, not lost.
                if stop is not None:
                    stop.wait(left)
                else:
                    time.sleep(left)
        finally:
            doc["wall_s"] = time.monotonic() - t0
            doc["utc_end"] = time.time()
            text = census._stop(bt, out, err)
    maps = bpftrace.parse_json(text)
    doc["tracer"] = "bpftrace"
    doc["trace"] = census.rows(maps, WINDOW_MAP_KEYS)
    doc["wlat"] = _wlat_rows(maps)
    doc["snapshot_end"] = process.snapshot()
    return doc
