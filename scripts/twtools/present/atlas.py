"""The report's section placing this machine among the atlas (data/machines/): its
undisturbed costs beside theirs; against each machine, the base (what every kernel entry pays)
fitted apart from a change of speed (analyse/basemodel.py: a tripled base on the same CPU
model is named, where ratios to each machine's own 64-bit syscall hid it); and what each way
adds over its baseline that differs most, in ns.

Both sides come from twtools.analyse.fleet's digest, so they use one figure: issue 17's
undisturbed cost with its 95% interval (a checkout without it falls back to the k-best floor
and says "floor (no interval)").  A ratio's interval combines the cell's and the reference's
by quadrature on the log scale (stats.ratio_summary, as if independent: they were measured
in the same rounds, so the interval is if anything wide).  An atlas machine measured more
than once shows the median of its runs, the envelope of their intervals, and the range of
their values, labelled as a range over runs.
"""
from ..analyse import atlas, basemodel, fleet, stats
from .document import outside

# The cells the side-by-side table shows (null calls: the entry path itself); the ratio
# table ranks every cell both machines measured.
SHOWN_OP = "null"
TOP = 3


def _g(x):
    return "—" if x is None else (f"{x:.3g}" if abs(x) < 1000 else f"{x:.0f}")


def _fig(c, key="value", lo="ci_low", hi="ci_high", unit=" ns"):
    if c is None or c.get(key) is None:
        return "—"
    s = _g(c[key]) + unit
    if c.get(lo) is not None and c.get(hi) is not None:
        s += f" [{_g(c[lo])}, {_g(c[hi])}]"
    return s


def _theirs(runs, col, key):
    """An atlas machine's figure for one cell over its runs: {median (of the runs), ci_low,
    ci_high (the envelope of the runs' intervals, None when a run has none), lo, hi (the
    range of the runs' values), n}."""
    lk, hk = ("ci_low", "ci_high") if key == "value" else ("ratio_low", "ratio_high")
    cs = sorted((r["cells"][col] for r in runs if col in r["cells"]
                 and r["cells"][col].get(key) is not None), key=lambda c: c[key])
    if not cs:
        return None
    vals = [c[key] for c in cs]
    n = len(vals)
    mid = vals[n // 2] if n % 2 else (vals[n // 2 - 1] + vals[n // 2]) / 2
    lows, highs = [c.get(lk) for c in cs], [c.get(hk) for c in cs]
    env = (min(lows), max(highs)) if None not in lows and None not in highs else (None, None)
    return {"median": mid, "ci_low": env[0], "ci_high": env[1], "lo": vals[0], "hi": vals[-1],
            "n": n}


def _txt(t, unit):
    if t is None:
        return "—"
    s = _g(t["median"]) + unit
    if t["ci_low"] is not None:
        s += f" [{_g(t['ci_low'])}, {_g(t['ci_high'])}]"
    if t["n"] > 1:
        s += f" (runs {_g(t['lo'])}–{_g(t['hi'])})"
    return s


def exits_text(runs):
    """The exit price and exits per int 0x80 call of a machine's runs (each run's, from its
    digest's cost model), or why not."""
    out = []
    for d in runs:
        c = d.get("causes") or {}
        p = c.get("exit_price") or {}
        if p.get("value") is None:
            out.append("unknown: no cpuid cell")
            continue
        e = (c.get("int80") or {}).get("exits_per_call") or {}
        out.append(_fig(p) + ("; " + _fig(e, unit="") if e.get("value") is not None else ""))
    return " · ".join(out)


def here_digest(data):
    raw = (data.get("raw") or {}).get("percall")
    if not raw:
        return None
    meta = data.get("meta") or {}
    return fleet.digest_doc(raw, data.get("fingerprint"), meta, meta.get("host") or "this run")


def latest(runs):
    """A machine's most recent run (by created_utc)."""
    return max(runs, key=lambda d: d.get("created_utc") or "")


def premiums_differ_most(there, here, top=TOP):
    """[(z, variant, op, size, premium_change)] of the kernel-entering cells whose way's
    premium over its baseline differs most clearly between an atlas run and this one."""
    _, prem = basemodel.between_digests(there, here)
    rows = []
    for v, op, size, p in prem:
        d = p["diff"]
        h = (d["ci_high"] - d["ci_low"]) / 2 / stats.Z
        if h > 0:
            rows.append((abs(d["median"]) / h, v, op, size, p))
    rows.sort(key=lambda r: -r[0])
    return rows[:top]


def bases(doc, here, by, names):
    """Against each atlas machine: the base this run pays over its, as an added constant and a
    change of speed (each of its runs)."""
    rows = []
    for m in names:
        for run in sorted(by[m], key=lambda d: d.get("created_utc") or ""):
            b, _ = basemodel.between_digests(run, here)
            if b.get("added_ns") is None:
                rows.append([outside(m), outside(run.get("run") or "?"), "—", "—",
                             outside(b.get("why") or "unknown")])
                continue
            a, sc = b["added"], b["scale"]
            rows.append([outside(m), outside(run.get("run") or "?"),
                         f"{a['value']:+.0f} ns [{a['ci_low']:+.0f}, {a['ci_high']:+.0f}]",
                         f"×{sc['value']:.3f} [{sc['ci_low']:.3f}, {sc['ci_high']:.3f}]",
                         outside(b["sentence"])])
    if rows:
        doc.p("The base this run pays against each machine's run: every kernel-entering cell "
              "fitted as here = speed × there + added (analyse/basemodel.py), each run's VM "
              "exits taken out at its own price; added is what every way into the kernel pays "
              "more here (a mitigation on every entry or exit adds it; a slower clock does "
              "not), speed what the CPU's work scales by. Between two CPU models the line "
              "summarises more than it explains: the sentence says how far the cells scatter.")
        doc.table(["machine", "run", "added here, ns [95% CI]", "speed here [95% CI]",
                   "what it says"], rows)


def section(doc, data, root=atlas.ATLAS):
    doc.h(2, "This machine among the machines measured before")
    try:
        here = here_digest(data)
    except Exception as e:      # noqa: BLE001 - a damaged stage file is said, not fatal
        doc.p(f"Not placed: this run's per-call matrix could not be digested ({outside(str(e))}).")
        return
    if here is None:
        doc.p("Not placed: this run has no per-call matrix (percall.json).")
        return
    digests, skipped = atlas.load(root)
    meta = data.get("meta") or {}
    # This very run, if it is in the atlas, is not compared with itself.
    digests = [d for d in digests if not (d.get("pid") == meta.get("pid")
                                          and d.get("created_utc") == meta.get("created_utc"))]
    if not digests:
        doc.p("No other machine in data/machines/ to compare with.")
        return
    by = atlas.machines(digests)
    label = fleet.LABEL_UNDISTURBED if here["estimator"] == fleet.UNDISTURBED[0] else \
        fleet.LABEL_FALLBACK
    doc.p(f"Figure: **{label}**, ns per call, and × each machine's own {here['reference']} "
          "call, [95% interval]. The atlas (data/machines/, docs/many-machines.md) keeps each "
          "machine's raw rounds, analysed here with this checkout's method; a machine measured "
          "more than once shows the median of its runs, the envelope of their intervals and "
          "the range over its runs. The seed's published "
          "platforms are not in it: they are the seed's figures (docs/seed-report.md).")
    names = list(by)
    facts = lambda d: (f"{d['facts']['cpu_name']}, {d['facts']['cpu']}, "
                       f"{d['facts']['hypervisor']}, {d['facts']['kernel']}")
    doc.table(["machine", "facts", "runs", "price of one VM exit; exits per int 0x80 call"],
              [["this run", outside(facts(here)), "1", exits_text([here])]] +
              [[outside(m), outside(facts(by[m][0])), str(len(by[m])), exits_text(by[m])]
               for m in names])
    doc.p("A machine whose runs have no cpuid cell (measured before it existed) has no exit "
          "price: its exits per call are unknown, not zero (docs/mechanisms.md).")
    rows = []
    for col, c in here["cells"].items():
        if c["op"] != SHOWN_OP or c["shape"] != "ret":
            continue
        row = [col, _fig(c) + " · " + _fig(c, "ratio", "ratio_low", "ratio_high", "×")]
        for m in names:
            row.append(_txt(_theirs(by[m], col, "value"), " ns") + " · "
                       + _txt(_theirs(by[m], col, "ratio"), "×"))
        rows.append(row)
    doc.table(["cell", "this machine"] + [outside(m) for m in names], rows)
    bases(doc, here, by, names)
    for m in names:
        run = latest(by[m])
        top = premiums_differ_most(run, here)
        if not top:
            continue
        doc.p(f"What each way adds over its baseline that differs most clearly from "
              f"**{outside(m)}** (its run {outside(run.get('run') or '?')}; each run's VM exits "
              "taken out at its own price where both priced them; here − there in ns, ranked by "
              "z, the distance from 0 in standard errors):")
        doc.table(["cell", f"{outside(m)}", "here", "here − there [95% CI]", "z"],
                  [[f"{v} {op}" + (f" {size} B" if size else ""), f"{p['a_ns']:.0f} ns",
                    f"{p['b_ns']:.0f} ns",
                    f"{p['diff']['median']:+.0f} [{p['diff']['ci_low']:+.0f}, "
                    f"{p['diff']['ci_high']:+.0f}]" + (" (exits in)" if p.get("exits_in") else ""),
                    f"{z:.1f}"] for z, v, op, size, p in top])
    for s in skipped:
        doc.warn(f"atlas entry {outside(s['machine'])}/{outside(s['run'])} "
                 f"skipped: {outside(s['why'])}")
