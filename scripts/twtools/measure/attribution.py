"""`tw attribute`: split one call into user loop, entry+exit, kernel body and waiting.

Per mechanism (variant) and operation:

  total_ns       syscost's ns per call, its empty loop already removed
                 (percall.json's cell when a results directory has one)
  loop_ns        syscost's empty-loop cost per call (what was removed)
  entry_exit_ns  the `null` op through the same mechanism: an invalid syscall
                 number the kernel answers -ENOSYS right after dispatch, so
                 its cost is entering, dispatching and leaving
  body_ns        traced raw_syscalls:sys_enter -> sys_exit interval of the op
                 (traces/body.bt) minus the same interval on `null`: what is
                 left is the op's own in-kernel work; the tracer's per-event
                 cost and the dispatch appear in both and cancel
  waiting_ns     write-sync and write-file: wall time minus on-CPU time
                 (user + system) per call, in the very syscost batches that
                 give the total.  On-CPU time is the scheduler's exact run
                 time (CLOCK_THREAD_CPUTIME_ID), not getrusage's tick-sampled
                 user/system split, so this is the time the task slept: for
                 an O_SYNC write, the wait for the device (what the seed's
                 Linux 2.6 sync row really measured); without O_SYNC, ~0
  body_cpu_ns    write-sync only: body - waiting.  An O_SYNC write sleeps
                 inside the kernel until the device answers, so the traced
                 enter->exit body contains the wait; this is the rest, the
                 kernel's own CPU work.  Stack loop, entry_exit, body_cpu and
                 waiting to draw the call; never body and waiting, which
                 counts the wait twice.  (Body is traced in separate runs,
                 waiting in the untraced ones, so the two can differ by the
                 tracer's own cost: read body_cpu with its interval.)
  residual_ns    total - entry_exit - body
  consistent     whether the residual's 95% interval contains 0, i.e. the
                 timed cost above a null call agrees with the traced body
                 within the combined uncertainty (null for the null row,
                 which is the reference itself)

Each body sample is one syscost process's mean enter->exit interval over
all its calls of that op (bpftrace sums per pid); runs of every cell are
interleaved in one bpftrace session so drift hits all cells alike.
"""
import csv
import tempfile
from pathlib import Path

from ..analyse import stats
from . import tracers
from ..core import files, proc, ui
from ..machine import probe, registry, sysnr

OPS = [("null", None), ("getppid", None), ("write-devnull", 1), ("write-file", 256),
       ("write-sync", 256)]
# syscall numbers of each op, per ABI (null: a number no kernel assigns)
OP_SYSCALL = {"null": "invalid", "getppid": "getppid", "write-devnull": "write",
              "write-file": "write", "write-sync": "write"}
NR = {abi: {op: sysnr.syscall_nr(abi, sc) for op, sc in OP_SYSCALL.items()}
      for abi in ("i386", "x86_64")}
PLAN = {
    # syscost batches for a measured total; body runs per cell; calls per body run
    "quick": {"batches": 5, "body_runs": 3, "body_calls": 10000, "sync_calls": 20},
    "default": {"batches": 10, "body_runs": 6, "body_calls": 20000, "sync_calls": 100},
    "long": {"batches": 20, "body_runs": 10, "body_calls": 50000, "sync_calls": 200},
}


def _bench():
    from . import bench
    return bench


def _percall_cell(percall, variant, op, size):
    if not percall:
        return None
    for c in percall.get("cells", []):
        if c.get("variant") == variant and c.get("op") == op and \
                (size is None or c.get("size") in (size, None)) and c.get("supported"):
            if c.get("median") is not None:
                return c
    return None


def _summary(s):
    return {k: s.get(k) for k in ("median", "ci_low", "ci_high", "min", "max", "cv", "n", "unstable")}


def measure_totals(variants, mode, tmp, percall=None):
    """{(variant, op): {total, loop, source}} from percall.json or fresh syscost runs."""
    bench = _bench()
    plan = PLAN[mode]
    out = {}
    for v in variants:
        for op, size in OPS:
            c = _percall_cell(percall, v, op, size)
            if c is not None:
                out[(v, op)] = {"total": _summary(c), "loop": c.get("loop_ns") or
                                ui.blind("percall.json has no loop_ns"), "source": "percall.json",
                                "offcpu": c.get("offcpu_ns") or
                                ui.blind("percall.json has no offcpu_ns (older syscost)")}
                continue
            sync = op == "write-sync"
            r = bench.measure(v, op, size=size, batches=plan["batches"] if not sync else 3,
                              calls=plan["sync_calls"] // 3 if sync else None,
                              batch_ms=None if sync else 1, warmup_ms=5 if not sync else 0,
                              file_dir=tmp)
            if not r.get("supported"):
                out[(v, op)] = {"unsupported": r.get("reason")}
                continue
            off = r.get("offcpu_ns_per_call")
            out[(v, op)] = {"total": stats.summarize(r["samples_ns"]),
                            "loop": stats.summarize(r["loop_ns_per_call"]), "source": "syscost",
                            "tsc_hz": r.get("tsc_hz"),
                            "offcpu": dict(stats.summarize(off), samples=off) if off else
                            ui.blind("syscost reported no off-CPU time")}
    return out


def measure_bodies(variants, mode, tmp, tsc_hz=None):
    """One body.bt session; {(variant, op): [per-process mean enter->exit ns]}."""
    plan = PLAN[mode]
    lines = []
    for rnd in range(plan["body_runs"]):
        for v in variants:
            for op, size in OPS:
                sync = op == "write-sync"
                if sync and rnd >= 2:
                    continue       # device-bound: two runs are plenty, and slow
                # many short batches: the one untimed warm-up pass (which, for
                # write-file, allocates the file's blocks) is then a small share
                # of the traced calls
                nb = 20
                cmd = [probe.binary("syscost", v), "--op", op, "--batches", str(nb),
                       "--calls", str(max(1, (plan["sync_calls"] if sync else plan["body_calls"]) // nb)),
                       "--warmup-ms", "0"]
                if size is not None:
                    cmd += ["--size", str(size)]
                if tsc_hz:
                    cmd += ["--tsc-hz", f"{tsc_hz:.0f}"]
                lines.append((f"{v}/{op}", cmd, "/dev/null"))
    maps, labels, p, text = _session(lines, tmp)
    abi_of = {x["name"]: x["abi"] for x in registry.variants()}
    out, err = {}, None
    for pid, (label, rc) in labels.items():
        v, op = label.split("/")
        key_abi = "i386" if (abi_of.get(v) == "i386") else "x86-64"
        nr = NR[abi_of.get(v, "x86_64")][op]
        k = (pid, key_abi, str(nr))
        n = maps.get("@pcount", {}).get(k)
        s = maps.get("@psum_ns", {}).get(k)
        if rc != 0 or not n:
            err = f"{label}: syscost exit {rc}, {n} traced calls"
            continue
        out.setdefault((v, op), []).append(_trimmed_mean(maps.get("@plin", {}).get(k), s / n))
    if not out:
        err = err or f"bpftrace exit {p.returncode}: {p.stderr.strip()[-200:]}"
    return out, err, text


def _trimmed_mean(buckets, mean):
    """Mean per call of the calls under 20 us (bucket midpoints), so that a rare
    stall (writeback, an interrupt storm) does not decide a sample: the
    analogue of syscost's median over batches.  When most calls exceed 20 us
    (O_SYNC writes) the plain mean is returned."""
    if not buckets:
        return mean
    hb = tracers.hist_buckets(buckets)
    inside = [b for b in hb if b["hi_ns"] is not None]
    n_in = sum(b["count"] for b in inside)
    n_all = sum(b["count"] for b in hb)
    if n_in < 0.5 * n_all or n_in == 0:
        return mean
    return sum((b["lo_ns"] + b["hi_ns"]) / 2 * b["count"] for b in inside) / n_in


def _session(lines, tmp):
    return tracers._bpftrace_session("body.bt", lines, tmp, "body")


def attribute(out_dir, percall=None, mode="default", variants=None):
    """Measure (or read) every figure, write attribution.json/.csv; return the dict."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    if percall is None:
        percall = files.read_json(out_dir / "percall.json")
    vs = [v for v in probe.check_all("syscost") if not variants or v["name"] in variants]
    ok = [v["name"] for v in vs if v["supported"]]
    rows, notes = [], []
    with tempfile.TemporaryDirectory(prefix="tw-attr-", dir=tracers._tmp_dir()) as tmp:
        ui.progress(f"attribute: totals of {len(ok)} variants x {len(OPS)} ops "
                        f"({'percall.json' if percall else 'syscost'})")
        totals = measure_totals(ok, mode, tmp, percall)
        tsc = next((t.get("tsc_hz") for t in totals.values() if t.get("tsc_hz")), None) or \
            (percall or {}).get("tsc_hz")
        bodies, body_err = {}, None
        if proc.is_root() and proc.which("bpftrace"):
            ui.progress("attribute: body.bt session over every cell")
            bodies, body_err, _ = measure_bodies(ok, mode, tmp, tsc)
        else:
            body_err = "bpftrace needs root" if not proc.is_root() else "bpftrace is not installed"
            ui.warn(body_err, "run as root with bpftrace for the in-kernel body")
    for v in vs:
        name = v["name"]
        if not v["supported"]:
            for op, size in OPS:
                rows.append({"variant": name, "op": op, "size": size, "supported": False,
                             "reason": v["reason"]})
            continue
        null_total = totals.get((name, "null"), {}).get("total")
        null_body = bodies.get((name, "null"))
        null_body_s = stats.summarize(null_body) if null_body else None
        for op, size in OPS:
            t = totals.get((name, op), {})
            if "unsupported" in t:
                rows.append({"variant": name, "op": op, "size": size, "supported": False,
                             "reason": t["unsupported"]})
                continue
            total = t["total"]
            traced = bodies.get((name, op))
            traced_s = stats.summarize(traced) if traced else None
            if traced_s and null_body_s:
                body = stats.diff_summary(traced_s, null_body_s)
            else:
                body = ui.blind(body_err or "bpftrace saw no calls of this op")
            ee = null_total
            wait = t.get("offcpu") if op in ("write-sync", "write-file") else None
            if wait is not None and "samples" in wait:
                wait = {k: wait[k] for k in ("median", "ci_low", "ci_high", "min", "max", "cv",
                                             "n", "unstable")}
            above = stats.diff_summary(total, ee) if ee else None
            if above and body.get("median") is not None:
                resid = stats.diff_summary(above, body)
                consistent = None if op == "null" else bool(resid["ci_low"] <= 0 <= resid["ci_high"])
            else:
                resid = ui.blind("needs both the total above null and the traced body")
                consistent = None
            note = {"null": "reference row: entry+exit by definition; body is 0 by construction",
                    "write-sync": "the traced body includes the wait for the device (the task "
                                  "sleeps inside write); waiting_ns shows how much of it",
                    "write-file": "without O_SYNC nothing should wait: waiting_ns near 0",
                    }.get(op, "")
            body_cpu = (stats.diff_summary(body, wait)
                         if op == "write-sync" and wait and body.get("median") is not None
                         else None)
            rows.append({"variant": name, "op": op, "size": size, "supported": True,
                         "total_ns": total, "loop_ns": t["loop"], "entry_exit_ns": ee,
                         "above_null_ns": above, "body_ns": body, "body_cpu_ns": body_cpu,
                         "traced_interval_ns": traced_s, "traced_null_interval_ns": null_body_s,
                         "waiting_ns": wait, "residual_ns": resid, "consistent": consistent,
                         "source": t.get("source"), "note": note})
    doc = {"mode": mode, "method": __doc__.strip().split("\n\n", 1)[1], "rows": rows,
           "notes": notes + ([body_err] if body_err else [])}
    files.write_json(out_dir / "attribution.json", doc)
    _csv(out_dir / "attribution.csv", rows)
    return doc


FIELDS = ["total_ns", "loop_ns", "entry_exit_ns", "body_ns", "waiting_ns", "residual_ns"]


def _csv(path, rows):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        head = ["variant", "op", "size", "supported", "consistent"]
        for k in FIELDS:
            head += [k, k + "_ci_low", k + "_ci_high"]
        w.writerow(head + ["why"])
        for r in rows:
            line = [r["variant"], r["op"], r["size"], r["supported"], r.get("consistent")]
            why = r.get("reason") or ""
            for k in FIELDS:
                s = r.get(k) or {}
                line += [s.get("median"), s.get("ci_low"), s.get("ci_high")]
                if s.get("why"):
                    why = s["why"]
            w.writerow(line + [why])


def format_table(doc):
    out = [f"{'variant':11} {'op':13} {'total':>22} {'entry+exit':>22} {'body':>22} "
           f"{'waiting':>22} {'residual':>22} consistent"]
    for r in doc["rows"]:
        if not r.get("supported"):
            out.append(f"{r['variant']:11} {r['op']:13} unsupported: {r.get('reason')}")
            continue
        cells = [_f(r.get(k)) for k in ("total_ns", "entry_exit_ns", "body_ns", "waiting_ns",
                                         "residual_ns")]
        out.append(f"{r['variant']:11} {r['op']:13} " + " ".join(f"{c:>22}" for c in cells) +
                   f" {r['consistent']}")
    return "\n".join(out)


def _f(s):
    if s is None:
        return "-"
    if s.get("median") is None:
        return "unknown"
    return f"{s['median']:.0f} [{s['ci_low']:.0f},{s['ci_high']:.0f}]"


def add_arguments(p, name):
    tracers.add_arguments(p, name)
    p.add_argument("--percall", default=None, help="a percall.json to take totals from")


def main(args, name):
    out = tracers._out(args, "attribute")
    percall = files.read_json(args.percall) if args.percall else None
    doc = attribute(out, percall=percall, mode=args.mode,
                    variants=args.variants.split(",") if args.variants else None)
    print(format_table(doc))
    print(f"attribution.json in {out}")
    return 0
