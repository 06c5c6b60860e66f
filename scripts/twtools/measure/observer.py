"""`tw observer`: nanoseconds per call each tracer adds (the observer effect).

The same workload, syscost --op getppid through each mechanism, runs bare
and under each tracer as a command prefix (bench.measure's wrapper):

  strace      strace -f -o /dev/null: ptrace stops at every entry and exit
  perf-trace  perf trace -o /dev/null: native 64-bit only (it decodes i386
              numbers with the x86-64 table, and the workload's cost would
              include its wrong-name lookups)
  perf-stat   perf stat -e raw_syscalls:sys_enter,raw_syscalls:sys_exit:
              counting tracepoints, no per-event output
  bpftrace    raw_syscalls:sys_enter/sys_exit for the traced process, a
              start-time map and a log2 histogram of the interval

added_ns = traced - bare, CI by quadrature (stats.diff_summary).  A tracer
that cannot run here (not root, not installed) gives a blind figure.
"""
import csv
import tempfile
from pathlib import Path

from ..analyse import stats
from . import tracers
from ..core import files, proc, ui
from ..machine import probe, registry

OP = "getppid"
PLAN = {"quick": {"batches": 5, "batch_ms": 1, "warmup_ms": 2},
        "default": {"batches": 10, "batch_ms": 2, "warmup_ms": 5},
        "long": {"batches": 20, "batch_ms": 4, "warmup_ms": 10}}

BT_PROG = ("tracepoint:raw_syscalls:sys_enter /pid == cpid/ { @s[tid] = nsecs; } "
           "tracepoint:raw_syscalls:sys_exit /@s[tid]/ { @ns = hist(nsecs - @s[tid]); "
           "delete(@s[tid]); } END { clear(@s); }")


def wrappers(tmp):
    """tracer -> (wrapper list or None, why-not)."""
    root = proc.is_root()
    w = {"none": ([], None)}
    w["strace"] = (["strace", "-f", "-o", "/dev/null"], None) if proc.which("strace") else \
        (None, "strace is not installed")
    if not proc.which("perf"):
        w["perf-trace"] = w["perf-stat"] = (None, "perf is not installed")
    elif not root:
        w["perf-trace"] = w["perf-stat"] = (None, "needs root for raw_syscalls tracepoints")
    else:
        w["perf-trace"] = (["perf", "trace", "-o", "/dev/null", "--"], None)
        w["perf-stat"] = (["perf", "stat", "-e", "raw_syscalls:sys_enter,raw_syscalls:sys_exit",
                           "-o", "/dev/null", "--"], None)
    if not proc.which("bpftrace"):
        w["bpftrace"] = (None, "bpftrace is not installed")
    elif not root:
        w["bpftrace"] = (None, "bpftrace needs root")
    else:
        prog = Path(tmp) / "observer.bt"
        prog.write_text(BT_PROG + "\n")
        # bpftrace -c takes one string: join the workload's words into it
        w["bpftrace"] = (["/bin/sh", "-c", f'exec bpftrace -o /dev/null {prog} -c "$*"', "sh"], None)
    return w


def observe(out_dir, mode="default", variants=None):
    from . import bench
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    plan = PLAN[mode]
    names = variants or [m.name for m in registry.mechanisms() if m.enters_kernel]
    rows = []
    with tempfile.TemporaryDirectory(prefix="tw-obs-", dir=tracers._tmp_dir()) as tmp:
        wr = wrappers(tmp)
        for v in names:
            ok, why = probe.check("syscost", v)
            if not ok:
                rows.append({"variant": v, "op": OP, "tracer": "none", "supported": False,
                             "reason": why, "available": False, "why": why,
                             "ns_per_call": ui.blind(why), "added_ns": ui.blind(why)})
                continue
            ui.progress(f"observer: {v}: bare, strace, perf trace, perf stat, bpftrace")
            bare = None
            for tracer in ("none", "strace", "perf-trace", "perf-stat", "bpftrace"):
                cmd, why = wr[tracer]
                if tracer == "perf-trace" and registry.get(v).abi != "x86_64":
                    cmd, why = None, ("perf trace names i386 calls from the x86-64 table; "
                                      "run for native 64-bit variants only")
                row = {"variant": v, "op": OP, "tracer": tracer, "supported": True}
                if cmd is None:
                    rows.append(dict(row, available=False, why=why,
                                     ns_per_call=ui.blind(why), added_ns=ui.blind(why)))
                    continue
                try:
                    r = bench.measure(v, OP, batches=plan["batches"], wrapper=cmd,
                                      batch_ms=plan["batch_ms"], warmup_ms=plan["warmup_ms"],
                                      timeout=120)
                except Exception as e:      # a tracer that failed: say so, keep going
                    msg = f"{tracer} run failed: {str(e)[-200:]}"
                    rows.append(dict(row, available=False, why=msg,
                                     ns_per_call=ui.blind(msg), added_ns=ui.blind(msg)))
                    continue
                s = stats.summarize(r["samples_ns"])
                if tracer == "none":
                    bare = s
                added = stats.diff_summary(s, bare) if bare and tracer != "none" else (
                    None if tracer == "none" else ui.blind("no bare run"))
                rows.append(dict(row, available=True, why=None, ns_per_call=s, added_ns=added,
                                 samples=r["samples_ns"],
                                 calls_per_batch=r.get("calls_per_batch")))
    doc = {"mode": mode, "op": OP, "method": __doc__.strip().split("\n\n", 1)[1], "rows": rows}
    files.write_json(out_dir / "observer.json", doc)
    with open(out_dir / "observer.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["variant", "op", "tracer", "available", "ns_per_call", "ci_low", "ci_high",
                    "added_ns", "added_ci_low", "added_ci_high", "why"])
        for r in rows:
            s, a = r["ns_per_call"] or {}, r["added_ns"] or {}
            w.writerow([r["variant"], r["op"], r["tracer"], r["available"], s.get("median"),
                        s.get("ci_low"), s.get("ci_high"), a.get("median"), a.get("ci_low"),
                        a.get("ci_high"), r.get("why") or ""])
    return doc


def format_table(doc):
    out = [f"{'variant':11} {'tracer':10} {'ns/call':>24} {'added ns/call':>24}"]
    for r in doc["rows"]:
        out.append(f"{r['variant']:11} {r['tracer']:10} {stats.fmt(r['ns_per_call']):>24} "
                   f"{stats.fmt(r['added_ns']) if r['added_ns'] else '-':>24}")
    return "\n".join(out)


def add_arguments(p, name):
    tracers.add_arguments(p, name)


def main(args, name):
    out = tracers._out(args, "observer")
    doc = observe(out, mode=args.mode, variants=args.variants.split(",") if args.variants else None)
    print(format_table(doc))
    print(f"observer.json in {out}")
    return 0
