"""The live half of `tw watch`: two BPF programs, loaded by build/watchbpf, raw.

  exec tracer  watch/exec.bpf.c, attached for the watch's whole life: one program on
               sched:sched_process_exec, counting every exec in a kernel map keyed by the file
               executed (device, inode and generation: not by a name, so one file behind many
               links is one key) and bitness, with the name it was last started by; the file's
               absolute path is resolved in the kernel from its own dentry and mount.  64-bit
               and 32-bit files each have a budget of keys of their own, and the execs a full
               budget drops are counted by bitness.  Every interval the loader flips the map's
               phase and prints the one no program writes to any more (NDJSON on a pipe): one
               batch.  Nothing is sent to user space per exec, and the system-call path is not
               touched.
  window       watch/window.bpf.c, attached for `seconds` only (a duty cycle): census.bt's
               per-image entry-path counts plus write(2) latency histograms.  An attached
               raw_syscalls tracepoint slows every system call of every process, so the window
               measures its own cost as tw census does (syscost getppid bare, then under the
               window) and the watch states it with the window's share of time.

They are compiled once by `make` (clang, libbpf), not by bpftrace at each start: a bpftrace
process keeps about 100 MiB resident for its LLVM, and the exec tracer runs for weeks.  The
loader prints what `bpftrace -f json` prints, so the census's parsers read it.

This module only measures: the batches and windows are folded, priced and kept by
twtools.analyse.watch and twtools.store.watchdb.
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
from ..machine import hostwalls, process
from ..machine.tracers import bpftrace
from . import census
from .trace import tmp_dir

LOADER = "watchbpf"
EXEC_OBJ = "watch/exec.bpf.o"
WINDOW_OBJ = "watch/window.bpf.o"
SCHEMA = "timewrite-watch-window/1"
# The exec map keeps at most this many keys a phase for 64-bit files, and EXEC_MAP_KEYS32 for
# 32-bit ones, each budget its own: distinct files an interval (32-byte keys, 224-byte values,
# preallocated for two phases: about 3 MB of kernel memory, and the path map 2 x both of 1288
# bytes, 13 MB).  A full budget drops updates; the keyless count n counts every exec by
# bitness, so the watch knows how many of each bitness a full map dropped.
EXEC_MAP_KEYS = 4096
EXEC_MAP_KEYS32 = 1024
# A window's maps are keyed by process image (and the write histograms by file kind too), and
# every map is preallocated to its key limit: the census's 131072 would take 195 MB of kernel
# memory for each window.  A window lasts seconds; 8192 images in one is a machine starting
# 1600 processes a second, and a map that fills is said (maps_full, the census's blind list).
WINDOW_MAP_KEYS = 8192
OVERHEAD_BATCHES = 10


class WatchError(RuntimeError):
    """A tracer could not start: the message says why, in one line."""


def loader():
    """build/watchbpf and its two objects: (argv[0], exec object, window object)."""
    return (paths.BUILD / LOADER, paths.BUILD / EXEC_OBJ, paths.BUILD / WINDOW_OBJ)


def why_not():
    """None when both programs can run here, else the reason."""
    if not proc.is_root():
        return "tracing every process needs root (loading BPF programs)"
    missing = [p for p in loader() if not p.exists()]
    if missing:
        return f"{missing[0]} is not built (run make)"
    if census.tracefs() is None:
        return ("no raw_syscalls tracepoints under /sys/kernel/tracing (mount it: "
                "mount -t tracefs nodev /sys/kernel/tracing)")
    if not os.path.exists("/sys/kernel/btf/vmlinux"):
        return ("the kernel has no BTF (/sys/kernel/btf/vmlinux): the programs find "
                "task_struct's fields in it")
    return None


def mono_to_epoch():
    """Seconds to add to the programs' bpf_ktime_get_ns (CLOCK_MONOTONIC) / 1e9 to get Unix
    time."""
    return time.time() - time.monotonic()


def _error_line(text):
    msg = [ln.strip() for ln in text.split("\n") if ln.strip()]
    return msg[-1] if msg else "no message"


class ExecTracer:
    """`watchbpf exec` running in the background; take() gives the batches printed so far:
    [{"execs": {(dev, ino, gen, is32): {"n", "first_ns", "last_ns", "started"}}, "paths":
    {(dev, ino, gen): absolute path}, "why": {(dev, ino, gen): watch/maps.h's PATH_* code},
    "n": {False: 64-bit execs, True: 32-bit execs}, "final": bool}].  Names and paths are text
    as core.escape.name keeps bytes (the loader writes them so)."""

    def __init__(self, interval_s, tmp):
        self.interval = max(1, int(interval_s))
        self.errp = Path(tmp) / "exec.err"
        self.batches = queue.Queue()
        self.loader = None
        self._attached = threading.Event()
        self._ended = threading.Event()

    def start(self, timeout=census.ATTACH_TIMEOUT):
        exe, obj, _ = loader()
        err = open(self.errp, "w")
        with proc.deferred_signals():
            self.loader = subprocess.Popen([str(exe), "exec", str(obj), "--own", str(os.getpid()),
                                        "--interval", str(self.interval),
                                        "--keys", str(EXEC_MAP_KEYS),
                                        "--keys32", str(EXEC_MAP_KEYS32)],
                                       stdout=subprocess.PIPE, stderr=err, stdin=subprocess.DEVNULL,
                                       start_new_session=True)
        err.close()
        threading.Thread(target=self._read, daemon=True, name="watch-exec").start()
        deadline = time.monotonic() + timeout
        while not self._attached.wait(0.1):
            if self.loader.poll() is not None or self._ended.is_set():
                self.loader.wait()
                raise WatchError(f"the exec tracer exited before attaching "
                                 f"({self.loader.returncode}): {_error_line(self.errp.read_text())}")
            if time.monotonic() > deadline:
                self.stop()
                raise WatchError(f"the exec tracer did not attach within {timeout:.0f} s")

    def _read(self):
        cur = _batch()
        try:
            for raw in self.loader.stdout:
                line = raw.decode("utf-8", "backslashreplace")
                # every member kept: two entries printed under one key are both counted
                for o in bpftrace.json_lines(line, pairs=True):
                    if o.get("type") == "printf":
                        d = o.get("data") or ""
                        if d.startswith("Counting"):
                            self._attached.set()
                        elif d.startswith(("interval done", "end")):
                            cur["final"] = d.startswith("end")
                            self.batches.put(cur)
                            cur = _batch()
                        continue
                    if o.get("type") != "map":
                        continue
                    for name, val in o.get("data") or []:
                        _fold(cur, name, val)
        finally:
            self._ended.set()

    def alive(self):
        return self.loader is not None and self.loader.poll() is None

    def why_stopped(self):
        """Why the loader is gone, in words: the signal that killed it (a loader killed alone,
        by the OOM killer or a user, prints nothing), else its exit status and last line."""
        import signal
        rc = self.loader.poll() if self.loader is not None else None
        try:
            line = _error_line(self.errp.read_bytes().decode("utf-8", "backslashreplace"))
        except OSError:
            line = "no message"
        if rc is not None and rc < 0:
            try:
                sig = signal.Signals(-rc).name
            except ValueError:
                sig = f"signal {-rc}"
            return f"build/watchbpf was killed by {sig}" + ("" if line == "no message" else f" ({line})")
        return f"build/watchbpf exited ({rc}): {line}"

    def take(self):
        out = []
        while True:
            try:
                out.append(self.batches.get_nowait())
            except queue.Empty:
                return out

    def stop(self, timeout=30):
        """SIGINT: the loader detaches and prints what both phases hold.  Returns the batches
        not taken yet, that last one included."""
        if self.loader is None:
            return []
        proc.interrupt(self.loader, timeout)
        self._ended.wait(5)
        return self.take()


def _batch():
    return {"execs": {}, "paths": {}, "why": {}, "n": {False: 0, True: 0}}


def _ints(text, n):
    """n whole numbers from "a,b,c", or None."""
    parts = text.split(",")
    return [int(p) for p in parts] if len(parts) == n and all(p.isdigit() for p in parts) else None


# Two entries of one printed key (none expected: the loader prints each BPF entry once, and
# every key is zeroed whole before it is filled) are one: counts add, the first and last
# times widen, the name is the later one.
_JOIN = {"n": lambda a, b: a + b, "first_ns": min, "last_ns": max, "started": lambda a, b: b}


def _fold(cur, name, val):
    """One printed map into the batch being read: val is its members as (key, value) pairs
    (base.Pairs), every one kept."""
    if name in ("@n0", "@n1"):
        if isinstance(val, list):
            for bits, v in val:
                if bits in ("64", "32"):
                    cur["n"][bits == "32"] += v if isinstance(v, int) and v >= 0 else 0
        return
    if not isinstance(val, list):
        return
    if name[:-1] in ("@path", "@why"):
        for k, v in val:
            f = _ints(k, 3)
            if f is not None:
                if name.startswith("@path"):
                    cur["paths"][tuple(f)] = v
                else:
                    cur["why"][tuple(f)] = int(v)
        return
    field = {"@exec": "n", "@first": "first_ns", "@last": "last_ns",
             "@started": "started"}.get(name[:-1])
    if field is None:
        return
    for k, v in val:
        f = _ints(k, 4)
        if f is None:
            continue
        dev, ino, gen, b = f
        row = cur["execs"].setdefault((dev, ino, gen, b == 1),
                                      {"n": 0, "first_ns": None, "last_ns": None, "started": None})
        v = v if field == "started" else int(v)
        row[field] = v if row[field] is None else _JOIN[field](row[field], v)


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


def start_window(tmp):
    """`watchbpf window` attached, its output in tmp/window.ndjson: (Popen, output path, stderr
    file), for census._stop to end.  tmp must not hold an earlier window's output: the start
    is the first record in it."""
    exe, _, obj = loader()
    out = Path(tmp) / "window.ndjson"
    bt, err = census.spawn_attached(
        [str(exe), "window", str(obj), "--own", str(os.getpid()), "--keys", str(WINDOW_MAP_KEYS),
         "--out", str(out)], out, Path(tmp) / "window.err", "the window's loader")
    return bt, out, err


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
           "tracer": None, "why_not": why_not(), "script": "watch/window.bpf.c",
           "vsyscall_why": None, "snapshot": process.snapshot(), "snapshot_end": None,
           "trace": None, "overhead": {}, "wall_s": None, "wlat": [],
           "utc_start": time.time(), "utc_end": None}
    doc["vdso32"], doc["ia32"] = census.host_facts()
    # the walls the host puts up for every process (audit's state, programs on raw_syscalls
    # other than this window's own), read before the window attaches, as tw census does
    doc["host_walls"] = hostwalls.host_walls()
    if doc["why_not"]:
        return doc
    v = registry.find(64, "syscall")
    bare = _probe(v) if with_overhead and v else (None, "not measured")
    with tempfile.TemporaryDirectory(prefix="tw-watch-", dir=tmp_dir()) as tmp:
        if not os.path.exists(f"{census.tracefs()}/{census.VSYSCALL_EVENT}"):
            # The loader leaves its page-fault program out where the tracepoint is missing.
            doc["vsyscall_why"] = "this kernel has no exceptions:page_fault_user tracepoint"
        try:
            bt, out, err = start_window(tmp)
        except census.CensusError as e:
            doc["why_not"] = str(e)
            doc["failed"] = True
            return doc
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
    maps = bpftrace.parse_json(text, census.COMBINE)
    doc["tracer"] = "watchbpf"
    doc["trace"] = census.rows(maps, WINDOW_MAP_KEYS)
    doc["wlat"] = _wlat_rows(maps)
    doc["snapshot_end"] = process.snapshot()
    return doc
