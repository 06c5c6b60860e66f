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


def format_table(doc, analysed):
    """The matrix as fixed-width lines: ns per call and the ratio to the reference cell,
    each with its 95% interval (drift included), the k-best floor, and flags."""
    ref = analysed["reference"]
    lines = [f"{'variant':<12} {'op':<14} {'size':>5} {'shape':<6} "
             f"{'ns/call [95% CI]':<26} {'x ' + ref['variant'] + ' ' + ref['op']:<22} "
             f"{'floor':>8}  flags"]
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
        r = c.get("ratio")
        ratio = (f"{r['median']:.3f} [{r['ci_low']:.3f}, {r['ci_high']:.3f}]" if r else "-")
        lines.append(f"{c['variant']:<12} {c['op']:<14} {size:>5} {c['shape']:<6} "
                     f"{_est(c, d):<26} {ratio:<22} {_ns(c.get('floor_ns'), d):>8}  "
                     f"{','.join(c.get('flags') or [])}")
    for p in analysed.get("penalties", []):
        if p.get("penalty_ns"):
            lines.append(f"post-return penalty {p['variant']} {p['op']}"
                         + (f" {p['size']} B" if p.get("size") else "") + ": "
                         f"{fmt(p['penalty_ns'])} (ret minus jmp shape, paired by round)")
    dist = analysed.get("disturbance") or {}
    pm = doc.get("params") or {}
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
    return (f"{len(bad)} of {analysed['measured']} cells unstable: " + "; ".join(parts),
            "re-run on a quiet machine, or with more rounds (--rounds, or --long)")
