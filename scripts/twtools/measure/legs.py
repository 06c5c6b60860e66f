"""tw run's legs stage: each null call split into its way in, body and way out, on one clock.

For every mechanism that enters by a system call (registry seen-as "syscall") and works here,
build/legs-<variant> stamps each call in user space, just before its entry and just after its
return, on CLOCK_MONOTONIC read through the vDSO; traces/legs.bt stamps the same calls at
raw_syscalls:sys_enter and sys_exit on bpf_ktime_get_ns(), the same clock (docs/legs.md says
why the pair agrees).  Rounds are processes, the mechanisms taking turns in each round, as the
per-call matrix does.

The tracer's own cost lands inside the legs, so the same programs also run untraced, half
their rounds before bpftrace attaches and half after it is stopped (a drift over the stage
falls on both sides alike): traced total - untraced total is the tracer's cost per call.

legs.json keeps raw stamps only (analyse.legs joins and checks them): per process, each
stamp as ns after that process's first user stamp (absolute CLOCK_MONOTONIC values grow with
the uptime past what a stage file may hold).

    stage(out, mode)   measure, write legs.json; RuntimeError when tracing cannot run here
                       (the stage is then recorded as failed with the reason)
"""
import json
import tempfile
import time
from pathlib import Path

from ..core import files, paths, proc, ui
from ..machine import probe, registry
from . import census

SCHEMA = "timewrite-legs/1"
SCRIPT = "legs.bt"
# rounds (processes per mechanism, traced; as many untraced), batches per process, calls per batch
PLAN = {"quick": (4, 5, 100), "default": (8, 10, 100), "long": (16, 20, 100)}
WARMUP = 2000


def why_not():
    """Why the kernel's stamps cannot be taken here, or None."""
    if not proc.is_root():
        return "tracing needs root (bpftrace on raw_syscalls)"
    if not proc.which("bpftrace"):
        return "bpftrace is not installed"
    return None


def program(variant):
    return probe.binary("legs", variant)


def candidates(variants=None):
    """The variants whose calls raw_syscalls sees: every way in by a system call."""
    return [m.name for m in registry.mechanisms()
            if m.seen_as == "syscall" and (not variants or m.name in variants)]


def _one(variant, batches, calls, warmup, shape="ret"):
    """One process's stamps: the program's JSON, its stamps made relative."""
    prog = program(variant)
    t = time.time()
    p = proc.run([prog, "--batches", batches, "--calls", calls, "--warmup", warmup,
                  "--shape", shape], timeout=300)
    if p.returncode != 0:
        msg = (p.stderr or "").strip().splitlines()
        raise RuntimeError(f"{prog.name} exited {p.returncode}: {msg[-1] if msg else 'no message'}")
    d = json.loads(p.stdout)
    base = d["before_ns"][0]
    return {"pid": d["pid"], "cpu": d["cpu"], "shape": d["shape"], "start_s": round(t, 3),
            "calls": d["calls"], "batches": d["batches"], "warmup": d["warmup"],
            "clock": d["clock"], "empty_ns": d["empty_ns"],
            "before": [x - base for x in d["before_ns"]],
            "after": [x - base for x in d["after_ns"]], "_base": base}


def attach_kernel_stamps(rec, maps):
    """rec (one traced process) with its kernel stamps from bpftrace's maps: enter and exit in
    call order, relative to the same base as its user stamps, and the counts bpftrace saw."""
    pid, base = str(rec["pid"]), rec.pop("_base")
    n = rec["calls"] * rec["batches"]
    for name, key in (("enter", "@enter"), ("exit", "@exit")):
        m = maps.get(key) or {}
        got = [m.get((pid, str(i))) for i in range(n)]
        rec[name] = [None if v is None else v - base for v in got]
    rec["kernel_calls"] = (maps.get("@calls") or {}).get((pid,))
    rec["kernel_exits"] = (maps.get("@exits") or {}).get((pid,))
    return rec


def measure(variants=None, mode="default", shape="ret"):
    """The legs.json document (raw stamps), or one with 'why' when tracing cannot run.  shape:
    the stub returns by ret (as libc's wrappers, and the cost model's cells) or leaves by an
    indirect jump (jmp: no return-stack prediction after the kernel returns)."""
    rounds, batches, calls = PLAN.get(mode, PLAN["default"])
    doc = {"schema": SCHEMA, "clock": "CLOCK_MONOTONIC: the vDSO in user space, "
                                      "bpf_ktime_get_ns() in the kernel",
           "script": SCRIPT, "rounds": rounds, "batches": batches, "calls": calls,
           "warmup": WARMUP, "shape": shape, "variants": {}, "why": why_not()}
    if doc["why"]:
        return doc
    names = []
    for v in candidates(variants):
        ok, why = probe.check("legs", v)
        if ok and shape != "ret" and shape not in registry.get(v).shapes:
            ok, why = False, f"{v} has no {shape} shape (variants/registry)"
        doc["variants"][v] = {"status": "measured" if ok else "unsupported", "why": why,
                              "traced": [], "untraced": []}
        if ok:
            names.append(v)
    if not names:
        doc["why"] = "no mechanism that enters by a system call works here"
        return doc
    first = rounds // 2
    for r in range(first):
        for v in names:
            doc["variants"][v]["untraced"].append(_strip(_one(v, batches, calls, WARMUP, shape)))
    keys = max(4096, 2 * rounds * batches * calls * len(names))
    with tempfile.TemporaryDirectory(prefix="tw-legs-") as tmp:
        ui.progress(f"legs: attaching bpftrace ({SCRIPT}) for {len(names)} mechanisms")
        bt, out, err = census._start(paths.TRACES / SCRIPT, tmp, keys=keys, arg=WARMUP,
                                     out_name="legs.ndjson")
        traced = []
        try:
            t0 = time.monotonic()
            for r in range(rounds):
                for v in names:
                    traced.append((v, _one(v, batches, calls, WARMUP, shape)))
            time.sleep(0.2)
            doc["attached_s"] = round(time.monotonic() - t0, 2)
        finally:
            text = census._stop(bt, out, err)
    from ..machine.tracers import bpftrace
    maps = bpftrace.parse_json(text)
    for v, rec in traced:
        doc["variants"][v]["traced"].append(attach_kernel_stamps(rec, maps))
    for r in range(rounds - first):
        for v in names:
            doc["variants"][v]["untraced"].append(_strip(_one(v, batches, calls, WARMUP, shape)))
    return doc


def _strip(rec):
    rec.pop("_base", None)
    return rec


def stage(out, mode="default", variants=None, shape="ret"):
    """tw run's legs stage: legs.json in out.  Where tracing cannot run (not root, no
    bpftrace) the file says why and the stage passes, as the report's unknowns do; a tracer
    that fails to attach, or a program that fails, fails the stage."""
    doc = measure(variants, mode, shape)
    files.write_json(Path(out) / "legs.json", doc)
    if doc["why"]:
        ui.progress(f"legs: not measured: {doc['why']}")
    return doc
