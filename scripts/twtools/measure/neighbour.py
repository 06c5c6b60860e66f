"""A noisy neighbour on purpose: start and stop build/neighbour (syscost/neighbour.c).

On a quiet machine the noisy host of issue 42 cannot be had on demand; build/neighbour makes one
on the CPU syscost does not use, bursts of cache and memory thrashing of exponential length with
a set noisy share (docs/syscost.md, "A noisy neighbour on purpose").  running() keeps one going
for the length of a with-block, for the tests and for a bench that wants to measure beside it;
`tw neighbour` (cli/neighbour.py) runs one in the foreground for a user.

The program stops with its parent (PR_SET_PDEATHSIG), so a Python that dies leaves no neighbour
behind; stop() still sends SIGTERM, waits STOP_WAIT_S for the JSON line it prints at exit, then
kills it."""
import contextlib
import json
import signal
import subprocess

from ..core import paths, ui

PROGRAM = "neighbour"
# How long a neighbour has to print its line and exit after SIGTERM: it looks at the clock
# every few hundred microseconds, so it takes milliseconds.
STOP_WAIT_S = 5.0
# A start that fails (a CPU it may not use, no memory for the buffer) fails at once: this long.
START_CHECK_S = 0.05


def path():
    return paths.BUILD / PROGRAM


KINDS = ("cache", "shootdown", "both")


def argv(share, burst_ms, mb=64, cpu=None, seconds=None, seed=None, kind="cache"):
    """build/neighbour's command line."""
    out = [str(path()), "--share", f"{share:g}", "--burst-ms", f"{burst_ms:g}", "--mb", str(mb),
           "--kind", kind]
    if cpu is not None:
        out += ["--cpu", str(cpu)]
    if seconds is not None:
        out += ["--seconds", f"{seconds:g}"]
    if seed is not None:
        out += ["--seed", str(seed)]
    return out


def start(share, burst_ms, mb=64, cpu=None, seconds=None, seed=None, capture=True,
          kind="cache"):
    """A started neighbour (a Popen; its stdout a pipe when capture, else tw's).  UserError
    when it is not built or exits at once (its own one-line reason)."""
    if not path().exists():
        raise ui.UserError(f"{path()} is not built", "run make (or make build/neighbour)")
    p = subprocess.Popen(argv(share, burst_ms, mb, cpu, seconds, seed, kind),
                         stdout=subprocess.PIPE if capture else None, stderr=subprocess.PIPE,
                         text=True)
    try:
        p.wait(timeout=START_CHECK_S)
    except subprocess.TimeoutExpired:
        return p
    if p.returncode != 0:
        err = (p.stderr.read() or "").strip().splitlines()
        raise ui.UserError(f"{PROGRAM} did not start: "
                           f"{err[0] if err else f'exit status {p.returncode}'}")
    return p


def result(text):
    """The JSON object of the neighbour's last stdout line, or None."""
    lines = (text or "").strip().splitlines()
    try:
        return json.loads(lines[-1]) if lines else None
    except ValueError:
        return None


def stop(p, wait_s=STOP_WAIT_S):
    """SIGTERM, up to wait_s for it to exit, then SIGKILL; its JSON line (None when it was
    killed or printed none, or its stdout was not captured)."""
    if p.poll() is None:
        p.send_signal(signal.SIGTERM)
    try:
        out, _ = p.communicate(timeout=wait_s)
    except subprocess.TimeoutExpired:
        p.kill()
        out, _ = p.communicate()
    return result(out)


class Running:
    """What running() yields: the neighbour's pid, and after the block its JSON line."""

    def __init__(self, process):
        self.process = process
        self.pid = process.pid
        self.result = None


@contextlib.contextmanager
def running(share, burst_ms, mb=64, cpu=None, seed=None, kind="cache"):
    """A neighbour noisy a share `share` of the time in bursts of mean `burst_ms`, over an
    `mb` MiB buffer, on `cpu` (default: the first allowed CPU), for the with-block."""
    p = start(share, burst_ms, mb, cpu, seed=seed, kind=kind)
    r = Running(p)
    try:
        yield r
    finally:
        r.result = stop(p)
