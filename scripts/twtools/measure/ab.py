"""A against B in one session, alternating: what `tw ab` measures.

Two settings that can alternate without a reboot: a per-process speculation mitigation
(syscost --speculation), or two builds of the benchmark (another build directory's
syscost-<variant>).  Every round measures every chosen cell once under A and once under B, in
a shuffled order, so the host's drift lands on both alike; each round then gives one B/A
value per cell (twtools.analyse.compare.paired_rounds decides).  ab.json keeps every batch of
every round, raw, and how each side was run.

Each side runs from COPIES fresh copies of its binary, round r from copy r % COPIES: the same
bytes cost about 1% more or less depending on which file they run from (where its pages
landed in memory, docs/syscost.md, "The binary's file"), for as long as the file lives, so a
run from one file per side measures that file's placement along with the build.  Drawing the
placement anew for every copy, spread over the whole run, puts it in the interval
(analyse.stats.grouped_ratio replicates over the copies).  Two sides of one build (a
--speculation comparison) run the same copy in a round, so its placement cancels in the pair.
"""
import random
import shutil
import time
from pathlib import Path

from ..core import files, ui
from ..machine import probe, registry
from .syscost import SyscostError, calibrate, make_copies, measure

SCHEMA = "timewrite-ab/2"
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
         binary=None):
    extra = ["--speculation", s["speculation"]] if s["speculation"] else []
    return measure(variant, op, batches=batches, batch_ms=batch_ms, warmup_ms=warmup_ms,
                   cpu=cpu, realtime=realtime, shape=shape, extra_args=extra,
                   binary=binary or _binary(s, variant), tsc_hz=tsc_hz)


def _calibrate(a, cells, cpu):
    """(tsc_hz, cpu) from one short run of A's first cell (syscost.calibrate, as tw bench
    does): the variance lives between runs, so the 50 ms each run would spend on the TSC
    buys rounds, and A and B alike run pinned to that run's CPU.  (None, cpu) when the
    first cell cannot run; each run then calibrates for itself."""
    variant, op, shape = cells[0]
    try:
        tsc_hz, clock, cpu = calibrate(variant, op, cpu=cpu, shape=shape,
                                       binary=_binary(a, variant))
    except SyscostError:
        return None, cpu
    return (tsc_hz if clock == "tsc" else None), cpu


def run_ab(out_dir, a, b, variants, ops=("null",), shapes=("ret",), rounds=12, batches=6,
           batch_ms=0.5, warmup_ms=5, cpu=None, realtime=True, copies=COPIES):
    """Interleave A and B over every (variant, op, shape) for `rounds` rounds, each side from
    `copies` fresh copies of its binary (round r from copy r % copies); write ab.json."""
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
    try:
        return _rounds(out_dir, a, b, cells, data, rounds, batches, batch_ms, warmup_ms, cpu,
                       realtime, tsc_hz, k, copied, same_build)
    finally:
        shutil.rmtree(top, ignore_errors=True)


def _rounds(out_dir, a, b, cells, data, rounds, batches, batch_ms, warmup_ms, cpu, realtime,
            tsc_hz, k, copied, same_build):
    t0 = shown = time.monotonic()
    for rnd in range(rounds):
        order = [(c, s) for c in cells for s in (a, b)]
        random.Random(rnd).shuffle(order)
        for c, s in order:
            d = data[(c, s["label"])]
            if d["reason"]:
                continue
            g = rnd % k
            binary = copied[((a if same_build else s)["label"], c[0])][g]
            try:
                r = _run(s, *c, batches, batch_ms, warmup_ms, cpu, realtime, tsc_hz, binary)
            except SyscostError as e:
                d["reason"] = str(e)
                ui.warn(f"ab: {s['label']} {' '.join(c)}: {e}", "that cell is reported without a decision")
                continue
            if not r["supported"]:
                d["reason"] = r["reason"]
                continue
            d["rounds"].append({"round": rnd, "copy": g, "t_s": round(time.monotonic() - t0, 3),
                                "samples_ns": r["samples_ns"], "disturbed": r.get("disturbed"),
                                "speculation": r.get("speculation")})
        now = time.monotonic()
        if rnd + 1 == rounds or now - shown >= PROGRESS_S:
            # a line a second at most: the default run has 200 rounds of about 25 ms
            ui.progress(f"ab: round {rnd + 1}/{rounds} ({now - t0:.1f} s)")
            shown = now
    doc = {"schema": SCHEMA, "a": a, "b": b, "rounds": rounds, "batches": batches,
           "batch_ms": batch_ms, "wall_s": round(time.monotonic() - t0, 2),
           "tsc_hz": tsc_hz, "cpu": cpu, "copies": k,
           "cells": [{"variant": c[0], "op": c[1], "shape": c[2],
                      "a": data[(c, a["label"])], "b": data[(c, b["label"])]} for c in cells]}
    if out_dir is not None:
        files.write_json(Path(out_dir) / "ab.json", doc)
    return doc
