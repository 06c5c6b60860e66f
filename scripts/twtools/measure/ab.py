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
import random
import shutil
import tempfile
import time
from pathlib import Path

from ..core import files, ui
from ..machine import hostwalls, probe, registry, seccomp
from . import workflags
from .syscost import Launch, Sampling, SyscostError, calibrate, make_copies, measure
from .trace import tmp_dir

SCHEMA = "timewrite-ab/3"
PROGRESS_S = 1.0
# Fresh copies of each side's binary, each a new file: the groups the interval replicates
# over.  Eight keep Student's t at 2.36 (7 df) while a default run's 200 rounds still give 25
# rounds a copy, 5 in each side's fastest 20%.
COPIES = 8


def side(label, speculation=None, build=None):
    """How one side runs: its label, syscost options and binary directory."""
    return {"label": label, "speculation": speculation, "build": str(build) if build else None}


def _binary(s, variant):
    """Side s's syscost-<variant>: its build's, or None for this tree's."""
    return Path(s["build"]) / f"syscost-{variant}" if s["build"] else None


def _run(s, variant, op, shape, batches, batch_ms, warmup_ms, cpu, realtime, tsc_hz=None,
         binary=None, wall=None, bare=None):
    """One syscost run of side s; behind the wall when one is given (side B's): what the wall
    adds to the run (wall.before: syscost's arguments, a command wrapper), or the run refused
    with the wall's reason.  bare: the wall of a run that stays in front of it (side A's),
    whose bare_wrapper, if it has one, starts A's program the way B's is started but for the
    wall."""
    extra = ["--speculation", s["speculation"]] if s["speculation"] else []
    wrapper = bare.bare_wrapper if bare is not None else None
    if wall is not None:
        more, wrapper, why = wall.before(variant, op, registry.get(variant).abi)
        if why:
            return {"supported": False, "reason": f"behind {wall.spec}: {why}"}
        extra += more
    return measure(variant, op, shape=shape, sampling=Sampling(
        batches=batches, batch_ms=batch_ms, warmup_ms=warmup_ms, cpu=cpu, tsc_hz=tsc_hz,
        realtime=realtime), launch=Launch(binary=binary or _binary(s, variant),
                                          extra_args=extra, command_wrapper=wrapper))


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


def run_ab(out_dir, a, b, variants, ops=("null",), shapes=("ret",), rounds=12, batches=6,
           batch_ms=0.5, warmup_ms=5, cpu=None, realtime=True, copies=COPIES, wall=None,
           wall_both=False):
    """Interleave A and B over every (variant, op, shape) for `rounds` rounds, each side from
    `copies` fresh copies of its binary (round r from copy r % copies); write ab.json.  wall:
    a measure.walls wall that B's runs go behind (up before the rounds, down after them, the
    host as it was found either way); wall_both: A's runs too (an A/A behind the wall, tw ab
    --selfcheck --wall)."""
    cells = [(v, op, shape) for v in variants for op in ops for shape in shapes
             if op in registry.get(v).ops and shape in registry.shapes_for(registry.get(v), op)]
    if not cells:
        raise ValueError("no cell to measure: check the variants' operations and shapes "
                         "(variants/registry)")
    data = {(c, s["label"]): {"rounds": [], "reason": None} for c in cells for s in (a, b)}
    tsc_hz, cpu = _calibrate(a, cells, cpu)
    k = max(1, min(copies, rounds))
    same_build = a["build"] == b["build"]
    sources = {}
    for v in sorted({c[0] for c in cells}):
        for s_ in ((a,) if same_build else (a, b)):
            sources[(s_["label"], v)] = _binary(s_, v) or probe.binary("syscost", v)
    copied, top = make_copies(sources, k)
    facts, doc, stopped = None, None, None
    # What every process paid during the run, A and B alike: programs on raw_syscalls that
    # are not this run's own (the tracer wall's loader is started after this look).
    host_before = hostwalls.raw_syscalls_tracers()
    try:
        if wall is not None:
            facts = {"up": wall.up(out_dir, [(c[0], c[1]) for c in cells])}
        doc = _rounds(out_dir, a, b, cells, data, rounds, batches, batch_ms, warmup_ms, cpu,
                      realtime, tsc_hz, k, copied, same_build, wall, wall_both)
        if wall is not None and not wall_both:
            facts["evidence"] = _evidence(wall, cells, data, copied, a, b, same_build, tsc_hz,
                                          cpu, realtime)
    except ui.Interrupted as e:
        # the rounds so far, marked interrupted (_rounds made them): kept, below
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
            shutil.rmtree(top, ignore_errors=True)
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


def _evidence(wall, cells, data, copied, a, b, same_build, tsc_hz, cpu, realtime):
    """What the kernel put on one A process and one B process of the first cell B could run:
    their SYSCALL_WORK flags, read by bpftrace at their exit_group (workflags.work_flags), and
    B's seccomp lines of /proc/self/status as syscost printed them.  {'cell', 'a', 'b',
    'why'}: a and b are lists of flag names, or None with why."""
    cell = next((c for c in cells if data[(c, b["label"])]["rounds"]), None)
    if cell is None:
        return {"cell": None, "a": None, "b": None, "why": "B ran no cell"}
    variant, op, shape = cell
    key = (a["label"], variant)
    binary = copied[key if key in copied else (b["label"], variant)][0]
    # exit_group: the process's last call, made with the wall up, and allowed by any filter a
    # process can live behind; a call the filter answers itself never reaches sys_enter
    # (syscall_trace_enter returns before the tracepoint when seccomp says skip).
    nr = seccomp.number("exit_group", seccomp.ABI_ARCH[registry.get(variant).abi])
    with tempfile.TemporaryDirectory(prefix="tw-ab-evidence-", dir=tmp_dir()) as tmp:
        flags, (ra, rb), why = workflags.work_flags(binary.name, nr, [
            lambda: _run(a, variant, op, shape, 2, 0.5, 1, cpu, realtime, tsc_hz, binary,
                         bare=wall),
            lambda: _run(b, variant, op, shape, 2, 0.5, 1, cpu, realtime, tsc_hz,
                         binary if same_build else copied[(b["label"], variant)][0], wall)],
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


def _rounds(out_dir, a, b, cells, data, rounds, batches, batch_ms, warmup_ms, cpu, realtime,
            tsc_hz, k, copied, same_build, wall=None, wall_both=False):
    t0 = shown = time.monotonic()
    done = 0
    try:
        for rnd in range(rounds):
            order = [(c, s) for c in cells for s in (a, b)]
            random.Random(rnd).shuffle(order)
            if wall is not None and wall.grouped and not wall_both:
                # A wall whose going up and down costs more than a run (the tracer: each
                # attach and detach waits for the kernel's RCU) is put up once a round: B's
                # runs together, A's together, each side first every other round, so that a
                # drift within the round lands on both alike.
                sides = (b, a) if rnd % 2 else (a, b)
                order = [x for side in sides for x in order if x[1] is side]
            for c, s in order:
                d = data[(c, s["label"])]
                if s is a and wall is not None and not wall_both:
                    wall.release()      # B's alone: an A/A keeps it up for both sides
                if d["reason"]:
                    continue
                g = rnd % k
                binary = copied[((a if same_build else s)["label"], c[0])][g]
                try:
                    r = _run(s, *c, batches, batch_ms, warmup_ms, cpu, realtime, tsc_hz, binary,
                             wall if s is b or wall_both else None,
                             bare=wall if s is a and not wall_both else None)
                except SyscostError as e:
                    d["reason"] = str(e)
                    ui.warn(f"ab: {s['label']} {' '.join(c)}: {e}",
                            "that cell is reported without a decision")
                    continue
                if not r["supported"]:
                    d["reason"] = r["reason"]
                    continue
                d["rounds"].append({"round": rnd, "copy": g,
                                    "t_s": round(time.monotonic() - t0, 3),
                                    "samples_ns": r["samples_ns"], "disturbed": r.get("disturbed"),
                                    "speculation": r.get("speculation"), "wall": r.get("wall")})
            if wall is not None:
                wall.release()
            done = rnd + 1
            now = time.monotonic()
            if rnd + 1 == rounds or now - shown >= PROGRESS_S:
                # a line a second at most: the default run has 200 rounds of about 25 ms
                ui.progress(f"ab: round {rnd + 1}/{rounds} ({now - t0:.1f} s)")
                shown = now
    except ui.Interrupted as e:
        # An interrupted run keeps what it measured: every round so far (a round cut in two
        # keeps the side that ran; the decision uses the rounds both sides have), marked.
        e.partial = _document(a, b, cells, data, rounds, batches, batch_ms, t0, tsc_hz, cpu, k,
                              wall_both, done, e.name)
        raise
    return _document(a, b, cells, data, rounds, batches, batch_ms, t0, tsc_hz, cpu, k,
                     wall_both, done, None)


def _document(a, b, cells, data, rounds, batches, batch_ms, t0, tsc_hz, cpu, k, wall_both,
              done, interrupted):
    """ab.json's document: every round kept raw; interrupted: the signal's name when the run
    was cut short after `done` whole rounds (None for a whole run)."""
    return {"schema": SCHEMA, "kernel": platform.release(), "a": a, "b": b,
            "wall_both": wall_both, "rounds": rounds, "rounds_done": done,
            "interrupted": interrupted, "batches": batches, "batch_ms": batch_ms,
            "wall_s": round(time.monotonic() - t0, 2), "tsc_hz": tsc_hz, "cpu": cpu,
            "copies": k,
            "cells": [{"variant": c[0], "op": c[1], "shape": c[2],
                       "a": data[(c, a["label"])], "b": data[(c, b["label"])]} for c in cells]}
