"""Each null call's way in, body and way out, from legs.json's stamps (measure/legs.py).

Per traced call, four stamps on one clock (CLOCK_MONOTONIC: the vDSO in user space,
bpf_ktime_get_ns() in the kernel):

    way in  = sys_enter - before       body = sys_exit - sys_enter       way out = after - sys_exit

A leg cannot be negative.  If one is, the user and kernel stamps are not on one clock (or
the join by order went wrong), and every leg of that mechanism is refused, with the call and
the amount, rather than averaged into a figure.  So is a process whose kernel stamps do not
match its calls one for one (bpftrace lost some, or counted others).

Each leg is averaged per batch of calls, and the batches of each process (one round) get the
per-call matrix's undisturbed treatment (analyse.stats.undisturbed, called as the matrix
calls it: one list of batch values per process, its 95% interval).  Each leg's figure is taken on its own, so the three
need not add up to the total's exactly.

The tracer's cost lands inside the legs: it is the traced total (after - before) less the
same program's untraced total, and is stated.  Differences between mechanisms (an int 0x80
leg less its baseline's) cancel it as far as it is equal for both, and cancel the stamps'
own cost (the empty bracket: two stamps around an empty call, no kernel entry).

    join(rec)            ({in, body, out}: per-call lists, None) or (None, why)
    batch_means(x, n)    means of consecutive groups of n
    variant(v)           one mechanism's figures from its raw rounds
    analyse(raw)         the document: {why, variants: {V: ...}, differences: {V: ...}}
"""
import math

from ..machine import registry
from . import stats

LEGS = ("in", "body", "out")
KEEP = ("value", "ci_low", "ci_high")


def join(rec):
    """One traced process's per-call legs ({in, body, out}, None), or (None, why)."""
    n = rec.get("calls", 0) * rec.get("batches", 0)
    pid = rec.get("pid")
    b, a = rec.get("before") or [], rec.get("after") or []
    e, x = rec.get("enter") or [], rec.get("exit") or []
    if n <= 0 or len(b) != n or len(a) != n:
        return None, f"process {pid}: {len(b)} user stamps for {n} calls"
    for name, ks in (("sys_enter", e), ("sys_exit", x)):
        got = sum(1 for k in ks if k is not None)
        if len(ks) != n or got != n:
            return None, (f"process {pid}: the tracer kept {got} {name} stamps for {n} calls "
                          "(events lost, or the map was full): calls cannot be joined by order")
    want = n + rec.get("warmup", 0)
    for name, got in (("sys_enter", rec.get("kernel_calls")), ("sys_exit", rec.get("kernel_exits"))):
        if got is not None and got != want:
            return None, (f"process {pid}: the tracer counted {got} {name} events for {want} "
                          "calls (warm-up included): calls cannot be joined by order")
    legs = {k: [] for k in LEGS}
    for i in range(n):
        for leg, lo, hi, what in (("in", b[i], e[i], "sys_enter is {d} ns before the user "
                                                     "stamp taken before the call"),
                                  ("body", e[i], x[i], "sys_exit is {d} ns before sys_enter"),
                                  ("out", x[i], a[i], "the user stamp taken after the return "
                                                      "is {d} ns before sys_exit")):
            d = hi - lo
            if d < 0:
                return None, (f"the clock steps backwards between user space and the kernel: "
                              f"in call {i} of process {pid}, " + what.format(d=-d)
                              + "; a leg cannot be negative, so these stamps are not on one "
                              "clock and no leg is measured")
            legs[leg].append(d)
    return legs, None


def batch_means(x, n):
    """The means of consecutive groups of n values (a last, shorter group is dropped)."""
    return [sum(x[i:i + n]) / n for i in range(0, len(x) - n + 1, n)] if n > 0 else []


def _u(rounds):
    """The undisturbed figure of a cell's rounds, reduced to what the documents keep."""
    u = stats.undisturbed(rounds)
    out = {k: u.get(k) for k in KEEP}
    out.update(n_rounds=u.get("n_rounds"), n=u.get("n"))
    if u.get("few_rounds"):
        out["few_rounds"] = True
    if u.get("value") is None or u.get("ci_low") is None:
        out["why"] = u.get("why") or "no interval"
    return out


def _not_negative(x, what):
    """x, or unknown with why when its figure is below zero: a duration cannot be, so the
    stamps are not on one clock or the file was not written by tw legs (a figure such as
    "-1000000.0 µs" is never published)."""
    if x.get("value") is not None and x["value"] < 0:
        return {"value": None, "ci_low": None, "ci_high": None,
                "why": f"unknown: {what} came out negative ({x['value']:.4g} ns): a duration "
                       "cannot be, so the stamps are not on one clock or legs.json is damaged"}
    return x


def half(x):
    return max(x["value"] - x["ci_low"], x["ci_high"] - x["value"])


def diff(a, b, **extra):
    """a - b of two {value, ci_low, ci_high}, the half-widths added in quadrature (the delta
    method, as analyse.causes); None when either has no interval."""
    if not a or not b or any(a.get(k) is None or b.get(k) is None for k in KEEP):
        return None
    v, h = a["value"] - b["value"], math.hypot(half(a), half(b))
    return dict({"value": v, "ci_low": v - h, "ci_high": v + h}, **extra)


def variant(v):
    """One mechanism's legs from its raw entry in legs.json: {legs: {in, body, out}, total,
    untraced_total, tracer_ns, bracket_ns, calls} or {why}."""
    if v.get("status") != "measured":
        return {"why": v.get("why") or "not measured"}
    traced = v.get("traced") or []
    if not traced:
        return {"why": "no traced process"}
    rounds = {k: [] for k in LEGS + ("total",)}
    for rec in traced:
        legs, why = join(rec)
        if why:
            return {"why": why}
        n = rec["calls"]
        for k in LEGS:
            rounds[k].append(batch_means(legs[k], n))
        rounds["total"].append(batch_means([a - b for a, b in zip(rec["after"], rec["before"])], n))
    out = {"legs": {k: _u(rounds[k]) for k in LEGS}, "total": _u(rounds["total"]),
           "calls": sum(len(r["before"]) for r in traced), "processes": len(traced),
           "shape": traced[0].get("shape")}
    bracket = [r.get("empty_ns") or [] for r in traced + (v.get("untraced") or [])]
    out["bracket_ns"] = _u(bracket)
    un = [batch_means([a - b for a, b in zip(r["after"], r["before"])], r["calls"])
          for r in v.get("untraced") or [] if r.get("calls")]
    out["untraced_total"] = _u(un) if un else {"value": None, "why": "no untraced process"}
    for k, what in (("bracket_ns", "the empty bracket (two stamps around no call)"),
                    ("total", "the traced total"), ("untraced_total", "the untraced total")):
        out[k] = _not_negative(out[k], what)
    t = diff(out["total"], out["untraced_total"])
    out["tracer_ns"] = t if t else {"value": None, "ci_low": None, "ci_high": None,
                                    "why": "unknown: no untraced total to compare with"}
    return out


def baseline(variant_name, have):
    """The mechanism an int 0x80 variant's legs are held against (as analyse.causes holds its
    cost): the 64-bit syscall for 64-bit code, the first 32-bit fast path with legs (then
    32-bit glibc) for 32-bit code; None for any other."""
    m = registry.get(variant_name)
    if m.entry != "int80":
        return None
    if m.bits == 64:
        b = registry.find(64, "syscall")
        return b if b in have else None
    for b in registry.fast32() + [registry.find(32, "libc")]:
        if b in have:
            return b
    return None


def analyse(raw):
    """The legs document from legs.json (None when there is none)."""
    if not raw:
        return None
    out = {"why": raw.get("why"), "clock": raw.get("clock"), "variants": {}, "differences": {},
           "method": "per leg: batch means of the joined calls, then the undisturbed figure "
                     "(analyse.stats.undisturbed) over the processes; differences carry the "
                     "delta method's interval"}
    known = set(registry.names())
    for name, v in (raw.get("variants") or {}).items():
        out["variants"][name] = variant(v) if name in known else \
            {"why": f"{name} is not in this checkout's variants/registry"}
    have = {k for k, v in out["variants"].items() if v.get("legs")}
    for name in sorted(have):
        b = baseline(name, have)
        if b is None:
            continue
        mine, base = out["variants"][name], out["variants"][b]
        d = {"baseline": b}
        for k in LEGS:
            d[k] = diff(mine["legs"][k], base["legs"][k])
        d["tracer"] = diff(mine["tracer_ns"], base["tracer_ns"])
        out["differences"][name] = d
    return out


def brief(doc, variant_name):
    """{in, body, out, tracer_ns, bracket_ns} of one mechanism as causes.json keeps it, or
    None: each {value, ci_low, ci_high} in ns, or {value: None, why}."""
    v = ((doc or {}).get("variants") or {}).get(variant_name)
    if not v:
        return None
    if not v.get("legs"):
        return {"value": None, "why": v.get("why")}
    out = {k: {x: v["legs"][k].get(x) for x in KEEP} for k in LEGS}
    for k in ("tracer_ns", "bracket_ns", "total", "untraced_total"):
        out[k] = {x: v[k].get(x) for x in KEEP}
        if v[k].get("why"):
            out[k]["why"] = v[k]["why"]
    return out


def _quot(a, p):
    """a / p with the delta method's interval; None without one."""
    if a is None or not p or p.get("value") in (None, 0) or p.get("ci_low") is None:
        return None
    e = a["value"] / p["value"]
    h = math.hypot(half(a) / p["value"], a["value"] * half(p) / p["value"] ** 2)
    return {"value": e, "ci_low": e - h, "ci_high": e + h}


# An exit is a whole event: the legs place it where the fitted count lies within this much of
# the predicted one (as analyse.causes.WHOLE_EXIT), and not where it lies below it.
WHOLE = 0.5


def placement(d, price, n):
    """Where the predicted exits sit, from an int 0x80 variant's legs less its baseline's:
    {in_exits, out_exits, in_beyond_exits_ns, legs_residual_ns, in_way_in, text}, or None
    when there is no exit price or no prediction."""
    if n is None or not price or price.get("value") is None or not d or not d.get("in"):
        return None
    fin, fout = _quot(d["in"], price), _quot(d["out"], price)
    if fin is None or fout is None:
        return None
    ex = {"value": n * price["value"], "ci_low": n * price["ci_low"], "ci_high": n * price["ci_high"]}
    beyond = diff(d["in"], ex)
    total = None
    if d.get("body"):
        s = d["in"]["value"] + d["body"]["value"] + d["out"]["value"]
        h = math.sqrt(half(d["in"]) ** 2 + half(d["body"]) ** 2 + half(d["out"]) ** 2)
        total = diff({"value": s, "ci_low": s - h, "ci_high": s + h}, ex)
    in_way_in = bool(n and n - WHOLE < fin["ci_low"] and fin["ci_high"] < n + WHOLE
                     and fout["ci_high"] < WHOLE)
    f = lambda x: f"{x['value']:.2f} [{x['ci_low']:.2f}, {x['ci_high']:.2f}]"
    if not n:
        text = (f"no exit is predicted; the way in carries {f(fin)} exits' worth over "
                f"{d['baseline']}'s, the way out {f(fout)}")
    elif in_way_in:
        text = (f"the exit sits in the way in, as predicted (before dispatch): the way in carries "
                f"{f(fin)} exits' worth over {d['baseline']}'s, the way out {f(fout)}")
    else:
        text = (f"not placed as predicted: the way in carries {f(fin)} exits' worth over "
                f"{d['baseline']}'s and the way out {f(fout)}, where {n} and 0 were predicted")
    return {"in_exits": fin, "out_exits": fout, "in_beyond_exits_ns": beyond,
            "legs_residual_ns": total, "in_way_in": in_way_in, "predicted_exits": n,
            "text": text}


def place(out, variant_name, doc, price, pred):
    """A causes.json mechanism entry gains its legs ({in, body, out, tracer_ns, bracket_ns,
    total, untraced_total}, or {value: None, why}); an int 0x80 one also its legs less its
    baseline's (two measured parts) and where the exits sit (placement)."""
    if doc is None:
        out["legs"] = {"value": None, "why": "unknown: these results have no legs stage "
                                             "(tw run --only legs, as root with bpftrace)"}
        return
    if doc.get("why") and not doc.get("variants"):
        out["legs"] = {"value": None, "why": f"unknown: {doc['why']}"}
        return
    out["legs"] = brief(doc, variant_name) or {"value": None,
                                               "why": "not measured by the legs stage"}
    d = (doc.get("differences") or {}).get(variant_name)
    if not d:
        return
    out["legs_vs_baseline"] = {"baseline": d["baseline"], **{k: d.get(k) for k in LEGS},
                               "tracer": d.get("tracer")}
    for k, what, where in (
            ("in", "way in", "sys_enter - the user stamp before the call"),
            ("out", "way out", "the user stamp after the return - sys_exit")):
        if d.get(k):
            out["parts"].append({
                "part": f"{what} over {d['baseline']}'s (legs)",
                "ns": {x: d[k][x] for x in KEEP},
                "basis": f"measured on one clock: ({where}) of {variant_name} less "
                         f"{d['baseline']}'s; the tracer's cost, equal in both, cancels"})
    p = placement(d, price, (pred or {}).get("value"))
    if p:
        out["exit_placement"] = p
