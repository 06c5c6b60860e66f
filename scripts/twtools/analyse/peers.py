"""How much each tool's figure moves from one repetition to the next, measured together
(measure/peers.py): the performance claim of the undisturbed figure against its peers.

Per tool, over repetitions: the median figure, the spread (max - min over the median), and
the coefficient of variation.  For timewrite, both of its figures per repetition: the
undisturbed cost (stats.undisturbed over that repetition's processes) and the typical one
(the median of the processes' medians).  The ratio of perf bench's spread to the undisturbed
figure's is the factor the claim states; None when either side could not be measured.
"""
import numpy as np

from . import stats


def _spread(xs):
    a = np.asarray([x for x in xs if x is not None], dtype=float)
    if a.size < 2:
        return {"n": int(a.size), "median": float(a[0]) if a.size else None, "spread": None,
                "cv": None, "values": a.tolist()}
    med = float(np.median(a))
    return {"n": int(a.size), "median": med, "spread": float((a.max() - a.min()) / med),
            "cv": float(np.std(a, ddof=1) / np.mean(a)), "values": a.tolist()}


def analyse(doc):
    tools = (doc or {}).get("tools") or {}
    out = {"tools": {}, "factor": None}
    tw = (tools.get("timewrite") or {}).get("reps") or []
    und, typ = [], []
    for rep in tw:
        vals = []
        for r in rep["rounds"]:
            s, d = r.get("samples_ns") or [], r.get("disturbed")
            keep = [v for v, x in zip(s, d) if not x] if d and len(d) == len(s) else list(s)
            vals.append(keep or list(s))
        und.append(stats.undisturbed(vals).get("value"))
        typ.append(float(np.median([np.median(v) for v in vals if v])) if vals else None)
    if tw:
        out["tools"]["timewrite undisturbed"] = _spread(und)
        out["tools"]["timewrite typical"] = _spread(typ)
    elif (tools.get("timewrite") or {}).get("why"):
        out["tools"]["timewrite undisturbed"] = {"why": tools["timewrite"]["why"]}
    for name in ("perf bench", "stress-ng"):
        t = tools.get(name) or {}
        if t.get("reps"):
            out["tools"][name] = _spread([r["ns"] for r in t["reps"]])
        else:
            out["tools"][name] = {"why": t.get("why") or "not run"}
    u, p = out["tools"].get("timewrite undisturbed") or {}, out["tools"].get("perf bench") or {}
    if u.get("spread") and p.get("spread") is not None:
        out["factor"] = p["spread"] / u["spread"]
    return out
