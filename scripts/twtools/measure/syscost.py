"""One run of build/syscost-<variant>, and one run of `perf bench syscall basic`.

Every stage that times system calls (the per-call matrix, attribution, the observer effect)
runs syscost through measure(); the result is syscost's own JSON object (docs/syscost.md),
raw: nothing here summarises.
"""
import json
import os
import re
import subprocess
import time
from pathlib import Path

from ..core import proc
from ..machine import probe


class SyscostError(RuntimeError):
    """syscost failed for a reason other than an unsupported mechanism."""


# ---- one run ------------------------------------------------------------------

def measure(variant, op, size=None, batches=5, extra_env=None, wrapper=None, calls=None,
            cpu=None, tsc_hz=None, batch_ms=None, warmup_ms=None, file_dir=None,
            clock=None, realtime=False, timeout=300, shape="ret", command_wrapper=None,
            binary=None, extra_args=()):
    """Run build/syscost-<variant> --op <op> once and return its result.

    variant   '64-syscall', '32-int80', ... (variants/registry)
    op        null | getppid | write-devnull | write-file | write-sync
    size      bytes per write (write ops only; syscost's default when None)
    batches   samples to take (each a batch of `calls` calls)
    extra_env dict added to the environment
    wrapper   list prefixed to the command, e.g. ['strace', '-f', '-o', '/dev/null'];
              the command then runs as wrapper + [syscost, ...]
    command_wrapper  a function from the syscost argv to the argv to run, for tools that
              take the command as one word (bpftrace -c)
    binary    another build of syscost-<variant> to run (tw ab --build-b)
    extra_args  more syscost options, e.g. ['--speculation', 'ssbd'] (tw ab)
    calls     calls per batch (None: syscost sizes batches to batch_ms)
    cpu       CPU to pin to (None: syscost's default, the last allowed CPU)
    tsc_hz    a TSC rate measured earlier, so this run skips its 50 ms calibration
    realtime  ask syscost for SCHED_FIFO (--realtime); the result's 'sched' says if it got it
    file_dir  where write-file/write-sync create their temporary file (cwd by default)
    shape     ret (the stub called, returning with ret: the contract), jmp (the same stub
              leaving by an indirect jump) or inline (the entry instruction in the timed
              loop itself); the registry lists the shapes each mechanism has

    Returns syscost's JSON object (variant, op, size, clock, tsc_hz, cpu,
    calls_per_batch, batches, loop_ns_per_call, samples_ns, raw_ns, ...) with
    supported=True, reason=None, cmd, stderr and wall_s added; or
    {variant, op, size, supported: False, reason} when the mechanism does not
    work here (exit 77).  Raises OSError (ENOSPC, EDQUOT, EROFS, EIO, naming file_dir)
    when syscost says the system refused its writes: that is no measurement of the cell,
    and the stage must fail saying so.  Raises SyscostError on any other failure.

    syscost runs through core.proc.run, in its own process group, killed whole on a
    timeout or an interrupt."""
    path = Path(binary) if binary else probe.binary("syscost", variant)
    if not path.exists():
        return {"variant": variant, "op": op, "size": size, "supported": False,
                "reason": f"{path.name} is not built (run make)", "shape": shape}
    cmd = [str(path), "--op", op, "--batches", str(batches)]
    if size is not None and op.startswith("write"):
        cmd += ["--size", str(size)]
    if calls is not None:
        cmd += ["--calls", str(calls)]
    if cpu is not None:
        cmd += ["--cpu", str(cpu)]
    if tsc_hz:
        cmd += ["--tsc-hz", f"{tsc_hz:.0f}"]
    if clock:
        cmd += ["--clock", clock]
    if batch_ms is not None:
        cmd += ["--batch-ms", f"{batch_ms:g}"]
    if warmup_ms is not None:
        cmd += ["--warmup-ms", f"{warmup_ms:g}"]
    if realtime:
        cmd += ["--realtime"]
    if shape != "ret":
        cmd += ["--shape", shape]
    cmd += [str(a) for a in extra_args]
    cmd = command_wrapper(cmd) if command_wrapper else list(wrapper or []) + cmd
    env = dict(os.environ, **(extra_env or {}))
    t0 = time.monotonic()
    try:
        p = proc.run(cmd, timeout=timeout, env=env, cwd=str(file_dir) if file_dir else None)
    except OSError as e:
        return {"variant": variant, "op": op, "size": size, "supported": False,
                "reason": f"cannot execute {path.name}: {e.strerror}"}
    except subprocess.TimeoutExpired:
        raise SyscostError(f"{' '.join(cmd)}: no result within {timeout} s")
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
            raise OSError(e, f"{os.strerror(e)} ({path.name} --op {op}: {said})",
                          str(file_dir or os.getcwd()))
        raise SyscostError(f"{' '.join(cmd)}: exit {p.returncode}: "
                           f"{msg[-1] if msg else 'no message'}")
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
    if not lines:
        raise SyscostError(f"{' '.join(cmd)}: no JSON on stdout")
    try:
        out = json.loads(lines[-1])
    except json.JSONDecodeError as e:
        raise SyscostError(f"{' '.join(cmd)}: unreadable JSON on stdout: {e}")
    out.setdefault("shape", shape)
    out.update(supported=True, reason=None, cmd=cmd, stderr=p.stderr, wall_s=wall)
    return out


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


def calibrate(variant, op, cpu=None, clock=None, **kw):
    """(tsc_hz, clock, cpu) from one short run of syscost, for every run after it to share:
    each run would otherwise spend 50 ms measuring the TSC rate, and pinning them all to
    the CPU this run chose puts every run on one CPU.  kw go to measure (binary, shape,
    extra_args).  (None, None, cpu) when the cell cannot run here."""
    cal = measure(variant, op, batches=1, cpu=cpu, warmup_ms=0, batch_ms=0.1, clock=clock, **kw)
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
