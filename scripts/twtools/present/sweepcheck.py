"""The sweeps' self-check (twtools.analyse.sweepcheck) as the lines `tw sweep --selfcheck`
prints, each figure beside its target."""


def _pct(x, digits=1):
    return "unknown" if x is None else f"{100 * x:.{digits}f}%"


def lines(f):
    T = f["targets"]
    out = ["sweep self-check: two back-to-back runs of tw run --only "
           "doctor,variants,seed-sweep,tlpi-sweep"]
    for i, r in enumerate(f["runs"], 1):
        out.append(f"  run {i}: {r['async_cells']} async cells ({r['undisturbed_cells']} with the "
                   f"undisturbed figure); half-width <= {T['half_width']:.0%}: "
                   f"{_pct(r['within_half_width'])} (target >= {T['half_width_share']:.0%}), "
                   f"median half-width {_pct(r['half_width_median'], 2)}")
        for stem, v in sorted(r["r2_min"].items()):
            out.append(f"    {stem} async fits: lowest r2 {v:.4f} over "
                       f"{len(r['r2'][stem])} lines (target >= {T['r2']})")
    c = f["compare"]
    out += [f"  cells compared: {c['cells']}",
            f"  intervals that overlap between the runs: {_pct(c['overlap_share'])} "
            f"(target >= {T['overlap']:.0%}): {c['misses']} miss, chance alone gives about "
            f"{c['expected_misses']}; async cells {_pct(c['async_overlap_share'])}, "
            f"{c['async_misses']} of {c['async_cells']} miss (chance: about "
            f"{c['expected_async_misses']}); the O_SYNC cells measure the disk, which moves "
            "between runs more than within one",
            f"  figures' move between the runs: median {_pct(c['move_median'], 2)} "
            f"(target <= {T['move']:.0%}), 90th percentile {_pct(c['move_p90'], 2)}",
            *[f"  {stem}: the host moved {100 * h['shift']:+.2f}% as a whole between the runs "
              f"(median over {h['cells']} async cells); with that taken out, cells moved "
              f"{_pct(h['residual_move_median'], 2)} (median), "
              f"{_pct(h['residual_move_p90'], 2)} (90th percentile), and "
              f"{_pct(h['overlap_after_shift'])} of their intervals overlap"
              for stem, h in sorted((f.get("host_shift") or {}).items())],
            *[_clock_line(stem, h) for stem, h in sorted((f.get("clock_shift") or {}).items())],
            "  'quiet' in the reports: " + (", ".join(f"run {i}" for i in
                                                     f["quiet_machine_in_report"]) or "none")]
    out += _vs_ref_lines(f.get("vs_ref"), T)
    return out


def _vs_ref_lines(v, T):
    """The figures that cancel the host's common move: each cell over the sweep's reference
    of the same rounds (vs_ref in sweep_*.csv)."""
    if not v:
        return []
    out = [f"  vs_ref (each async cell over {'; '.join(v['of']) or 'no reference'}: a move "
           "of the host that every mechanism at a size shares cancels; a mechanism's own move "
           "within the run widens its intervals)"]
    for i, r in enumerate(v["runs"], 1):
        out.append(f"    run {i}: {r['cells']} cells; half-width <= {T['half_width']:.0%}: "
                   f"{_pct(r['within_half_width'])} (target >= {T['half_width_share']:.0%}), "
                   f"median half-width {_pct(r['half_width_median'], 2)}")
    out += [f"    overlap between the runs: {_pct(v['overlap_share'])} (target >= "
            f"{T['vs_ref_overlap']:.0%}): {v['misses']} of {v['cells']} miss, chance alone gives "
            f"about {v['expected_misses']}",
            f"    move between the runs: median {_pct(v['move_median'], 2)} (target <= "
            f"{T['vs_ref_move']:.1%}), 90th percentile {_pct(v['move_p90'], 2)}",
            "    " + ("every vs_ref target held" if not v["short"] else
                      "SHORT: " + "; ".join(v["short"]))]
    return out


def _clock_line(stem, h):
    if h.get("shift") is None:
        return f"  {stem}: the host's own speed: unknown ({h.get('why')})"
    return (f"  {stem}: the host's own speed for user code (hostclock, no kernel entry) moved "
            f"{100 * h['shift']:+.2f}% ± {100 * h['shift_half_width']:.2f}% between the runs; "
            f"with that taken out, cells moved {_pct(h['residual_move_median'], 2)} (median), "
            f"{_pct(h['residual_move_p90'], 2)} (90th percentile), and "
            f"{_pct(h['agree_after_shift'])} of them agree within their intervals and the "
            "shift's")
