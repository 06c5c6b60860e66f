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
import statistics

from ..machine import registry
from . import coreclock, sequential, stats

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


def _u(rounds, q=stats.UNDISTURBED_Q):
    """The undisturbed figure of a cell's rounds, reduced to what the documents keep.  q: the
    share of the fastest processes' floors it averages (1: all of them, for processes a screen
    has already kept)."""
    u = stats.undisturbed(rounds, q=q)
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
    return stats.half_width(x, "value")


def diff(a, b, **extra):
    """a - b of two {value, ci_low, ci_high}, the half-widths added in quadrature (the delta
    method, as analyse.causes); None when either has no interval."""
    if not a or not b or any(a.get(k) is None or b.get(k) is None for k in KEEP):
        return None
    v, h = a["value"] - b["value"], math.hypot(half(a), half(b))
    return dict({"value": v, "ci_low": v - h, "ci_high": v + h}, **extra)


def _is_blocked(v):
    return any("block" in r for r in (v.get("traced") or []) + (v.get("untraced") or []))


def variant(v, top=None, target=None, given_at=None):
    """One mechanism's legs from its raw entry in legs.json: {legs: {in, body, out}, total,
    untraced_total, tracer_ns, bracket_ns, calls} or {why}.  A file measured in blocks
    (legs/2) takes _blocked's way: top, the run's top clock (ns per chain step, or None);
    target, a --target run's relative half-width; given_at, the clocks the host gave the run's
    processes (coreclock.given_levels)."""
    if v.get("status") != "measured":
        return {"why": v.get("why") or "not measured"}
    if _is_blocked(v):
        sides, why = _sides(v, top, given_at)
        if why:
            return {"why": why}
        return _blocked(v, sides, traced_fast([sides]), target)
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


# The host's fast state, told apart on each side by its own processes.  The traced processes
# of a block (bpftrace attached, every mechanism once within a few ms) meet the same moment and
# the same tracer: beside a noisy host their floors moved together by 40% from block to block,
# every mechanism alike, while the untraced twins, a quarter of a second away and far less
# sensitive to what the host does to memory, moved differently.  So a block is fast for the
# traced side when the median over the mechanisms of (its floor / that mechanism's lowest) is
# within BLOCK_SCREEN: the traced path's fast state spreads wider than a null call's (its
# floors in the fast blocks were 0-13% above their lowest, median 2-9%).  An untraced process
# is fast when its floor is within sequential.SCREEN of its mechanism's lowest, as the matrix's
# gate.  At least GATED_MIN such blocks give an undisturbed figure (as analyse.percall's gate).
BLOCK_SCREEN = 0.10
GATED_MIN = 3
# The tracer's cost is paired, twin with twin, when at least PAIRED_MIN blocks met the fast
# state on both sides; else it is the two figures' difference.  On a noisy host the twins
# rarely meet it together (3-5 blocks of 24-40: the untraced side's state is its own), and a
# mean of 3-4 differences carries Student's t of 2-3 degrees of freedom, ±13-90% where the
# figures' difference gave ±2-3%.
PAIRED_MIN = 8


def _means(rec, values, f):
    return [x * f for x in batch_means(values, rec["calls"])]


def _side(rec, top, traced, given_at=None):
    """One process's batch means at the top clock: {total, in, body, out (traced), floor} or
    (None, why).  A chain the host slowed along with the call is no clock (given_at:
    core/clocksteps.given)."""
    f = coreclock.factor(None, rec, (top, given_at))
    out = {"total": _means(rec, [a - b for a, b in zip(rec["after"], rec["before"])], f),
           "empty": [x * f for x in rec.get("empty_ns") or []]}
    if traced:
        legs, why = join(rec)
        if why:
            return None, why
        for k in LEGS:
            out[k] = _means(rec, legs[k], f)
    out["floor"] = min(out["total"]) if out["total"] else None
    return out, None


def _screen(floors):
    """The keys of floors ({key: floor}) within sequential.SCREEN of their lowest."""
    lo = min(floors.values(), default=None)
    return [k for k, x in floors.items() if lo is not None and x <= lo * (1 + sequential.SCREEN)]


def _gated(series, target, what, screen=BLOCK_SCREEN, own=True):
    """The figure of one quantity over the kept blocks: series is [(block, [batch values])] in
    block order.  Without a target, stats.undisturbed over those processes (each one's floor,
    q=1: the screen has already left the slow ones out); with one, Stein's two-stage interval
    over their floors in block order (analyse/sequential.py), which decided when to stop.
    screen: the rule's own (values that far above its first stage's lowest are set aside):
    BLOCK_SCREEN for the traced side, whose fast state spreads that wide, sequential.SCREEN
    for the untraced.  own: a block whose floor of this quantity lies more than `screen`
    above the lowest is left out first: a block can meet the fast state for most mechanisms
    and not for this one, or not on this leg (64-syscall's way in at 145 ns in a block where
    its others were 118-122).  Not for a difference, which has no floor to screen."""
    if own and series:
        lo = min(min(v) for _, v in series)
        series = [(b, v) for b, v in series if min(v) <= lo * (1 + screen)]
    if len(series) < GATED_MIN:
        return {"value": None, "ci_low": None, "ci_high": None, "n_rounds": len(series),
                "why": f"unknown: {what} met the host's fast state in {len(series)} block(s), "
                       f"at least {GATED_MIN} are needed"}
    if target:
        seq = sequential.progress([min(v) for _, v in series], target, screen=screen)
        iv = seq["interval"]
        if iv["value"] is not None:
            return {"value": iv["value"], "ci_low": iv["ci_low"], "ci_high": iv["ci_high"],
                    "n_rounds": iv["n"], "n": iv["n"], "sequential": {
                        "met": iv["met"], "need_n": iv["need_n"], "screened": iv["screened"],
                        "target": target}}
        # the rule's first stage is not complete: the figure without it, not yet met
        return dict(_u([v for _, v in series], q=1.0), sequential={
            "met": False, "need_n": iv["need_n"], "target": target, "why": iv.get("why")})
    return _u([v for _, v in series], q=1.0)


def _sides(v, top, given_at=None):
    """{block: {"traced": side, "untraced": side}} of one mechanism (_side), or (None, why)."""
    sides = {}
    for kind, traced in (("untraced", False), ("traced", True)):
        for rec in v.get(kind) or []:
            got, why = _side(rec, top, traced, given_at)
            if why:
                return None, why
            if got["floor"] is not None:
                sides.setdefault(rec.get("block"), {})[kind] = got
    return sides, None


def traced_fast(all_sides):
    """The blocks whose traced side met the host's fast state (BLOCK_SCREEN), from every
    mechanism's sides: the median over mechanisms of floor / that mechanism's lowest."""
    ratios = {}
    for sides in all_sides:
        fl = {b: x["traced"]["floor"] for b, x in sides.items() if "traced" in x}
        lo = min(fl.values(), default=None)
        for b, f in fl.items():
            ratios.setdefault(b, []).append(f / lo)
    return {b for b, r in ratios.items() if statistics.median(r) <= 1 + BLOCK_SCREEN}


def _blocked(v, sides, fast_blocks, target):
    """A mechanism's legs from blocks (measure/legs.py): the traced processes of the blocks
    that met the host's fast state (traced_fast) give the legs and the traced total; the
    untraced ones within sequential.SCREEN of their lowest give the untraced total; the
    tracer's cost is the twins' difference block by block where both sides were fast in at
    least PAIRED_MIN blocks, else the two figures' difference."""
    blocks = sorted(b for b, x in sides.items() if "traced" in x and "untraced" in x)
    if not blocks:
        return {"why": "no block holds both a traced and an untraced process"}
    kb = [b for b in blocks if b in fast_blocks]
    ub = set(_screen({b: sides[b]["untraced"]["floor"] for b in blocks}))
    out = {"legs": {k: _gated([(b, sides[b]["traced"][k]) for b in kb], target, f"the {k} leg")
                    for k in LEGS},
           "total": _gated([(b, sides[b]["traced"]["total"]) for b in kb], target,
                           "the traced total"),
           "untraced_total": _gated([(b, sides[b]["untraced"]["total"]) for b in blocks
                                     if b in ub], target, "the untraced total",
                                    sequential.SCREEN),
           "calls": sum(len(r["before"]) for r in v.get("traced") or []),
           "processes": len(v.get("traced") or []),
           "shape": (v.get("traced") or [{}])[0].get("shape")}
    both = [b for b in kb if b in ub]
    if len(both) >= PAIRED_MIN:
        t = _gated([(b, [sides[b]["traced"]["floor"] - sides[b]["untraced"]["floor"]])
                    for b in both], target, "the tracer's cost", own=False)
        t.update(paired=True, blocks=len(both))
    else:
        t = diff(out["total"], out["untraced_total"]) or {
            "value": None, "ci_low": None, "ci_high": None,
            "why": "unknown: the traced or the untraced total has no figure"}
        if target and t.get("value") is not None:
            # no rule of its own: judged met when both sides are
            t["sequential"] = {"met": all((out[k].get("sequential") or {}).get("met")
                                          for k in ("total", "untraced_total"))}
        t["paired"] = False
    out["tracer_ns"] = t
    out["bracket_ns"] = _u([s[k]["empty"] for s in sides.values() for k in s if s[k]["empty"]])
    for k, what in (("bracket_ns", "the empty bracket (two stamps around no call)"),
                    ("total", "the traced total"), ("untraced_total", "the untraced total")):
        out[k] = _not_negative(out[k], what)
    out["host"] = {"blocks": len(blocks), "fast_blocks": len(kb), "untraced_fast": len(ub),
                   "block_screen": BLOCK_SCREEN, "screen": sequential.SCREEN,
                   "floors": {str(b): [round(sides[b]["untraced"]["floor"], 2),
                                       round(sides[b]["traced"]["floor"], 2)] for b in blocks}}
    out["_floors"] = {b: {k: min(sides[b]["traced"][k]) for k in LEGS} for b in kb}
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


def _top(raw):
    """The run's top clock (analyse.coreclock: the step its fastest 1% of processes, never
    the fastest three, reached), or None when any process lacks the chain (a file from before
    it): then every figure stays as measured."""
    steps = []
    for v in (raw.get("variants") or {}).values():
        for rec in (v.get("traced") or []) + (v.get("untraced") or []):
            s = coreclock.step_of(rec)
            if s is None:
                return None, []
            steps.append(s)
    return coreclock.top_of(steps), steps


def _paired(mine, base, leg):
    """mine's leg less base's, block by block over the blocks both kept (one moment of the
    host for both), or None when fewer than GATED_MIN blocks are common.  Never Stein's rule:
    a difference may be near zero or below it, and no target judges it."""
    a, b = mine.get("_floors") or {}, base.get("_floors") or {}
    common = [k for k in sorted(a) if k in b]
    if len(common) < GATED_MIN:
        return None
    d = _gated([(k, [a[k][leg] - b[k][leg]]) for k in common], None, f"the {leg} leg",
               own=False)
    if d.get("value") is None:
        return None
    return dict({x: d[x] for x in KEEP}, paired=True, blocks=len(common))


def analyse(raw):
    """The legs document from legs.json (None when there is none)."""
    if not raw:
        return None
    top, steps = _top(raw)
    given_at = coreclock.given_levels(steps) if top else None
    target = raw.get("target") if isinstance(raw.get("target"), (int, float)) else None
    out = {"why": raw.get("why"), "clock": raw.get("clock"), "variants": {}, "differences": {},
           "method": "per leg: batch means of the joined calls, then the undisturbed figure "
                     "(analyse.stats.undisturbed) over the processes; differences carry the "
                     "delta method's interval"}
    if raw.get("blocks"):
        out["method"] = ("per leg: batch means of the joined calls at the run's top core clock; "
                         "the traced side's figures over the blocks where the mechanisms' traced "
                         f"floors were within {100 * BLOCK_SCREEN:.0f}% of their lowest (median "
                         "over mechanisms, then each leg's own), the untraced totals over the "
                         f"processes within {100 * sequential.SCREEN:.0f}% of theirs; int 0x80 "
                         "less its baseline paired block by block, the tracer's cost too where "
                         f"{PAIRED_MIN} blocks met the fast state on both sides"
                         + ("; --target: Stein's two-stage interval" if target else ""))
        out.update(blocks=raw.get("blocks"), target=target, stopped=raw.get("stopped"),
                   seconds=raw.get("seconds"), added_blocks=raw.get("added_blocks") or 0)
    if top:
        out["core_clock"] = {"ghz": round(coreclock.ghz(top), 4), "step_ns": top,
                             "levels": [{"ghz": g, "share": round(sh, 4)}
                                        for g, sh in coreclock.levels(steps)]}
    known = set(registry.names())
    sides = {}
    for name, v in (raw.get("variants") or {}).items():
        if name in known and v.get("status") == "measured" and _is_blocked(v):
            sides[name] = _sides(v, top, given_at)
    fast = traced_fast([x for x, why in sides.values() if not why])
    if sides:
        out["fast_blocks"] = sorted(fast)
    for name, v in (raw.get("variants") or {}).items():
        if name not in known:
            out["variants"][name] = {"why": f"{name} is not in this checkout's variants/registry"}
        elif name in sides:
            got, why = sides[name]
            out["variants"][name] = {"why": why} if why else _blocked(v, got, fast, target)
        else:
            out["variants"][name] = variant(v, top, target, given_at)
    have = {k for k, v in out["variants"].items() if v.get("legs")}
    for name in sorted(have):
        b = baseline(name, have)
        if b is None:
            continue
        mine, base = out["variants"][name], out["variants"][b]
        d = {"baseline": b}
        for k in LEGS:
            d[k] = _paired(mine, base, k) or diff(mine["legs"][k], base["legs"][k])
        d["tracer"] = diff(mine["tracer_ns"], base["tracer_ns"])
        out["differences"][name] = d
    for v in out["variants"].values():
        v.pop("_floors", None)
    out["instructions"] = instructions(raw)
    host = raw.get("host") or {}
    if host.get("probes") is not None:
        pr = host["probes"]
        out["quiet_first"] = {"probes": len(pr), "fast": sum(1 for p in pr if p.get("fast")),
                              "waited_s": host.get("waited_s"),
                              "wait_max_s": host.get("wait_max_s")}
    return out


def instructions(raw):
    """A mitigation's own instruction timed from user space in each block (legs.json
    'instructions': syscost --op verw, --op lfence): {op: {value, ci_low, ci_high, n_rounds,
    what}}, the undisturbed figure over the processes (each its batches, the disturbed ones
    left out), or {why}.  A lower bound of what the kernel's same instruction costs on its
    leg: the buffers a VERW clears hold less after a user loop than after a system call."""
    out = {}
    for op, recs in (raw.get("instructions") or {}).items():
        rounds = []
        for r in recs or []:
            dist = r.get("disturbed") or []
            vals = [v for i, v in enumerate(r.get("samples_ns") or [])
                    if not (i < len(dist) and dist[i])] or list(r.get("samples_ns") or [])
            if vals:
                rounds.append(vals)
        if len(rounds) < 3:
            out[op] = {"value": None, "ci_low": None, "ci_high": None,
                       "why": f"{len(rounds)} process(es) timed it: an interval needs 3"}
            continue
        out[op] = _u(rounds)
    why = raw.get("instructions_why") or {}
    for op, w in why.items():
        if not (out.get(op) or {}).get("value"):
            out[op] = {"value": None, "ci_low": None, "ci_high": None, "why": w}
    return out


def target_status(doc, target):
    """{met, judged, missing, more_fast_blocks, first_stage_incomplete}: of every measured
    mechanism's legs, totals and tracer's cost, how many have an interval within target of
    their figure (a --target run's stopping rule's own judgement: Stein's `met`), which do not
    yet, how many more blocks of the host's fast state the rule still asks for (the most any
    planned figure needs), and for how many the rule's first stage is not complete."""
    met, judged, missing, more, first = 0, 0, [], 0, 0
    for name, v in sorted(((doc or {}).get("variants") or {}).items()):
        if not v.get("legs"):
            continue
        figs = [(f"{name} {k}", v["legs"][k]) for k in LEGS] + [
            (f"{name} {k}", v[k]) for k in ("total", "untraced_total", "tracer_ns")]
        for what, x in figs:
            judged += 1
            ok = bool((x.get("sequential") or {}).get("met")) if target else (
                x.get("value") and x.get("ci_low") is not None
                and half(x) <= target * abs(x["value"]))
            if ok:
                met += 1
            else:
                missing.append(what)
                sq = x.get("sequential") or {}
                if sq.get("why"):          # the rule's first stage is not complete
                    first += 1
                elif sq.get("need_n"):
                    more = max(more, sq["need_n"] - (x.get("n_rounds") or 0))
    return {"met": met, "judged": judged, "missing": missing, "more_fast_blocks": more,
            "first_stage_incomplete": first}


def unknown_legs(doc, variant_name):
    """The legs of one mechanism the analysed document leaves unknown, [(leg, why)]: all three
    when the mechanism has no legs at all (tw run's legs stage measures on past its deadline
    while the reference's are unknown, measure.legs.measure's `known`)."""
    v = ((doc or {}).get("variants") or {}).get(variant_name) or {}
    if not v.get("legs"):
        return [(k, v.get("why") or "not measured") for k in LEGS]
    return [(k, v["legs"][k].get("why")) for k in LEGS if v["legs"][k].get("value") is None]


def brief(doc, variant_name):
    """{in, body, out, tracer_ns, bracket_ns} of one mechanism as causes.json keeps it, or
    None: each {value, ci_low, ci_high} in ns, or {value: None, why}."""
    v = ((doc or {}).get("variants") or {}).get(variant_name)
    if not v:
        return None
    if not v.get("legs"):
        return {"value": None, "why": v.get("why")}
    out = {}
    for k in LEGS + ("tracer_ns", "bracket_ns", "total", "untraced_total"):
        x = v["legs"][k] if k in LEGS else v[k]
        out[k] = {f: x.get(f) for f in KEEP}
        if x.get("why"):
            out[k]["why"] = x["why"]
    if v.get("host"):
        # a file measured in blocks: how many met the host's fast state, and the clock
        out["host"] = {k: v["host"][k] for k in ("blocks", "fast_blocks", "untraced_fast")}
        out["host"]["added_blocks"] = doc.get("added_blocks") or 0
        out["host"]["core_ghz"] = (doc.get("core_clock") or {}).get("ghz")
        out["tracer_paired"] = bool(v["tracer_ns"].get("paired"))
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
