"""tw run's legs stage: each null call split into its way in, body and way out, on one clock.

For every mechanism that enters by a system call (registry seen-as "syscall") and works here,
build/legs-<variant> stamps each call in user space, just before its entry and just after its
return, on CLOCK_MONOTONIC read through the vDSO; traces/legs.bt stamps the same calls at
raw_syscalls:sys_enter and sys_exit on bpf_ktime_get_ns(), the same clock (docs/legs.md says
why the pair agrees).  Each program also times the core's clock before every batch (chain.h),
so that the analysis takes the host's clock steps out.

The measurement is in blocks.  In each, every mechanism runs once untraced, bpftrace attaches,
every mechanism runs once traced, and bpftrace stops (untraced first in even blocks, last in
odd ones).  So each traced process has an untraced twin from the same moment of the host, a
fraction of a second away, and every mechanism's traced process in a block meets the same
moment and the same tracer: int 0x80 less its baseline is taken within a block, and so is the
tracer's cost (the traced total less the twin's) where enough blocks allow (issue 42, item 5).
A noisy host's slow moments cost the traced calls far more than the untraced (the tracer
touches maps in memory): beside a neighbour the traced total moved 40% between the host's
states, every mechanism alike, while the twins moved differently.  So analyse.legs labels
each side by its own processes and keeps what met the host's fast state.

The mode fixes the number of blocks; --target (tw legs) adds blocks until every figure is
within it or --budget ends; tw run's deadline ends the stage early on a slow host.

legs.json keeps raw stamps only (analyse.legs joins and checks them): per process, each
stamp as ns after that process's first user stamp (absolute CLOCK_MONOTONIC values grow with
the uptime past what a stage file may hold).

    stage(out, mode, ..., **Stop's fields)
                       measure, write legs.json; RuntimeError when tracing cannot run here
                       (the stage is then recorded as failed with the reason)
"""
import json
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from ..core import files, paths, proc, ui
from ..machine import probe, registry
from . import census

SCHEMA = "timewrite-legs/2"
SCRIPT = "legs.bt"
# legs.bt's maps hold assigned values, not counts: a stamp (kept as first printed; two entries
# of one key would be a conflict, said by the reader) and a running count per process (the
# larger).  Their keys are integers, so entries cannot print alike unseen.
COMBINE = {"@enter": "first", "@exit": "first", "@calls": "max", "@exits": "max"}
# blocks (each: one process per mechanism untraced and one traced, in one moment), batches per
# process, calls per batch.  A block takes about 0.7 s on the 2-core guests (bpftrace attaches
# and stops in about 0.25 s each), so the default's 24 blocks are about 17 s, when tw run's
# deadline allows them.  legs.json keeps every stamp: about 0.6 MB a block for 7 mechanisms,
# so --long's 64 blocks (39 MB) stay inside the 64 MB a stage file may be.
# --quick: 8 blocks of the headline's mechanisms alone (headline()): with 4 blocks of all seven,
# a quick run beside the neighbour on an AMD EPYC guest left 64-int80's way out unknown (it met
# the host's fast state in 2 blocks, 3 are needed), and the first screen rests on those legs,
# not on the libcs' (issue 62).
PLAN = {"quick": (8, 5, 100), "default": (24, 10, 100), "long": (64, 10, 100)}
WARMUP = 2000
# A deadline (tw run's share of its time) or a --target never stops the stage before this many
# blocks: the undisturbed figure needs three processes of the host's fast state, and Stein's
# first stage (analyse/sequential.py) needs twelve.
MIN_BLOCKS = 4
# tw run's legs stage, past its deadline or its mode's blocks, goes on while the reference's
# legs are unknown (its `known` judge), up to this many blocks in all (about 1 s a block): a
# default report beside the neighbour on an Intel Xeon guest, its sweeps late, had 4 blocks and
# the 64-bit syscall's body unknown (1 block of the traced side in the host's fast state, 3
# are needed); with it, 11 blocks (6 added, 4 fast) and all three legs known.
KNOWN_MAX_BLOCKS = 12
# A --target run judges its figures (the whole analysis, which grows with the blocks) once
# MIN_BLOCKS are in hand and then whenever the blocks have grown by CHECK_GROWTH since the
# last judgement, and at least every CHECK_MAX blocks.
CHECK_GROWTH = 0.1
CHECK_MAX = 8
# Quiet first: before each block, the host is probed (one short process of the 64-bit syscall's
# null call, judged by the matrix's rule, measure.rounds.HostProbe) and, while it is slow, probed
# again every WAIT_STEP_S for up to WAIT_MAX_S before the block runs anyway.  A host fast in a
# quarter of its moments, in bursts of seconds, then gives most blocks its fast state: the
# legs' figures rest on the blocks whose processes met it (analyse/legs.py), and with 4 blocks
# of which 2 met it, an AMD EPYC Zen 3 guest's default report had no legs at all (issue 71).
# Waiting buys no fast time the host does not give; under a deadline it spends the block's
# share, so a run that waited has fewer blocks, more of them fast.
WAIT_MAX_S = {"quick": 1.0, "default": 2.0, "long": 3.0}
WAIT_STEP_S = 0.1
# A mitigation's own instruction, timed from user space in each block beside the untraced
# processes (syscost --op verw / lfence, the 64-bit build): the lower bound of its price on
# the leg where the kernel runs it (machine/mitigations.py says where), shown beside that leg.
INSTRUCTIONS = ("verw", "lfence")


def why_not():
    """Why the kernel's stamps cannot be taken here, or None."""
    if not proc.is_root():
        return "tracing needs root (bpftrace on raw_syscalls)"
    if not proc.which("bpftrace"):
        return "bpftrace is not installed"
    return None


def program(variant):
    return probe.binary("legs", variant)


def headline():
    """The mechanisms whose legs the report's first screen and cost model rest on: the 64-bit
    syscall (the base), int 0x80 from 32- and 64-bit code, and the 32-bit fast entries int
    0x80 is held against; what a --quick stage measures."""
    return [v for v in candidates() if v in {registry.find(64, "syscall"),
                                             registry.find(32, "int80"),
                                             registry.find(64, "int80"), *registry.fast32()}]


def candidates(variants=None):
    """The variants whose calls raw_syscalls sees: every way in by a system call."""
    return [m.name for m in registry.mechanisms()
            if m.seen_as == "syscall" and (not variants or m.name in variants)]


def _probe_host(rule, host, deadline=None):
    """Wait for a quiet moment: one reference process judged by the matrix's rule (fast or
    not), again every WAIT_STEP_S while slow, for up to host['wait_max_s'] (never past the
    deadline).  Appends each probe to host['probes']; returns whether the last was fast."""
    from .bench import reference
    from .syscost import Launch, Sampling, SyscostError, measure
    v, op = reference()[:2]
    end = time.monotonic() + host["wait_max_s"]
    if deadline is not None:
        end = min(end, deadline)
    t0 = time.monotonic()
    while True:
        try:
            r = measure(v, op, sampling=Sampling(batches=2, batch_ms=0.3, warmup_ms=1),
                        launch=Launch(timeout=30))
        except SyscostError:
            return None
        judged = rule.judge({"samples_ns": r.get("samples_ns"), "disturbed": r.get("disturbed"),
                             "chain_ns": r.get("chain_ns_per_step")}) if r.get("supported") else None
        fast = judged[2] if judged else None
        host["probes"].append({"t_s": round(time.monotonic() - host["_t0"], 3),
                               "floor_ns": judged[0] if judged else None, "fast": fast})
        if fast is not False or time.monotonic() + WAIT_STEP_S > end:
            host["waited_s"] = round(host["waited_s"] + time.monotonic() - t0, 3)
            return fast
        time.sleep(WAIT_STEP_S)


def _instructions(doc, b):
    """Each of INSTRUCTIONS timed once, untraced, in block b: {op: [records]} in doc."""
    from .syscost import Launch, Sampling, SyscostError, measure
    v = registry.find(64, "syscall")
    ins = doc.setdefault("instructions", {op: [] for op in INSTRUCTIONS})
    for op in INSTRUCTIONS:
        try:
            r = measure(v, op, sampling=Sampling(batches=4, batch_ms=0.3, warmup_ms=1),
                        launch=Launch(timeout=30))
        except SyscostError as e:
            doc.setdefault("instructions_why", {})[op] = str(e)[-200:]
            continue
        if not r.get("supported"):
            doc.setdefault("instructions_why", {})[op] = r.get("reason")
            continue
        ins[op].append({"block": b, "samples_ns": r["samples_ns"],
                        "disturbed": r.get("disturbed") or [],
                        "chain_ns": r.get("chain_ns_per_step") or []})


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
    rec = {"pid": d["pid"], "cpu": d["cpu"], "shape": d["shape"], "start_s": round(t, 3),
           "calls": d["calls"], "batches": d["batches"], "warmup": d["warmup"],
           "clock": d["clock"], "empty_ns": d["empty_ns"],
           "before": [x - base for x in d["before_ns"]],
           "after": [x - base for x in d["after_ns"]], "_base": base}
    if d.get("chain_ns_per_step"):
        rec["chain_ns"] = d["chain_ns_per_step"]
        rec["chain_cycles_per_step"] = d.get("chain_cycles_per_step")
    return rec


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


def _block(b, names, doc, batches, calls, shape, tmp):
    """Block b: each mechanism once untraced and once traced, one moment of the host for both
    (bpftrace attaches and stops in about 0.25 s each; the host's quiet bursts last seconds),
    so that differences can be paired within a block (issue 42, item 5).  Even blocks run the untraced processes first, odd ones last, so that
    neither side always meets the later moment; the mechanisms' order turns by one a block."""
    k = b % len(names)
    order = names[k:] + names[:k]

    def untraced():
        for v in order:
            doc["variants"][v]["untraced"].append(
                dict(_strip(_one(v, batches, calls, WARMUP, shape)), block=b))

    if b % 2 == 0:
        untraced()
        _instructions(doc, b)
    keys = max(4096, 2 * batches * calls * len(names))
    t0 = time.monotonic()
    bt, out, err = census._start(paths.TRACES / SCRIPT, tmp, keys=keys, arg=WARMUP,
                                 out_name=f"legs-{b}.ndjson")
    doc["attach_s"].append(round(time.monotonic() - t0, 3))
    traced = []
    try:
        for v in order:
            traced.append((v, _one(v, batches, calls, WARMUP, shape)))
        time.sleep(0.05)
    finally:
        text = census._stop(bt, out, err)
    from ..machine.tracers import bpftrace
    maps = bpftrace.parse_json(text, COMBINE)
    for v, rec in traced:
        doc["variants"][v]["traced"].append(dict(attach_kernel_stamps(rec, maps), block=b))
    if b % 2 == 1:
        untraced()
        _instructions(doc, b)


@dataclass(frozen=True)
class Stop:
    """When the stage's blocks end, beyond its mode's number (PLAN): one value, passed whole.

    target (a relative half-width, tw legs --target): blocks until judge(doc, seconds per
    block) says (met, words for the progress line) that every figure is within it
    (cli.stages.legs_judge: analyse.legs.target_status, Stein's two-stage rule over the blocks
    that met the host's fast state; the measuring layer does not analyse), or budget_s ends.
    deadline: a time.monotonic() by which the stage ends (tw run's share of the report's time),
    never before MIN_BLOCKS blocks.
    known(doc): (whether the figures a report needs are known, words for the progress line);
    past the deadline or the mode's blocks, the blocks go on while it says no, up to
    KNOWN_MAX_BLOCKS in all (cli.stages.legs_known: the reference's three legs).
    doc["added_blocks"] counts them."""
    target: float = None
    budget_s: float = None
    deadline: float = None
    judge: object = None
    known: object = None


def measure(variants=None, mode="default", shape="ret", stop=Stop(), keep=None):
    """The legs.json document (raw stamps), or one with 'why' when tracing cannot run.  shape:
    the stub returns by ret (as libc's wrappers, and the cost model's cells) or leaves by an
    indirect jump (jmp: no return-stack prediction after the kernel returns).

    Blocks of one untraced and one traced process per mechanism (_block), the mode's number of
    them (PLAN), or fewer or more as stop (Stop) says.
    keep(doc): called with the whole blocks so far, marked interrupted, when a signal cuts the
    stage (the signal then goes on up): a --target run stopped at minute 9 keeps its blocks."""
    blocks, batches, calls = PLAN.get(mode, PLAN["default"])
    doc = {"schema": SCHEMA, "clock": "CLOCK_MONOTONIC: the vDSO in user space, "
                                      "bpf_ktime_get_ns() in the kernel",
           "script": SCRIPT, "mode": mode, "blocks": 0, "batches": batches, "calls": calls,
           "warmup": WARMUP, "shape": shape, "target": stop.target, "budget_s": stop.budget_s,
           "stopped": None, "attach_s": [], "variants": {}, "why": why_not()}
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
    t0 = time.monotonic()
    from .rounds import HostProbe
    rule = HostProbe()
    doc["host"] = host = {"probes": [], "waited_s": 0.0, "wait_max_s": WAIT_MAX_S.get(mode, 2.0),
                          "_t0": t0}
    took = []
    most = blocks if stop.judge is None else 100000
    judged_at = 0
    try:
        with tempfile.TemporaryDirectory(prefix="tw-legs-") as tmp:
            b = 0
            while True:
                # past the mode's blocks or the run's time for them, one question to `known`
                # a block (a run past both would otherwise count its added blocks twice)
                past = ("the mode's blocks" if b >= most else "the run's time for them"
                        if proc.next_round_past(stop.deadline, took, b, MIN_BLOCKS) else None)
                if past and not _one_more(stop, doc, b, past):
                    if b < most:
                        doc["stopped"] = "deadline"
                    break
                t = time.monotonic()
                _probe_host(rule, host, stop.deadline)
                _block(b, names, doc, batches, calls, shape, tmp)
                took.append(time.monotonic() - t)
                b += 1
                doc["blocks"] = b
                elapsed = time.monotonic() - t0
                of = "" if stop.target else f"/{blocks}"
                line = f"legs: block {b}{of} ({elapsed:.1f} s)"
                if stop.judge is not None and b >= MIN_BLOCKS and (
                        b - judged_at >= min(CHECK_MAX, max(1, CHECK_GROWTH * judged_at))):
                    judged_at = b
                    met, words = stop.judge(doc, sum(took) / len(took))
                    line += words
                    if met:
                        doc["stopped"] = "target"
                        ui.progress(line)
                        break
                if stop.target is not None and stop.budget_s is not None \
                        and elapsed >= stop.budget_s \
                        and b >= MIN_BLOCKS:
                    doc["stopped"] = "budget"
                    ui.progress(line + f"; the budget of {stop.budget_s:.0f} s ended")
                    break
                ui.progress(line)
    except ui.Interrupted as e:
        # only whole blocks: a cut block may hold one side of its twins
        done = doc["blocks"]
        for v in doc["variants"].values():
            for side in ("traced", "untraced"):
                v[side] = [r for r in v[side] if r.get("block", 0) < done]
        doc.update(stopped="interrupted", seconds=round(time.monotonic() - t0, 2),
                   interrupted={"signal": e.name, "blocks": done})
        if keep is not None and done:
            keep(doc)
        raise
    doc["seconds"] = round(time.monotonic() - t0, 2)
    host.pop("_t0", None)
    return doc


def _one_more(stop, doc, b, past):
    """Past the deadline or the mode's blocks: whether stop.known asks for one more block (the
    reference's legs still unknown, and fewer than KNOWN_MAX_BLOCKS so far); counts it in
    doc["added_blocks"] and says so."""
    if stop.known is None or b >= KNOWN_MAX_BLOCKS:
        return False
    ok, words = stop.known(doc)
    if ok:
        return False
    doc["added_blocks"] = doc.get("added_blocks", 0) + 1
    ui.progress(f"legs: past {past}{words}: one more block")
    return True


def _strip(rec):
    rec.pop("_base", None)
    return rec


def stage(out, mode="default", variants=None, shape="ret", **stop):
    """tw run's legs stage: legs.json in out.  Where tracing cannot run (not root, no
    bpftrace) the file says why and the stage passes, as the report's unknowns do; a tracer
    that fails to attach, or a program that fails, fails the stage.  --quick without variants
    measures the headline's mechanisms alone (headline()).  stop: Stop's fields, as tw run
    and tw legs pass them."""
    if variants is None and mode == "quick":
        variants = headline()
    doc = measure(variants, mode, shape, Stop(**stop),
                  keep=lambda d: files.write_json(Path(out) / "legs.json", d))
    files.write_json(Path(out) / "legs.json", doc)
    if doc["why"]:
        ui.progress(f"legs: not measured: {doc['why']}")
    return doc
