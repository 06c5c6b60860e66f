"""`tw bench`: the per-call cost matrix (every variant x operation) from syscost.

Each cell is one build/syscost-<variant> run with one --op: nanoseconds per call
with the empty loop's cost removed (see docs/syscost.md for the method).  The
matrix is measured in rounds: every round runs every cell once, in a shuffled
order, for a few batches.  A disturbance (another process, the hypervisor
stealing the CPU) therefore hits a few batches of many cells rather than all
batches of one, and each cell's samples span the whole session.  Summaries
come from twtools.analyse.stats.summarize: median, 95% bootstrap CI, spread, unstable.

Python API, for other modules:

    run_matrix(out_dir, mode='default', variants=None, ops=None, sizes=None, ...)
        measures the matrix, writes percall.json and percall.csv into out_dir
        (unless out_dir is None) and returns the percall document
        (docs/results-schema.md, "percall.json").

    measure(variant, op, size=None, batches=5, extra_env=None, wrapper=None, ...)
        one syscost run; returns syscost's JSON object plus supported/reason,
        cmd, stderr and wall_s.  `wrapper` is a list put before the command,
        e.g. ['strace', '-f', '-o', '/dev/null'] or ['perf', 'stat', '-j',
        '-e', 'raw_syscalls:sys_enter'], so that the observer-effect and
        tracer modules can time syscost under an instrument; the wrapper's own
        stderr comes back in 'stderr'.  An unsupported mechanism (exit 77)
        gives {'supported': False, 'reason': ...}; any other failure raises
        SyscostError with syscost's message.
"""
import csv
import os
import random
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

from ..analyse import stats
from ..cli import options
from ..core import files, paths, proc, ui
from ..machine import probe, registry

OPS = ["null", "getppid", "write-devnull", "write-file", "write-sync"]
DEFAULT_SIZES = [256, 4096]          # write-file sizes
SEED_SIZES = [256 << i for i in range(10)]   # the seed report's BUFFSIZE sweep, 256 .. 131072
SYNC_SIZE = 256                      # write-sync: the seed report's slow row
DEVNULL_SIZE = 1

# Per mode: rounds, batches per run, batch length, warm-up, perf bench runs.
MODES = {
    "quick":   {"rounds": 2,  "batches": 3,  "batch_ms": 0.5, "warmup_ms": 5,  "perf_runs": 3,
                "perf_loops": 500000},
    "default": {"rounds": 20, "batches": 8,  "batch_ms": 0.5, "warmup_ms": 10, "perf_runs": 20,
                "perf_loops": 1000000},
    "long":    {"rounds": 20, "batches": 10, "batch_ms": 2.0, "warmup_ms": 20, "perf_runs": 20,
                "perf_loops": 2000000},
}
# write-sync waits for the device (~0.1-4 ms per call): fewer, single-call batches.
SYNC_BATCHES = {"quick": 2, "default": 3, "long": 5}

# Targets the --accuracy report checks (printed, never asserted).
TARGET_PERF_RATIO = 0.05     # our 64-bit getppid within 5% of perf bench
TARGET_LOOP_NS = 1.0         # empty loop cost per call
TARGET_LIBC_PCT = 2.0        # libc's wrapper over the bare syscall stub, null op
TARGET_CI_HALF = 0.02        # CI half-width of 64-bit null/getppid medians
TARGET_WALL_S = 60.0         # the full matrix, default mode


class SyscostError(RuntimeError):
    """syscost failed for a reason other than an unsupported mechanism."""


# ---- one run ------------------------------------------------------------------

def measure(variant, op, size=None, batches=5, extra_env=None, wrapper=None, calls=None,
            cpu=None, tsc_hz=None, batch_ms=None, warmup_ms=None, file_dir=None,
            clock=None, realtime=False, timeout=300):
    """Run build/syscost-<variant> --op <op> once and return its result.

    variant   '64-syscall', '32-int80', ... (variants/registry)
    op        null | getppid | write-devnull | write-file | write-sync
    size      bytes per write (write ops only; syscost's default when None)
    batches   samples to take (each a batch of `calls` calls)
    extra_env dict added to the environment
    wrapper   list prefixed to the command, e.g. ['strace', '-f', '-o', '/dev/null'];
              the command then runs as wrapper + [syscost, ...]
    calls     calls per batch (None: syscost sizes batches to batch_ms)
    cpu       CPU to pin to (None: syscost's default, the last allowed CPU)
    tsc_hz    a TSC rate measured earlier, so this run skips its 50 ms calibration
    realtime  ask syscost for SCHED_FIFO (--realtime); the result's 'sched' says if it got it
    file_dir  where write-file/write-sync create their temporary file (cwd by default)

    Returns syscost's JSON object (variant, op, size, clock, tsc_hz, cpu,
    calls_per_batch, batches, loop_ns_per_call, samples_ns, raw_ns, ...) with
    supported=True, reason=None, cmd, stderr and wall_s added; or
    {variant, op, size, supported: False, reason} when the mechanism does not
    work here (exit 77).  Raises SyscostError on any other failure."""
    import json

    path = probe.binary("syscost", variant)
    if not path.exists():
        return {"variant": variant, "op": op, "size": size, "supported": False,
                "reason": f"{path.name} is not built (run make)"}
    cmd = [str(path), "--op", op, "--batches", str(batches)]
    if size is not None and op.startswith("write"):
        cmd += ["--size", str(size)]
    if calls is not None:
        cmd += ["--calls", str(calls)]
    if cpu is not None:
        cmd += ["--cpu", str(cpu)]
    if tsc_hz:
        cmd += ["--tsc-hz", f"{tsc_hz:.0f}"]
    if clock:
        cmd += ["--clock", clock]
    if batch_ms is not None:
        cmd += ["--batch-ms", f"{batch_ms:g}"]
    if warmup_ms is not None:
        cmd += ["--warmup-ms", f"{warmup_ms:g}"]
    if realtime:
        cmd += ["--realtime"]
    cmd = list(wrapper or []) + cmd
    env = dict(os.environ, **(extra_env or {}))
    t0 = time.monotonic()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env,
                           cwd=str(file_dir) if file_dir else None)
    except OSError as e:
        return {"variant": variant, "op": op, "size": size, "supported": False,
                "reason": f"cannot execute {path.name}: {e.strerror}"}
    except subprocess.TimeoutExpired:
        raise SyscostError(f"{' '.join(cmd)}: no result within {timeout} s")
    wall = time.monotonic() - t0
    if p.returncode == probe.EXIT_UNSUPPORTED:
        why = p.stderr.strip().splitlines()
        why = why[-1].split("unsupported: ", 1)[-1] if why else "exit status 77"
        return {"variant": variant, "op": op, "size": size, "supported": False, "reason": why}
    if p.returncode != 0:
        msg = p.stderr.strip().splitlines()
        raise SyscostError(f"{' '.join(cmd)}: exit {p.returncode}: "
                           f"{msg[-1] if msg else 'no message'}")
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
    if not lines:
        raise SyscostError(f"{' '.join(cmd)}: no JSON on stdout")
    out = json.loads(lines[-1])
    out.update(supported=True, reason=None, cmd=cmd, stderr=p.stderr, wall_s=wall)
    return out


# ---- perf bench ------------------------------------------------------------------

_PERF_USECS = re.compile(r"([0-9.]+)\s+usecs/op")
_PERF_OPS = re.compile(r"([0-9]+)\s+ops/sec")


def _pin_and_fifo(cpu, realtime):
    """A preexec_fn giving perf bench the conditions syscost runs under."""
    def pre():
        if cpu is not None:
            os.sched_setaffinity(0, {cpu})
        if realtime:
            try:
                os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(50))
            except OSError:
                pass
    return pre


def perf_bench_once(loops, cpu=None, realtime=False):
    """ns per getppid from one `perf bench syscall basic`, or (None, why)."""
    perf = proc.which("perf")
    if perf is None:
        return None, "perf is not installed"
    pre = _pin_and_fifo(cpu, realtime)
    try:
        p = subprocess.run([perf, "bench", "syscall", "basic", "-l", str(loops)],
                           capture_output=True, text=True, timeout=120, preexec_fn=pre)
    except (OSError, subprocess.TimeoutExpired) as e:
        return None, f"perf bench failed to run: {e}"
    text = p.stdout + p.stderr
    if p.returncode != 0:
        last = text.strip().splitlines()
        return None, f"perf bench exit {p.returncode}: {last[-1] if last else 'no output'}"
    m = _PERF_USECS.search(text)
    if m:
        return float(m.group(1)) * 1000.0, None
    m = _PERF_OPS.search(text)
    if m and int(m.group(1)) > 0:
        return 1e9 / int(m.group(1)), None
    return None, "perf bench printed neither usecs/op nor ops/sec"


# ---- the matrix --------------------------------------------------------------------

def cell_list(variants, ops, sizes):
    """[(variant row, op, size)] in matrix order."""
    cells = []
    for v in variants:
        for op in ops:
            if op == "write-file":
                cells += [(v, op, s) for s in sizes]
            elif op == "write-sync":
                cells.append((v, op, SYNC_SIZE))
            elif op == "write-devnull":
                cells.append((v, op, DEVNULL_SIZE))
            else:
                cells.append((v, op, None))
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


def run_matrix(out_dir, mode="default", variants=None, ops=None, sizes=None, rounds=None,
               cpu=None, file_dir=None, accuracy=False, clock=None, realtime=True):
    """Measure the per-call matrix; write percall.json/.csv into out_dir; return the document.

    variants  names ('64-syscall', ...) or None for every row of variants/matrix
    ops       subset of OPS, or None for all
    sizes     write-file sizes (default 256 and 4096)
    rounds    override the mode's number of rounds
    accuracy  also run `perf bench syscall basic` once per round and fill "accuracy"
    realtime  run syscost (and perf bench) under SCHED_FIFO when allowed
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}")
    params = dict(MODES[mode])
    if rounds is not None:
        params["rounds"] = rounds
    rows = registry.variants()
    if variants is not None:
        known = {r["name"]: r for r in rows}
        unknown = [v for v in variants if v not in known]
        if unknown:
            raise ValueError(f"unknown variant(s) {', '.join(unknown)}; see variants/registry")
        rows = [known[v] for v in variants]
    ops = list(ops) if ops is not None else list(OPS)
    bad = [o for o in ops if o not in OPS]
    if bad:
        raise ValueError(f"unknown op(s) {', '.join(bad)}; choose from {', '.join(OPS)}")
    sizes = list(sizes) if sizes is not None else list(DEFAULT_SIZES)
    full = variants is None and set(ops) == set(OPS)
    if out_dir is not None:
        Path(out_dir).mkdir(parents=True, exist_ok=True)
    file_dir = Path(file_dir) if file_dir else (Path(out_dir) if out_dir else Path.cwd())
    file_dir.mkdir(parents=True, exist_ok=True)

    t_start = time.monotonic()
    support = {}
    for r in rows:
        support[r["name"]] = probe.check("syscost", r["name"])
        if not support[r["name"]][0]:
            ui.progress(f"bench: {r['name']} unsupported: {support[r['name']][1]}")
    cells = cell_list(rows, ops, sizes)
    state = {}
    for v, op, size in cells:
        ok, why = support[v["name"]]
        state[(v["name"], op, size)] = {"row": v, "op": op, "size": size, "supported": ok,
                                        "reason": why, "samples": [], "raw": [], "loop": [], "offcpu": [],
                                        "calls": None, "n_calls": 0, "errors": []}

    # One run to measure the TSC rate (longer calibration), shared by every run after it.
    tsc_hz, clk, pinned = None, None, cpu
    first = next((v["name"] for v in rows if support[v["name"]][0]), None)
    if first is not None:
        cal = measure(first, "null", batches=1, cpu=cpu, warmup_ms=0, batch_ms=0.1,
                      clock=clock, extra_env=None)
        if cal.get("supported"):
            tsc_hz, clk, pinned = cal.get("tsc_hz"), cal.get("clock"), cal.get("cpu")
    perf = {"samples": [], "why": None}
    scheds, sched_why = set(), None
    perf_s = 0.0        # time spent in perf bench, not part of the matrix's wall time

    for rnd in range(params["rounds"]):
        order = [k for k, c in state.items() if c["supported"]]
        random.Random(rnd).shuffle(order)
        t_round = time.monotonic()
        for key in order:
            c = state[key]
            if c["errors"] and len(c["errors"]) >= 2:
                continue        # failed twice: stop spending time on it
            sync = c["op"] == "write-sync"
            try:
                res = measure(c["row"]["name"], c["op"], c["size"],
                              batches=SYNC_BATCHES[mode] if sync else params["batches"],
                              calls=c["calls"], cpu=pinned, tsc_hz=tsc_hz, clock=clock,
                              batch_ms=params["batch_ms"],
                              warmup_ms=min(params["warmup_ms"], 5) if sync else params["warmup_ms"],
                              file_dir=file_dir, realtime=realtime)
            except SyscostError as e:
                c["errors"].append(str(e))
                ui.warn(f"bench: {key[0]} {key[1]}: {e}",
                            "the cell is reported with the error; see the message")
                continue
            if not res["supported"]:
                c["supported"], c["reason"] = False, res["reason"]
                continue
            if c["calls"] is None:
                c["calls"] = res["calls_per_batch"]   # later rounds reuse the first round's size
            c["samples"] += res["samples_ns"]
            c["raw"] += res["raw_ns"]
            c["loop"] += res["loop_ns_per_call"]
            c["offcpu"] += res.get("offcpu_ns_per_call") or []
            c["n_calls"] += res["calls_per_batch"] * res["batches"]
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
        ui.progress(f"bench: round {rnd + 1}/{params['rounds']} "
                        f"({time.monotonic() - t_round:.1f} s)")
    wall = time.monotonic() - t_start - perf_s
    if accuracy and perf["why"] is None:
        while len(perf["samples"]) < params["perf_runs"]:
            ns, why = perf_bench_once(params["perf_loops"], cpu=pinned, realtime=realtime)
            if ns is None:
                perf["why"] = why
                break
            perf["samples"].append(ns)

    out_cells = []
    for (name, op, size), c in state.items():
        row = c["row"]
        cell = {"variant": name, "bits": row["bits"], "abi": row["abi"],
                "mechanism": row["mechanism"], "op": op, "size": size,
                "supported": c["supported"], "reason": c["reason"]}
        if c["supported"]:
            s = stats.summarize(c["samples"])
            cell.update(s)
            cell["loop_ns"] = stats.summarize(c["loop"])
            cell["raw_ns"] = stats.summarize(c["raw"])
            # Wall minus on-CPU time per call, in the same batches: the wait for the device
            # in an O_SYNC write, ~0 elsewhere.  Blind, never 0, if syscost did not report it.
            cell["offcpu_ns"] = (dict(stats.summarize(c["offcpu"]),
                                      samples=[round(x, 2) for x in c["offcpu"]])
                                 if c["offcpu"] else ui.blind("syscost reported no off-CPU time"))
            cell["samples"] = [round(x, 4) for x in c["samples"]]
            cell["n_calls"] = c["n_calls"]
            cell["calls_per_batch"] = c["calls"]
            flags = []
            if s["n"] and s["unstable"]:
                flags.append("unstable")
            if c["errors"]:
                flags.append("error")
                cell["errors"] = c["errors"]
            if s["n"] == 0:
                flags.append("no samples")
            cell["flags"] = flags
        else:
            cell.update({k: None for k in ("median", "ci_low", "ci_high", "min", "max", "cv")})
            cell.update(n=0, unstable=False, samples=[], n_calls=0, flags=["unsupported"])
        out_cells.append(cell)

    doc = {"clock": clk, "tsc_hz": tsc_hz, "cpu": pinned, "mode": mode,
           "params": {"batches": params["batches"], "sync_batches": SYNC_BATCHES[mode],
                      "calls_per_batch": "auto (first round, then fixed)",
                      "batch_ms": params["batch_ms"], "warmup_ms": params["warmup_ms"],
                      "rounds": params["rounds"], "sizes": sizes, "ops": ops,
                      "variants": [r["name"] for r in rows]},
           "sched": "fifo" if scheds == {"fifo"} else ("mixed" if "fifo" in scheds else "other"),
           "sched_why": sched_why or ("SCHED_FIFO priority 50" if scheds == {"fifo"} else None),
           "file_dir": str(file_dir), "file_fstype": _fstype(file_dir),
           "host": socket.gethostname(), "full_matrix": full,
           "wall_s": wall, "cells": out_cells, "accuracy": None}
    if accuracy:
        doc["accuracy"] = accuracy_figures(doc, perf)
    if out_dir is not None:
        export(doc, out_dir)
    return doc


# ---- accuracy and precision -----------------------------------------------------------

def _cell(doc, variant, op, size=None):
    for c in doc["cells"]:
        if c["variant"] == variant and c["op"] == op and c["size"] == size and c["supported"] \
                and c.get("median") is not None:
            return c
    return None


def _summary_of(cell):
    if cell is None:
        return None
    return {k: cell[k] for k in ("median", "ci_low", "ci_high", "min", "max", "cv", "n", "unstable")}


def accuracy_figures(doc, perf):
    """The figures `tw bench --accuracy` prints, as a dict for percall.json."""
    acc = {}
    if perf["samples"]:
        acc["perf_bench_ns"] = dict(stats.summarize(perf["samples"]),
                                    samples=perf["samples"])
    else:
        acc["perf_bench_ns"] = ui.blind(perf["why"] or "perf bench was not run")
    ours = _summary_of(_cell(doc, "64-syscall", "getppid"))
    acc["ours_getppid_64_ns"] = ours or ui.blind("64-syscall getppid was not measured")
    libc_g = _summary_of(_cell(doc, "64-libc", "getppid"))
    acc["ours_getppid_64libc_ns"] = libc_g or ui.blind("64-libc getppid was not measured")
    if perf["samples"] and ours:
        r = acc["perf_bench_ns"]["median"] / ours["median"]
        acc["ratio"] = r
        acc["within_5pct"] = bool(abs(r - 1) <= TARGET_PERF_RATIO)
    else:
        acc["ratio"], acc["within_5pct"] = None, None
    # perf bench calls glibc's getppid() in a plain loop: 64-libc is its exact twin.
    acc["ratio_libc"] = (acc["perf_bench_ns"]["median"] / libc_g["median"]
                         if perf["samples"] and libc_g else None)
    acc["write_devnull_64_ns"] = (_summary_of(_cell(doc, "64-syscall", "write-devnull", DEVNULL_SIZE))
                                  or ui.blind("64-syscall write-devnull was not measured"))
    per_cell = [c["loop_ns"]["median"] for c in doc["cells"]
                if c["supported"] and c.get("loop_ns") and c["loop_ns"]["median"] is not None]
    acc["loop_ns"] = stats.summarize(per_cell) if per_cell else ui.blind("no cell measured")
    acc["loop_ns_max_cell"] = max(per_cell) if per_cell else None
    acc["loop_within_target"] = (max(per_cell) <= TARGET_LOOP_NS) if per_cell else None
    pct = {}
    for bits, bare in (("64", "64-syscall"), ("32", "32-vdso")):
        a = _summary_of(_cell(doc, f"{bits}-libc", "null"))
        b = _summary_of(_cell(doc, bare, "null"))
        if a and b:
            d = stats.diff_summary(a, b)
            pct[bits] = {"vs": bare, "pct": 100 * d["median"] / b["median"],
                         "pct_ci": [100 * d["ci_low"] / b["median"], 100 * d["ci_high"] / b["median"]],
                         "libc_ns": a["median"], "bare_ns": b["median"]}
        else:
            pct[bits] = ui.blind(f"{bits}-libc or {bare} null was not measured")
    acc["libc_vs_syscall_null_pct"] = pct["64"].get("pct") if "pct" in pct["64"] else None
    acc["libc_vs_bare_null"] = pct
    halfs = []
    for c in doc["cells"]:
        if c["bits"] == 64 and c["op"] in ("null", "getppid") and c["supported"] \
                and c.get("median") is not None:
            h = stats.half_width_rel(c)
            halfs.append({"variant": c["variant"], "op": c["op"], "median": c["median"],
                          "ci_half_rel": h, "within_2pct": bool(h is not None and h <= TARGET_CI_HALF),
                          "unstable": c["unstable"]})
    acc["ci_half_widths"] = halfs
    acc["unstable_cells"] = [f"{c['variant']} {c['op']}" + (f" {c['size']}" if c["size"] else "")
                             for c in doc["cells"] if c["supported"] and c.get("unstable")]
    acc["wall_s"] = doc["wall_s"]
    acc["wall_is_full_matrix"] = doc["full_matrix"]
    acc["wall_within_target"] = bool(doc["wall_s"] <= TARGET_WALL_S)
    return acc


# ---- export ----------------------------------------------------------------------------

CSV_FIELDS = ["variant", "bits", "abi", "mechanism", "op", "size", "supported", "reason",
              "median", "ci_low", "ci_high", "min", "max", "cv", "n", "unstable",
              "loop_ns_median", "raw_ns_median", "calls_per_batch", "n_calls", "flags"]


def _write_json(doc, out_dir):
    path = Path(out_dir) / "percall.json"
    files.write_json(path, doc)
    return path


def _write_csv(doc, out_dir):
    path = Path(out_dir) / "percall.csv"
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=CSV_FIELDS, extrasaction="ignore")
        w.writeheader()
        for c in doc["cells"]:
            row = dict(c)
            row["loop_ns_median"] = (c.get("loop_ns") or {}).get("median")
            row["raw_ns_median"] = (c.get("raw_ns") or {}).get("median")
            row["flags"] = ";".join(c.get("flags") or [])
            w.writerow(row)
    return path


EXPORTERS = {"json": _write_json, "csv": _write_csv}


def export(doc, out_dir, formats=("json", "csv")):
    """Write the percall document in each format; returns the paths written."""
    return [EXPORTERS[f](doc, out_dir) for f in formats]


# ---- printing ---------------------------------------------------------------------------

def _ns(x, digits=1):
    if x is None:
        return "?"
    if abs(x) >= 100000:
        return f"{x / 1000:.0f}k"
    return f"{x:.{digits}f}"


def format_table(doc):
    """The matrix as fixed-width text lines."""
    lines = [f"{'variant':<12} {'op':<14} {'size':>5}  {'ns/call median [95% CI]':<32} "
             f"{'CV':>6}  flags"]
    shown_unsupported = set()
    for c in doc["cells"]:
        if not c["supported"]:
            if c["variant"] in shown_unsupported:
                continue
            shown_unsupported.add(c["variant"])
            lines.append(f"{c['variant']:<12} {'(every op)':<14} {'':>5}  unsupported: {c['reason']}")
            continue
        size = "" if c["size"] is None else str(c["size"])
        if c.get("median") is None:
            lines.append(f"{c['variant']:<12} {c['op']:<14} {size:>5}  no result: "
                         f"{(c.get('errors') or ['no samples'])[-1]}")
            continue
        d = 1 if c["median"] < 10000 else 0
        est = f"{_ns(c['median'], d)} [{_ns(c['ci_low'], d)}, {_ns(c['ci_high'], d)}]"
        cv = f"{100 * c['cv']:.1f}%" if c.get("cv") is not None else "-"
        flags = ",".join(c.get("flags") or [])
        lines.append(f"{c['variant']:<12} {c['op']:<14} {size:>5}  {est:<32} {cv:>6}  {flags}")
    lines.append(f"(n = batches per cell; loop cost subtracted; clock {doc['clock']}"
                 + (f" at {doc['tsc_hz'] / 1e9:.4f} GHz" if doc.get("tsc_hz") else "")
                 + f", CPU {doc['cpu']}, sched {doc.get('sched')}, files on {doc.get('file_fstype') or '?'}; "
                 f"{doc['params']['rounds']} rounds, {doc['wall_s']:.1f} s)")
    return lines


def format_accuracy(acc):
    """The --accuracy figures as text lines, each with its target."""
    out = ["", "accuracy and precision"]
    pb = acc["perf_bench_ns"]
    ours = acc["ours_getppid_64_ns"]
    out.append(f"  perf bench syscall basic (getppid, glibc): {stats.fmt(pb)}")
    out.append(f"  ours, 64-syscall getppid:                 {stats.fmt(ours)}")
    out.append(f"  ours, 64-libc getppid:                    {stats.fmt(acc['ours_getppid_64libc_ns'])}")
    if acc["ratio"] is not None:
        out.append(f"  ratio perf/ours = {acc['ratio']:.3f}: "
                   f"{'within' if acc['within_5pct'] else 'NOT within'} 5% (target)")
    else:
        out.append("  ratio perf/ours: unknown (one side is blind)")
    if acc.get("ratio_libc") is not None:
        out.append(f"  ratio perf/64-libc = {acc['ratio_libc']:.3f} (perf bench's own path: glibc getppid)")
    out.append(f"  64-syscall write-devnull (1 B):           {stats.fmt(acc['write_devnull_64_ns'])}")
    lm = acc["loop_ns"]
    if lm.get("median") is not None:
        out.append(f"  empty loop: median {lm['median']:.2f} ns/call over cells, worst cell "
                   f"{acc['loop_ns_max_cell']:.2f} ns: "
                   f"{'meets' if acc['loop_within_target'] else 'ABOVE'} the <= {TARGET_LOOP_NS:g} ns target"
                   " (it is subtracted either way)")
    for bits, p in acc["libc_vs_bare_null"].items():
        if "pct" in p:
            ok = p["pct"] <= TARGET_LIBC_PCT
            out.append(f"  libc over {p['vs']} (null, {bits}-bit): {p['pct']:+.1f}% "
                       f"[{p['pct_ci'][0]:+.1f}, {p['pct_ci'][1]:+.1f}] "
                       f"({p['libc_ns']:.1f} vs {p['bare_ns']:.1f} ns)"
                       + (f": {'meets' if ok else 'ABOVE'} the <= {TARGET_LIBC_PCT:g}% target"
                          if bits == "64" else ""))
        else:
            out.append(f"  libc over bare stub ({bits}-bit): unknown ({p['why']})")
    for h in acc["ci_half_widths"]:
        hw = "?" if h["ci_half_rel"] is None else f"{100 * h['ci_half_rel']:.2f}%"
        out.append(f"  CI half-width {h['variant']} {h['op']}: {hw} of {h['median']:.1f} ns "
                   f"({'meets' if h['within_2pct'] else 'ABOVE'} the <= 2% target)"
                   + (" unstable" if h["unstable"] else ""))
    out.append(f"  wall time: {acc['wall_s']:.1f} s for "
               f"{'the full matrix' if acc['wall_is_full_matrix'] else 'a partial matrix'} "
               f"({'meets' if acc['wall_within_target'] else 'ABOVE'} the <= {TARGET_WALL_S:g} s target)")
    return out


def warn_unstable(doc):
    """One hyperfine-style warning naming every unstable cell, on stderr."""
    bad = [c for c in doc["cells"] if c["supported"] and c.get("unstable") and c.get("n")]
    if not bad:
        return
    parts = []
    for c in bad:
        size = f" {c['size']} B" if c["size"] else ""
        parts.append(f"{c['variant']} {c['op']}{size} (CV {100 * c['cv']:.0f}%, "
                     f"min {_ns(c['min'])}, max {_ns(c['max'])} ns)")
    sync = any(c["op"] == "write-sync" for c in bad)
    ui.warn(f"{len(bad)} cell(s) unstable (CV >= 10% or min/max over 50% from the median): "
                + "; ".join(parts)
                + ". Some batches were disturbed by other processes or the hypervisor"
                + (", and O_SYNC writes wait for the device, whose latency varies" if sync else "")
                + ". Medians and their CIs are robust to this; the spread is not",
                "re-run on a quiet machine, or raise --rounds (or use --long)")


# ---- command line -------------------------------------------------------------------------

def _sizes(text):
    if text == "seed":
        return list(SEED_SIZES)
    try:
        out = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ValueError(f"--sizes: '{text}' is not a comma-separated list of integers or 'seed'")
    if not out or any(s < 1 or s > (64 << 20) for s in out):
        raise ValueError("--sizes: each size must be 1 .. 67108864 bytes")
    return out


def add_arguments(parser, name):
    parser.description = (
        "Measure ns per system call for every variant (variants/registry) and operation with "
        "build/syscost-*, in interleaved rounds; print a table and write percall.json/.csv.")
    options.add_mode_arguments(parser, "a few seconds: 2 rounds, 3 batches, write-file 256 B only",
                              "20 rounds of 10 batches of 2 ms: tighter intervals, a few minutes")
    parser.add_argument("--out", metavar="DIR",
                        help="results directory (default results/bench-<host>-<UTC time>)")
    parser.add_argument("--variants", metavar="V,V", help="variants to run (default: all)")
    parser.add_argument("--ops", metavar="OP,OP", help=f"operations (default: {','.join(OPS)})")
    parser.add_argument("--sizes", metavar="N,N",
                        help="write-file sizes in bytes, or 'seed' for 256..131072 "
                             "(default 256,4096; --quick 256)")
    parser.add_argument("--rounds", type=int, metavar="R", help="override the mode's rounds")
    parser.add_argument("--cpu", type=int, metavar="N", help="pin to CPU N (default: the last one)")
    parser.add_argument("--clock", choices=["auto", "tsc", "monotonic"], default=None,
                        help="syscost's clock (default auto: the TSC when invariant)")
    parser.add_argument("--dir", metavar="DIR",
                        help="where write-file/write-sync write (default: the --out directory)")
    parser.add_argument("--accuracy", action="store_true",
                        help="also run perf bench syscall basic and print accuracy/precision figures")
    parser.add_argument("--no-realtime", dest="realtime", action="store_false",
                        help="do not ask for SCHED_FIFO (default: ask; needs root)")
    parser.add_argument("--json", action="store_true", help="print percall.json to stdout instead of the table")


def main(args, name):
    import json

    try:
        sizes = _sizes(args.sizes) if args.sizes else ([256] if args.mode == "quick" else None)
        variants = [v for v in args.variants.split(",") if v] if args.variants else None
        ops = [o for o in args.ops.split(",") if o] if args.ops else None
        if args.rounds is not None and args.rounds < 1:
            raise ValueError("--rounds must be at least 1")
    except ValueError as e:
        print(f"tw bench: {e}", file=sys.stderr)
        return 2
    out = args.out
    if out is None:
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        out = paths.ROOT / "results" / f"bench-{socket.gethostname()}-{stamp}"
    ui.progress(f"bench: {args.mode} mode, results into {out}")
    try:
        doc = run_matrix(out, mode=args.mode, variants=variants, ops=ops, sizes=sizes,
                         rounds=args.rounds, cpu=args.cpu, file_dir=args.dir,
                         accuracy=args.accuracy, clock=args.clock, realtime=args.realtime)
    except ValueError as e:
        print(f"tw bench: {e}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(doc, indent=1))
    else:
        print("\n".join(format_table(doc)))
        if doc["accuracy"]:
            print("\n".join(format_accuracy(doc["accuracy"])))
    warn_unstable(doc)
    ui.progress(f"bench: wrote {Path(out) / 'percall.json'} and percall.csv "
                    f"in {doc['wall_s']:.1f} s")
    if not any(c["supported"] and c.get("n") for c in doc["cells"]):
        print("tw bench: no cell could be measured", file=sys.stderr)
        return 1
    return 0
