"""The tracers' cross-check: did every instrument count the workload's writes alike?

A count that nothing measured is "not checked", never agreement.  The tracer plug-ins'
declared sample lists (twtools.machine.tracers: Tracer.summaries) are summarised here.
"""

from ..core import files
from ..machine import tracers
from . import stats

ANALYSIS = "tracers/2"
# tracers.json before the plug-ins: one key per tracer in each counts row
LEGACY_COUNT_KEYS = {"strace": "strace", "bpftrace": "bpftrace", "perf": "perf-stat"}


def analyse(raw):
    if not raw:
        return None
    out = files.copy_doc(raw)
    for tr in tracers.plugins():
        for key, fields in tr.summaries.items():
            for rec in out.get(key) or []:
                for samples, name in fields.items():
                    if rec.get(samples):
                        rec[name] = stats.summarize(rec[samples])
    rows = []
    for r in raw.get("counts", []):
        by = dict(r.get("by_tracer") or {k2: r.get(k1) for k1, k2 in LEGACY_COUNT_KEYS.items()
                                         if k1 in r})
        seen = {k: v for k, v in by.items() if v is not None}
        own = r.get("timewrite")
        if r.get("supported") is False:
            agree, why = None, f"unsupported: {r.get('reason')}"
        elif not seen:
            agree, why = None, "not checked: no tracer counted this variant's writes"
        else:
            vals = list(seen.values()) + ([own] if own is not None else [])
            agree = all(x == r.get("expected") for x in vals)
            why = None if agree else "counts differ: " + ", ".join(f"{k} {v}" for k, v in seen.items())
        rows.append({"variant": r["variant"], "expected": r.get("expected"), "timewrite": own,
                     "by_tracer": by, "agree": agree, "why": why})
    out["crosscheck"] = rows
    out["analysis"] = ANALYSIS
    return out
