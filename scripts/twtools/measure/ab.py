"""A against B in one session, alternating: what `tw ab` measures.

Settings that can alternate without a reboot: a per-process speculation mitigation
(syscost --speculation), two builds of the benchmark (another build directory's
syscost-<variant>), or a wall between B and the kernel (measure.walls: a seccomp filter, audit
rules, a tracer) that B's runs go behind and A's do not.  Every round measures every chosen
cell once under A and once under B, in a shuffled order, so the host's drift lands on both
alike; each round then gives one B/A value per cell (twtools.analyse.compare.paired_rounds
decides).  ab.json keeps every batch of
every round, raw, and how each side was run.

Each side runs from COPIES fresh copies of its binary, round r from copy r % COPIES: the same
bytes cost about 1% more or less depending on which file they run from (where its pages
landed in memory, docs/syscost.md, "The binary's file"), for as long as the file lives, so a
run from one file per side measures that file's placement along with the build.  Drawing the
placement anew for every copy, spread over the whole run, puts it in the interval
(analyse.stats.grouped_ratio replicates over the copies).  Two sides of one build (a
--speculation comparison) run the same copy in a round, so its placement cancels in the pair.
"""
import platform
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path

from ..core import files, ui
from ..machine import hostwalls, probe, registry, seccomp
from . import rounds, workflags
from .syscost import Launch, Sampling, SyscostError, calibrate, measure
from .trace import tmp_dir

SCHEMA = "timewrite-ab/3"
PROGRESS_S = 1.0
# Fresh copies of each side's binary, each a new file: the groups the interval replicates
# over.  Eight keep Student's t at 2.36 (7 df) while a default run's 200 rounds still give 25
# rounds a copy, 5 in each side's fastest 20%.
COPIES = 8
# Rounds per mode: the interval narrows as 1/sqrt(rounds), so --long's four times the rounds
# halve it.  A round is two syscost runs of about 12 ms each (the TSC rate is measured once),
# so the default's 200 rounds take about 5 s per cell: on a Zen 5 guest its 95% half-width
# on B/A was 0.3-1.0% over 19 A/A runs (median 0.44%), enough to find a 1.5% change.
ROUNDS = {"quick": 24, "default": 200, "long": 800}


def side(label, speculation=None, build=None):
    """How one side runs: its label, syscost options and binary directory."""
    return {"label": label, "speculation": speculation, "build": str(build) if build else None}


@dataclass(frozen=True)
class Settings:
    """What one tw ab run measures and how, built once by its command (cli/ab.py, and the
    walls stage, measure/walls/stage.py) and passed whole to run_ab().  Every (variant, op,
    shape) of variants x ops x shapes that the registry gives the variant is a cell; rounds
    left None are the mode's (ROUNDS)."""
    # What to measure
    a: dict                             # side A (side(): a label, a --speculation, a build)
    b: dict                             # side B
    variants: list                      # the variants ...
    ops: list = ("null",)               # ... their operations ...
    shapes: list = ("ret",)             # ... and loop shapes
    # How many rounds, and how each process runs
    mode: str = "default"               # quick, default or long: the rounds when not given
    rounds: int | None = None           # each measures every cell once under A, once under B
    copies: int = COPIES                # fresh copies of each side's binary: round r, r % k
    batches: int = 6                    # each process's batches ...
    batch_ms: float = 0.5               # ... their length ...
    warmup_ms: float = 5                # ... and the warm-up before them
    cpu: int | None = None              # the CPU to pin to; None: the calibrating run's
    realtime: bool = True               # ask for SCHED_FIFO
    # The wall: a measure.walls wall that B's runs go behind (up before the rounds, down
    # after them, the host as it was found either way); wall_both puts A's runs behind it
    # too (an A/A behind the wall, tw ab --selfcheck --wall).
    wall: object = None                 # the wall, or None
    wall_both: bool = False             # A behind it as well

    def __post_init__(self):
        if self.rounds is None:
            object.__setattr__(self, "rounds", ROUNDS[self.mode])

    def cells(self):
        """[(variant, op, shape)]: each variant's operations and shapes among those asked."""
        return [(v, op, shape) for v in self.variants for op in self.ops for shape in self.shapes
                if op in registry.get(v).ops
                and shape in registry.shapes_for(registry.get(v), op)]

    def sampling(self, tsc_hz, cpu):
        """How each of the run's processes samples."""
        return Sampling(batches=self.batches, batch_ms=self.batch_ms, warmup_ms=self.warmup_ms,
                        cpu=cpu, tsc_hz=tsc_hz, realtime=self.realtime)


def _binary(s, variant):
    """Side s's syscost-<variant>: its build's, or None for this tree's."""
    return Path(s["build"]) / f"syscost-{variant}" if s["build"] else None


def _run(s, cell, sampling, binary, wall=None, bare=None):
    """One syscost run of side s on cell (variant, op, shape); behind the wall when one is
    given (side B's): what the wall adds to the run (wall.before: syscost's arguments, a
    command wrapper), or the run refused with the wall's reason.  bare: the wall of a run
    that stays in front of it (side A's), whose bare_wrapper, if it has one, starts A's
    program the way B's is started but for the wall."""
    variant, op, shape = cell
    extra = ["--speculation", s["speculation"]] if s["speculation"] else []
    wrapper = bare.bare_wrapper if bare is not None else None
    if wall is not None:
        more, wrapper, why = wall.before(variant, op, registry.get(variant).abi)
        if why:
            return {"supported": False, "reason": f"behind {wall.spec}: {why}"}
        extra += more
    return measure(variant, op, shape=shape, sampling=sampling, launch=Launch(
        binary=binary or _binary(s, variant), extra_args=extra, command_wrapper=wrapper))


def _calibrate(a, cells, cpu):
    """(tsc_hz, cpu) from one short run of A's first cell (syscost.calibrate, as tw bench
    does): the variance lives between runs, so the 50 ms each run would spend on the TSC
    buys rounds, and A and B alike run pinned to that run's CPU.  (None, cpu) when the
    first cell cannot run; each run then calibrates for itself."""
    variant, op, shape = cells[0]
    try:
        tsc_hz, clock, cpu = calibrate(variant, op, cpu=cpu, shape=shape,
                                       launch=Launch(binary=_binary(a, variant)))
    except SyscostError:
        return None, cpu
    return (tsc_hz if clock == "tsc" else None), cpu


def run_ab(out_dir, settings):
    """Interleave A and B over every cell of `settings` (a Settings) for its rounds, each side
    from its copies (round r from copy r % copies); write ab.json into out_dir (unless None)
    and return the document.  A wall is up for the rounds and down after them, the host as it
    was found either way."""
    s = settings
    cells = s.cells()
    if not cells:
        raise ValueError("no cell to measure: check the variants' operations and shapes "
                         "(variants/registry)")
    tsc_hz, cpu = _calibrate(s.a, cells, s.cpu)
    same_build = s.a["build"] == s.b["build"]
    sources = {}
    for v in sorted({c[0] for c in cells}):
        for s_ in ((s.a,) if same_build else (s.a, s.b)):
            sources[(s_["label"], v)] = _binary(s_, v) or probe.binary("syscost", v)
    copies = rounds.Copies(sources, min(s.copies, s.rounds))
    run = _AB(s, cells, s.sampling(tsc_hz, cpu), copies)
    wall, facts, doc, stopped = s.wall, None, None, None
    # What every process paid during the run, A and B alike: programs on raw_syscalls that
    # are not this run's own (the tracer wall's loader is started after this look).
    host_before = hostwalls.raw_syscalls_tracers()
    try:
        if wall is not None:
            facts = {"up": wall.up(out_dir, [(c[0], c[1]) for c in cells])}
        doc = run.measured()
        if wall is not None and not s.wall_both:
            facts["evidence"] = _evidence(run)
    except ui.Interrupted as e:
        # the rounds so far, marked interrupted (_AB.measured made them): kept, below
        stopped, doc = e, getattr(e, "partial", None) or doc
        if doc is None:
            raise
        if doc.get("interrupted") is None:      # the rounds had all run: evidence was cut
            doc.update(interrupted=e.name)
    finally:
        try:
            if wall is not None:
                facts = facts or {}
                facts["down"] = wall.down()
        finally:
            copies.remove()
    if stopped is None:
        own = wall.own_pids() if wall is not None else set()
        after = hostwalls.raw_syscalls_tracers(exclude=own)
        doc["host_tracers"] = {"before": host_before[0], "after": after[0],
                               "why": host_before[1] or after[1]}
    if wall is not None:
        doc["wall"] = facts
    if out_dir is not None:
        files.write_json(Path(out_dir) / "ab.json", doc)
    if stopped is not None:
        stopped.partial = doc
        raise stopped
    return doc


def _evidence(run):
    """What the kernel put on one A process and one B process of the first cell B could run:
    their SYSCALL_WORK flags, read by bpftrace at their exit_group (workflags.work_flags), and
    B's seccomp lines of /proc/self/status as syscost printed them.  {'cell', 'a', 'b',
    'why'}: a and b are lists of flag names, or None with why."""
    s, data, copied = run.settings, run.data, run.copies.paths
    a, b, wall = s.a, s.b, s.wall
    cell = next((c for c in run.cells if data[(c, b["label"])]["rounds"]), None)
    if cell is None:
        return {"cell": None, "a": None, "b": None, "why": "B ran no cell"}
    variant, op, shape = cell
    key = (a["label"], variant)
    binary = copied[key if key in copied else (b["label"], variant)][0]
    # exit_group: the process's last call, made with the wall up, and allowed by any filter a
    # process can live behind; a call the filter answers itself never reaches sys_enter
    # (syscall_trace_enter returns before the tracepoint when seccomp says skip).
    nr = seccomp.number("exit_group", seccomp.ABI_ARCH[registry.get(variant).abi])
    short = replace(run.sampling, batches=2, batch_ms=0.5, warmup_ms=1)
    with tempfile.TemporaryDirectory(prefix="tw-ab-evidence-", dir=tmp_dir()) as tmp:
        flags, (ra, rb), why = workflags.work_flags(binary.name, nr, [
            lambda: _run(a, cell, short, binary, bare=wall),
            lambda: _run(b, cell, short,
                         binary if run.same_build else copied[(b["label"], variant)][0], wall)],
            tmp)
    wall.release()
    out = {"cell": list(cell), "why": why, "a": None, "b": None, "probe": "bpftrace at "
           "raw_syscalls:sys_enter of exit_group, curtask->thread_info.syscall_work; the "
           "probe's own SYSCALL_TRACEPOINT left out"}
    pa, pb = (ra or {}).get("pid"), (rb or {}).get("pid")
    if flags is not None:
        if pa in flags and pb in flags:
            out["a"], out["b"] = workflags.work_names(flags[pa]), workflags.work_names(flags[pb])
            out["a_bits"], out["b_bits"] = flags[pa], flags[pb]
        else:
            out["why"] = (f"bpftrace did not see {'A' if pa not in flags else 'B'}'s process "
                          f"({pa if pa not in flags else pb}) make exit_group")
    last = data[(cell, b["label"])]["rounds"][-1].get("wall")
    out["b_status"] = (last or {}).get("status")
    return out


class _AB(rounds.Rounds):
    """One tw ab run's rounds in progress (run_ab): each round every cell once under A and
    once under B, in an order drawn from the round's number, each process from the round's
    copy; the steps rounds.Rounds.measure runs.  No quiet probe: A and B alternate within
    the round, so the host's state lands on both sides of a pair alike."""

    def __init__(self, settings, cells, sampling, copies):
        super().__init__()
        self.settings, self.cells, self.sampling, self.copies = settings, cells, sampling, copies
        a, b = settings.a, settings.b
        self.same_build = a["build"] == b["build"]
        self.data = {(c, x["label"]): {"rounds": [], "reason": None}
                     for c in cells for x in (a, b)}
        self.shown = self.t0

    def measured(self):
        """Every round; ab.json's document.  An interrupted run keeps what it measured: every
        round so far (a round cut in two keeps the side that ran; the decision uses the
        rounds both sides have), marked, as the signal's `partial`."""
        self.t0 = self.shown = time.monotonic()     # the wall is up: the rounds' clock starts
        try:
            self.measure()
        except ui.Interrupted as e:
            e.partial = self.document(e.name)
            raise
        return self.document(None)

    def another_round(self):
        return self.done < self.settings.rounds

    def plan_round(self, rnd):
        """Every (cell, side) once, in an order drawn from the round's number.  A wall whose
        going up and down costs more than a run (the tracer: each attach and detach waits for
        the kernel's RCU) is put up once a round: B's runs together, A's together, each side
        first every other round, so that a drift within the round lands on both alike."""
        s = self.settings
        order = rounds.order([(c, x) for c in self.cells for x in (s.a, s.b)], rnd)
        if s.wall is not None and s.wall.grouped and not s.wall_both:
            sides = (s.b, s.a) if rnd % 2 else (s.a, s.b)
            order = [x for side_ in sides for x in order if x[1] is side_]
        return _Order(rnd, order)

    def quiet_moment(self, rd):
        """No probe: the whole round's processes, at once."""
        return rd.take()

    def run_process(self, rd, item):
        """One process of side x on cell c, from the round's copy; a cell a side cannot run is
        kept with the reason and not run again."""
        (c, x), s, rnd = item, self.settings, rd.rnd
        d = self.data[(c, x["label"])]
        wall = s.wall
        if x is s.a and wall is not None and not s.wall_both:
            wall.release()      # B's alone: an A/A keeps it up for both sides
        if d["reason"]:
            return
        binary = self.copies.of(((s.a if self.same_build else x)["label"], c[0]), rnd)
        try:
            r = _run(x, c, self.sampling, binary, wall if x is s.b or s.wall_both else None,
                     bare=wall if x is s.a and not s.wall_both else None)
        except SyscostError as e:
            d["reason"] = str(e)
            ui.warn(f"ab: {x['label']} {' '.join(c)}: {e}",
                    "that cell is reported without a decision")
            return
        if not r["supported"]:
            d["reason"] = r["reason"]
            return
        d["rounds"].append({"round": rnd, "copy": self.copies.index(rnd), "t_s": self.t_s(),
                            "samples_ns": r["samples_ns"], "disturbed": r.get("disturbed"),
                            "speculation": r.get("speculation"), "wall": r.get("wall")})

    def close_round(self, rd):
        """The round's last run may have left a grouped wall up: down it comes."""
        wall = self.settings.wall
        if wall is not None:
            wall.release()

    def record_round(self, rd, notes):
        """A line a second at most: the default run has 200 rounds of about 25 ms."""
        now, n = time.monotonic(), self.settings.rounds
        if self.done == n or now - self.shown >= PROGRESS_S:
            ui.progress(f"ab: round {self.done}/{n} ({now - self.t0:.1f} s)")
            self.shown = now

    def document(self, interrupted):
        """ab.json's document: every round kept raw; interrupted: the signal's name when the
        run was cut short after `done` whole rounds (None for a whole run)."""
        s, data = self.settings, self.data
        return {"schema": SCHEMA, "kernel": platform.release(), "a": s.a, "b": s.b,
                "wall_both": s.wall_both, "rounds": s.rounds, "rounds_done": self.done,
                "interrupted": interrupted, "batches": s.batches, "batch_ms": s.batch_ms,
                "wall_s": round(time.monotonic() - self.t0, 2), "tsc_hz": self.sampling.tsc_hz,
                "cpu": self.sampling.cpu, "copies": self.copies.k,
                "cells": [{"variant": c[0], "op": c[1], "shape": c[2],
                           "a": data[(c, s.a["label"])], "b": data[(c, s.b["label"])]}
                          for c in self.cells]}


class _Order:
    """One tw ab round: its number and its (cell, side) order, taken whole."""

    def __init__(self, rnd, order):
        self.rnd, self.order = rnd, order

    def take(self):
        out, self.order = self.order, []
        return out

    def left(self):
        return bool(self.order)
