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

    run_matrix(out_dir, mode='default', variants=None, ops=None, sizes=None, ...)
        measures the matrix, writes percall.json into out_dir (unless out_dir is None) and
        returns the document (docs/results-schema.md, "percall.json").
"""
import os
import random
import shutil
import socket
import time
from pathlib import Path

from ..core import clocksteps, files, proc, ui
from ..machine import probe, registry
from .syscost import Launch, Sampling, SyscostError, calibrate, make_copies, measure, perf_bench_once

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
# fastest probe so far says the host is slow; while it is, and the run's budget has slack
# beyond the work left, the matrix waits WAIT_S and probes again instead of measuring cells
# in the slow state.  The labels are computed again at analysis time from the whole run's
# fastest probe; these live ones only decide when to measure.
HOST_TOL = 0.10
# The fast state's level is the LEVEL_RANK-th fastest probe, not the fastest: one lucky
# process (the lowest layout level, a quiet instant) must not set a bar the host's fast state
# itself seldom reaches (seen: one such probe made the matrix wait 45 s for nothing).
LEVEL_RANK = 3
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


class HostProbe:
    """The live rule for the host's state: each probe (a reference process, 64-syscall null
    ret) is fast when its floor is within HOST_TOL of the LEVEL_RANK-th fastest probe so far,
    in chain steps when syscost timed its clock.  The matrix's (run_matrix) and the sweeps'
    (measure/sweep.py, which run the reference between their timewrite runs): one rule, so
    that the two label the host alike."""

    def __init__(self):
        self.lows = []                              # the LEVEL_RANK fastest costs so far
        self.clocks = {"levels": {}, "top": None}   # the probes' chain steps (core/clocksteps)

    def judge(self, rd):
        """(floor ns, chain step ns or None, fast) of one reference process's record (its
        samples_ns, disturbed, chain_ns), or None when it gave no usable value."""
        vals = [v for v, bad in zip(rd.get("samples_ns") or [], rd.get("disturbed") or [])
                if not bad] or (rd.get("samples_ns") or []) if rd else []
        vals = [v for v in vals if isinstance(v, (int, float)) and v == v]
        if not vals:
            return None
        f = min(vals)
        # The core's clock when the probe ran (syscost's chain before each batch): the host
        # moves it in steps of about 4% that last minutes, and a probe at a lower clock is not
        # a disturbed one.  So the live rule compares floors in chain steps (cycles / 4), not
        # in ns, when syscost timed the chain.
        # A chain the host slowed along with the call is no clock (clocksteps.given): such a
        # probe's floor in chain steps reads below the fast state's, and once three had set
        # the level no later probe was fast.  Until its level is one the host gave, a probe
        # is taken at the fastest clock seen.
        chain = [v for v in rd.get("chain_ns") or [] if isinstance(v, (int, float)) and v > 0]
        step = None
        if chain:
            step = min(chain)
            lv, seen = clocksteps.level_of(step), self.clocks["levels"]
            seen[lv] = seen.get(lv, 0) + 1
            top = self.clocks["top"] = min(self.clocks["top"] or step, step)
            given = step <= top or clocksteps.given(step, seen, sum(seen.values()))
            cost = f / (step if given else top)
        else:
            cost = f
        lows = self.lows
        lows.append(cost)
        lows.sort()
        del lows[LEVEL_RANK:]
        level = lows[-1]        # the LEVEL_RANK-th fastest so far (the slowest of the few)
        return f, step, cost <= level * (1 + HOST_TOL)


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


def run_matrix(out_dir, mode="default", variants=None, ops=None, sizes=None, rounds=None,
               cpu=None, file_dir=None, accuracy=False, clock=None, realtime=True,
               shapes=None, judged=None, target=None, budget_s=None, quiet_first=True,
               should_stop=None, skip=None, copies=COPIES, deadline=None, label="bench",
               round_lines=True):
    """Measure the per-call matrix; write percall.json into out_dir; return the document.

    variants  names ('64-syscall', ...) or None for every mechanism of the registry
    ops       operations, or None for each mechanism's own (registry)
    sizes     write-file sizes (default 256 and 4096)
    rounds    override the mode's number of rounds
    shapes    loop shapes, or None for each mechanism's own (registry)
    accuracy  also run `perf bench syscall basic` once per round
    realtime  run syscost (and perf bench) under SCHED_FIFO when allowed
    judged    probe.check_all('syscost') rows, when the caller has them already
    quiet_first  wait for the host's fast state (the reference's probes) while the budget
              has slack: on a quiet host this never waits
    budget_s  the matrix's time budget (default: BUDGET_FACTOR of the mode's rounds' time on a
              quiet host, estimated from the first round)
    target    keep adding rounds past the mode's until should_stop(doc) says so or the budget
              (required then) is spent; should_stop(doc) -> (stop, progress text) is the
              analysis' judgement (this layer does not analyse)
    skip      skip(cell key, past the mode's rounds) -> True for a cell that needs no more
              rounds (its target met, or no target to meet once the mode's rounds are done)
    label     what the progress lines begin with (tw run's exit-price stage runs a cut matrix)
    round_lines  a progress line each round (the exit-price stage's rounds take 30 ms: it
              says what it did in one line instead)
    deadline  a time.monotonic() by which the matrix ends (tw run's share of its budget for
              the bench): no round starts that would end past it, once MIN_ROUNDS are done,
              and no waiting for a quiet host spends the time those rounds need
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}")
    params = dict(MODES[mode])
    if rounds is not None:
        params["rounds"] = rounds
    mechs = registry.mechanisms()
    if variants is not None:
        names = registry.names()
        unknown = [v for v in variants if v not in names]
        if unknown:
            raise ValueError(f"unknown variant(s) {', '.join(unknown)}; see variants/registry")
        mechs = [registry.get(v) for v in variants]
    sizes = list(sizes) if sizes is not None else list(DEFAULT_SIZES)
    ref = reference()
    full = variants is None and ops is None and shapes is None
    if out_dir is not None:
        Path(out_dir).mkdir(parents=True, exist_ok=True)
    file_dir = Path(file_dir) if file_dir else (Path(out_dir) if out_dir else Path.cwd())
    file_dir.mkdir(parents=True, exist_ok=True)

    t_start = time.monotonic()
    judged = {r["name"]: r for r in (judged or probe.check_all("syscost"))}
    for r in judged.values():
        if r["status"] == "unsupported":
            ui.progress(f"{label}: {r['name']} unsupported: {r['reason']}")
        elif r["status"] == "broken":
            ui.warn(f"{label}: {r['name']} is broken: {r['reason']}",
                    "its cells are recorded as broken and the run exits non-zero")
    cells = cell_list(mechs, ops, sizes, shapes)
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

    # One run to measure the TSC rate (longer calibration), shared by every run after it.
    tsc_hz, clk, pinned = None, None, cpu
    first = next((k for k, c in state.items() if c["supported"]), None)
    if first is not None:
        tsc_hz, clk, pinned = calibrate(
            first[0], "null" if "null" in state[first]["mech"].ops else first[1], cpu=cpu,
            clock=clock)
    perf = {"samples": [], "rounds": [], "why": None, "loops": params["perf_loops"]}

    ref_key = next((k for k in state if (k[0], k[1], k[3]) == ref and state[k]["supported"]), None)
    n_copies = max(1, copies)
    copied, copies_dir = make_copies(
        {v: probe.binary("syscost", v) for v in sorted({k[0] for k, c in state.items()
                                                        if c["supported"]})}, n_copies)
    so_far = {}
    try:
        return _rounds(out_dir, mode, mechs, ops, sizes, shapes, full, accuracy, clock, realtime,
                       target, budget_s, quiet_first, should_stop, skip, params, ref, file_dir,
                       t_start, state, tsc_hz, clk, pinned, perf, ref_key, copied, n_copies,
                       deadline, label, round_lines, so_far)
    except ui.Interrupted as e:
        # A signal (Ctrl-C, SIGTERM): the rounds so far are kept, marked interrupted, so that
        # a run stopped at minute 9 of 10 keeps 9 minutes of measuring (tw report and tw
        # compare read them and say so); the signal then goes on up.
        if out_dir is not None and "doc" in so_far and any(c["rounds"] for c in state.values()):
            doc = so_far["doc"]()
            doc["host_state"]["stopped"] = "interrupted"
            doc["interrupted"] = {"signal": e.name, "rounds": doc["params"]["rounds"],
                                  "after_s": round(time.monotonic() - t_start, 2)}
            files.write_json(Path(out_dir) / "percall.json", doc)
        raise
    finally:
        shutil.rmtree(copies_dir, ignore_errors=True)


def _rounds(out_dir, mode, mechs, ops, sizes, shapes, full, accuracy, clock, realtime, target,
            budget_s, quiet_first, should_stop, skip, params, ref, file_dir, t_start, state,
            tsc_hz, clk, pinned, perf, ref_key, copied, n_copies, deadline=None, label="bench",
            round_lines=True, so_far=None):
    """run_matrix's rounds, the programs' copies made (and removed) by the caller; returns
    the document (and writes percall.json into out_dir).  so_far["doc"]: how to build the
    document of what was measured so far, for the caller to keep when a signal cuts it."""
    scheds = set()
    perf_s = 0.0        # time spent in perf bench, not part of the matrix's wall time
    # A target run never waits: it stops at a number of fast-state processes, not of rounds,
    # and waiting adds no fast time (the host is quiet when it is quiet), it only spends the
    # sleeps and the probes of the wait, and a burst seconds long yields one chunk of cells
    # per fast probe.  Beside a noisy neighbour, a --target 1% run that waited measured 38
    # rounds in 600 s, 27 s of a round waiting, and met the target in 1 of 48 fast cells.
    quiet = quiet_first and ref_key is not None and target is None
    host = {"probes": [], "tol": HOST_TOL, "quiet_first": quiet, "waited_s": 0.0,
            "budget_s": budget_s, "target": target, "stopped": None, "rounds": 0,
            # the stopping rule's plan: each cell's sampling aims at what the host's drift
            # leaves of the target (percall.sampling_target); a run without it planned for
            # the whole target and is read so
            "target_plan": "drift" if target is not None else None,
            "deadline_s": round(deadline - t_start, 1) if deadline is not None else None}
    rule = HostProbe()       # the live rule: fast or slow, from the probes so far
    # the headline's cells (headline()): their processes that met the fast state so far (a
    # probe fast on each side), those measured since the last probe, and the blocks so far
    head = sorted((k for k, c in state.items() if c["supported"] and k != ref_key
                   and headline(k)), key=lambda k: (k[1] != "cpuid", k[0]))
    head_fast = {k: 0 for k in head}
    live = {"pending": [], "last_fast": None, "bursts": 0}

    sched_why = None        # why a run did not get SCHED_FIFO, the last one's

    def run_one(key, rnd, record=True):
        """One process of one cell; its record (appended to the cell unless record is False),
        or None when it gave nothing."""
        nonlocal sched_why, clk
        c = state[key]
        if len(c["errors"]) >= 2:
            return None         # failed twice: stop spending time on it
        sync = c["op"] == "write-sync"
        t_cell = time.monotonic() - t_start
        try:
            res = measure(key[0], c["op"], c["size"], c["shape"], sampling=Sampling(
                batches=SYNC_BATCHES[mode] if sync else params["batches"], calls=c["calls"],
                cpu=pinned, tsc_hz=tsc_hz, clock=clock, batch_ms=params["batch_ms"],
                warmup_ms=min(params["warmup_ms"], 5) if sync else params["warmup_ms"],
                realtime=realtime), launch=Launch(
                binary=copied[key[0]][rnd % n_copies], file_dir=file_dir,
                extra_env=_stack_pad(rnd)))
        except SyscostError as e:
            c["errors"].append(str(e))
            ui.warn(f"{label}: {' '.join(str(x) for x in key if x is not None)}: {e}",
                    "the cell is reported with the error")
            return None
        if not res["supported"]:
            c["supported"], c["reason"] = False, res["reason"]
            if c["status"] == "works":
                c["status"] = "broken"      # it passed its probe, then stopped working
            return None
        if c["calls"] is None:
            c["calls"] = res["calls_per_batch"]   # later rounds reuse the first round's size
        rd = {"round": rnd, "copy": rnd % n_copies, "t_s": round(t_cell, 3),
              "calls_per_batch": res["calls_per_batch"],
              "cpu": res.get("cpu"), "sched": res.get("sched")}
        for k, name in BATCH_KEYS.items():
            if res.get(k) is not None:
                rd[name] = res[k]
        if record:
            c["rounds"].append(rd)
        scheds.add(res.get("sched"))
        if res.get("sched") != "fifo":
            sched_why = res.get("sched_why")
        clk = clk or res.get("clock")
        return rd

    def host_probe(rnd, record):
        """Run the reference once as the host's probe: (its record, fast or not, or None)."""
        rd = run_one(ref_key, rnd, record)
        judged = rule.judge(rd)
        if judged is None:
            return rd, None
        f, step, fast = judged
        if fast and live["last_fast"]:
            for k in live["pending"]:
                head_fast[k] += 1
        live["pending"].clear()
        live["last_fast"] = fast
        probe_rec = {"t_s": rd["t_s"], "round": rnd, "floor_ns": f, "fast": fast,
                     "in_cell": record}
        if step is not None:
            probe_rec["chain_ns"] = step
        host["probes"].append(probe_rec)
        return rd, fast

    def _doc():
        """The document of what was measured so far."""
        wall = time.monotonic() - t_start - perf_s

        out_cells = []
        for (name, op, size, shape), c in state.items():
            m = c["mech"]
            cell = {"variant": name, "bits": m.bits, "abi": m.abi, "mechanism": m.mechanism,
                    "op": op, "size": size, "shape": shape, "supported": c["supported"],
                    "status": c["status"], "reason": c["reason"], "calls_per_batch": c["calls"],
                    "rounds": c["rounds"]}
            if c["errors"]:
                cell["errors"] = c["errors"]
            out_cells.append(cell)
        doc = {"schema": SCHEMA, "clock": clk, "tsc_hz": tsc_hz, "cpu": pinned, "mode": mode,
               "params": {"batches": params["batches"], "sync_batches": SYNC_BATCHES[mode],
                          "calls_per_batch": "auto (first round, then fixed)",
                          "batch_ms": params["batch_ms"], "warmup_ms": params["warmup_ms"],
                          "rounds": host["rounds"], "rounds_mode": params["rounds"],
                          "copies": n_copies,
                          "sizes": sizes,
                          "ops": list(ops) if ops is not None else None,
                          "shapes": list(shapes) if shapes is not None else None,
                          "variants": [m.name for m in mechs]},
               "reference": {"variant": ref[0], "op": ref[1], "shape": ref[2]},
               "sched": "fifo" if scheds == {"fifo"} else ("mixed" if "fifo" in scheds else "other"),
               "sched_why": sched_why or ("SCHED_FIFO priority 50" if scheds == {"fifo"} else None),
               "file_dir": str(file_dir), "file_fstype": _fstype(file_dir),
               "host": socket.gethostname(), "full_matrix": full,
               "wall_s": wall, "cells": out_cells,
               "perf_bench": perf if accuracy else None,
               "host_state": dict(host, probes=list(host["probes"]))}
        return doc

    if so_far is not None:
        so_far["doc"] = _doc
    measured = []           # each round's measuring time (waiting left out)
    judged_at = [0.0]       # when should_stop last judged
    max_rounds = params["rounds"] if target is None else 10000
    rnd = 0
    while rnd < max_rounds:
        if proc.next_round_past(deadline, measured, rnd, MIN_ROUNDS):
            # tw run's time for the bench is spent: fewer rounds, the intervals wider and
            # honest for it, rather than a report past its time
            host["stopped"] = "deadline"
            ui.progress(f"{label}: stopped after {rnd} of {params['rounds']} rounds: the "
                        f"report's time for the bench ({host['deadline_s']:.0f} s) is spent")
            break
        order = [k for k, c in state.items() if c["supported"] and k != ref_key
                 and not (skip and skip(k, rnd >= params["rounds"]))]
        random.Random(rnd).shuffle(order)
        t_round = time.monotonic()
        waited_round = 0.0
        # Quiet first: the cells whose undisturbed figure the quiet moments are for (QUIET_OPS)
        # wait in one queue, the rest in another, each in the round's shuffled order.  A probe
        # that finds the host fast takes the next chunk of the first; one that finds it slow
        # takes the next chunk of the second, whose cells lead with their typical figure or
        # are not what the quiet is for, and waits only when that queue is empty.
        queues = ([[k for k in order if _quiet(k)], [k for k in order if not _quiet(k)]]
                  if quiet else [list(order)])
        # the headline's cells first among those the quiet moments are for, as one block
        queues[0].sort(key=lambda k: head.index(k) if k in head_fast else len(head))
        repeats = 0
        while True:             # at least once: a round of no cells still probes
            chunk = None
            if ref_key is not None:
                # The probe before each chunk: while the host is slow, nothing is left to
                # measure in the slow state and the budget has slack beyond the work left,
                # wait for its fast state.  Only the probe that opens the chunk counts as a
                # reference round.
                rd, fast = host_probe(rnd, record=False)
                if quiet and fast and head and repeats < HEADLINE_REPEATS \
                        and min(head_fast.values()) < HEADLINE_FAST \
                        and not any(k in head_fast for k in queues[0]) and any(queues):
                    # a fast probe, the headline's block measured already this round and its
                    # cells still short of fast processes: the block again, first
                    chunk = list(head)
                    repeats += 1
                else:
                    chunk = next_chunk(queues, fast) if quiet else None
                while quiet and chunk is None and fast is False and budget_s is not None \
                        and measured:
                    # the rounds left at the mean measuring time so far: the fastest round
                    # is an optimist's estimate, and the budget was overrun by 11% with it
                    per = sum(measured) / len(measured)
                    left = per * (max(params["rounds"] - rnd, 1) if target is None else 1)
                    elapsed = time.monotonic() - t_start - perf_s
                    if elapsed + left + WAIT_S > budget_s:
                        break
                    t_wait = time.monotonic()
                    time.sleep(WAIT_S)
                    rd, fast = host_probe(rnd, record=False)
                    waited_round += time.monotonic() - t_wait
                if rd is not None:
                    state[ref_key]["rounds"].append(rd)
                    host["probes"][-1]["in_cell"] = True
            if chunk is None:
                chunk = next_chunk(queues, True)
            burst = None
            if any(k in head_fast for k in chunk):
                live["bursts"] += 1
                burst = live["bursts"]
            for key in chunk:
                rd = run_one(key, rnd)
                if rd is not None and burst is not None and key in head_fast:
                    rd["burst"] = burst
                    live["pending"].append(key)
            if not any(queues):
                break
        if ref_key is not None:
            rd, _ = host_probe(rnd, record=True)       # the round's closing probe
        host["waited_s"] += waited_round
        measuring = time.monotonic() - t_round - waited_round
        measured.append(measuring)
        if rnd == min(1, params["rounds"] - 1) and host["budget_s"] is None and target is None:
            budget_s = BUDGET_FACTOR.get(mode, 1.0) * min(measured) * params["rounds"]
            if deadline is not None:
                # waiting must not spend the rounds' own time: within the deadline, the
                # rounds left at their pace come first
                budget_s = min(budget_s, deadline - t_start)
            host["budget_s"] = budget_s
        if accuracy:
            t_perf = time.monotonic()
            ns, why = perf_bench_once(params["perf_loops"], cpu=pinned, realtime=realtime)
            perf_s += time.monotonic() - t_perf
            if ns is None:
                perf["why"] = why
            else:
                perf["samples"].append(ns)
                perf["rounds"].append(rnd)
        rnd += 1
        host["rounds"] = rnd
        elapsed = time.monotonic() - t_start - perf_s
        pr = host["probes"]
        share = sum(1 for x in pr if x["fast"]) / len(pr) if pr else None
        msg = (f"{label}: round {rnd}{'' if target else '/' + str(params['rounds'])} "
               f"({time.monotonic() - t_round:.1f} s"
               + (f", {waited_round:.1f} s waiting for a quiet host" if waited_round else "")
               + (f"; host fast in {100 * share:.0f}% of probes so far" if share is not None else "")
               + ")")
        # The target's judgement from the fourth round on (the stopping rule's plan depends on
        # its first stage alone, so judging often costs no coverage), at most once per tenth
        # of the time so far: analysing the matrix takes a second or so.
        if should_stop is not None and rnd >= 4 and elapsed - judged_at[0] >= 0.1 * elapsed:
            judged_at[0] = elapsed
            stop, why = should_stop(_doc())
            msg += f"; {why}"
            if stop:
                host["stopped"] = "target"
                if round_lines:
                    ui.progress(msg)
                break
        if target is not None and budget_s is not None and elapsed >= budget_s:
            host["stopped"] = "budget"
            if round_lines:
                ui.progress(msg + f"; the budget of {budget_s:.0f} s is spent")
            break
        if round_lines:
            ui.progress(msg)
    doc = _doc()
    if out_dir is not None:
        files.write_json(Path(out_dir) / "percall.json", doc)
    return doc
