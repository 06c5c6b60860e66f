"""The benchmark self-check's figures (twtools.analyse.selfcheck) as the lines `tw bench
--selfcheck` prints, each beside its target."""
from ..analyse.selfcheck import TARGETS


def lines(f):
    """The figures as text, each beside its target."""
    def pct(x):
        return "unknown" if x is None else f"{100 * x:.1f}%"
    T = TARGETS
    u = f.get("undisturbed") or {}
    cmpf = u.get("compare") or {}
    out = ["benchmark self-check: two back-to-back runs of the matrix",
           f"  cells compared: {f['cells_compared']}",
           "  undisturbed cost (each process's floor, the mean of the fastest 20% of them; "
           "jackknife over processes, drift and level terms):",
           f"    fast cells with a 95% half-width <= {T['undisturbed_half_width']:.0%}: "
           f"{pct(u.get('fast_half_width_share'))} (target >= {T['fast_share']:.0%}); median "
           f"half-width {pct(u.get('fast_half_width_median'))}",
           f"    intervals ({u.get('unit', 'ns')}) that overlap between the runs: "
           f"{pct(u.get('overlap_share'))} "
           f"(target >= {T['undisturbed_overlap']:.0%}): {u.get('misses', '?')} miss, chance alone "
           f"gives about {u.get('expected_misses', '?')}; intervals of zero width: "
           f"{len(u.get('zero_width') or [])}"
           + (f"; at the first run's price of a VM exit (the host moved it "
              f"{u['exit_shift_pct']:+.1f}%), {pct(u.get('overlap_share_one_exit_price'))}"
              if u.get("exit_shift_pct") is not None else ""),
           f"    fast cells' move between the runs: median {pct(u.get('fast_move_median'))} "
           f"(target <= {T['undisturbed_move']:.1%}), 90th percentile {pct(u.get('fast_move_p90'))}",
           f"    tw compare of the two runs: {cmpf.get('called', 'unknown')} of {cmpf.get('tests', 0)} "
           f"cells called different after Benjamini-Hochberg ({cmpf.get('called_uncorrected', '?')} "
           f"before; chance alone gives about {cmpf.get('expected_by_chance', '?')} at 95%; target "
           f"<= {T['compare_calls']})",
           "  typical cost (median over process runs, drift folded in):",
           f"  95% intervals that overlap between the runs: {pct(f['overlap_share'])} as measured, "
           f"{pct(f['overlap_share_ratio'])} as ratios to the 64-bit syscall (target >= {T['overlap']:.0%})",
           f"  fast cells (null, getppid, write-devnull) with a half-width <= {T['fast_half_width']:.0%}: "
           f"{pct(f['fast_within_target'])} as measured, {pct(f['fast_within_target_ratio'])} as ratios "
           f"(target >= {T['fast_share']:.0%} for the ratio form at least); median half-width "
           f"{pct(f['fast_half_width_median'])} / {pct(f['fast_half_width_median_ratio'])}"]
    r1, r2 = f["int80_ratio"]
    if r1 and r2:
        out.append(f"  {r1['slow']} / {r1['fast']} (paired by round): {r1['ratio']['median']:.3f} "
                   f"then {r2['ratio']['median']:.3f}: changed by {pct(f['int80_ratio_change'])} "
                   f"(target <= {T['ratio_repro']:.0%})")
    else:
        out.append("  int 0x80 / fast path: unknown (not measured in both runs)")
    for n, r in enumerate(f["runs"], 1):
        p = r["perf_over_twin"]
        perf = (f"perf bench {r['perf_bench_ns']['median']:.1f} ns / 64-libc getppid (ret) "
                f"{r['getppid_libc_ns']['median']:.1f} ns = {p['median']:.3f} "
                f"[{p['ci_low']:.3f}, {p['ci_high']:.3f}]" if p else
                f"perf bench: unknown ({(r['perf_bench_ns'] or {}).get('why')})")
        loop = r["loop_ns"].get("median") if r.get("loop_ns") else None
        out.append(f"  run {n}: {perf} (target within {T['perf_within']:.0%}); empty loop "
                   + (f"{loop:.2f} ns" if loop is not None else "unknown")
                   + f"; unstable cells {pct(r['unstable_share'])} (target <= {T['unstable_share']:.0%}); "
                   + (f"disturbed batches {r['disturbed']} of {r['batches']}; " if r["disturbed"] is not None else "")
                   + f"matrix wall time {r['wall_s']:.1f} s (target <= {T['wall_s']:.0f} s)")
    return out
