"""The per-call matrix: every mechanism x operation x loop shape, measured in rounds, raw.

Each cell is one build/syscost-<variant> run per round with one --op and --shape: nanoseconds
per call with the empty loop's cost removed (docs/syscost.md).  The matrix is measured in
rounds: every round runs every cell once, in a shuffled order, for a few batches.  A round is
one process per cell, the unit the analysis replicates over (twtools.analyse.percall), and
the reference cell (64-bit syscall, null, ret) is in every round, so every cell can also be
read as a ratio to it, paired by round, which cancels the host's drift.

This module only measures: percall.json holds every batch of every round with how it was
taken (the clock, the CPU, the scheduling class, the disturbance counters syscost read), and
no summary.  `tw report` and `tw bench` compute the summaries from it, every time.

    Settings(mode=..., variants=..., ...)   what one matrix measures and how, built once by
        its command; the modes' defaults filled in one place
    run(out_dir, settings)   measures the matrix, writes percall.json into out_dir (unless
        out_dir is None) and returns the document (docs/results-schema.md, "percall.json")
    run_matrix(out_dir, mode, variants, ops, sizes, shapes, deadline)   the same for a
        matrix that names only its cells, every other setting the default

A round takes the steps docs/syscost.md describes, in its order, each a method of _Matrix
that measure/rounds.py's loop (Rounds.measure, tw ab's loop too) calls: another_round (the
plan, tw run's deadline), plan_round (the round's cells, shuffled, in their queues),
quiet_moment (the probe of the host that opens each chunk of cells, waiting for its fast
state while the budget has slack), run_process (one process of a cell), close_round (the
closing probe, perf bench), judge_round (the budget, the target) and record_round (the
progress line).
"""
import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path

from ..core import files, proc, ui
from ..machine import probe, registry
from . import rounds, syscost
from .rounds import HOST_TOL
from .syscost import SyscostError, calibrate, perf_bench_once

SCHEMA = "timewrite-percall/2"
DEFAULT_SIZES = [256, 4096]          # write-file sizes
SYNC_SIZE = 256                      # write-sync: the seed report's slow row
DEVNULL_SIZE = 1
# The cell every round measures, to which every cell is also compared, paired by round.
REFERENCE_OP, REFERENCE_SHAPE = "null", "ret"
# ... several times per round: once every this many other cells.  The reference is also the
# host's probe: each of its processes says whether the host was in its fast state then
# (analyse.hoststate), and the cells' processes between two of them take their label, so it
# runs often enough that a burst of the fast state (seconds long on a noisy cloud host) holds
# many probes, at a seventh of the matrix's processes.
REF_EVERY = 6
# Quiet first: a probe (reference process) whose floor is more than HOST_TOL above the
# fast state's level (the LEVEL_RANK-th fastest probe so far: rounds.HostProbe) says the host
# is slow; while it is, and the run's budget has slack beyond the work left, the matrix waits
# WAIT_S and probes again instead of measuring cells in the slow state.  The labels are
# computed again at analysis time from the whole run's fastest probe; these live ones only
# decide when to measure.
WAIT_S = 0.05
# The calls the quiet moments are for: their undisturbed figure leads and is what the
# precision targets judge (analyse.percall.FAST_OPS; tests/test_quiet_first.py holds the two
# equal).  The other cells (the writes to a file, the clocks) are measured while the host is
# slow, when there are any left in the round.
QUIET_OPS = ("null", "getppid", "write-devnull")
# The cell that prices a VM exit (cpuid, one exit and back) waits with them: the int 0x80
# cells pay one exit a call, `tw compare` takes the exit's move between two runs out at each
# run's price, and tw run's exit-price stage measures the move over the run from it
# (analyse/exitdrift.py), so its interval sets theirs.  Measured in the slow moments, only
# 10 of its 32 processes met the fast state on an AMD EPYC guest and its figure was +-1.3%,
# where the int 0x80 cells' were +-0.4%.
QUIET_CELLS = (("cpuid", "ret"),)
# The headline's cells (issue 62): the report's first screen rests on the reference (the
# probe), the exit's price (cpuid), int 0x80's null calls and the fast path int 0x80 is held
# against (the 32-bit fast entries' null calls).  On a guest whose host is fast a few seconds
# at a time (an AMD EPYC Zen 3 guest, fast in 14% of a quick run's probes), a quick matrix
# gave 46 of its 48 fast cells no undisturbed figure, the exit's price among them, and the
# first screen no word of the VM exit.  So in every round these cells take the host's fast
# moments before any other cell, as one block right after a fast probe: the exit's price,
# int 0x80's extra over the fast path and its ratio to the reference are then each measured
# within one quiet burst (`burst` in their records); and while fewer than HEADLINE_FAST of
# their processes have met the fast state, a fast probe measures the block again, up to
# HEADLINE_REPEATS times a round, so that a short run spends its few fast seconds where the
# headline is decided.  A block is 4-6 processes, about 0.1 s.
HEADLINE_FAST = 8
HEADLINE_REPEATS = 3


def headline(key):
    """Whether a cell (variant, op, size, shape) is one the report's first screen rests on:
    cpuid, and the null call of int 0x80 (32- and 64-bit) and of the 32-bit fast entries,
    in the ret shape (the reference is the probe itself)."""
    if key[3] != "ret":
        return False
    if key[1] == "cpuid":
        return True
    return key[1] == REFERENCE_OP and key[0] in _headline_variants()


def _headline_variants():
    return {registry.find(32, "int80"), registry.find(64, "int80"), *registry.fast32()} - {None}


# A deadline (tw run's share of its time) never cuts a matrix below this many rounds: the
# undisturbed figure's drift term needs 8 (analyse/stats.UNDISTURBED_MIN_ROUNDS).
MIN_ROUNDS = 8
# The budget of a matrix, as a multiple of what its rounds take on a quiet host (estimated
# from the faster of the first two rounds' measuring time: the first runs every program cold):
# the slack a noisy host may spend waiting for quiet moments.  Waiting adds no fast time to a
# run of fixed length (the host is quiet when it is quiet), it only moves the cells'
# processes there; so the slack is what buys fast-state processes, and the default's is kept
# small for the report's three minutes.
BUDGET_FACTOR = {"quick": 1.0, "default": 1.1, "long": 2.0}
# Each variant's syscost runs from this many fresh copies of its file, round r from copy
# r % COPIES: the same bytes cost about 1% more or less depending on where their file's pages
# landed (docs/syscost.md, "The binary's file"), for the file's life, so a matrix run from one
# file per variant compares placements along with mechanisms, and its reruns (the same files)
# cannot see it.  Spread over the rounds, the copies put the placement in the rounds' spread.
COPIES = 4

# Per mode: rounds, batches per run, batch length, warm-up, perf bench runs.  Every mode
# takes batches of the same length and number per process: the undisturbed figure is a share
# of the batches' distribution, so the modes differ only in how many processes (rounds) they
# sample it with, and a --quick, a default and a --long run estimate the same figure.
MODES = {
    "quick":   {"rounds": 8,  "batches": 4,  "batch_ms": 0.5, "warmup_ms": 5,  "perf_runs": 3,
                "perf_loops": 500000},
    # The variance lives between processes (a cell's value moves by ~7% from one process to
    # the next on a 2-core KVM guest, and by well under that between batches of one process),
    # so the modes spend their time on rounds, each a new process, not on batches: 32 rounds
    # of 4 batches keep the matrix near 40 s there, inside its 60 s budget.
    "default": {"rounds": 32, "batches": 4,  "batch_ms": 0.5, "warmup_ms": 2, "perf_runs": 32,
                "perf_loops": 1000000},
    # ~84 rounds are what a 2% half-width needs at a 7% between-process spread; --long runs 96.
    "long":    {"rounds": 96, "batches": 4,  "batch_ms": 0.5, "warmup_ms": 5, "perf_runs": 32,
                "perf_loops": 2000000},
}
# write-sync waits for the device (~0.05-4 ms per call): fewer, single-call batches.
SYNC_BATCHES = {"quick": 2, "default": 3, "long": 5}


def _quiet(key):
    """Whether a cell (variant, op, size, shape) is one the host's quiet moments are for."""
    return key[1] in QUIET_OPS or (key[1], key[3]) in QUIET_CELLS


def next_chunk(queues, fast):
    """The next REF_EVERY cells to measure, taken off the front of their queue: [quiet cells,
    other cells] (or one queue), the first non-empty one when the host is fast (or its state
    unknown), the second when it is slow; None when it is slow and the second is empty (then
    the caller waits for a quiet moment while its budget allows, and asks again as fast)."""
    if fast is False:
        if len(queues) < 2 or not queues[1]:
            return None
        q = queues[1]
    else:
        q = next((q for q in queues if q), [])
    chunk = q[:REF_EVERY]
    del q[:REF_EVERY]
    return chunk


def reference():
    """(variant, op, shape) of the reference cell: the 64-bit syscall instruction."""
    return registry.find(64, "syscall"), REFERENCE_OP, REFERENCE_SHAPE


def cell_list(mechs, ops, sizes, shapes=None):
    """[(mechanism, op, size, shape)] in matrix order: each mechanism's own operations and
    loop shapes (variants/registry), restricted to `ops` and `shapes` when given."""
    cells = []
    for m in mechs:
        for op in m.ops:
            if ops is not None and op not in ops:
                continue
            if op == "write-file":
                op_sizes = list(sizes)
            elif op == "write-sync":
                op_sizes = [SYNC_SIZE]
            elif op == "write-devnull":
                op_sizes = [DEVNULL_SIZE]
            else:
                op_sizes = [None]
            for shape in registry.shapes_for(m, op):
                if shapes is not None and shape not in shapes:
                    continue
                cells += [(m, op, s, shape) for s in op_sizes]
    return cells


def _fstype(path):
    """The file system type of path, from /proc/self/mounts (longest mount prefix)."""
    path = os.path.realpath(path)
    best, fstype = "", None
    try:
        for line in Path("/proc/self/mounts").read_text().splitlines():
            parts = line.split()
            if len(parts) >= 3:
                mnt = parts[1].replace("\\040", " ")
                if (path == mnt or path.startswith(mnt.rstrip("/") + "/")) and len(mnt) >= len(best):
                    best, fstype = mnt, parts[2]
    except OSError:
        pass
    return fstype


BATCH_KEYS = {"samples_ns": "samples_ns", "loop_ns_per_call": "loop_ns", "raw_ns": "raw_ns",
              "offcpu_ns_per_call": "offcpu_ns", "nivcsw": "nivcsw", "steal_ticks": "steal_ticks",
              "irqs": "irqs", "disturbed": "disturbed", "chain_ns_per_step": "chain_ns"}


def _stack_pad(rnd):
    """An environment variable whose length changes from round to round (0 to 4 KiB in 16-byte
    steps), so that where each process's stack starts is sampled by the rounds rather than
    fixed for the whole run (Mytkowicz et al. 2009: the environment's size moves code's
    speed).  It costs nothing; scripts/bench_factors.py measured the effect of a 3000-byte
    change at 0.22% (median over cells), within what a rerun moves."""
    return {"TW_ROUND_PAD": "x" * ((rnd * 16 * 37) % 4096)}




@dataclass(frozen=True)
class Settings:
    """What one per-call matrix measures and how, built once by its command (cli/bench.py,
    cli/run.py, cli/stages.py, tw run's exit-price stage, the short matrices of tw watch and
    tw diagnose) and passed whole to run().  A field left None takes its mode's value
    (MODES, SYNC_BATCHES), filled in by __post_init__: the one place the modes' defaults are
    read."""
    # What to measure
    mode: str = "default"               # quick, default or long (MODES)
    variants: list | None = None        # names ('64-syscall', ...); None: every mechanism
    ops: list | None = None             # operations; None: each mechanism's own (registry)
    sizes: list | None = None           # write-file sizes; None: DEFAULT_SIZES
    shapes: list | None = None          # loop shapes; None: each mechanism's own
    # How many rounds, and how each process runs
    rounds: int | None = None           # the rounds planned
    copies: int = COPIES                # fresh copies of each program: round r runs r % copies
    batches: int | None = None          # each process's batches ...
    sync_batches: int | None = None     # ... and write-sync's, which waits for the device
    batch_ms: float | None = None       # a batch's length
    warmup_ms: float | None = None      # the warm-up before the first batch (write-sync: <= 5)
    perf_loops: int | None = None       # perf bench's loops, with accuracy:
    accuracy: bool = False              # `perf bench syscall basic` once per round too
    cpu: int | None = None              # the CPU to pin to; None: the calibrating run's
    clock: str | None = None            # syscost's clock; None: auto, the TSC when invariant
    realtime: bool = True               # SCHED_FIFO for syscost and perf bench, when allowed
    file_dir: str | Path | None = None  # where the writes to a file go; None: out_dir or cwd
    # The host's budget.  quiet_first: wait for the host's fast state (the reference's
    # probes) while the budget has slack; on a quiet host this never waits.  budget_s (None:
    # BUDGET_FACTOR of the mode's rounds on a quiet host, from the first rounds; required with
    # a target).  deadline: a time.monotonic() by which the matrix ends (tw run's share of
    # its budget): no round starts that would end past it once MIN_ROUNDS are done, and no
    # wait for a quiet host spends the time those rounds need.
    quiet_first: bool = True            # wait for the host's fast state while there is slack
    budget_s: float | None = None       # the matrix's time budget, in seconds
    deadline: float | None = None       # when the matrix ends, as time.monotonic() tells it
    # The target and its judge (this layer does not analyse): past the planned rounds, more
    # until should_stop(doc) -> (stop, progress text) says stop, or the budget is spent; a
    # cell for which skip(cell key, past the planned rounds) is true is left out of a round
    # (its target met, or none to meet once the planned rounds are done).
    target: object = None               # the target, recorded as given (a fraction, or words)
    should_stop: object = None          # the analysis' judgement of the document so far
    skip: object = None                 # which cells need no more rounds
    # Who runs it
    judged: list | None = None          # probe.check_all('syscost') rows, when known already
    label: str = "bench"                # what the progress lines begin with
    round_lines: bool = True            # a line each round (the exit-price stage says one)

    def __post_init__(self):
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}")
        given = {k: MODES[self.mode][k] for k in ("rounds", "batches", "batch_ms", "warmup_ms",
                                                  "perf_loops")}
        given["sync_batches"] = SYNC_BATCHES[self.mode]
        for name, value in given.items():
            if getattr(self, name) is None:
                object.__setattr__(self, name, value)

    def sampling(self, op, calls, tsc_hz, cpu):
        """How one process of an op's cell samples: write-sync, which waits for the device,
        takes fewer batches and at most 5 ms of warm-up."""
        sync = op == "write-sync"
        return syscost.Sampling(
            batches=self.sync_batches if sync else self.batches, calls=calls,
            batch_ms=self.batch_ms, warmup_ms=min(self.warmup_ms, 5) if sync else self.warmup_ms,
            cpu=cpu, tsc_hz=tsc_hz, clock=self.clock, realtime=self.realtime)


def run_matrix(out_dir, mode="default", variants=None, ops=None, sizes=None, shapes=None,
               deadline=None):
    """The matrix of a mode over these cells, every other setting its default (tw run's bench
    stage, tw attribute's cells): run(out_dir, Settings(...)) of them."""
    return run(out_dir, Settings(mode=mode, variants=variants, ops=ops, sizes=sizes,
                                 shapes=shapes, deadline=deadline))


def run(out_dir, settings):
    """Measure the per-call matrix `settings` (a Settings) describes; write percall.json into
    out_dir (unless it is None); return the document (docs/results-schema.md, "percall.json").

    A signal (Ctrl-C, SIGTERM) keeps the rounds so far, marked interrupted, so that a run
    stopped at minute 9 of 10 keeps 9 minutes of measuring (tw report and tw compare read them
    and say so); the signal then goes on up."""
    m = _Matrix(out_dir, settings)
    with rounds.Copies(m.programs(), settings.copies) as m.copies:
        try:
            m.measure()
            doc = m.document()
            if out_dir is not None:
                files.write_json(Path(out_dir) / "percall.json", doc)
            return doc
        except ui.Interrupted as e:
            if out_dir is not None and any(c["rounds"] for c in m.state.values()):
                doc = m.document()
                doc["host_state"]["stopped"] = "interrupted"
                doc["interrupted"] = {"signal": e.name, "rounds": doc["params"]["rounds"],
                                      "after_s": round(time.monotonic() - m.t0, 2)}
                files.write_json(Path(out_dir) / "percall.json", doc)
            raise


def _mechanisms(variants):
    """The registry's mechanisms, or those named (ValueError for a name it lacks)."""
    if variants is None:
        return registry.mechanisms()
    names = registry.names()
    unknown = [v for v in variants if v not in names]
    if unknown:
        raise ValueError(f"unknown variant(s) {', '.join(unknown)}; see variants/registry")
    return [registry.get(v) for v in variants]


def _cell_state(settings, mechs, sizes, ref):
    """{cell key: its state} in matrix order, each cell as its variant's probe judged it (the
    reference cell added first when the matrix lacks it and it works here); says which
    variants are unsupported or broken."""
    label = settings.label
    judged = {r["name"]: r for r in (settings.judged or probe.check_all("syscost"))}
    for r in judged.values():
        if r["status"] == "unsupported":
            ui.progress(f"{label}: {r['name']} unsupported: {r['reason']}")
        elif r["status"] == "broken":
            ui.warn(f"{label}: {r['name']} is broken: {r['reason']}",
                    "its cells are recorded as broken and the run exits non-zero")
    cells = cell_list(mechs, settings.ops, sizes, settings.shapes)
    if ref[0] and not any((m.name, op, shape) == ref for m, op, _, shape in cells) \
            and judged.get(ref[0], {}).get("supported"):
        cells.insert(0, (registry.get(ref[0]), ref[1], None, ref[2]))
    state = {}
    for m, op, size, shape in cells:
        j = judged.get(m.name) or {"supported": False, "status": "unsupported",
                                   "reason": "not probed"}
        state[(m.name, op, size, shape)] = {
            "mech": m, "op": op, "size": size, "shape": shape, "supported": j["supported"],
            "status": j["status"], "reason": j["reason"], "rounds": [], "calls": None,
            "errors": []}
    return state


class _Round:
    """One round of the matrix in progress: its number, its queues of cells, when it began,
    how long it waited for a quiet host, how often the headline's block ran again, the burst
    the chunk in hand belongs to, and its progress line."""

    def __init__(self, rnd, queues):
        self.rnd, self.queues = rnd, queues
        self.t0 = time.monotonic()
        self.waited, self.repeats, self.burst, self.line = 0.0, 0, None, ""

    def left(self):
        return any(self.queues)


class _Matrix(rounds.Rounds):
    """One matrix's measuring in progress (run): the cells' state, the host's probes, the
    calibrated clock, and the steps of each round in the order docs/syscost.md gives them
    (rounds.Rounds.measure runs them)."""

    def __init__(self, out_dir, settings):
        super().__init__()
        s = self.settings = settings
        self.mechs = _mechanisms(s.variants)
        self.sizes = list(s.sizes) if s.sizes is not None else list(DEFAULT_SIZES)
        self.ref = reference()
        self.full = s.variants is None and s.ops is None and s.shapes is None
        if out_dir is not None:
            Path(out_dir).mkdir(parents=True, exist_ok=True)
        self.file_dir = Path(s.file_dir) if s.file_dir else (
            Path(out_dir) if out_dir else Path.cwd())
        self.file_dir.mkdir(parents=True, exist_ok=True)
        self.t0 = time.monotonic()
        self.state = _cell_state(s, self.mechs, self.sizes, self.ref)
        self.tsc_hz, self.clk, self.cpu = self._calibrate()
        self.perf = {"samples": [], "rounds": [], "why": None, "loops": s.perf_loops}
        self.perf_s = 0.0       # time spent in perf bench, not part of the matrix's wall time
        self.ref_key = next((k for k in self.state if (k[0], k[1], k[3]) == self.ref
                             and self.state[k]["supported"]), None)
        self.copies = None      # rounds.Copies, made by run()
        self.scheds, self.sched_why = set(), None   # why a run did not get SCHED_FIFO
        # A target run never waits: it stops at a number of fast-state processes, not of
        # rounds, and waiting adds no fast time (the host is quiet when it is quiet), it only
        # spends the sleeps and the probes of the wait, and a burst seconds long yields one
        # chunk of cells per fast probe.  Beside a noisy neighbour, a --target 1% run that
        # waited measured 38 rounds in 600 s, 27 s of a round waiting, and met the target in
        # 1 of 48 fast cells.
        self.quiet = s.quiet_first and self.ref_key is not None and s.target is None
        self.host = {"probes": [], "tol": HOST_TOL, "quiet_first": self.quiet,
                     "waited_s": 0.0, "budget_s": s.budget_s, "target": s.target,
                     "stopped": None, "rounds": 0,
                     # the stopping rule's plan: each cell's sampling aims at what the host's
                     # drift leaves of the target (percall.sampling_target); a run without it
                     # planned for the whole target and is read so
                     "target_plan": "drift" if s.target is not None else None,
                     "deadline_s": (round(s.deadline - self.t0, 1)
                                    if s.deadline is not None else None)}
        self.rule = rounds.HostProbe()      # the live rule: fast or slow, from the probes so far
        # the headline's cells (headline()): their processes that met the fast state so far (a
        # probe fast on each side), those measured since the last probe, and the blocks so far
        self.head = sorted((k for k, c in self.state.items() if c["supported"]
                            and k != self.ref_key and headline(k)),
                           key=lambda k: (k[1] != "cpuid", k[0]))
        self.head_fast = {k: 0 for k in self.head}
        self.live = {"pending": [], "last_fast": None, "bursts": 0}
        self.measured = []      # each round's measuring time (waiting left out)
        self.judged_at = 0.0    # when should_stop last judged
        self.max_rounds = s.rounds if s.target is None else 10000

    def _calibrate(self):
        """(tsc_hz, clock, cpu) from one run of the first supported cell (syscost.calibrate),
        shared by every run after it: a longer calibration of the TSC rate, and one CPU."""
        s = self.settings
        first = next((k for k, c in self.state.items() if c["supported"]), None)
        if first is None:
            return None, None, s.cpu
        return calibrate(first[0], "null" if "null" in self.state[first]["mech"].ops
                         else first[1], cpu=s.cpu, clock=s.clock)

    def programs(self):
        """{variant: its syscost program} of every supported cell, for the copies."""
        return {v: probe.binary("syscost", v) for v in sorted(
            {k[0] for k, c in self.state.items() if c["supported"]})}

    # ---- the steps of a round, in their order (rounds.Rounds.measure) ----

    def another_round(self):
        """Whether a round starts: not past the planned rounds (or, with a target, the
        judge's), and not one that would end past tw run's deadline once MIN_ROUNDS are
        done (fewer rounds, the intervals wider and honest for it, rather than a report past
        its time)."""
        s = self.settings
        if self.done >= self.max_rounds:
            return False
        if proc.next_round_past(s.deadline, self.measured, self.done, MIN_ROUNDS):
            self.host["stopped"] = "deadline"
            ui.progress(f"{s.label}: stopped after {self.done} of {s.rounds} rounds: the "
                        f"report's time for the bench ({self.host['deadline_s']:.0f} s) is spent")
            return False
        return True

    def plan_round(self, rnd):
        """Plan a round: its cells (every supported one but the reference, less those the
        target's skip leaves out) in an order drawn from its number.  Quiet first: the cells
        whose undisturbed figure the quiet moments are for (_quiet) wait in one queue, the
        headline's block first among them, the rest in another, each in the round's order."""
        s = self.settings
        cells = rounds.order([k for k, c in self.state.items() if c["supported"]
                              and k != self.ref_key
                              and not (s.skip and s.skip(k, rnd >= s.rounds))], rnd)
        queues = ([[k for k in cells if _quiet(k)], [k for k in cells if not _quiet(k)]]
                  if self.quiet else [cells])
        rd = _Round(rnd, queues)
        queues[0].sort(key=lambda k: self.head.index(k) if k in self.head_fast
                       else len(self.head))
        return rd

    def quiet_moment(self, rd):
        """Wait for a quiet moment: the probe that opens the next chunk of cells, and the
        chunk.  A fast probe takes the headline's block again while its cells are short of
        fast processes (_headline_again), else the next chunk of the quiet queue; a slow one
        the next chunk of the other queue, and when that is empty it waits WAIT_S and probes
        again while the budget has slack beyond the work left.  Only the probe that opens the
        chunk counts as one of the reference's rounds."""
        chunk = None
        if self.ref_key is not None:
            probed, fast = self._probe(rd.rnd, in_cell=False)
            if self._headline_again(rd, fast):
                chunk = list(self.head)
                rd.repeats += 1
            else:
                chunk = next_chunk(rd.queues, fast) if self.quiet else None
            while self.quiet and chunk is None and fast is False and self._slack(rd):
                t_wait = time.monotonic()
                time.sleep(WAIT_S)
                probed, fast = self._probe(rd.rnd, in_cell=False)
                rd.waited += time.monotonic() - t_wait
            if probed is not None:
                self.state[self.ref_key]["rounds"].append(probed)
                self.host["probes"][-1]["in_cell"] = True
        if chunk is None:
            chunk = next_chunk(rd.queues, True)
        rd.burst = None
        if any(k in self.head_fast for k in chunk):
            self.live["bursts"] += 1
            rd.burst = self.live["bursts"]
        return chunk

    def run_process(self, rd, key):
        """Run one process of a cell of the chunk; a cell of the headline's block keeps the
        burst it ran in, and waits for the next probe to say whether it met the fast state."""
        rec = self._process(key, rd.rnd)
        if rec is not None and rd.burst is not None and key in self.head_fast:
            rec["burst"] = rd.burst
            self.live["pending"].append(key)

    def close_round(self, rd):
        """The round's closing probe, its measuring time (waiting left out), and with
        accuracy one `perf bench syscall basic`, whose time is no part of the matrix's."""
        s = self.settings
        if self.ref_key is not None:
            self._probe(rd.rnd, in_cell=True)
        self.host["waited_s"] += rd.waited
        self.measured.append(time.monotonic() - rd.t0 - rd.waited)
        if s.accuracy:
            t_perf = time.monotonic()
            ns, why = perf_bench_once(s.perf_loops, cpu=self.cpu, realtime=s.realtime)
            self.perf_s += time.monotonic() - t_perf
            if ns is None:
                self.perf["why"] = why
            else:
                self.perf["samples"].append(ns)
                self.perf["rounds"].append(rd.rnd)

    def judge_round(self, rd):
        """Judge the round: after the first two, the budget (unless given); from the fourth
        on, the target's judgement (the stopping rule's plan depends on its first stage
        alone, so judging often costs no coverage), at most once per tenth of the time so
        far (analysing the matrix takes a second or so); and with a target, its budget.
        (stop, the words it adds to the round's line)."""
        s, host = self.settings, self.host
        host["rounds"] = self.done
        if self.done - 1 == min(1, s.rounds - 1) and host["budget_s"] is None \
                and s.target is None:
            self._set_budget()
        elapsed = time.monotonic() - self.t0 - self.perf_s
        rd.line = self._round_line(rd)
        notes = ""
        if s.should_stop is not None and self.done >= 4 \
                and elapsed - self.judged_at >= 0.1 * elapsed:
            self.judged_at = elapsed
            stop, why = s.should_stop(self.document())
            notes = f"; {why}"
            if stop:
                host["stopped"] = "target"
                return True, notes
        budget_s = host["budget_s"]
        if s.target is not None and budget_s is not None and elapsed >= budget_s:
            host["stopped"] = "budget"
            return True, notes + f"; the budget of {budget_s:.0f} s is spent"
        return False, notes

    def record_round(self, rd, notes):
        """The round's progress line, with what its judgement said."""
        if self.settings.round_lines:
            ui.progress(rd.line + notes)

    # ---- what the steps use ----

    def _probe(self, rnd, in_cell):
        """Run the reference once as the host's probe: (its record, fast or not, or None).
        A fast probe after a fast one counts the headline's processes between them as met
        the fast state."""
        rec = self._process(self.ref_key, rnd, keep=in_cell)
        judged = self.rule.judge(rec)
        if judged is None:
            return rec, None
        f, step, fast = judged
        live = self.live
        if fast and live["last_fast"]:
            for k in live["pending"]:
                self.head_fast[k] += 1
        live["pending"].clear()
        live["last_fast"] = fast
        probe_rec = {"t_s": rec["t_s"], "round": rnd, "floor_ns": f, "fast": fast,
                     "in_cell": in_cell}
        if step is not None:
            probe_rec["chain_ns"] = step
        self.host["probes"].append(probe_rec)
        return rec, fast

    def _headline_again(self, rd, fast):
        """A fast probe, the headline's block measured already this round and its cells still
        short of fast processes: the block again, first, up to HEADLINE_REPEATS a round."""
        return (self.quiet and fast and self.head and rd.repeats < HEADLINE_REPEATS
                and min(self.head_fast.values()) < HEADLINE_FAST
                and not any(k in self.head_fast for k in rd.queues[0]) and rd.left())

    def _slack(self, rd):
        """Whether the budget has room for one more wait beyond the work left: the rounds
        left at the mean measuring time so far (the fastest round is an optimist's estimate,
        and the budget was overrun by 11% with it)."""
        s, budget_s = self.settings, self.host["budget_s"]
        if budget_s is None or not self.measured:
            return False
        per = sum(self.measured) / len(self.measured)
        left = per * (max(s.rounds - rd.rnd, 1) if s.target is None else 1)
        elapsed = time.monotonic() - self.t0 - self.perf_s
        return elapsed + left + WAIT_S <= budget_s

    def _set_budget(self):
        """The budget of a run without one: BUDGET_FACTOR of what its rounds take on a quiet
        host, from the faster of the first two; within a deadline, the rounds left at their
        pace come first (waiting must not spend the rounds' own time)."""
        s = self.settings
        budget_s = BUDGET_FACTOR.get(s.mode, 1.0) * min(self.measured) * s.rounds
        if s.deadline is not None:
            budget_s = min(budget_s, s.deadline - self.t0)
        self.host["budget_s"] = budget_s

    def _round_line(self, rd):
        """The round's progress line: its time, its wait, the host's fast share so far."""
        s, pr = self.settings, self.host["probes"]
        share = sum(1 for x in pr if x["fast"]) / len(pr) if pr else None
        return (f"{s.label}: round {self.done}{'' if s.target else '/' + str(s.rounds)} "
                f"({time.monotonic() - rd.t0:.1f} s"
                + (f", {rd.waited:.1f} s waiting for a quiet host" if rd.waited else "")
                + (f"; host fast in {100 * share:.0f}% of probes so far"
                   if share is not None else "")
                + ")")

    def _process(self, key, rnd, keep=True):
        """One process of one cell, from round rnd's copy of its program; its record
        (appended to the cell unless keep is False), or None when it gave nothing."""
        s, c = self.settings, self.state[key]
        if len(c["errors"]) >= 2:
            return None         # failed twice: stop spending time on it
        t_cell = time.monotonic() - self.t0
        try:
            res = syscost.measure(
                key[0], c["op"], c["size"], c["shape"],
                sampling=s.sampling(c["op"], c["calls"], self.tsc_hz, self.cpu),
                launch=syscost.Launch(binary=self.copies.of(key[0], rnd),
                                      file_dir=self.file_dir, extra_env=_stack_pad(rnd)))
        except SyscostError as e:
            c["errors"].append(str(e))
            ui.warn(f"{s.label}: {' '.join(str(x) for x in key if x is not None)}: {e}",
                    "the cell is reported with the error")
            return None
        if not res["supported"]:
            c["supported"], c["reason"] = False, res["reason"]
            if c["status"] == "works":
                c["status"] = "broken"      # it passed its probe, then stopped working
            return None
        if c["calls"] is None:
            c["calls"] = res["calls_per_batch"]   # later rounds reuse the first round's size
        rec = {"round": rnd, "copy": self.copies.index(rnd), "t_s": round(t_cell, 3),
               "calls_per_batch": res["calls_per_batch"],
               "cpu": res.get("cpu"), "sched": res.get("sched")}
        for k, name in BATCH_KEYS.items():
            if res.get(k) is not None:
                rec[name] = res[k]
        if keep:
            c["rounds"].append(rec)
        self.scheds.add(res.get("sched"))
        if res.get("sched") != "fifo":
            self.sched_why = res.get("sched_why")
        self.clk = self.clk or res.get("clock")
        return rec

    def document(self):
        """The document of what was measured so far."""
        s, scheds = self.settings, self.scheds
        wall = time.monotonic() - self.t0 - self.perf_s
        out_cells = []
        for (name, op, size, shape), c in self.state.items():
            m = c["mech"]
            cell = {"variant": name, "bits": m.bits, "abi": m.abi, "mechanism": m.mechanism,
                    "op": op, "size": size, "shape": shape, "supported": c["supported"],
                    "status": c["status"], "reason": c["reason"], "calls_per_batch": c["calls"],
                    "rounds": c["rounds"]}
            if c["errors"]:
                cell["errors"] = c["errors"]
            out_cells.append(cell)
        return {"schema": SCHEMA, "clock": self.clk, "tsc_hz": self.tsc_hz, "cpu": self.cpu,
                "mode": s.mode,
                "params": {"batches": s.batches, "sync_batches": s.sync_batches,
                           "calls_per_batch": "auto (first round, then fixed)",
                           "batch_ms": s.batch_ms, "warmup_ms": s.warmup_ms,
                           "rounds": self.host["rounds"], "rounds_mode": s.rounds,
                           "copies": self.copies.k,
                           "sizes": self.sizes,
                           "ops": list(s.ops) if s.ops is not None else None,
                           "shapes": list(s.shapes) if s.shapes is not None else None,
                           "variants": [m.name for m in self.mechs]},
                "reference": {"variant": self.ref[0], "op": self.ref[1], "shape": self.ref[2]},
                "sched": ("fifo" if scheds == {"fifo"} else
                          ("mixed" if "fifo" in scheds else "other")),
                "sched_why": self.sched_why or ("SCHED_FIFO priority 50"
                                                if scheds == {"fifo"} else None),
                "file_dir": str(self.file_dir), "file_fstype": _fstype(self.file_dir),
                "host": socket.gethostname(), "full_matrix": self.full,
                "wall_s": wall, "cells": out_cells,
                "perf_bench": self.perf if s.accuracy else None,
                "host_state": dict(self.host, probes=list(self.host["probes"]))}
