"""The benchmark of the benchmark: two back-to-back runs of the matrix, and how far each
one's claims hold in the other (`tw bench --selfcheck`, `make bench`).

Printed, never asserted: these machines are shared and noisy, and the point is to show how
the intervals fare against a rerun on this one.  Both figures of every cell are checked: the
undisturbed cost (what compares machines) and the typical one (the median).
"""
from ..machine import registry
from . import causes, compare, percall, stats

TARGETS = {"overlap": 0.90, "undisturbed_overlap": 0.95, "fast_half_width": 0.02,
           "fast_share": 0.90, "ratio_repro": 0.02,
           "perf_within": 0.05, "unstable_share": 0.25, "wall_s": 60.0,
           "undisturbed_half_width": 0.01, "undisturbed_move": 0.005, "compare_calls": 1}


def _u(c):
    return percall.figure(c, "undisturbed")


def undisturbed_figures(pairs, a1, a2, fp=None):
    """The undisturbed figure's claims against the rerun: fast cells' half-widths, interval
    overlap over every cell, the fast cells' move between the runs, and what a comparison of
    the two runs calls on it (Benjamini-Hochberg), as `tw compare` decides it: with the
    machine's facts (fp), a cell that pays VM exits at the first run's exit price."""
    paid = causes.compute_from(a2, fp) if fp else None
    x1, x2 = percall.exit_cell(a1), percall.exit_cell(a2)
    # each run's price of one exit, in either unit a pair of cells is compared in
    price = {u: (percall.figure(x1, u), percall.figure(x2, u)) for u in ("cycles", "undisturbed")}
    fast_hw, overlap, moves, decisions, zero, priced = [], [], [], [], [], []
    for i, a in enumerate((a1, a2), 1):
        for c in a["cells"]:
            u = _u(c)
            if u and u["ci_high"] <= u["ci_low"]:
                zero.append(f"run {i}: {' '.join(str(x) for x in percall.key(c) if x is not None)}")
            if u and c["op"] in percall.FAST_OPS:
                fast_hw.append(stats.half_width_rel(u))
    units = set()
    for x, y in pairs:
        # in the core's cycles when both runs timed the clock: two runs minutes apart met top
        # clocks 7% apart, and a figure in ns moves with the clock (analyse/coreclock.py)
        cycles = bool(x.get("undisturbed_cycles")) and bool(y.get("undisturbed_cycles"))
        ux, uy = (percall.figure(x, "cycles"), percall.figure(y, "cycles")) if cycles \
            else (_u(x), _u(y))
        if not (ux and uy):
            continue
        units.add("cycles" if cycles else "ns")
        overlap.append(_overlap(ux, uy))
        # the same at the first run's price of a VM exit, for a cell that pays exits (as
        # tw compare decides it): the host moves that price between runs
        k = causes.exits_paid(paid, x["variant"])
        xa, xb = price["cycles" if cycles else "undisturbed"]
        priced.append(_overlap(ux, compare.at_a_exit_price(uy, xa, xb, k)) if k and xa and xb
                      else overlap[-1])
        if x["op"] in percall.FAST_OPS:
            moves.append(abs(uy["median"] / ux["median"] - 1))
        which = compare.figure_of(x, y)
        decisions.append(compare.between_runs(
            x, y, _ref(a1, x, which), _ref(a2, x, which), same_host=True, a_exit=x1, b_exit=x2,
            exits=k)["absolute"])
    fam = compare.adjust([d for d in decisions if d])
    misses = len(overlap) - sum(overlap)
    return {"misses": misses, "expected_misses": round(MISS_BY_CHANCE * len(overlap), 2),
            "unit": "cycles" if units == {"cycles"} else "ns" if units == {"ns"} else
            "cycles where both runs timed the clock, else ns",
            "zero_width": zero,
            "fast_half_width_share": (sum(1 for h in fast_hw if h is not None and
                                          h <= TARGETS["undisturbed_half_width"]) / len(fast_hw))
            if fast_hw else None,
            "fast_half_width_median": _median(fast_hw),
            "overlap_share": sum(overlap) / len(overlap) if overlap else None,
            "overlap_share_one_exit_price": sum(priced) / len(priced) if priced else None,
            "exit_shift_pct": 100 * (price["undisturbed"][1]["median"]
                                     / price["undisturbed"][0]["median"] - 1)
            if all(price["undisturbed"]) and paid else None,
            "fast_move_median": _median(moves),
            "fast_move_p90": sorted(moves)[int(0.9 * (len(moves) - 1))] if moves else None,
            "compare": fam}


MISS_BY_CHANCE = stats.MISS_BY_CHANCE


def shortfalls(f):
    """What of the undisturbed figure's coverage the two runs fell short of (empty when it
    held): `tw bench --selfcheck` exits non-zero on any."""
    u = f.get("undisturbed") or {}
    short = []
    if u.get("overlap_share") is None:
        return ["no cell measured in both runs"]
    if u["overlap_share"] < TARGETS["undisturbed_overlap"]:
        short.append(f"undisturbed intervals overlap in {100 * u['overlap_share']:.1f}% of cells "
                     f"({u['misses']} miss; chance gives about {u['expected_misses']}), below "
                     f"{100 * TARGETS['undisturbed_overlap']:.0f}%")
    if u.get("zero_width"):
        short.append(f"{len(u['zero_width'])} interval(s) of zero width: "
                     + ", ".join(u["zero_width"][:3]))
    return short


def _ref(analysed, cell, which="undisturbed"):
    """The cell of one run whose move between the two runs measures the host's (both runs are
    one host), as `tw compare` takes it (compare.reference_of)."""
    v, op, size = compare.reference_of(cell["op"], cell.get("size"), which)
    shape = (cell.get("shape") or "ret") if op == cell["op"] else "ret"
    return percall.find(analysed, v, op, size, shape)


def _overlap(a, b):
    return a["ci_low"] <= b["ci_high"] and b["ci_low"] <= a["ci_high"]


def _ok(c):
    return c is not None and c.get("supported") and c.get("median") is not None


def _int80_ratio(doc):
    """int 0x80 over the fast 32-bit path (or over the 64-bit syscall), paired by round."""
    for slow, fasts in ((registry.find(32, "int80"), registry.fast32()),
                        (registry.find(64, "int80"), [registry.find(64, "syscall")])):
        for fast in fasts:
            r = percall.pair(doc, slow, fast, "ratio")
            if r and r.get("median"):
                return {"slow": slow, "fast": fast, "ratio": r}
    return None


def figures(runs, fp=None):
    """runs: [(percall.json document, its analysis)] of two back-to-back runs; fp: the
    machine's fingerprint, when known."""
    (d1, a1), (d2, a2) = runs
    c2 = {percall.key(c): c for c in a2["cells"]}
    pairs = [(c, c2.get(percall.key(c))) for c in a1["cells"]]
    pairs = [(x, y) for x, y in pairs if _ok(x) and _ok(y)]
    absolute = [_overlap(x, y) for x, y in pairs]
    ratio = [_overlap(x["ratio"], y["ratio"]) for x, y in pairs if x.get("ratio") and y.get("ratio")]
    fast = []
    for a in (a1, a2):
        for c in a["cells"]:
            if _ok(c) and c["op"] in percall.FAST_OPS:
                fast.append({"abs": stats.half_width_rel(c),
                             "ratio": stats.half_width_rel(c["ratio"]) if c.get("ratio") else None})
    r1, r2 = _int80_ratio(d1), _int80_ratio(d2)
    out = {"cells_compared": len(pairs), "undisturbed": undisturbed_figures(pairs, a1, a2, fp),
           "overlap_share": sum(absolute) / len(absolute) if absolute else None,
           "overlap_share_ratio": sum(ratio) / len(ratio) if ratio else None,
           "fast_within_target": (sum(1 for f in fast if f["abs"] is not None and f["abs"] <= TARGETS["fast_half_width"])
                                  / len(fast)) if fast else None,
           "fast_within_target_ratio": (sum(1 for f in fast if f["ratio"] is not None
                                            and f["ratio"] <= TARGETS["fast_half_width"]) / len(fast))
           if fast else None,
           "fast_half_width_median": _median([f["abs"] for f in fast]),
           "fast_half_width_median_ratio": _median([f["ratio"] for f in fast]),
           "int80_ratio": [r1, r2],
           "int80_ratio_change": (abs(r2["ratio"]["median"] / r1["ratio"]["median"] - 1)
                                  if r1 and r2 and (r1["fast"], r1["slow"]) == (r2["fast"], r2["slow"])
                                  else None),
           "runs": []}
    out["short"] = shortfalls(out)
    for doc, a in runs:
        acc = percall.accuracy(doc, a)
        measured = a["measured"] or 1
        out["runs"].append({"perf_over_twin": acc.get("perf_over_twin"),
                            "perf_bench_ns": acc.get("perf_bench_ns"),
                            "getppid_libc_ns": acc.get("getppid_libc_ns"),
                            "loop_ns": acc.get("loop_ns"), "wall_s": doc.get("wall_s"),
                            "unstable_share": a["unstable"] / measured,
                            "disturbed": (a.get("disturbance") or {}).get("disturbed"),
                            "batches": (a.get("disturbance") or {}).get("batches")})
    return out


def _median(xs):
    xs = sorted(x for x in xs if x is not None)
    return xs[len(xs) // 2] if xs else None
