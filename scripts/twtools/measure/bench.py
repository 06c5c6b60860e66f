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
import socket
import time
from pathlib import Path

from ..core import files, ui
from ..machine import probe, registry
from .syscost import SyscostError, calibrate, measure, perf_bench_once

SCHEMA = "timewrite-percall/2"
DEFAULT_SIZES = [256, 4096]          # write-file sizes
SYNC_SIZE = 256                      # write-sync: the seed report's slow row
DEVNULL_SIZE = 1
# The cell every round measures, to which every cell is also compared, paired by round.
REFERENCE_OP, REFERENCE_SHAPE = "null", "ret"
# ... several times per round: once every this many other cells.
REF_EVERY = 12

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
              "irqs": "irqs", "disturbed": "disturbed"}


def _stack_pad(rnd):
    """An environment variable whose length changes from round to round (0 to 4 KiB in 16-byte
    steps), so that where each process's stack starts is sampled by the rounds rather than
    fixed for the whole run (Mytkowicz et al. 2009: the environment's size moves code's
    speed).  It costs nothing; scripts/bench_factors.py measured the effect of a 3000-byte
    change at 0.22% (median over cells), within what a rerun moves."""
    return {"TW_ROUND_PAD": "x" * ((rnd * 16 * 37) % 4096)}


def run_matrix(out_dir, mode="default", variants=None, ops=None, sizes=None, rounds=None,
               cpu=None, file_dir=None, accuracy=False, clock=None, realtime=True,
               shapes=None, judged=None):
    """Measure the per-call matrix; write percall.json into out_dir; return the document.

    variants  names ('64-syscall', ...) or None for every mechanism of the registry
    ops       operations, or None for each mechanism's own (registry)
    sizes     write-file sizes (default 256 and 4096)
    rounds    override the mode's number of rounds
    shapes    loop shapes, or None for each mechanism's own (registry)
    accuracy  also run `perf bench syscall basic` once per round
    realtime  run syscost (and perf bench) under SCHED_FIFO when allowed
    judged    probe.check_all('syscost') rows, when the caller has them already
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
            ui.progress(f"bench: {r['name']} unsupported: {r['reason']}")
        elif r["status"] == "broken":
            ui.warn(f"bench: {r['name']} is broken: {r['reason']}",
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
    scheds, sched_why = set(), None
    perf_s = 0.0        # time spent in perf bench, not part of the matrix's wall time

    ref_key = next((k for k in state if (k[0], k[1], k[3]) == ref and state[k]["supported"]), None)
    for rnd in range(params["rounds"]):
        order = [k for k, c in state.items() if c["supported"] and k != ref_key]
        random.Random(rnd).shuffle(order)
        if ref_key is not None:
            # The reference runs every REF_EVERY cells, so each cell has one a fraction of a
            # second away: the host's speed changes faster than a round lasts, and a ratio
            # only cancels what both of its cells saw.
            for i in range(len(order) - len(order) % REF_EVERY, -1, -REF_EVERY):
                order.insert(i, ref_key)
        t_round = time.monotonic()
        for key in order:
            c = state[key]
            if len(c["errors"]) >= 2:
                continue        # failed twice: stop spending time on it
            sync = c["op"] == "write-sync"
            t_cell = time.monotonic() - t_start
            try:
                res = measure(key[0], c["op"], c["size"],
                              batches=SYNC_BATCHES[mode] if sync else params["batches"],
                              calls=c["calls"], cpu=pinned, tsc_hz=tsc_hz, clock=clock,
                              batch_ms=params["batch_ms"],
                              warmup_ms=min(params["warmup_ms"], 5) if sync else params["warmup_ms"],
                              file_dir=file_dir, realtime=realtime, shape=c["shape"],
                              extra_env=_stack_pad(rnd))
            except SyscostError as e:
                c["errors"].append(str(e))
                ui.warn(f"bench: {' '.join(str(x) for x in key if x is not None)}: {e}",
                        "the cell is reported with the error")
                continue
            if not res["supported"]:
                c["supported"], c["reason"] = False, res["reason"]
                if c["status"] == "works":
                    c["status"] = "broken"      # it passed its probe, then stopped working
                continue
            if c["calls"] is None:
                c["calls"] = res["calls_per_batch"]   # later rounds reuse the first round's size
            rd = {"round": rnd, "t_s": round(t_cell, 3), "calls_per_batch": res["calls_per_batch"],
                  "cpu": res.get("cpu"), "sched": res.get("sched")}
            for k, name in BATCH_KEYS.items():
                if res.get(k) is not None:
                    rd[name] = res[k]
            c["rounds"].append(rd)
            clk = clk or res.get("clock")
            scheds.add(res.get("sched"))
            if res.get("sched") != "fifo":
                sched_why = res.get("sched_why")
        if accuracy:
            t_perf = time.monotonic()
            ns, why = perf_bench_once(params["perf_loops"], cpu=pinned, realtime=realtime)
            perf_s += time.monotonic() - t_perf
            if ns is None:
                perf["why"] = why
            else:
                perf["samples"].append(ns)
                perf["rounds"].append(rnd)
        ui.progress(f"bench: round {rnd + 1}/{params['rounds']} "
                    f"({time.monotonic() - t_round:.1f} s)")
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
                      "rounds": params["rounds"], "sizes": sizes,
                      "ops": list(ops) if ops is not None else None,
                      "shapes": list(shapes) if shapes is not None else None,
                      "variants": [m.name for m in mechs]},
           "reference": {"variant": ref[0], "op": ref[1], "shape": ref[2]},
           "sched": "fifo" if scheds == {"fifo"} else ("mixed" if "fifo" in scheds else "other"),
           "sched_why": sched_why or ("SCHED_FIFO priority 50" if scheds == {"fifo"} else None),
           "file_dir": str(file_dir), "file_fstype": _fstype(file_dir),
           "host": socket.gethostname(), "full_matrix": full,
           "wall_s": wall, "cells": out_cells,
           "perf_bench": perf if accuracy else None}
    if out_dir is not None:
        files.write_json(Path(out_dir) / "percall.json", doc)
    return doc
