"""Running programs, and stopping them: argument lists only, each child in a process group of
its own that is killed whole.

Every program the tools start goes through run().  It never uses a shell, and it starts each
child in a new session (so a new process group, led by the child): bpftrace's driver shell,
the programs that shell starts, strace's tracee, all stay in that group.  When tw is
interrupted (SIGINT, SIGTERM, SIGHUP; see install_signal_handlers) or a child outlives its
timeout, the whole group gets SIGTERM, then SIGKILL after GRACE_S: a tracer cannot leave its
workload behind as an orphan.  The group is signalled while its leader is still an unreaped
zombie at the latest, so its number cannot have been reused by an unrelated process.

A new session also keeps Ctrl-C away from the children: the terminal signals tw's own process
group only, and tw stops its children itself, in order, after which `finally` blocks remove
the temporary files those children were writing.
"""
import contextlib
import errno
import os
import shutil
import signal
import subprocess
import time

from . import ui

GRACE_S = 2.0                  # SIGTERM -> SIGKILL: time for bpftrace to detach its probes
SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

_live = {}                     # pid -> Popen: children whose group may still hold processes
_defer = 0                     # > 0 while a signal must not interrupt (spawning, renaming)
_pending = None                # a signal that arrived while deferred
_caught = None                 # the first signal acted on; later ones are ignored


def is_root():
    return os.geteuid() == 0


def which(cmd):
    return shutil.which(cmd)


# ---- signals ----------------------------------------------------------------------------

def _handler(signum, frame):
    global _pending, _caught
    if _caught is not None:
        return          # already stopping: a second Ctrl-C must not cut the clean-up short
    if _defer:
        _pending = _pending or signum
        return
    _caught = signum
    raise ui.Interrupted(signum)


def install_signal_handlers():
    """SIGINT, SIGTERM and SIGHUP raise ui.Interrupted in the main thread from now on, so
    that every `finally` runs and every child group is killed.  Returns the previous
    handlers, for restore_signal_handlers()."""
    global _pending, _caught
    _pending = _caught = None
    return {s: signal.signal(s, _handler) for s in SIGNALS}


def restore_signal_handlers(previous):
    for s, h in (previous or {}).items():
        signal.signal(s, h)


@contextlib.contextmanager
def deferred_signals():
    """A section no signal may cut in two (a child started but not yet recorded, a file
    renamed but not its directory entry synced): a signal arriving inside is raised at its
    end instead."""
    global _defer, _pending, _caught
    _defer += 1
    try:
        yield
    finally:
        _defer -= 1
        if _defer == 0 and _pending is not None and _caught is None:
            signum, _pending = _pending, None
            _caught = signum
            raise ui.Interrupted(signum)


def interrupted():
    """The signal tw is stopping for, or None."""
    return _caught


# ---- children ---------------------------------------------------------------------------

def _signal_group(pgid, sig):
    try:
        os.killpg(pgid, sig)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return False     # a member changed its credentials (setuid): nothing tw may do


def _group_running(pgid):
    """Whether a process of the group has not yet exited.  A zombie has: its files are closed
    and it writes nothing more, and it stays in the group until its parent reaps it, which for
    a member the leader's exit left to PID 1 may be never where PID 1 is not an init that
    reaps (a container's own program, a sandbox's agent: there every stop waited out its
    whole grace for a background program already dead).  Where /proc cannot say, the group
    still answering a signal is taken as running."""
    if not _signal_group(pgid, 0):
        return False
    try:
        pids = [n for n in os.listdir("/proc") if n.isdigit()]
    except OSError:
        return True
    for n in pids:
        try:
            with open(f"/proc/{n}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue                # gone meanwhile
        if int(fields[2]) == pgid and fields[0] not in (b"Z", b"X"):
            return True
    return False


def _leader_exited(p):
    """Whether the group's leader has exited, without reaping it (so its pid, which is the
    group's id, stays reserved until kill_group is done with the group)."""
    if p.returncode is not None:
        return True
    try:
        return os.waitid(os.P_PID, p.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True


def kill_group(p, grace=GRACE_S):
    """Stop a child started by run() and everything in its process group: SIGTERM (bpftrace
    detaches its probes and exits), then SIGKILL to whatever is left after `grace` seconds,
    then reap the leader and wait briefly for the rest to be gone."""
    if p.returncode is not None:
        return          # reaped already: its group id may belong to someone else by now
    pgid = p.pid
    _signal_group(pgid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while not _leader_exited(p) and time.monotonic() < deadline:
        time.sleep(0.02)
    # Stragglers (the programs a driver shell started) and a leader that ignored SIGTERM.
    _signal_group(pgid, signal.SIGKILL)
    for f in (p.stdin, p.stdout, p.stderr):
        if f:
            with contextlib.suppress(OSError):
                f.close()
    p.wait()
    # Members outlive the leader by a moment: wait until every one has exited (its zombie
    # left for its parent to reap), so that temporary files are not removed under a process
    # still writing them.
    deadline = time.monotonic() + grace
    while _group_running(pgid) and time.monotonic() < deadline:
        _signal_group(pgid, signal.SIGKILL)
        time.sleep(0.02)


# bpftrace 0.17 can miss a SIGINT: its handler only sets a flag, which its event loop reads
# before it blocks in epoll_wait, so a signal that lands between the two leaves it waiting for
# events that never come (seen twice in about 340 stops, as tw legs stops it in every
# block; it sat in do_epoll_wait with the signal handled and none pending).  A second SIGINT
# ends the wait.  So interrupt(again=True) repeats it every REINTERRUPT_S: for bpftrace, whose
# output goes to a file (-o), where a write is never cut short by a signal.  tw watch's own
# loader is not asked twice.
REINTERRUPT_S = 1.0


def interrupt(p, timeout, again=False):
    """SIGINT to a child started in its own session (bpftrace prints its maps and detaches on
    it), with again every REINTERRUPT_S while it runs, up to `timeout` seconds for it to exit;
    past that, kill_group."""
    end = time.monotonic() + timeout
    sent = False
    while p.poll() is None:
        if again or not sent:
            p.send_signal(signal.SIGINT)
            sent = True
        try:
            p.wait(timeout=max(0.0, min(REINTERRUPT_S, end - time.monotonic())))
        except subprocess.TimeoutExpired:
            if time.monotonic() >= end:
                kill_group(p, grace=0.5)
                return


def kill_all():
    """Kill every child group still alive (the top-level handler's safety net)."""
    for p in list(_live.values()):
        kill_group(p, grace=0.5)
        _live.pop(p.pid, None)


def live_pids():
    """The pids of the children run() is waiting for (the fault tests read them)."""
    return sorted(_live)


class OutputTooLarge(RuntimeError):
    """A child printed more than the bound its caller gave (run(limit=)); its process group
    was killed and nothing more of its output read."""

    def __init__(self, argv, limit):
        super().__init__(f"{argv[0]}: printed more than {limit} bytes; stopped and not read")
        self.argv, self.limit = argv, limit


def _communicate_bounded(p, timeout, limit):
    """(stdout, stderr) bytes of p, read as they come, never more than limit of each:
    OutputTooLarge (the group killed) beyond it, subprocess.TimeoutExpired after timeout."""
    import selectors
    import time
    sel = selectors.DefaultSelector()
    bufs = {}
    for f in (p.stdout, p.stderr):
        if f is not None:
            sel.register(f, selectors.EVENT_READ)
            bufs[f] = bytearray()
    end = time.monotonic() + timeout
    try:
        while sel.get_map():
            left = end - time.monotonic()
            if left <= 0:
                raise subprocess.TimeoutExpired(p.args, timeout)
            for key, _ in sel.select(left):
                chunk = os.read(key.fd, 1 << 16)
                if not chunk:
                    sel.unregister(key.fileobj)
                    continue
                buf = bufs[key.fileobj]
                buf += chunk
                if len(buf) > limit:
                    kill_group(p)
                    raise OutputTooLarge(p.args, limit)
        p.wait(max(0.1, end - time.monotonic()))
    finally:
        sel.close()
        for f in bufs:
            f.close()
    return (bytes(bufs[p.stdout]) if p.stdout in bufs else None,
            bytes(bufs[p.stderr]) if p.stderr in bufs else None)


def run(cmd, timeout=600, check=False, input=None, capture_output=True, text=True, limit=None,
        **kw):
    """subprocess.run, but each child leads a new session and its whole process group is
    killed when it times out or tw is interrupted.  cmd items become str; never a shell.
    Output is captured as text by default.  Returns a CompletedProcess; raises
    subprocess.TimeoutExpired after killing the group, OSError when the program cannot be
    started, and ui.Interrupted (after killing the group) when a signal arrives.  limit: at
    most this many bytes of each of stdout and stderr are read (a program tw did not build
    may print without end); OutputTooLarge, its group killed, beyond (no input then)."""
    argv = [str(c) for c in cmd]
    if capture_output:
        kw.setdefault("stdout", subprocess.PIPE)
        kw.setdefault("stderr", subprocess.PIPE)
    if input is not None:
        kw["stdin"] = subprocess.PIPE
    kw.pop("start_new_session", None)
    p = None
    try:
        with deferred_signals():
            p = subprocess.Popen(argv, text=text and limit is None, start_new_session=True,
                                 **kw)
            _live[p.pid] = p
        try:
            if limit is None:
                out, err = p.communicate(input, timeout=timeout)
            else:
                out, err = _communicate_bounded(p, timeout, limit)
                if text:
                    out, err = (None if b is None else b.decode(errors="replace")
                                for b in (out, err))
        except subprocess.TimeoutExpired:
            kill_group(p)
            raise subprocess.TimeoutExpired(argv, timeout) from None
    except BaseException:
        if p is not None:
            with deferred_signals():
                kill_group(p)
        raise
    finally:
        if p is not None:
            _live.pop(p.pid, None)
    cp = subprocess.CompletedProcess(argv, p.returncode, out, err)
    if check:
        cp.check_returncode()
    return cp


# ---- what a child's message says about the system ----------------------------------------

# errno values a child reports by their strerror text (err(3), perror(3)): the ones that mean
# the system, not the measurement, failed, and that the run must name.
SYSTEM_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EIO)


def system_errno(text):
    """The errno a child's stderr names by its message (ENOSPC: 'No space left on device'),
    for SYSTEM_ERRNOS only; None when it names none of them."""
    for e in SYSTEM_ERRNOS:
        if os.strerror(e) in (text or ""):
            return e
    return None


def exit_text(returncode):
    """How a child ended, in words: 'exit 1', or for one a signal killed 'killed by SIGSYS
    (signal 31)', naming it, never 'exit -31'; a shell's 128 + N for a child it lost to
    signal N is said as such too."""
    if returncode is not None and returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = "an unknown signal"
        return f"killed by {name} (signal {-returncode})"
    if returncode is not None and 128 < returncode < 128 + 65:
        try:
            return (f"exit {returncode} (a shell's 128 + {returncode - 128}: "
                    f"{signal.Signals(returncode - 128).name})")
        except ValueError:
            pass
    return f"exit {returncode}"


def errno_name(e):
    """'ENOSPC' for 28; the number as text when it has no name."""
    return errno.errorcode.get(e, str(e)) if e is not None else "?"


# ---- worker processes ----------------------------------------------------------------------

# Workers beyond a few per CPU only share the same CPUs and each holds its own memory: `--jobs`
# is refused above this many per CPU (4 per CPU keeps I/O-bound scans busy).
JOBS_PER_CPU = 4
PR_SET_PDEATHSIG = 1


def next_round_past(deadline, took, done, minimum):
    """Whether rounds of runs measured against a deadline (a time.monotonic()) should start no
    more: `minimum` rounds are done and the next one, at the mean of those so far (`took`, in
    seconds), would end past it.  False without a deadline or before any round: tw run's
    matrix and sweeps stop this way at their share of the report's time."""
    return deadline is not None and done >= minimum and bool(took) and \
        time.monotonic() + sum(took) / len(took) > deadline


def max_jobs():
    """The largest --jobs accepted on this machine."""
    return JOBS_PER_CPU * (os.cpu_count() or 1)


def _die_with(parent):
    """A pool worker's initializer: SIGKILL when the parent dies, whatever kills it (SIGKILL
    included, which no handler of the parent can pass on), and the terminal's signals left to
    the parent, which stops the workers itself."""
    import ctypes
    for sig in SIGNALS:
        signal.signal(sig, signal.SIG_IGN)
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass
    # The parent may have died between the fork and the prctl: then no signal will come.
    if os.getppid() != parent:
        os._exit(1)


def pool(workers):
    """A ProcessPoolExecutor of at most max_jobs() forked workers that die with this process
    (PR_SET_PDEATHSIG), so that a parent killed by SIGKILL or a timeout leaves none behind."""
    import concurrent.futures as cf
    import multiprocessing
    if not 1 <= workers <= max_jobs():
        raise ValueError(f"{workers} workers: 1 to {max_jobs()} here")
    return cf.ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork"),
                                  initializer=_die_with, initargs=(os.getpid(),))


def stop_pool(p):
    """Kill a pool's workers now (ProcessPoolExecutor can only wait for them before 3.14)."""
    for w in list((getattr(p, "_processes", None) or {}).values()):
        with contextlib.suppress(OSError):
            w.kill()
    # At exit, concurrent.futures wakes each pool's manager thread through a pipe that killing
    # the workers may already have closed: the interpreter then printed a traceback ("Bad file
    # descriptor") after tw scan's one-line SIGINT message.  A wake-up that finds the pipe
    # closed has nothing left to wake.
    wake = getattr(p, "_executor_manager_thread_wakeup", None)
    if wake is not None and callable(getattr(wake, "wakeup", None)):
        plain = wake.wakeup

        def wakeup():
            with contextlib.suppress(OSError, ValueError):
                plain()
        wake.wakeup = wakeup
    p.shutdown(wait=False, cancel_futures=True)
