"""tw watch's service: the census kept for weeks, as a long-running process (issue 45: the
run loop, the windows, the state's lock and saving live here, below the command, which keeps
its arguments and the call).

The watch (measure.watch) keeps one BPF program attached for its whole life,
watch/exec.bpf.c (every exec, counted in the kernel, read every --interval), and opens a
second set, watch/window.bpf.c, for --window seconds every --window-period (entry paths
per program, write latency): an attached raw_syscalls tracepoint slows every system call on the
machine, so per-call figures are taken in windows, and each window measures what it cost.
The state (analyse.watch.State) is saved to --state DIR/watch.sqlite after every batch
(store.watchdb), exported on --listen in Prometheus's text format (present.watch, served by
present.metricsserver), and read again at start: a restart loses nothing saved.  The per-call
matrix that prices the windows comes from service.matrix.
"""
import os
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path

from ..analyse import watch as analyse
from ..store import watchdb
from ..core import escape, ui
from ..machine import process
from ..measure import watch as measure
from ..measure.trace import tmp_dir
from ..present import watch as present
from . import matrix

BOUND_EVERY_S = 3600.0     # the size cap runs at most this often (a VACUUM on a big file)


def url(host, port):
    """The metrics' URL: an IPv6 address in brackets (http://[::1]:9864/metrics)."""
    return f"http://{'[' + host + ']' if ':' in host else host}:{port}/metrics"



# ---------------------------------------------------------------- the report

RESET_HINT = "tw watch --state-reset moves it aside (kept) and starts a fresh state"
NEWER_HINT = ("run the tw that wrote it (a package downgrade keeps the newer state); "
              "tw watch --state-reset moves it aside (kept) and starts a fresh one")
TRUST_HINT = ("make root its owner and let only root write it (chown root: DIR; chmod go-w "
              "DIR), or give --allow-unsafe-state if that user is trusted")


def refused(e):
    """A watchdb.StateRefused as the one-line DataError (exit 3) tw prints."""
    if isinstance(e, watchdb.StateUntrusted):
        return ui.DataError(f"refused the watch state: {escape.terminal(str(e))}", TRUST_HINT)
    return ui.DataError(f"refused the watch state: {escape.terminal(str(e))}",
                        NEWER_HINT if isinstance(e, watchdb.StateNewer) else RESET_HINT)


def denied(path, state_dir):
    """A reader who may not read the state: said as such (the state may well be there)."""
    try:
        st = os.stat(state_dir)
        import grp
        import pwd
        try:
            owner = f"{pwd.getpwuid(st.st_uid).pw_name}:{grp.getgrgid(st.st_gid).gr_name}"
        except KeyError:
            owner = f"{st.st_uid}:{st.st_gid}"
        how = f" (the folder {escape.path(state_dir)} is mode {st.st_mode & 0o7777:04o}, owner {owner})"
    except OSError:
        how = ""
    return ui.UserError(f"permission denied: this user may not read the watch state "
                        f"{escape.path(path)}{how}",
                        "run tw watch --report as root, or as a user of the state's group",
                        code=ui.EXIT_SYSTEM)


def report(state_dir, since_s, now=None, allow_unsafe=False):
    db = watchdb.path_in(state_dir)
    try:
        if not allow_unsafe:
            watchdb.check_trust(state_dir)
        os.lstat(db)
    except FileNotFoundError:
        raise ui.UserError(f"{escape.path(state_dir)} holds no watch state ({watchdb.FILE})",
                           "start the watch first: tw watch --state DIR")
    except PermissionError:
        raise denied(db, state_dir)
    except watchdb.StateRefused as e:
        raise refused(e)
    now = now or time.time()
    since_t = now - since_s
    try:
        watchdb.check(db)
        con = watchdb.connect(db, read_only=True)
    except watchdb.StateRefused as e:
        raise refused(e)
    except watchdb.StateLocked as e:
        raise ui.UserError(str(e), "try again in a moment", code=ui.EXIT_SYSTEM)
    except PermissionError:
        raise denied(db, state_dir)
    except Exception as e:       # SQLite's own errors: a damaged or foreign file
        raise ui.DataError(f"{escape.path(db)}: not a readable watch state "
                           f"({escape.terminal(str(e).splitlines()[0][:200])})")
    try:
        progs = watchdb.programs_since(con, since_t)
        pths = watchdb.paths_since(con, since_t)
        full = watchdb.full_since(con, since_t)
        meta = watchdb.meta(con)
        nwin, wsec = watchdb.windows_since(con, since_t)
    except (watchdb.Error, ValueError, TypeError) as e:
        raise ui.DataError(f"{escape.path(db)}: not a readable watch state "
                           f"({escape.terminal(str(e).splitlines()[0][:200])})")
    finally:
        con.close()
    doc = analyse.readiness(progs, pths, since_t, now, full)
    doc["host"] = socket.gethostname()
    doc["coverage"] = {"started": float(meta["started"]) if meta.get("started") else None,
                       "saved": float(meta["saved"]) if meta.get("saved") else None,
                       "windows": int(nwin), "window_seconds": float(wsec)}
    return doc


# ---------------------------------------------------------------- the watch

_SUMMARISE = r"""
import json, sys
sys.path.insert(0, sys.argv[3])
from twtools.analyse import watch
d = json.load(open(sys.argv[1]))
from twtools.analyse import walls
w = walls.analyse(d["walls"]) if d.get("walls") else None
json.dump(watch.window_summary(d["raw"], d["percall"], d["source"], w), open(sys.argv[2], "w"))
"""


def summarise_window(raw, percall, source, walls=None):
    """analyse.watch.window_summary in a child process: the census's analysis imports numpy
    (about 20 MB), which a Python process does not give back; run once a window (every 20
    minutes by default) in a child, it leaves with it, and the watch itself stays small.  (It
    imports no scipy: stats.t_quantile is written out, because scipy.stats took 60-70 MB
    more, and the child's peak counts too.)"""
    import json
    import subprocess
    scripts = str(Path(__file__).resolve().parents[2])
    with tempfile.TemporaryDirectory(prefix="tw-window-", dir=tmp_dir()) as tmp:
        src, dst = os.path.join(tmp, "raw.json"), os.path.join(tmp, "window.json")
        with open(src, "w") as f:
            json.dump({"raw": raw, "percall": percall, "source": source, "walls": walls}, f)
        p = subprocess.run([sys.executable, "-c", _SUMMARISE, src, dst, scripts],
                           capture_output=True, text=True, timeout=600)
        if p.returncode != 0:
            raise RuntimeError((p.stderr.strip().splitlines() or ["no message"])[-1][:300])
        with open(dst) as f:
            return json.load(f)


def _walls_for(args):
    """(analysed walls, source) that price the calls of the processes a window finds behind a
    wall: --results DIR's walls.json, the container profile measured here with --measure (a
    few seconds), or results/latest's; (None, why) when there is none, and the window then
    says how many processes and calls, with the price unknown."""
    try:
        return matrix.walls_for(args.results, args.measure, raw=True)
    except (ui.UserError, ui.DataError, OSError) as e:
        return None, f"the walls could not be read or measured: {e}"


def _walls_line(w, source):
    """'; N processes behind seccomp filters, C calls/s, +X us of CPU a second (priced ...)',
    or '' when none was."""
    g = (w or {}).get("seccomp") or {}
    if not g.get("processes"):
        return ""
    calls = (g.get("native_calls_per_s") or 0) + (g.get("compat_calls_per_s") or 0)
    ns = g.get("ns_per_s")
    price = (f", +{ns['median'] / 1e6:.3g} ms of CPU a second [{ns['ci_low'] / 1e6:.3g}, "
             f"{ns['ci_high'] / 1e6:.3g}] priced as the container profile ({source})"
             if ns else f", their price unknown ({g.get('why') or source})")
    return f"; {g['processes']} processes behind seccomp filters, {calls:.0f} calls/s{price}"


class Watch:
    def __init__(self, args):
        self.args = args
        self.db = watchdb.path_in(args.state)
        self.state = analyse.State(max_programs=args.max_programs)
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.hup = threading.Event()
        self.pending = []          # windows summarised, not saved yet
        self.window_thread = None
        self.window_raw = None
        self.window_error = None
        self.percall, self.percall_source = matrix.for_watch(args.results, args.measure)
        self.walls, self.walls_source = _walls_for(args)
        self.last_bound = 0.0
        self.failed_saves = 0      # saves that failed over the watch's life
        self.lost_windows = 0      # windows whose rows a failed save lost
        self.last_failure = None   # the last save's error, or None once a save succeeds
        self.last_saved = None     # when a save last succeeded

    def snapshot(self):
        with self.lock:
            s = self.state
            return {"programs": dict(s.programs), "folded": dict(s.folded), "calls": dict(s.calls),
                    "cost": dict(s.cost),
                    "wlat": {k: {"buckets": dict(v["buckets"]), "sum_ns": v["sum_ns"],
                                 "count": v["count"]} for k, v in s.wlat.items()},
                    "windows": dict(s.windows), "intervals": s.intervals,
                    "max_programs": s.max_programs, "started": s.started,
                    "share": analyse.share(self.args.window, self.args.window_period),
                    "on_disk_only": dict(s.on_disk_only), "seccomp": dict(s.seccomp),
                    "tracer": self._tracer_memory()}

    def _tracer_memory(self):
        """The exec tracer's resident memory and its BPF maps' kernel memory, from /proc."""
        from ..measure import watchcost
        t = getattr(self, "tracer", None)
        if t is None or not t.alive():
            return None
        cpu_rss = watchcost.proc_cpu_rss(t.loader.pid)
        try:
            rss = int(open(f"/proc/{t.loader.pid}/status").read().split("VmRSS:")[1].split()[0]) * 1024
        except (OSError, IndexError, ValueError):
            rss = None
        return {"rss": rss, "cpu_s": cpu_rss[0] if cpu_rss else None,
                "map_bytes": watchcost.bpf_map_memlock(t.loader.pid)}

    def save(self, windows=(), bound=True):
        """Save; a failure (a full disk, the file held too long by a report) is said and the
        watch goes on: what was not saved stays in memory (the days and changed programs are
        cleared only once committed) and goes with the next save, but a window's rows are
        lost then (said).  Returns whether it was saved; every failure is counted for the last
        line and the exit status (_end).  The size cap (bound) runs at most once an hour."""
        with self.lock:
            self.state.intervals += 1
            try:
                watchdb.save(self.db, self.state, windows,
                             wait=getattr(self.args, "save_wait", watchdb.LOCK_WAIT_S))
            except (OSError, RuntimeError, ValueError, watchdb.StateLocked, watchdb.Error) as e:
                self.state.intervals -= 1          # not saved: not counted as saved
                self.failed_saves += 1
                self.lost_windows += len(windows)
                self.last_failure = escape.terminal(str(e).splitlines()[0][:300]) if str(e) else type(e).__name__
                ui.progress(f"watch: saving the state failed ({self.last_failure}); "
                            f"kept in memory, saved again at the next interval"
                            + (f"; {len(windows)} window(s) not kept on disk" if windows else ""))
                return False
            self.last_failure, self.last_saved = None, time.time()
        if bound and time.time() - self.last_bound > BOUND_EVERY_S:
            self.last_bound = time.time()
            try:
                for line in watchdb.bound(self.db, self.args.keep_days,
                                          self.args.max_state_mb * 2 ** 20):
                    ui.progress(f"watch: state: {escape.terminal(line)}")
            except (OSError, ValueError, watchdb.StateLocked, watchdb.Error) as e:
                # A full disk cannot VACUUM: the rows are saved, only the cap waits an hour.
                ui.progress(f"watch: state: keeping the size cap failed "
                            f"({escape.terminal(str(e).splitlines()[0][:300])}); tried again in "
                            f"{BOUND_EVERY_S:g} s")
        return True

    def _window(self):
        try:
            self.window_raw = measure.window(self.args.window, stop=self.stop)
        except Exception as e:         # reported by the loop, which goes on with execs
            self.window_error = f"{type(e).__name__}: {e}"

    def _window_done(self):
        t = self.window_thread
        if t is None or t.is_alive():
            return []
        self.window_thread = None
        if self.window_error:
            ui.progress(f"watch: the window failed: {escape.terminal(self.window_error)}")
            self.window_error = None
            return []
        raw, self.window_raw = self.window_raw, None
        if raw is None or raw.get("trace") is None:
            ui.progress(f"watch: the window saw nothing: {escape.terminal((raw or {}).get('why_not'))}")
            return []
        try:
            w = summarise_window(raw, self.percall, self.percall_source, self.walls)
        except RuntimeError as e:
            ui.progress(f"watch: the window's analysis failed: {escape.terminal(str(e))}")
            return []
        if self.percall is None:
            w["percall_why"] = self.percall_source
        with self.lock:
            rows, lat = self.state.add_window(w)
        ui.progress(f"watch: window {self.state.windows['n']}: {len(w['programs'])} programs, "
                    f"{sum(r['calls'] for r in rows)} calls in {w['seconds']:.3g} s"
                    + _walls_line(w.get("walls"), self.walls_source))
        return [(w, rows, lat)]

    def _lock_state(self, state):
        """One watch per state folder: two would count every exec twice into one file.  The
        lock (flock on DIR/watch.lock) is held for the watch's life and goes with it."""
        import fcntl
        import stat
        path = os.path.join(state, "watch.lock")
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            st = None
        if st is not None and not stat.S_ISREG(st.st_mode):
            raise ui.DataError(f"{escape.path(path)} is not a regular file (a FIFO, a device, "
                               "a folder or a link)", "remove it; the watch makes its own")
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK,
                     0o640)
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise ui.DataError(f"{escape.path(path)} is not a regular file",
                               "remove it; the watch makes its own")
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip()
            os.close(fd)
            raise ui.UserError(f"another tw watch (pid {escape.terminal(holder) or '?'}) keeps "
                               f"its state in {escape.path(state)}",
                               "stop it first, or give another --state", code=ui.EXIT_FAILED)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._state_lock = fd

    def open_state(self):
        """The state folder locked, the state file checked (refused with exit 3 if the watch did
        not write it or it is damaged: never written into), set aside first with
        --state-reset, created whole if there is none, and loaded within the caps."""
        a = self.args
        os.makedirs(a.state, mode=0o750, exist_ok=True)
        if not getattr(a, "allow_unsafe_state", False):
            try:
                watchdb.check_trust(a.state)
            except watchdb.StateRefused as e:
                raise refused(e)
        self._lock_state(a.state)
        if getattr(a, "state_reset", False):
            old = watchdb.set_aside(self.db)
            ui.progress("watch: state: --state-reset: "
                        + (f"{escape.path(self.db)} renamed {escape.path(old)} (kept); a fresh "
                           "state begins" if old else "there was no state; a fresh one begins"))
        moved = watchdb.migrate(a.state, sys.executable)
        if moved:
            ui.progress(f"watch: state: {escape.terminal(moved)}")
        try:
            up = watchdb.upgrade(self.db)
            if up:
                ui.progress(f"watch: state: {escape.terminal(up)}")
            if os.path.lexists(self.db):
                watchdb.check(self.db)
            else:
                watchdb.create(self.db)
            with self.lock:
                watchdb.load(self.db, self.state)
        except watchdb.StateRefused as e:
            raise refused(e)
        except watchdb.StateLocked as e:
            raise ui.UserError(str(e), "try again in a moment", code=ui.EXIT_SYSTEM)
        except (OSError, watchdb.Error) as e:
            raise ui.SystemRefused(f"the watch state {escape.path(self.db)} cannot be made or "
                                   f"read: {escape.terminal(str(e).splitlines()[0][:200])}")
        with self.lock:
            if self.state.started is None:
                self.state.started = time.time()

    def run(self):
        a = self.args
        self.open_state()
        why = measure.why_not()
        if why:
            raise ui.UserError(f"cannot watch here: {why}", code=ui.EXIT_FAILED)
        server = None
        end = time.monotonic() + a.duration if a.duration else None
        with tempfile.TemporaryDirectory(prefix="tw-watch-", dir=tmp_dir()) as tmp:
            tracer = self.tracer = measure.ExecTracer(a.interval, tmp)
            ui.progress("watch: attaching the exec tracer (watch/exec.bpf.c)")
            tracer.start()
            if a.listen:
                # Served once the exec tracer counts: a scrape that answers means every exec
                # from then on is counted.
                from ..present import metricsserver
                try:
                    server = metricsserver.serve(a.listen[0], a.listen[1],
                                                 present.registry(self.snapshot))
                except OSError as e:
                    tracer.stop()
                    raise ui.SystemRefused(f"--listen {a.listen[0]}:{a.listen[1]}: {e.strerror}")
            offset = measure.mono_to_epoch()
            with self.lock:
                self.state.add_snapshot(process.snapshot(generation=True), time.time())
            self.save(bound=False)      # the cap (a VACUUM: a minute on a big file) after ready
            ui.progress(f"watch: counting every exec; state in {escape.path(self.db)}"
                        + (f"; metrics on {url(*a.listen)}" if a.listen else "")
                        + (f"; a {a.window:g} s window every {a.window_period:g} s" if a.window else
                           "; no windows"))
            next_window = time.monotonic()
            try:
                while not self.stop.is_set():
                    if end and time.monotonic() >= end:
                        break
                    if not tracer.alive() and tracer.batches.empty():
                        raise ui.UserError("the exec tracer stopped: " + tracer.why_stopped(),
                                           code=ui.EXIT_FAILED)
                    if a.window and self.window_thread is None and time.monotonic() >= next_window:
                        next_window = time.monotonic() + a.window_period
                        self.window_thread = threading.Thread(target=self._window, daemon=True,
                                                              name="watch-window")
                        self.window_thread.start()
                    try:
                        batch = tracer.batches.get(timeout=0.5)
                    except Exception:
                        batch = None
                    windows = self._window_done()
                    if batch is not None:
                        now = time.time()
                        offset = measure.mono_to_epoch()    # the wall clock may have been set
                        with self.lock:
                            self.state.add_batch(batch, offset, now)
                            if int(now) % 600 < a.interval:
                                # Long-running processes are seen again now and then.
                                self.state.add_snapshot(process.snapshot(generation=True), now)
                    if batch is not None or windows:
                        self.save(windows)
                    if self.hup.is_set():
                        self.hup.clear()
                        if not a.measure:
                            self.percall, self.percall_source = matrix.for_watch(a.results)
                            self.walls, self.walls_source = _walls_for(a)
                        self.save()
                        ui.progress(f"watch: SIGHUP: state saved, per-call matrix re-read "
                                    f"({escape.terminal(self.percall_source)})")
            finally:
                self.stop.set()
                last = tracer.stop()
                if self.window_thread is not None:
                    self.window_thread.join(timeout=60)
                windows = self._window_done()
                with self.lock:
                    for b in last:
                        self.state.add_batch(b, offset, time.time())
                self.save(windows)
                if server is not None:
                    server.close()
        return self._end()

    def _end(self):
        """The last line: what was saved, and the exit status (4 when a save failed)."""
        where = escape.path(self.db)
        if self.last_failure is not None:
            since = (time.strftime("%Y-%m-%d %H:%M:%SZ", time.gmtime(self.last_saved))
                     if self.last_saved else "the start")
            ui.progress(f"watch: stopped; the state could NOT be saved in {where} "
                        f"({self.last_failure}): what was counted since {since} is lost "
                        f"({self.failed_saves} save(s) failed)")
            return ui.EXIT_SYSTEM
        if self.failed_saves:
            ui.progress(f"watch: stopped; state saved in {where}, but {self.failed_saves} "
                        f"save(s) failed on the way (their counts went with a later save"
                        + (f"; {self.lost_windows} window(s) lost" if self.lost_windows else "")
                        + ")")
            return ui.EXIT_SYSTEM
        ui.progress(f"watch: stopped; state saved in {where}")
        return ui.EXIT_OK
