"""The tracer wall: walls/tracer.bpf.c on raw_syscalls:sys_enter and sys_exit, as an
observability agent attaches it (build/tracerbpf loads it and attaches or detaches it on
command).

Attaching a raw_syscalls program slows every process on the machine, so the loader attaches
it for B's runs only: once a round, before all of B's runs of the round, and detaches it
before A's (each attach and detach waits for the kernel, longer than a run); which side goes
first turns round by round (measure.ab's rounds, `grouped`).  In the wall's own A/A (tw ab
--selfcheck --wall tracer:raw_syscalls) both sides run attached: it is attached before the
round's first run, whichever side that is, and detached at the round's end only, so that
neither side's runs follow a detach the other's do not.
"""
import json
import subprocess

from ...core import paths, proc
from .base import Run, Wall
from .spec import WallError

TRACER_OBJ = paths.BUILD / "walls" / "tracer.bpf.o"
TRACER_LOADER = paths.BUILD / "tracerbpf"


class TracerWall(Wall):
    kind = "tracer"
    # Each attach and detach waits for the kernel (tracepoint registration, an RCU grace
    # period): about 0.1 s here, more than a run.  So the tracer goes up once a round, for all
    # of B's runs of it, and comes down before A's (measure.ab's rounds, grouped).
    grouped = True

    def __init__(self, spec):
        super().__init__(spec)
        self.p = self.pid = None
        self.attaches = 0
        self.attached = False
        if not proc.is_root():
            raise WallError(f"--wall {self.spec}: attaching a BPF program needs root")
        for f in (TRACER_LOADER, TRACER_OBJ):
            if not f.exists():
                raise WallError(f"--wall {self.spec}: {paths.shown(f)} is not built (run make)")

    def up(self, out_dir, cells):
        # Its own session: the terminal's Ctrl-C is tw's to handle; its stdin is tw's pipe,
        # so when tw dies, however it dies, the loader reads EOF, detaches and exits.
        self.p = subprocess.Popen([str(TRACER_LOADER), str(TRACER_OBJ)], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                  start_new_session=True, bufsize=1)
        self.pid = self.p.pid
        self._say("count", "count ")
        return self.describe()

    def _say(self, cmd, want):
        try:
            self.p.stdin.write(cmd + "\n")
            self.p.stdin.flush()
            line = self.p.stdout.readline()
        except (BrokenPipeError, OSError):
            line = ""
        if not line.startswith(want):
            err = self.p.stderr.read() if self.p.poll() is not None else ""
            raise WallError(f"--wall {self.spec}: build/tracerbpf did not {cmd}: "
                            f"{(err.strip().splitlines() or [line.strip() or 'no answer'])[-1]}")
        return line

    def describe(self):
        return {"kind": "tracer", "spec": self.spec, "program": "walls/tracer.bpf.c",
                "attach": "raw_syscalls:sys_enter and sys_exit, for B's runs only: attached "
                          "once a round for all of them, detached before A's"}

    def before(self, variant, op, abi):
        if not self.attached:
            self._say("attach", "attached")
            self.attaches += 1
            self.attached = True
        return Run([])

    def release(self):
        """Detach, if attached: before A's runs, at a round's end, at the end."""
        if self.attached:
            self._say("detach", "detached")
            self.attached = False

    def own_pids(self):
        return {self.pid} if self.pid is not None else set()

    def down(self):
        """Close the loader's input: it detaches (if it had not) and prints what it counted."""
        if self.p is None:
            return {}
        if self.attached and self.p.poll() is None:
            try:
                self.release()
            except WallError:
                pass            # closing its input below detaches it too
        try:
            out, err = self.p.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill_group(self.p)
            return {"calls_seen": None}
        last = [ln for ln in (out or "").splitlines() if ln.startswith("{")]
        seen = json.loads(last[-1]) if last else {}
        self.p = None
        return {"calls_seen": seen.get("calls"), "attaches": self.attaches}
