"""One run of build/syscost-<variant>, and one run of `perf bench syscall basic`.

Every stage that times system calls (the per-call matrix, attribution, the observer effect)
runs syscost through measure(); the result is syscost's own JSON object (docs/syscost.md),
raw: nothing here summarises.
"""
import errno
import json
import math
import os
import re
import shutil
import stat
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from ..core import paths, proc
from ..machine import probe


class SyscostError(RuntimeError):
    """syscost failed for a reason other than an unsupported mechanism."""


COPIES_PREFIX = "tw-copies-"
# copy's path -> the program it was copied from: messages name the user's program, not a copy
# in a temporary folder that is gone by the time the message is read.
_ORIGIN = {}


def shown_program(path):
    """The program a message names: the user's, where `path` is one of make_copies' copies."""
    return _ORIGIN.get(str(path), str(path))


def copies_root():
    """Where make_copies makes its folder: the first of $TMPDIR (tempfile's choice), /var/tmp,
    $XDG_RUNTIME_DIR and ~/.cache that exists, this user may write, lets programs run (not
    mounted noexec, as /tmp often is) and lies outside the checkout or the installed package
    (paths.ROOT: a build tree is not tw's to fill, and dpkg owns /usr/lib/timewrite).  OSError
    when none does."""
    root = os.path.realpath(paths.ROOT)
    seen = []
    for c in (tempfile.gettempdir(), "/var/tmp", os.environ.get("XDG_RUNTIME_DIR"),
              os.path.join(os.path.expanduser("~"), ".cache")):
        if not c or c in seen:
            continue
        seen.append(c)
        real = os.path.realpath(c)
        try:
            if (os.path.isdir(real) and os.access(real, os.W_OK | os.X_OK)
                    and not os.statvfs(real).f_flag & os.ST_NOEXEC
                    and os.path.commonpath([real, root]) != root):
                return real
        except (OSError, ValueError):
            continue
    raise OSError(errno.EACCES, "no folder for the programs' copies: each of "
                  f"{', '.join(seen)} is missing, not writable, mounted noexec or inside "
                  f"{root}; set TMPDIR to a folder where programs may run", seen[0])


def _start_of(pid):
    """A process's start time in clock ticks since boot, or None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return int(f.read().rsplit(b")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def sweep_copies(root):
    """Remove the copies' folders in root that runs now dead left behind (SIGKILL, a power
    cut: nothing of theirs ran to remove them): each is named tw-copies-<pid>-<its start
    time>-..., so a folder whose process is gone, or whose pid a later process took, is its
    leftover.  Only this user's folders are touched.  Returns how many were removed."""
    n, me = 0, os.geteuid()
    try:
        entries = list(os.scandir(root))
    except OSError:
        return 0
    for e in entries:
        if not e.name.startswith(COPIES_PREFIX):
            continue
        parts = e.name[len(COPIES_PREFIX):].split("-")
        try:
            if not e.is_dir(follow_symlinks=False) or e.stat(follow_symlinks=False).st_uid != me:
                continue
            pid, start = int(parts[0]), int(parts[1])
        except (OSError, IndexError, ValueError):
            continue
        if _start_of(pid) != start:
            shutil.rmtree(e.path, ignore_errors=True)
            n += 1
    return n


def make_copies(sources, n, where=None):
    """{key: [path of copy 0, ..., n-1]} for {key: source path}, and the directory holding them
    (remove it when done).  Each copy is a new file written from the source's bytes, so the
    kernel places its pages anew; the copies of every key have paths of one length (a
    program's path is on its stack, and moves where the stack starts).  A source that is not a
    regular file is not copied (its key maps to [source] * n), so measure() says what it is.

    The copies go into a private folder (mode 0700, mkdtemp) under `where`, by default
    copies_root(): outside the build (which may be read-only, or the package's own files) in
    a folder where programs may run.  The folder's name holds this process's pid and start
    time, and each call first removes the folders of runs that died (sweep_copies).  A copy
    that fails (a full disk) removes the folder and every copy made before it raising.  The
    copies' messages name their source (shown_program)."""
    base = where or copies_root()
    sweep_copies(base)
    top = Path(tempfile.mkdtemp(prefix=f"{COPIES_PREFIX}{os.getpid()}-{_start_of(os.getpid())}-",
                                dir=base))
    out = {}
    try:
        for i, (key, src) in enumerate(sources.items()):
            src = Path(src)
            try:
                st = os.stat(src)
                regular = stat.S_ISREG(st.st_mode)
            except OSError:
                regular = False
            if not regular:
                out[key] = [src] * n
                continue
            paths_ = []
            for g in range(n):
                d = top / f"{i:02d}-{g:02d}"
                d.mkdir(exist_ok=True)
                dst = d / src.name
                try:
                    shutil.copyfile(src, dst)
                except OSError as e:
                    raise OSError(e.errno, f"{e.strerror} (copying {src} into {top}: its "
                                  f"copies go to a temporary folder; set TMPDIR to one with "
                                  f"room)", str(top)) from None
                # its source's permissions (a program that is not executable stays so, and
                # measure() says so), never set-user-ID
                os.chmod(dst, stat.S_IMODE(st.st_mode) & 0o755)
                _ORIGIN[str(dst)] = str(src)
                paths_.append(dst)
            out[key] = paths_
    except BaseException:
        shutil.rmtree(top, ignore_errors=True)
        raise
    return out, top


# ---- one run ------------------------------------------------------------------

@dataclass(frozen=True)
class Sampling:
    """How one syscost process samples its cell: syscost's options but the cell's own
    (docs/syscost.md, "Method").  A field left None is syscost's own default."""
    batches: int = 5                    # samples to take, each a batch of `calls` calls
    calls: int | None = None            # calls per batch; None: sized to batch_ms
    batch_ms: float | None = None       # a batch's length when syscost sizes it
    warmup_ms: float | None = None      # the warm-up before the first batch
    cpu: int | None = None              # the CPU to pin to; None: the last allowed one
    tsc_hz: float | None = None         # a TSC rate measured before: no 50 ms calibration
    clock: str | None = None            # auto, tsc or monotonic
    realtime: bool = False              # ask for SCHED_FIFO; the result's 'sched' says


@dataclass(frozen=True)
class Launch:
    """How one syscost process is started, beside its options.  wrapper is prefixed to the
    command (['strace', '-f', '-o', '/dev/null']); command_wrapper, for tools that take the
    command as one word (bpftrace -c), maps syscost's argv to the argv to run."""
    binary: str | Path | None = None    # another build of syscost-<variant>, or a copy
    extra_args: tuple = ()              # more syscost options: ('--speculation', 'ssbd')
    extra_env: dict | None = None       # added to the environment (tw bench's stack pad)
    wrapper: list | None = None         # a command the process runs under
    command_wrapper: object = None      # argv -> argv, for a tool that takes one word
    file_dir: str | Path | None = None  # where the writes to a file go; None: the cwd
    timeout: float = 300                # seconds before the process group is killed


SAMPLING, LAUNCH = Sampling(), Launch()


def measure(variant, op, size=None, shape="ret", sampling=SAMPLING, launch=LAUNCH):
    """Run build/syscost-<variant> --op <op> once and return its result.

    variant   '64-syscall', '32-int80', ... (variants/registry)
    op        null | getppid | write-devnull | write-file | write-sync | ...
    size      bytes per write (write ops only; syscost's default when None)
    shape     ret (the stub called, returning with ret: the contract), jmp (the same stub
              leaving by an indirect jump) or inline (the entry instruction in the timed
              loop itself); the registry lists the shapes each mechanism has
    sampling  how it samples (Sampling: batches, their length, CPU, clock, SCHED_FIFO)
    launch    how it is started (Launch: another binary, more options or environment, a
              wrapper, the write ops' directory, the timeout)

    Returns syscost's JSON object (variant, op, size, clock, tsc_hz, cpu,
    calls_per_batch, batches, loop_ns_per_call, samples_ns, raw_ns, ...) with
    supported=True, reason=None, cmd, stderr and wall_s added; or
    {variant, op, size, supported: False, reason} when the mechanism does not
    work here (exit 77).  Raises OSError (ENOSPC, EDQUOT, EROFS, EIO, naming file_dir)
    when syscost says the system refused its writes: that is no measurement of the cell,
    and the stage must fail saying so.  Raises SyscostError on any other failure.

    syscost runs through core.proc.run, in its own process group, killed whole on a
    timeout or an interrupt."""
    binary, file_dir, timeout = launch.binary, launch.file_dir, launch.timeout
    path = Path(binary) if binary else probe.binary("syscost", variant)
    name = shown_program(path)          # the user's program, where path is a copy of it
    if binary:
        _check_program(path)
    if not path.exists():
        return {"variant": variant, "op": op, "size": size, "supported": False,
                "reason": f"{Path(name).name} is not built (run make)", "shape": shape}
    cmd = [str(path), "--op", op] + _options(op, size, shape, sampling) + [
        str(a) for a in launch.extra_args]
    cmd = (launch.command_wrapper(cmd) if launch.command_wrapper
           else list(launch.wrapper or []) + cmd)
    env = dict(os.environ, **(launch.extra_env or {}))
    t0 = time.monotonic()
    try:
        p = proc.run(cmd, timeout=timeout, env=env, cwd=str(file_dir) if file_dir else None,
                     limit=MAX_OUTPUT)
    except proc.OutputTooLarge:
        raise SyscostError(f"{name}: printed more than {MAX_OUTPUT >> 20} MiB, more than any "
                           "syscost run; stopped, and its output is unusable") from None
    except OSError as e:
        return {"variant": variant, "op": op, "size": size, "supported": False,
                "reason": f"cannot execute {name}: {e.strerror}"}
    except subprocess.TimeoutExpired:
        raise SyscostError(f"{_cmd_text(cmd)}: no result within {timeout} s")
    wall = time.monotonic() - t0
    if p.returncode == probe.EXIT_UNSUPPORTED:
        why = p.stderr.strip().splitlines()
        why = why[-1].split("unsupported: ", 1)[-1] if why else "exit status 77"
        return {"variant": variant, "op": op, "size": size, "supported": False, "reason": why}
    if p.returncode != 0:
        msg = p.stderr.strip().splitlines()
        e = proc.system_errno(p.stderr)
        if e is not None:
            said = (msg[-1] if msg else "no message").removeprefix(f"{path.name}: ")
            raise OSError(e, f"{os.strerror(e)} ({Path(name).name} --op {op}: {said})",
                          str(file_dir or os.getcwd()))
        raise SyscostError(f"{_cmd_text(cmd)}: {proc.exit_text(p.returncode)}: "
                           f"{msg[-1] if msg else 'no message'}")
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
    if not lines:
        raise SyscostError(f"{_cmd_text(cmd)}: no JSON on stdout")
    try:
        out = json.loads(lines[-1], parse_constant=_no_constant)
    except (json.JSONDecodeError, ValueError, RecursionError) as e:
        raise SyscostError(f"{name}: its output is unusable: not strict JSON ({e})") from None
    why = _unusable(out)
    if why:
        raise SyscostError(f"{name}: its output is unusable: {why}")
    out.setdefault("shape", shape)
    out.update(supported=True, reason=None, cmd=cmd, stderr=p.stderr, wall_s=wall)
    return out


def _options(op, size, shape, s):
    """syscost's options for a cell's size and shape and a Sampling s, in the order syscost's
    usage gives them."""
    out = ["--batches", str(s.batches)]
    if size is not None and op.startswith("write"):
        out += ["--size", str(size)]
    if s.calls is not None:
        out += ["--calls", str(s.calls)]
    if s.cpu is not None:
        out += ["--cpu", str(s.cpu)]
    if s.tsc_hz:
        out += ["--tsc-hz", f"{s.tsc_hz:.0f}"]
    if s.clock:
        out += ["--clock", s.clock]
    if s.batch_ms is not None:
        out += ["--batch-ms", f"{s.batch_ms:g}"]
    if s.warmup_ms is not None:
        out += ["--warmup-ms", f"{s.warmup_ms:g}"]
    if s.realtime:
        out += ["--realtime"]
    if shape != "ret":
        out += ["--shape", shape]
    return out


def _cmd_text(cmd):
    """A command as a message shows it: a copy of a program named by its source."""
    return " ".join(shown_program(c) for c in cmd)


# A syscost run prints a few hundred KB at most (its raw batches); a program that prints far
# more is not syscost, and is not read whole (2 GB took 1.3 GB of memory, then MemoryError).
MAX_OUTPUT = 64 << 20
# No call takes ten seconds: a figure beyond is not a measurement (analyse.fleet.MAX_NS).
MAX_NS = 1e10


def _no_constant(name):
    raise ValueError(f"{name} is not a number syscost prints")


def _finite(v, low=-MAX_NS, high=MAX_NS):
    return (isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
            and low < v < high)


def _unusable(out):
    """Why syscost's JSON (another build's, tw ab --build-a/-b) cannot be used, or None:
    every field tw reads is checked for type and a plausible size."""
    if not isinstance(out, dict):
        return "not a JSON object"
    s = out.get("samples_ns")
    if not isinstance(s, list) or not s:
        return "samples_ns is not a list of figures"
    for i, v in enumerate(s):
        if not _finite(v):
            return f"samples_ns[{i}] is {str(v)[:40]}, not a figure in ns"
    for key in ("raw_ns", "loop_ns_per_call", "offcpu_ns_per_call"):
        vals = out.get(key)
        if vals is not None and not (isinstance(vals, list)
                                     and all(v is None or _finite(v) for v in vals)):
            return f"{key} is not a list of figures"
    d = out.get("disturbed")
    if d is not None and not (isinstance(d, list) and len(d) == len(s)
                              and all(isinstance(x, bool) for x in d)):
        return "disturbed is not one true or false per batch"
    if out.get("tsc_hz") is not None and not _finite(out["tsc_hz"], 0, 1e11):
        return f"tsc_hz is {str(out['tsc_hz'])[:40]}, not a clock rate"
    cpu = out.get("cpu")
    if cpu is not None and not (isinstance(cpu, int) and not isinstance(cpu, bool)
                                and 0 <= cpu < 1 << 16):
        return f"cpu is {str(cpu)[:40]}, not a CPU number"
    for key in ("clock", "variant", "op", "shape"):
        if out.get(key) is not None and not (isinstance(out[key], str) and len(out[key]) < 100):
            return f"{key} is not a name"
    if out.get("speculation") is not None and not isinstance(out["speculation"], dict):
        return "speculation is not an object"
    return None


def _check_program(path):
    """SyscostError, saying what path is, when another build's syscost is not a program tw can
    run (a directory read 'Permission denied')."""
    import stat
    name = shown_program(path)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return
    except OSError as e:
        raise SyscostError(f"{name}: {e.strerror}") from None
    if stat.S_ISDIR(st.st_mode):
        raise SyscostError(f"{name}: is a directory, not a syscost program")
    if not stat.S_ISREG(st.st_mode):
        raise SyscostError(f"{name}: is not a regular file, not a syscost program")
    if not os.access(path, os.X_OK):
        raise SyscostError(f"{name}: is not executable (mode {stat.S_IMODE(st.st_mode):o})")


# ---- perf bench ------------------------------------------------------------------

_PERF_USECS = re.compile(r"([0-9.]+)\s+usecs/op")
_PERF_OPS = re.compile(r"([0-9]+)\s+ops/sec")


def _pin_and_fifo(cpu, realtime):
    """A preexec_fn giving perf bench the conditions syscost runs under."""
    def pre():
        if cpu is not None:
            os.sched_setaffinity(0, {cpu})
        if realtime:
            try:
                os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(50))
            except OSError:
                pass
    return pre


def calibrate(variant, op, cpu=None, clock=None, shape="ret", launch=LAUNCH):
    """(tsc_hz, clock, cpu) from one short run of syscost, for every run after it to share:
    each run would otherwise spend 50 ms measuring the TSC rate, and pinning them all to
    the CPU this run chose puts every run on one CPU.  (None, None, cpu) when the cell
    cannot run here."""
    cal = measure(variant, op, shape=shape, launch=launch,
                  sampling=Sampling(batches=1, cpu=cpu, warmup_ms=0, batch_ms=0.1, clock=clock))
    if not cal.get("supported"):
        return None, None, cpu
    return cal.get("tsc_hz"), cal.get("clock"), cal.get("cpu")


def perf_bench_once(loops, cpu=None, realtime=False):
    """ns per getppid from one `perf bench syscall basic`, or (None, why)."""
    perf = proc.which("perf")
    if perf is None:
        return None, "perf is not installed"
    pre = _pin_and_fifo(cpu, realtime)
    try:
        p = proc.run([perf, "bench", "syscall", "basic", "-l", str(loops)], timeout=120,
                     preexec_fn=pre)
    except (OSError, subprocess.TimeoutExpired) as e:
        return None, f"perf bench failed to run: {e}"
    text = p.stdout + p.stderr
    if p.returncode != 0:
        last = text.strip().splitlines()
        return None, f"perf bench exit {p.returncode}: {last[-1] if last else 'no output'}"
    m = _PERF_USECS.search(text)
    if m:
        return float(m.group(1)) * 1000.0, None
    m = _PERF_OPS.search(text)
    if m and int(m.group(1)) > 0:
        return 1e9 / int(m.group(1)), None
    return None, "perf bench printed neither usecs/op nor ops/sec"
