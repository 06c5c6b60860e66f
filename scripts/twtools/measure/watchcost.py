"""What `tw watch` costs every other program: a paired A/B, raw.

Each round measures, with build/syscost-64-syscall, a null system call and a one-byte write to
/dev/null (op null and write-devnull) three ways, one after another:
  off     nothing of the watch attached;
  exec    the watch's always-on exec tracer attached (watch/exec.bpf.c), as it runs
          between windows, nearly all of the time;
  window  a window open (watch/window.bpf.c), as it runs --window seconds every
          --window-period.
The order of the legs turns round by round (off first, then last), so that a drift of the
machine does not land on one leg.  The legs are whole attaches, not alternating calls, as the
watch attaches.  The samples are raw: analyse.watchcost says what
they mean.
"""
import tempfile
import threading
import time

from ..core import paths
from . import census
from .syscost import Launch, Sampling, SyscostError, measure
from .trace import tmp_dir
from .watch import ExecTracer, start_window

SCHEMA = "timewrite-watch-cost/1"
OPS = ("null", "write-devnull")
VARIANT = "64-syscall"


def _leg(batches):
    out = {}
    for op in OPS:
        try:
            r = measure(VARIANT, op, sampling=Sampling(batches=batches, batch_ms=2, warmup_ms=5),
                        launch=Launch(timeout=120))
        except SyscostError as e:
            raise RuntimeError(f"syscost-{VARIANT} --op {op} failed: {str(e)[-200:]}")
        out[op] = r["samples_ns"]
    return out


def run(rounds=6, batches=15, progress=None, idle_s=60):
    doc = {"schema": SCHEMA, "variant": VARIANT, "ops": list(OPS), "rounds": [],
           "utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    with tempfile.TemporaryDirectory(prefix="tw-watchcost-", dir=tmp_dir()) as tmp:
        for i in range(rounds):
            legs = ["off", "exec", "window"] if i % 2 == 0 else ["exec", "window", "off"]
            rnd = {}
            for leg in legs:
                if progress:
                    progress(f"watch cost: round {i + 1}/{rounds}, {leg}")
                if leg == "off":
                    rnd[leg] = _leg(batches)
                elif leg == "exec":
                    t = ExecTracer(3600, tmp)
                    t.start()
                    try:
                        rnd[leg] = _leg(batches)
                    finally:
                        t.stop()
                else:
                    # A directory of its own each time: the start waits for the first record
                    # in its output file, which an earlier leg's file would already hold.
                    bt, out, err = start_window(tempfile.mkdtemp(prefix=f"window-{i}-", dir=tmp))
                    try:
                        rnd[leg] = _leg(batches)
                    finally:
                        census._stop(bt, out, err)
            doc["rounds"].append(rnd)
    if idle_s:
        if progress:
            progress(f"watch cost: a real tw watch for {idle_s:g} s, its CPU and memory")
        doc["resources"] = resources(idle_s)
    return doc


def proc_cpu_rss(pid):
    """(CPU seconds of the process and its reaped children, resident peak in bytes) or None."""
    import os
    try:
        f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        status = open(f"/proc/{pid}/status").read()
    except OSError:
        return None
    tck = os.sysconf("SC_CLK_TCK")
    cpu = sum(int(x) for x in f[11:15]) / tck       # utime, stime, cutime, cstime
    hwm = next((int(ln.split()[1]) * 1024 for ln in status.splitlines()
                if ln.startswith("VmHWM:")), None)
    return cpu, hwm


def bpf_map_memlock(pid):
    """Bytes of kernel memory the BPF maps this process holds open take (each map fd's
    fdinfo says `memlock:`), or None when /proc does not say."""
    import os
    total, seen = 0, False
    try:
        fds = os.listdir(f"/proc/{pid}/fdinfo")
    except OSError:
        return None
    for fd in fds:
        try:
            info = open(f"/proc/{pid}/fdinfo/{fd}").read()
        except OSError:
            continue
        if "map_type:" in info:
            for ln in info.splitlines():
                if ln.startswith("memlock:"):
                    total += int(ln.split()[1])
                    seen = True
    return total if seen else None


def _tree(pid):
    """pid and its descendants, from /proc/*/stat."""
    import os
    kids = {}
    for n in os.listdir("/proc"):
        if n.isdigit():
            try:
                ppid = int(open(f"/proc/{n}/stat").read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            kids.setdefault(ppid, []).append(int(n))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo += kids.get(p, [])
    return out


def _memory(pid):
    """{rss, anon, pss, maps} in bytes of one process: resident (shared library pages counted
    whole), anonymous (its own), proportional (shared pages divided among the processes that
    map them: what summing over processes may do) and its BPF maps' kernel memory."""
    try:
        status = open(f"/proc/{pid}/status").read()
        roll = open(f"/proc/{pid}/smaps_rollup").read()
    except OSError:
        return None

    def kb(text, key):
        for ln in text.splitlines():
            if ln.startswith(key + ":"):
                return int(ln.split()[1]) * 1024
        return 0
    return {"rss": kb(status, "VmRSS"), "anon": kb(status, "RssAnon"), "pss": kb(roll, "Pss"),
            "maps": bpf_map_memlock(pid) or 0}


MEMORY_KEYS = ("rss", "anon", "pss", "maps")


# What the watch holds at one instant: its processes' memory plus the kernel memory of the BPF
# maps they hold.  The peaks of the parts may come from different samples (a window's maps are
# gone before its analysis child starts), so the total's peak is taken sample by sample.
TOTAL_KEYS = ("pss_and_maps", "rss_and_maps")


def _sample_until(root, t_end, peak, step=0.25, done=None):
    """Sample the memory of root's process tree until t_end (monotonic), or until the event
    `done` is set (after the sample that follows it): peak[key] is the largest sum over the
    tree any sample saw (for TOTAL_KEYS, of the sample's pss or rss plus its maps),
    peak['by_process'][comm][key] each kind's."""
    for k in TOTAL_KEYS:
        peak.setdefault(k, 0)
    while time.monotonic() < t_end:
        last = done is not None and done.is_set()
        total = dict.fromkeys(MEMORY_KEYS, 0)
        for q in _tree(root):
            m = _memory(q)
            if not m:
                continue
            try:
                comm = open(f"/proc/{q}/comm").read().strip()
            except OSError:
                comm = "?"
            mine = peak["by_process"].setdefault(comm, dict.fromkeys(MEMORY_KEYS, 0))
            for k in MEMORY_KEYS:
                total[k] += m[k]
                mine[k] = max(mine[k], m[k])
        for k in MEMORY_KEYS:
            peak[k] = max(peak[k], total[k])
        peak["pss_and_maps"] = max(peak["pss_and_maps"], total["pss"] + total["maps"])
        peak["rss_and_maps"] = max(peak["rss_and_maps"], total["rss"] + total["maps"])
        if last:
            break
        if done is not None:
            done.wait(min(step, max(0.0, t_end - time.monotonic())))
        else:
            time.sleep(min(step, max(0.0, t_end - time.monotonic())))
    return peak


def _watch(tmp, *args):
    import subprocess
    import sys
    p = subprocess.Popen([sys.executable, str(paths.ROOT / "scripts" / "tw"), "watch",
                          "--state", tmp, *args],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                         start_new_session=True)
    for line in p.stderr:
        if "counting every exec" in line:
            return p
    p.wait()
    raise RuntimeError("tw watch did not start")


WINDOW_S, WINDOW_PERIOD_S = 5, 10
# How long past its own seconds a window may take to end (its loader reads the kernel's BTF
# before it attaches, then the analysis): a bound on a slow machine, not an expected figure.
WINDOW_LATE_S = 120

# The watch's line for a window that ended (service/watch.py's _window_done): its summary, or
# why it saw nothing or failed.  One per window.
_WINDOW_ENDED = ("tw: watch: window ", "tw: watch: the window")


def _count_windows(p, ended, want, seen):
    """Reads the watch's stderr to its end, counting the windows that ended in seen[0]; sets
    the event `ended` at the `want`th."""
    if want <= 0:
        ended.set()
    for line in p.stderr:
        if line.startswith(_WINDOW_ENDED):
            seen[0] += 1
            if seen[0] >= want:
                ended.set()


def resources(seconds, interval=60, window_s=WINDOW_S, every_s=WINDOW_PERIOD_S, windows=2):
    """A real `tw watch --window 0` run for `seconds`: its CPU time (Python and the loader, from
    /proc) over the run after attaching, by process, and its memory sampled four times a
    second (peaks of the tree's sums: resident, anonymous, proportional, BPF maps); then a
    watch with windows (window_s every every_s, the first as it starts) for the peak while a
    window's loader runs beside the exec tracer and the window's analysis after it, sampled
    until `windows` of them have ended (the watch's line for each, after its analysis), at
    most WINDOW_LATE_S past their own span; memory.window.ended says how many did.  The
    watch counts the machine's execs meanwhile: on a machine that is not idle this is an
    upper bound on the idle cost."""
    with tempfile.TemporaryDirectory(prefix="tw-watchcost-", dir=tmp_dir()) as tmp:
        p = _watch(tmp, "--window", "0", "--interval", str(interval))
        try:
            t0 = time.monotonic()
            start = {q: proc_cpu_rss(q) for q in _tree(p.pid)}
            steady = _sample_until(p.pid, t0 + seconds,
                                   dict(dict.fromkeys(MEMORY_KEYS, 0), by_process={}))
            wall = time.monotonic() - t0
            end = {q: proc_cpu_rss(q) for q in _tree(p.pid)}
            names = {}
            for q in end:
                try:
                    names[q] = open(f"/proc/{q}/comm").read().strip()
                except OSError:
                    names[q] = "?"
        finally:
            p.terminate()
            p.wait(timeout=120)
    with tempfile.TemporaryDirectory(prefix="tw-watchcost-", dir=tmp_dir()) as tmp:
        p = _watch(tmp, "--window", str(window_s), "--window-period", str(every_s),
                   "--interval", str(interval))
        ended, seen = threading.Event(), [0]
        reader = threading.Thread(target=_count_windows, args=(p, ended, windows, seen),
                                  daemon=True, name="watchcost-windows")
        reader.start()
        try:
            windowed = _sample_until(p.pid, time.monotonic() + (windows - 1) * every_s + window_s
                                     + WINDOW_LATE_S,
                                     dict(dict.fromkeys(MEMORY_KEYS, 0), by_process={}),
                                     done=ended)
            windows_ended = seen[0]
        finally:
            p.terminate()
            p.wait(timeout=120)
            reader.join(timeout=10)
    cpu = sum(e[0] - (start.get(q) or (0.0, 0))[0] for q, e in end.items() if e)
    per = {}
    for q, e in end.items():
        if e:
            per[f"{q} {names.get(q, '?')}"] = e[0] - (start.get(q) or (0.0, 0))[0]
    return {"seconds": wall, "cpu_s": cpu, "cpu_share_of_one_core": cpu / wall,
            "cpu_s_by_process": per,
            "peak_rss_bytes": {f"{q} {names.get(q, '?')}": e[1] for q, e in end.items() if e},
            "peak_rss_total_bytes": sum(e[1] or 0 for e in end.values() if e),
            "bpf_map_bytes": {k: v["maps"] for k, v in steady["by_process"].items()
                              if v["maps"]},
            "memory": {"execs_only": steady, "with_a_window": windowed,
                       "window": {"seconds": window_s, "every_s": every_s,
                                  "ended": windows_ended}},
            "interval_s": interval}
