"""Between two runs: a cost added to every kernel entry, told apart from a change of speed.

Every kernel-entering cell is three parts: the base (the entry and exit work every call pays,
whatever way it came in: the register saves, the mitigations on the way in and out), what its
way in adds (int 0x80's IDT delivery, its VM exit on a guest, the compat path's conversions),
and its body (getppid's, a write's).  A kernel update can add to the base alone: one VERW on
every return to user (AMD's TSA mitigation, Linux 6.16+) added about 240 ns to every way in on
the same CPU, while the ways' premiums and the VM exit held.  Read as a change of speed (a
ratio to the run's own 64-bit syscall), that move makes every slow way look faster: int 0x80
"faster by 63%".  So the two kinds of change are fitted apart:

    B(c) = s * A(c) + added          over the kernel-entering cells c of both runs

with each cell's VM exits taken out at its own run's price of one exit first (the host sets
that price, and moves it: analyse/exitdrift.py), so that `added` is the kernel's and `s` the
CPU's.  The fit weighs each cell by its two intervals (errors in both: the effective variance
of York's straight line, iterated), and its intervals are widened by how far the cells scatter
beyond their own errors (the Birge ratio), so that a model that does not fit says so in its
width and in `fits`.  The cells that never enter the kernel (the 64-bit vDSO, glibc's clock
calls, which go through it) witness the CPU's own speed apart: their B/A.

What each way adds and what each body costs are then decided apart, cell by cell, as
differences in ns (premium_change): a way's premium is its cell less the 64-bit syscall's of
the same operation, a body the 64-bit syscall's cell less its null call.

    enters_kernel(variant, op)        whether a call of that cell enters the kernel
    points(a_cells, b_cells, ...)     the cells both runs measured, exits taken out
    fit(points)                       {added, scale, fits, birge, n, ...}
    change(a_set, b_set, ...)         the base object tw compare --json carries per B against A
    premium_change(...)               one cell's premium (or body) in A and B, and its decision
"""
import math

from ..machine import registry
from . import percall, stats

# The operations a null call's base is compared on: those that wait on a device (write-sync)
# carry the device's time, which no model of the CPU's entry describes.
FIT_OPS = ("null", "getppid", "write-devnull")
# glibc's clock calls go through the vDSO: no kernel entry from the libc variants.
CLOCK_OPS = ("time", "gettimeofday", "clock_gettime")
BASE_VARIANT = "64-syscall"
# Below this many cells, no straight line is fitted: one shift per cell says nothing of the
# base's shape.
MIN_POINTS = 4


def enters_kernel(variant, op):
    """Whether a call of this cell enters the kernel: every system-call way does; the 64-bit
    vDSO and glibc's clock calls (which use it) do not, nor does cpuid (a VM exit, no entry);
    the vsyscall page does (a page fault, emulated, back by the exception path)."""
    if op in ("cpuid", "verw", "lfence"):
        return False
    try:
        m = registry.get(variant)
    except (KeyError, ValueError):
        return False
    if m.entry == "vdso-call" and m.bits == 64:
        return False
    if op in CLOCK_OPS and variant.endswith("-libc"):
        return False
    return True


def _sigma(f):
    """A figure's standard error from its 95% interval (the larger half)."""
    return max(f["median"] - f["ci_low"], f["ci_high"] - f["median"]) / stats.Z


def _fig(c, unit):
    """A cell's figure in a unit: 'ns' (its undisturbed figure), 'cycles' (the same in the
    core's cycles), 'typical' (its median, in ns)."""
    f = percall.figure(c, unit if unit in ("cycles", "typical") else "undisturbed")
    if not f or f.get("median") is None or f.get("ci_low") is None:
        return None
    return f


def points(a_cells, b_cells, a_exit=None, b_exit=None, exits_of=None, unit="ns",
           ops=FIT_OPS, enters=True):
    """[{variant, op, size, shape, a, sa, b, sb, exits}] for the cells both runs measured
    (ret shape), of the kernel-entering ones (enters=True) or of the others (False): each
    figure less its VM exits at its own run's price, with its standard error.  exits_of(variant):
    (exits a call pays in A, in B), each None where its run's facts and fit do not say; a cell
    whose runs pay different numbers of exits is left out (its way's work differs), and one
    that pays exits its run did not price too."""
    xa, xb = _fig(a_exit, unit), _fig(b_exit, unit)
    out = []
    for key, a in a_cells.items():
        variant, op, size, shape = key
        if shape != "ret" or (ops and op not in ops) or enters_kernel(variant, op) != enters:
            continue
        b = b_cells.get(key)
        fa, fb = _fig(a, unit), _fig(b, unit)
        if not fa or not fb:
            continue
        ka, kb = exits_of(variant) if exits_of else (None, None)
        if (ka or 0) != (kb or 0):
            continue                # one run pays exits the other does not
        k = ka or 0
        va, sa, vb, sb = fa["median"], _sigma(fa), fb["median"], _sigma(fb)
        if k:
            if not xa or not xb:
                continue            # a cell that pays an exit no run priced: not fitted
            va, vb = va - k * xa["median"], vb - k * xb["median"]
            sa, sb = math.hypot(sa, k * _sigma(xa)), math.hypot(sb, k * _sigma(xb))
        out.append({"variant": variant, "op": op, "size": size, "shape": shape,
                    "a": va, "sa": sa, "b": vb, "sb": sb, "exits": k})
    return out


def _line(pts, slope=None, through_zero=False):
    """The weighted straight line b = s*a + d through the points (York's effective variance,
    iterated): (s, d, cov, chi2).  slope: s fixed (the added-only model, s = 1);
    through_zero: d fixed at 0 (the speed-only model)."""
    import numpy as np
    a = np.array([p["a"] for p in pts])
    b = np.array([p["b"] for p in pts])
    sa = np.array([p["sa"] for p in pts])
    sb = np.array([p["sb"] for p in pts])
    s = 1.0 if slope is None else slope
    d = 0.0
    for _ in range(50):
        w = 1.0 / np.maximum(sb ** 2 + (s * sa) ** 2, 1e-18)
        if slope is not None:
            d = float(np.sum(w * (b - s * a)) / np.sum(w))
            cov = np.array([[0.0, 0.0], [0.0, 1.0 / float(np.sum(w))]])
            break
        if through_zero:
            s_new = float(np.sum(w * a * b) / np.sum(w * a * a))
            cov = np.array([[1.0 / float(np.sum(w * a * a)), 0.0], [0.0, 0.0]])
            if abs(s_new - s) < 1e-12:
                s = s_new
                break
            s = s_new
            continue
        X = np.column_stack([a, np.ones_like(a)])
        xtw = X.T * w
        cov = np.linalg.inv(xtw @ X)
        s_new, d = cov @ (xtw @ b)
        if abs(s_new - s) < 1e-10:
            s = float(s_new)
            break
        s = float(s_new)
    w = 1.0 / np.maximum(sb ** 2 + (s * sa) ** 2, 1e-18)
    chi2 = float(np.sum(w * (b - s * a - d) ** 2))
    return s, float(d), cov, chi2


def _t(dof):
    from scipy import stats as sst
    return float(sst.t.ppf(0.975, dof)) if dof > 0 else float("inf")


def fit(pts):
    """The straight line through the points, {added: {value, ci_low, ci_high}, scale: {...},
    n, dof, chi2_dof, birge, fits, residuals: [{variant, op, size, ns, sigma}], why}.  added
    is in the points' unit.  Intervals: 95%, from the fit's covariance scaled by the Birge
    ratio where the cells scatter beyond their errors (Student's t on n-2 degrees of freedom
    then); fits is False when the scatter is more than chance allows at 1% (the line is then
    a summary, not a model: the output says so).  Below MIN_POINTS, None values with why."""
    n = len(pts)
    none = {"value": None, "ci_low": None, "ci_high": None}
    if n < MIN_POINTS:
        return {"added": dict(none), "scale": dict(none), "n": n, "fits": None,
                "why": f"{n} kernel-entering cells measured in both runs: a straight line needs "
                       f"{MIN_POINTS}"}
    s, d, cov, chi2 = _line(pts)
    dof = n - 2
    chi2_dof = chi2 / dof if dof else float("inf")
    birge = math.sqrt(max(1.0, chi2_dof))
    from scipy import stats as sst
    p_fit = float(sst.chi2.sf(chi2, dof)) if dof > 0 else 0.0
    q = _t(dof) if chi2_dof > 1 else stats.Z
    hs, hd = q * birge * math.sqrt(cov[0, 0]), q * birge * math.sqrt(cov[1, 1])
    out = {"added": {"value": d, "ci_low": d - hd, "ci_high": d + hd},
           "scale": {"value": s, "ci_low": s - hs, "ci_high": s + hs},
           "n": n, "dof": dof, "chi2_dof": chi2_dof, "birge": birge, "p_fit": p_fit,
           "fits": p_fit >= 0.01, "model": "added and speed", "why": None}
    # The simpler model where the data allow it: a speed whose interval holds 1 is no change
    # of speed, and the added part is then fitted with the slope at 1 (the weighted mean of
    # the cells' differences); an added part whose interval holds 0 is none, and the speed is
    # the line through zero.  The free line's other figure stays as fitted.
    k = kind(out)
    if k in ("added", "speed"):
        s1, d1, cov1, chi1 = _line(pts, slope=1.0) if k == "added" else _line(pts, through_zero=True)
        dof1 = n - 1
        b1 = math.sqrt(max(1.0, chi1 / dof1))
        q1 = _t(dof1) if chi1 / dof1 > 1 else stats.Z
        if k == "added":
            h = q1 * b1 * math.sqrt(cov1[1, 1])
            out["added"] = {"value": d1, "ci_low": d1 - h, "ci_high": d1 + h}
        else:
            h = q1 * b1 * math.sqrt(cov1[0, 0])
            out["scale"] = {"value": s1, "ci_low": s1 - h, "ci_high": s1 + h}
        s, d, chi2, birge = s1, d1, chi1, b1
        out.update(model="added only" if k == "added" else "speed only", chi2_dof=chi1 / dof1,
                   birge=b1, p_fit=float(sst.chi2.sf(chi1, dof1)))
        out["fits"] = out["p_fit"] >= 0.01
    out["residuals"] = [{"variant": p["variant"], "op": p["op"], "size": p["size"],
                         "ns": p["b"] - s * p["a"] - d, "sigma": math.hypot(p["sb"], s * p["sa"])}
                        for p in pts]
    return out


def _excludes(iv, x):
    return iv.get("ci_low") is not None and (iv["ci_low"] > x or iv["ci_high"] < x)


def kind(f):
    """What the fit says changed: 'added' (a constant on every entry, no change of speed),
    'speed' (a ratio, nothing added), 'both', 'held' (neither detected), or None (no fit)."""
    if f["added"]["value"] is None:
        return None
    add, speed = _excludes(f["added"], 0.0), _excludes(f["scale"], 1.0)
    return {(True, False): "added", (False, True): "speed", (True, True): "both",
            (False, False): "held"}[(add, speed)]


def _cells_by_key(cells):
    return {(c["variant"], c["op"], c.get("size"), c.get("shape") or "ret"): c
            for c in cells or [] if c.get("supported")}


def _user_space(a, b, unit):
    """B/A over the cells that never enter the kernel (the CPU's own speed): the median of
    their ratios, with the range; None when there are none."""
    pts = points(a, b, unit=unit, ops=None, enters=False)
    pts = [p for p in pts if p["a"] > 0 and p["b"] > 0 and p["op"] != "cpuid"]
    if not pts:
        return None
    r = sorted(p["b"] / p["a"] for p in pts)
    return {"median": r[len(r) // 2], "min": r[0], "max": r[-1], "cells": len(r),
            "what": "B/A of the cells that never enter the kernel (the 64-bit vDSO, glibc's "
                    "clock calls): the CPU's own change of speed, apart from the kernel's"}


def change(a_cells, b_cells, a_exit=None, b_exit=None, exits_of=None, facts_changed=None):
    """The base object of one B against A (tw compare --json's `base`): the fit in ns (and in
    the core's cycles where both runs timed its clock), what it says changed, the VM exit's
    price in both runs, and the cells that never enter the kernel as the CPU's witness.

    a_cells, b_cells: each run's analysed cells (lists); a_exit, b_exit: their cpuid cells;
    exits_of(variant): (exits a call pays in A, in B), each run's own (the kernel's prediction,
    its own fit agreeing: analyse.causes.exits_paid); facts_changed: the facts that differ,
    listed first."""
    A, B = _cells_by_key(a_cells), _cells_by_key(b_cells)
    out = {"facts_changed": facts_changed or []}
    for unit in ("ns", "cycles"):
        pts = points(A, B, a_exit, b_exit, exits_of, unit)
        if unit == "cycles" and len(pts) < MIN_POINTS:
            out["cycles"] = None
            break
        f = fit(pts)
        f["kind"] = kind(f)
        f["unit"] = unit
        if unit == "ns":
            out.update(f)
            out.update(added_ns=f["added"]["value"], added_ci_low=f["added"]["ci_low"],
                       added_ci_high=f["added"]["ci_high"])
        else:
            out["cycles"] = {k: f[k] for k in ("added", "scale", "kind", "n", "birge", "fits")}
    xa, xb = _fig(a_exit, "ns"), _fig(b_exit, "ns")
    out["exit"] = None if not (xa and xb) else {
        "a_ns": xa["median"], "b_ns": xb["median"],
        "ratio": stats.ratio_summary(xb, xa)}
    out["user_space"] = _user_space(A, B, "ns")
    out["sentence"] = sentence(out)
    return out


def _pm(iv, digits=0):
    return f"[{iv['ci_low']:+.{digits}f}, {iv['ci_high']:+.{digits}f}]"


def sentence(base):
    """The base's change in one sentence (no facts: those are said first, apart)."""
    if base.get("added_ns") is None:
        return f"the base could not be fitted: {base.get('why')}"
    a, s = base["added"], base["scale"]
    add = f"{a['value']:+.0f} ns {_pm(a)}"
    speed = f"×{s['value']:.3f} [{s['ci_low']:.3f}, {s['ci_high']:.3f}]"
    text = {"added": f"{add} on every way into the kernel, the speed held ({speed}): a cost "
                     "added to each entry, not a change of speed",
            "speed": f"a change of speed, {speed}, with nothing added to the entries ({add})",
            "both": f"{add} on every way into the kernel, and a change of speed, {speed}",
            "held": f"the base held: {add} on every way in, speed {speed}"}[base["kind"]]
    ex = base.get("exit")
    if ex and ex["ratio"].get("median"):
        text += f"; one VM exit {100 * (ex['ratio']['median'] - 1):+.1f}%"
    if base.get("fits") is False:
        text += (f"; the cells scatter about this line by {base['birge']:.1f} times their own "
                 "errors (its interval is widened by as much): the ways and bodies moved too, "
                 "each decided apart")
    return text


def premium_change(a_cells, b_cells, key, scale=None, a_exit=None, b_exit=None, exits_of=None,
                   figure="ns"):
    """One kernel-entering cell's premium over the base, in A and in B, and its decision:
    what its way adds, the cell less its baseline's of the same operation (int 0x80 from
    32-bit code: the 32-bit fast path, vDSO first, as the cost model holds it, analyse/causes;
    every other way: the 64-bit syscall); for the 64-bit syscall's own cells other than null,
    less its null call (its body).  Exits taken out at each run's price.  scale: the fitted
    change of speed, applied to A's premium when its interval excludes 1 (a premium is CPU
    work, and moves with the speed).  None for the base cell itself and for a cell that does
    not enter the kernel."""
    from . import compare
    variant, op, size, shape = key
    if not enters_kernel(variant, op) or op not in FIT_OPS + ("write-sync",):
        return None
    A, B = _cells_by_key(a_cells), _cells_by_key(b_cells)
    if variant == BASE_VARIANT:
        if op == "null":
            return None
        ref, what = (BASE_VARIANT, "null", None, shape), "body"
    else:
        ref, what = (BASE_VARIANT, op, size, shape), "premium"
        m = registry.get(variant)
        if m.entry == "int80" and m.bits == 32:
            for v in registry.fast32():
                k = (v, op, size, shape)
                if _fig(A.get(k), figure) and _fig(B.get(k), figure):
                    ref = k
                    break
    pair_a, pair_b = {key: A.get(key), ref: A.get(ref)}, {key: B.get(key), ref: B.get(ref)}
    by = {(p["variant"], p["op"], p["size"], p["shape"]): p
          for p in points(pair_a, pair_b, a_exit, b_exit, exits_of, unit=figure, ops=None)}
    exits_in = None
    if key not in by and ref in by:
        # its exits cannot be taken out of both (a run that priced no exit, or runs that pay
        # different numbers of them): compared with them in, and said
        by.update({(p["variant"], p["op"], p["size"], p["shape"]): p
                   for p in points(pair_a, pair_b, unit=figure, ops=None) if p["variant"] == variant})
        exits_in = ("its VM exits are in both figures (a run priced no exit, or the two pay "
                    "different numbers of them)")
    c, r = by.get(key), by.get(ref)
    if not c or not r:
        return {"what": what, "decision": "unknown", "sentence": "unknown (the cell or the "
                "64-bit syscall's of the same operation has no undisturbed figure in a run)"}
    ma, sa = c["a"] - r["a"], math.hypot(c["sa"], r["sa"])
    mb, sb = c["b"] - r["b"], math.hypot(c["sb"], r["sb"])
    k = 1.0
    if scale and _excludes(scale, 1.0):
        k = scale["value"]
        ks = (scale["ci_high"] - scale["ci_low"]) / 2 / stats.Z
        sa = math.hypot(k * sa, ma * ks)
        ma = k * ma
    d = mb - ma
    h = stats.Z * math.hypot(sa, sb)
    out = {"what": what, "over": ref[0], "figure": "typical" if figure == "typical" else "undisturbed",
           "a_ns": c["a"] - r["a"], "b_ns": mb,
           "scaled_by": k if k != 1.0 else None,
           "exits_in": exits_in,
           "diff": {"median": d, "ci_low": d - h, "ci_high": d + h},
           "p": 2 * compare._norm_sf(abs(d) / (h / stats.Z)) if h > 0 else None}
    word = ("way's premium over the base" if ref[0] == BASE_VARIANT else
            f"way's premium over {ref[0]}") if what == "premium" else "body (over its null call)"
    at = " (A's at B's speed)" if k != 1.0 else ""
    if d - h > 0 or d + h < 0:
        out["decision"] = compare.SLOWER if d > 0 else compare.FASTER
        out["sentence"] = (f"its {word} {'grew' if d > 0 else 'shrank'} by {abs(d):.0f} ns "
                           f"[{d - h:+.0f}, {d + h:+.0f}]: {ma:.0f}{at} → {mb:.0f} ns")
    else:
        out["decision"] = compare.SAME
        out["sentence"] = (f"its {word} held: {ma:.0f}{at} → {mb:.0f} ns, {d:+.0f} "
                           f"[{d - h:+.0f}, {d + h:+.0f}]; a change smaller than about "
                           f"{h:.0f} ns could not have been detected")
    if exits_in:
        out["sentence"] += f" ({exits_in})"
    out["pct"] = 100 * d / ma if ma else None
    out["pct_ci"] = [100 * (d - h) / ma, 100 * (d + h) / ma] if ma else None
    out["detectable_pct"] = 100 * h / abs(ma) if ma else None
    return out


def demoted(p):
    """A premium decision the Benjamini-Hochberg correction took back (analyse.compare.adjust
    wrote its sentence in percent): said again in ns."""
    d = p["diff"]
    p["sentence"] = (f"its {'way' if p['what'] == 'premium' else 'body'}'s change, "
                     f"{d['median']:+.0f} ns [{d['ci_low']:+.0f}, {d['ci_high']:+.0f}], excludes 0 "
                     f"alone, but not after correcting for the comparison's tests "
                     f"(Benjamini-Hochberg, q = {p.get('q', 1):.2f}): no difference detected")


def from_digest(d):
    """A fleet digest (analyse/fleet.digest_doc: a run's cells as {value, ci_low, ci_high}, its
    cost model's exit price and int 0x80 exits) as what change() and premium_change() take:
    (cells, exit cell or None, {variant: exits a call pays, where its run's fit holds})."""
    cells = []
    for c in (d.get("cells") or {}).values():
        if c.get("value") is None or c.get("ci_low") is None:
            continue
        cells.append({"variant": c["variant"], "op": c["op"], "size": c.get("size"),
                      "shape": c.get("shape") or "ret", "supported": True,
                      "undisturbed_ns": c["value"], "undisturbed_ci_low": c["ci_low"],
                      "undisturbed_ci_high": c["ci_high"]})
    cz = d.get("causes") or {}
    p = cz.get("exit_price") or {}
    exit_cell = None if p.get("value") is None or p.get("ci_low") is None else {
        "variant": BASE_VARIANT, "op": "cpuid", "size": None, "shape": "ret", "supported": True,
        "undisturbed_ns": p["value"], "undisturbed_ci_low": p["ci_low"],
        "undisturbed_ci_high": p["ci_high"]}
    exits = {v: m.get("predicted_exits") for v, m in (cz.get("int80_all") or {}).items()
             if m and m.get("holds") and m.get("predicted_exits")}
    return cells, exit_cell, exits


def between_digests(a, b):
    """change() of digest b against digest a, each run's exits at its own price; plus its
    premiums: [(variant, op, size, premium_change)] of the kernel-entering cells both have."""
    ca, xa, ea = from_digest(a)
    cb, xb, eb = from_digest(b)
    exits_of = lambda v: (ea.get(v), eb.get(v))  # noqa: E731
    base = change(ca, cb, xa, xb, exits_of)
    keys = sorted({(c["variant"], c["op"], c["size"], c["shape"]) for c in ca}
                  & {(c["variant"], c["op"], c["size"], c["shape"]) for c in cb},
                  key=lambda k: (k[0], k[1], k[2] or 0))
    prem = []
    for k in keys:
        if k[3] != "ret":
            continue
        p = premium_change(ca, cb, k, None, xa, xb, exits_of)
        if p and p.get("diff"):
            prem.append((k[0], k[1], k[2], p))
    return base, prem
