"""The observer-effect stage: what each tracer adds to a call, measured raw.

The same workload, syscost --op getppid through each mechanism, runs bare and under each
tracer plug-in's observer wrapper (twtools.machine.tracers: strace stops the process at
every entry and exit; perf trace and perf stat open the raw_syscalls tracepoints; bpftrace
attaches a start-time map and a histogram to them).  A tracer that cannot see a mechanism's
calls (a vsyscall fault, a compat call perf trace misnames) or cannot run here (not root, not
installed) gets a row saying why.  observer.json keeps every batch; the added cost per call,
traced minus bare with its CI, is computed at report time (twtools.analyse.observer).
"""
import tempfile
from pathlib import Path

from ..core import files, proc, ui
from ..machine import probe, registry, tracers
from . import legs, syscost
from .trace import tmp_dir

OP = "getppid"
PLAN = {"quick": {"batches": 5, "batch_ms": 1, "warmup_ms": 2},
        "default": {"batches": 10, "batch_ms": 2, "warmup_ms": 5},
        "long": {"batches": 20, "batch_ms": 4, "warmup_ms": 10}}


# --quick: the mechanisms the report's first screen rests on (measure.legs.headline), not every
# one: each tracer starts once per mechanism, and the quick run's minute goes to the headline
# (issue 62); the libcs and the vsyscall page are the default's.
QUICK = set(legs.headline())


def observe(out_dir, mode="default", variants=None):
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    plan = PLAN[mode]
    names = variants or [m.name for m in registry.mechanisms() if OP in m.ops
                         and (mode != "quick" or m.name in QUICK)]
    root = proc.is_root()
    rows = []
    with tempfile.TemporaryDirectory(prefix="tw-obs-", dir=tmp_dir()) as tmp:
        wrappers = [("none", [], None, None)]
        for tr in tracers.plugins():
            w, why = tr.observer_wrapper(tmp, root)
            wrappers.append((tr.name, w, why, tr))
        for v in names:
            mech = registry.get(v)
            ok, why = probe.check("syscost", v)
            if not ok:
                rows.append({"variant": v, "op": OP, "tracer": "none", "supported": False,
                             "available": False, "why": why})
                continue
            ui.progress(f"observer: {v}: bare and under " + ", ".join(w[0] for w in wrappers[1:]))
            for name, wrapper, why, tr in wrappers:
                row = {"variant": v, "op": OP, "tracer": name, "supported": True}
                why = why or (tr.blind(mech, root) if tr else None)
                if why:
                    rows.append(dict(row, available=False, why=why))
                    continue
                try:
                    # Every run (bare too, for like conditions) in tmp: a wrapper may name a
                    # script there by a relative path (tracers.base.command_word).
                    r = syscost.measure(v, OP, sampling=syscost.Sampling(
                        batches=plan["batches"], batch_ms=plan["batch_ms"],
                        warmup_ms=plan["warmup_ms"]), launch=syscost.Launch(
                        timeout=120, file_dir=tmp,
                        command_wrapper=(lambda cmd, tr=tr, w=wrapper:
                                         tr.wrap_command(w, cmd)) if tr else None))
                except syscost.SyscostError as e:     # a tracer that failed: say so, keep going
                    rows.append(dict(row, available=False, why=f"{name} run failed: {str(e)[-200:]}"))
                    continue
                rows.append(dict(row, available=True, why=None, samples=r["samples_ns"],
                                 calls_per_batch=r.get("calls_per_batch")))
    doc = {"schema": "timewrite-observer/2", "mode": mode, "op": OP,
           "method": __doc__.strip().split("\n\n", 1)[1], "rows": rows}
    files.write_json(out_dir / "observer.json", doc)
    return doc
