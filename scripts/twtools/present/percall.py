"""The per-call matrix as text: what `tw bench` prints."""
from ..analyse import percall
from ..core.fmt import fmt


def _ns(x, digits=1):
    if x is None:
        return "?"
    if abs(x) >= 100000:
        return f"{x / 1000:.0f}k"
    return f"{x:.{digits}f}"


def _est(s, digits):
    if not s or s.get("median") is None:
        return "-"
    return f"{_ns(s['median'], digits)} [{_ns(s['ci_low'], digits)}, {_ns(s['ci_high'], digits)}]"


def _u(c):
    return percall.figure(c, "undisturbed")


def format_table(doc, analysed):
    """The matrix as fixed-width lines: the undisturbed cost and its ratio to the reference
    cell, then the typical cost (median), each with its 95% interval, and flags.  A cell
    whose leading figure is the typical one (write-sync, or no trustworthy floor) shows '†'."""
    ref = analysed["reference"]
    lines = [f"{'variant':<12} {'op':<14} {'size':>5} {'shape':<6} "
             f"{'undisturbed ns [95% CI]':<26} {'x ' + ref['variant'] + ' ' + ref['op']:<22} "
             f"{'typical ns [95% CI]':<26} flags"]
    shown = set()
    for c in analysed["cells"]:
        if not c.get("supported"):
            if c["variant"] in shown:
                continue
            shown.add(c["variant"])
            lines.append(f"{c['variant']:<12} {'(every op)':<14} {'':>5} {'':<6} "
                         f"{c['status']}: {c['reason']}")
            continue
        size = "" if c.get("size") is None else str(c["size"])
        if c.get("median") is None:
            lines.append(f"{c['variant']:<12} {c['op']:<14} {size:>5} {c['shape']:<6} no result: "
                         f"{(c.get('errors') or ['no samples'])[-1]}")
            continue
        d = 1 if c["median"] < 10000 else 0
        lead_typ = c.get("primary") == "typical"
        r = c.get("ratio") if lead_typ else c.get("undisturbed_ratio")
        ratio = (f"{r['median']:.3f} [{r['ci_low']:.3f}, {r['ci_high']:.3f}]" if r else "-")
        und = _est(_u(c), d) + (" †" if lead_typ else "")
        lines.append(f"{c['variant']:<12} {c['op']:<14} {size:>5} {c['shape']:<6} "
                     f"{und:<26} {ratio:<22} {_est(c, d):<26} "
                     f"{','.join(c.get('flags') or [])}")
    for p in analysed.get("penalties", []):
        if p.get("penalty_ns"):
            lines.append(f"post-return penalty {p['variant']} {p['op']}"
                         + (f" {p['size']} B" if p.get("size") else "") + ": "
                         f"{fmt(p['penalty_ns'])} (ret minus jmp shape, paired by round)")
    dist = analysed.get("disturbance") or {}
    pm = doc.get("params") or {}
    host = analysed.get("host") or {}
    if host.get("slow_share") is not None:
        lines.append(f"(this host during the run: {100 * host['slow_share']:.0f}% of the reference "
                     f"cell's batches ran >{100 * host['slow_margin']:.0f}% above its undisturbed cost; "
                     "median interference "
                     + (f"{100 * host['interference_share_median']:.0f}%" if
                        host.get("interference_share_median") is not None else "unknown")
                     + " of the typical cost)")
    clock = analysed.get("core_clock") or {}
    if clock.get("ghz"):
        lines.append(f"(undisturbed figures at the run's top core clock, {clock['ghz']:.2f} GHz, "
                     "the one its fastest 1% of processes reached; the host gave "
                     + ", ".join((f"{x['ghz']:.1f} GHz" if x["ghz"] else "other clocks")
                                 + f" to {100 * x['share']:.0f}%"
                                 for x in (clock.get("levels") or []))
                     + " of the processes; between runs compare cycles (--json: "
                     "undisturbed_cycles) or the ratios)")
    lines.append("(† the typical figure leads: the cell measures waiting, or has no trustworthy "
                 "floor; ratios are of the leading figure)")
    lines.append(f"(intervals: over {pm.get('rounds')} process runs, host drift folded in; "
                 f"loop cost subtracted; clock {doc.get('clock')}"
                 + (f" at {doc['tsc_hz'] / 1e9:.4f} GHz" if doc.get("tsc_hz") else "")
                 + f", CPU {doc.get('cpu')}, sched {doc.get('sched')}, files on "
                 f"{doc.get('file_fstype') or '?'}; "
                 + (f"{dist['disturbed']} of {dist['batches']} batches disturbed and left out; "
                    if dist.get("disturbed") is not None else "")
                 + f"{doc.get('wall_s', 0):.1f} s)")
    return lines


def format_accuracy(acc):
    """The --accuracy figures as text lines, each with its target."""
    out = ["", "accuracy and precision"]
    pb = acc["perf_bench_ns"]
    out.append(f"  perf bench syscall basic (glibc getppid, ret): {fmt(pb)}")
    out.append(f"  ours, 64-libc getppid (ret, its twin):        {fmt(acc['getppid_libc_ns'])}")
    out.append(f"  ours, 64-syscall getppid (ret):               {fmt(acc['getppid_syscall_ns'])}")
    r = acc.get("perf_over_twin")
    if r:
        out.append(f"  perf bench / ours = {r['median']:.3f} [{r['ci_low']:.3f}, {r['ci_high']:.3f}]: "
                   f"{'within' if acc['within_5pct'] else 'NOT within'} 5% (target)")
    else:
        out.append("  perf bench / ours: unknown (one side is blind)")
    lm = acc["loop_ns"]
    if lm.get("median") is not None:
        out.append(f"  empty loop: median {lm['median']:.2f} ns/call over cells, worst cell "
                   f"{acc['loop_ns_max_cell']:.2f} ns (target <= {percall.TARGET_LOOP_NS:g} ns; "
                   "subtracted either way)")
    for h in acc["fast_cells"]:
        hw = "?" if h["ci_half_rel"] is None else f"{100 * h['ci_half_rel']:.2f}%"
        hr = "?" if h["ratio_ci_half_rel"] is None else f"{100 * h['ratio_ci_half_rel']:.2f}%"
        out.append(f"  CI half-width {h['variant']} {h['op']} {h['shape']}: {hw} of "
                   f"{h['median']:.1f} ns; ratio form {hr} (target <= 2%)")
    if acc.get("wall_s") is not None:
        out.append(f"  wall time: {acc['wall_s']:.1f} s for "
                   f"{'the full matrix' if acc['full_matrix'] else 'a partial matrix'} "
                   f"(target <= {percall.TARGET_WALL_S:g} s)")
    return out


def unstable_warning(analysed):
    """(message, what to do) naming the unstable cells, or None."""
    bad = [c for c in analysed["cells"] if c.get("supported") and c.get("unstable")
           and c.get("median") is not None]
    if not bad:
        return None
    parts = [f"{c['variant']} {c['op']}" + (f" {c['size']} B" if c.get("size") else "")
             + (f" {c['shape']}" if c["shape"] != "ret" else "") + f" ({c['unstable_why']})"
             for c in bad]
    return (f"{len(bad)} of {analysed['measured']} cells have an unstable leading figure: "
            + "; ".join(parts), "measure more rounds (--rounds, or --long)")


def format_peers(doc, a):
    """tw bench --peers as text: each tool's figure over the repetitions, how far it moved,
    and the factor the claim states."""
    out = [f"peers, side by side: {doc['reps']} repetitions in alternation, {doc['wall_s']:.0f} s "
           f"(timewrite: {doc['variant']} getppid, ret shape, {doc['procs']} processes of "
           f"{doc['batches']} batches per repetition)",
           f"  {'tool':<24} {'median ns':>10} {'spread (max-min)/median':>24} {'CV':>7}  values"]
    for name, t in a["tools"].items():
        if t.get("why"):
            out.append(f"  {name:<24} unknown: {t['why']}")
            continue
        sp = "unknown" if t.get("spread") is None else f"{100 * t['spread']:.2f}%"
        cv = "unknown" if t.get("cv") is None else f"{100 * t['cv']:.2f}%"
        vals = ", ".join(f"{v:.1f}" for v in t.get("values") or [])
        out.append(f"  {name:<24} {t['median']:>10.1f} {sp:>24} {cv:>7}  {vals}")
    if a.get("factor"):
        out.append(f"  perf bench's figure moved {a['factor']:.1f}x as far as timewrite's undisturbed "
                   "figure over the same repetitions")
    else:
        out.append("  factor: unknown (a tool could not be measured, or did not move)")
    return out
