"""A against B in one session, alternating: what `tw ab` measures.

Two settings that can alternate without a reboot: a per-process speculation mitigation
(syscost --speculation), or two builds of the benchmark (another build directory's
syscost-<variant>).  Every round measures every chosen cell once under A and once under B, in
a shuffled order, so the host's drift lands on both alike; each round then gives one B/A
value per cell (twtools.analyse.compare.paired_rounds decides).  ab.json keeps every batch of
every round, raw, and how each side was run.
"""
import random
import time
from pathlib import Path

from ..core import files, ui
from ..machine import registry
from .syscost import SyscostError, calibrate, measure

SCHEMA = "timewrite-ab/1"
PROGRESS_S = 1.0


def side(label, speculation=None, build=None):
    """How one side runs: its label, syscost options and binary directory."""
    return {"label": label, "speculation": speculation, "build": str(build) if build else None}


def _binary(s, variant):
    """Side s's syscost-<variant>: its build's, or None for this tree's."""
    return Path(s["build"]) / f"syscost-{variant}" if s["build"] else None


def _run(s, variant, op, shape, batches, batch_ms, warmup_ms, cpu, realtime, tsc_hz=None):
    extra = ["--speculation", s["speculation"]] if s["speculation"] else []
    return measure(variant, op, batches=batches, batch_ms=batch_ms, warmup_ms=warmup_ms,
                   cpu=cpu, realtime=realtime, shape=shape, extra_args=extra,
                   binary=_binary(s, variant), tsc_hz=tsc_hz)


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
           batch_ms=0.5, warmup_ms=5, cpu=None, realtime=True):
    """Interleave A and B over every (variant, op, shape) for `rounds` rounds; write ab.json."""
    cells = [(v, op, shape) for v in variants for op in ops for shape in shapes
             if op in registry.get(v).ops and shape in registry.shapes_for(registry.get(v), op)]
    if not cells:
        raise ValueError("no cell to measure: check the variants' operations and shapes "
                         "(variants/registry)")
    data = {(c, s["label"]): {"rounds": [], "reason": None} for c in cells for s in (a, b)}
    tsc_hz, cpu = _calibrate(a, cells, cpu)
    t0 = shown = time.monotonic()
    for rnd in range(rounds):
        order = [(c, s) for c in cells for s in (a, b)]
        random.Random(rnd).shuffle(order)
        for c, s in order:
            d = data[(c, s["label"])]
            if d["reason"]:
                continue
            try:
                r = _run(s, *c, batches, batch_ms, warmup_ms, cpu, realtime, tsc_hz)
            except SyscostError as e:
                d["reason"] = str(e)
                ui.warn(f"ab: {s['label']} {' '.join(c)}: {e}", "that cell is reported without a decision")
                continue
            if not r["supported"]:
                d["reason"] = r["reason"]
                continue
            d["rounds"].append({"round": rnd, "t_s": round(time.monotonic() - t0, 3),
                                "samples_ns": r["samples_ns"], "disturbed": r.get("disturbed"),
                                "speculation": r.get("speculation")})
        now = time.monotonic()
        if rnd + 1 == rounds or now - shown >= PROGRESS_S:
            # a line a second at most: the default run has 200 rounds of about 25 ms
            ui.progress(f"ab: round {rnd + 1}/{rounds} ({now - t0:.1f} s)")
            shown = now
    doc = {"schema": SCHEMA, "a": a, "b": b, "rounds": rounds, "batches": batches,
           "batch_ms": batch_ms, "wall_s": round(time.monotonic() - t0, 2),
           "tsc_hz": tsc_hz, "cpu": cpu,
           "cells": [{"variant": c[0], "op": c[1], "shape": c[2],
                      "a": data[(c, a["label"])], "b": data[(c, b["label"])]} for c in cells]}
    if out_dir is not None:
        files.write_json(Path(out_dir) / "ab.json", doc)
    return doc
