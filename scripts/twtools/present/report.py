"""`tw report DIR`: report.md, report.html, plots/ and verdict.json from a results directory.

Reporting only reads the results directory (and the seed's reference CSVs): it
never measures.  Rebuilding gives byte-identical files: the only date in the
report is meta.json's created_utc, plots carry no date, ordering is fixed.

The report is built once as a list of blocks (a tiny document model), then
rendered by one exporter per format (`EXPORTERS`: md, html).
"""
from pathlib import Path

from ..analyse import causes as causes_mod, findings, percall, results, seedref, stats, sweeps, verdict as verdict_mod
from ..core import files, ui
from ..machine import registry, tracers
from . import atlas, causes as present_causes, walls as present_walls
from . import census as present_census, diagnose as present_diagnose, export as csv_export, \
    tables
from .document import Doc, export, fmt, outside

# stage-file stem -> name of the stage that writes it (meta.json's stages)
# (meta.json's stage names, tried in order; the first is the one named in messages)
STAGE_OF = {"fingerprint": ["doctor"], "variants": ["variants", "run"], "percall": ["bench"],
            "sweep_seed": ["seed-sweep", "sweep"], "sweep_tlpi": ["tlpi-sweep", "sweep"],
            "writev": ["writev", "sweep"], "stdio": ["stdio", "sweep"],
            "tracers": ["tracers", "trace"], "latency": ["latency", "tracers", "trace"],
            "attribution": ["attribution", "attribute"], "observer": ["observer"]}


# -- helpers ---------------------------------------------------------------------------------



def plots_module():
    """The plots module, imported when the first plot is drawn: matplotlib takes about 0.4 s to
    import, and every command that imports this module or present.compare (tw report, tw run,
    tw compare) paid it before it could even refuse a mistyped command line."""
    from . import plots
    return plots


def fmt_cell(c, unit="ns"):
    """A percall-like cell: value with CI, or 'unsupported: reason', or 'unknown (why)'."""
    if c is None:
        return "not measured"
    if c.get("supported") is False:
        return f"unsupported: {outside(c.get('reason') or 'no reason given')}"
    if c.get("median") is None:
        return f"unknown ({outside(c.get('why') or 'no value recorded')})"
    return fmt(c, unit)


def fmt_s(s, unit="s"):
    if s is None:
        return "—"
    if verdict_mod.is_blind(s):
        return f"unknown ({outside(s.get('why'))})"
    if s.get("median") is None:
        return "unknown"
    m = s["median"]
    digits = 4 if abs(m) < 1 else 3
    return f"{m:.{digits}f} {unit} [{s['ci_low']:.{digits}f}, {s['ci_high']:.{digits}f}]" + \
        (" (unstable)" if s.get("unstable") else "")


def missing(doc, data, stem):
    """Say why a stage file is absent, from meta.json; returns True when it is absent."""
    if data.get(stem) is not None:
        return False
    stages = (data.get("meta") or {}).get("stages") or {}
    names = STAGE_OF.get(stem, [stem])
    name = next((n for n in names if n in stages), names[0])
    st = stages.get(name)
    if st is None:
        why = f"stage {name} skipped: not recorded in meta.json"
    elif not st.get("ok"):
        why = f"stage {name} failed: {outside(st.get('error') or 'no error recorded')}"
    else:
        why = f"stage {name} ran but wrote no {stem}.json"
    doc.p(f"Not measured ({why}).")
    return True


RERUN_BENCH = ("Raise the number of rounds: `make report REPORT_ARGS=--long`, or `scripts/tw "
               "bench --long` for this table alone (3x the rounds: intervals about 1.7x narrower); "
               "what the host's neighbours did meanwhile is described under \"This host during "
               "the run\", and the undisturbed figure already leaves them out.")
# What to raise, and by how much it helps: an interval over n passes narrows as 1/sqrt(n).
def rerun_sweep(reps, runs=None, mode="async"):
    """The advice for unstable sweep cells: the runs to raise (the variance lives between
    runs), by how much that narrows the interval, and for sync rows what else shares the
    device."""
    had = (f"this run took {runs} runs per cell; " if isinstance(runs, int) and runs > 0 else
           f"this run took {reps} passes per size; " if isinstance(reps, int) and reps > 0
           else "")
    target = ("`make report REPORT_ARGS='--target 2%'` measures the wide async rows alone until "
              "they are within it (the line under the table says how long that takes here), and "
              if mode == "async" else "")
    return (f"Raise the runs: {had}each doubling narrows the interval about 1.4x (1/sqrt(n)); "
            + target + "`make report REPORT_ARGS=--long` doubles every row's runs; "
            "the host's neighbours are described under \"This host during the run\". For sync "
            "rows the device is what varies: other I/O on the output file system widens them, "
            "and more passes do not.")


# Why a table leads with the typical figure (its median, with a 95% interval) and not the
# undisturbed one (issue 26, item 3): said under each such table.
FIGURE_WHY = {
    "writev": "Figures: undisturbed. wvbench runs once per cell in each of several rounds, "
              "each run timing a few paired repetitions (both calls in each): write and writev "
              "are each the mean of the fastest 20% of the runs' fastest repetitions, and the ratio's interval "
              "leaves the same runs out of both sides (a jackknife over runs). `--long` doubles "
              "the runs.",
    "stdio": "Figures: typical (the median of the runs). Each run writes the whole input once, one "
             "sample per run, so there are no batches to take the fastest of; `--long` raises the "
             "runs.",
    "attribution": "Figures: typical. Each part is a difference of medians from traced runs (strace, "
                   "perf), one sample per traced run; the per-call matrix's section gives each "
                   "call's undisturbed cost.",
    "observer": "Figures: typical (the median of the batches with the tracer attached). A tracer's "
                "cost is what it adds to the calls it sees, interruptions included: the fastest "
                "batches would leave out part of what it costs.",
}


# -- sections --------------------------------------------------------------------------------

def machine_title(data):
    """What the machine is, for a title: its CPU (vendor family/model and name), the
    hypervisor, and the host name last; a host named "vm" says nothing on its own."""
    meta = data.get("meta") or {}
    fp = data.get("fingerprint") or {}
    cpu = fp.get("cpu") or {}
    host = meta.get("host") or fp.get("host") or "unknown host"
    vendor = {"GenuineIntel": "Intel", "AuthenticAMD": "AMD"}.get(cpu.get("vendor"), cpu.get("vendor"))
    name = " ".join((cpu.get("model_name") or "").replace("(R)", "").replace("(TM)", "")
                    .replace(" Processor", "").replace(" CPU", "").split())
    what = name or (f"{vendor} CPU" if vendor else "unknown CPU")
    if cpu.get("family") is not None:
        what += f" (family {cpu.get('family')}, model {cpu.get('model')})"
    virt = fp.get("virtualization")
    where = "bare metal" if virt in ("none", "bare metal") else f"{virt} guest" if virt else \
        "hypervisor unknown"
    return f"{outside(what)} · {outside(where)} · host {outside(host)}"


def sec_title(doc, data):
    doc.h(1, f"timewrite report: {machine_title(data)}")
    state = run_state(data)
    if state:
        doc.warn(state, inline=True)


def run_state(data):
    """One sentence when the run is not a complete, healthy one: the report's first line.
    The run's state (interrupted, in progress, failed) comes from analyse.results.run_state;
    broken mechanisms are added because they are this machine's news, not the run's."""
    headline = results.run_state(data)["headline"]
    broken = sorted({c["variant"] for c in (data.get("percall") or {}).get("cells", [])
                     if c.get("status") == "broken"} |
                    {v["name"] for v in data.get("variants") or [] if v.get("status") == "broken"})
    parts = [outside(headline.rstrip("."))] if headline else []
    if broken:
        parts.append(f"**broken** here (they must work on this machine and did not): "
                     f"{', '.join(broken)}")
    return "; ".join(parts) + "." if parts else None


def sec_provenance(doc, data, results_dir):
    meta = data.get("meta") or {}
    an = data.get("analysis") or {}
    doc.h(2, "Provenance")
    doc.p(f"Results directory: {outside(Path(results_dir).name)} · measured "
          f"{outside(meta.get('created_utc') or 'unknown date')} "
          f"· mode {outside(meta.get('mode') or 'unknown')} · schema "
          f"{outside(meta.get('schema') or 'unknown')} "
          f"· measuring took {meta.get('duration_s', '?')} s · analysis version "
          f"{an.get('version')} (" + ", ".join(f"{k} {v}" for k, v in (an.get("methods") or {}).items())
          + "), every figure computed from the raw samples when this report was built.")
    if an.get("from_stored"):
        doc.p("Figures taken as stored, because the stage file predates raw samples: "
              + "; ".join(an["from_stored"]) + ".")
    doc.p("Rebuild this report (reads only the results directory, re-measures nothing):")
    doc.code(outside(ui.command_line(["scripts/tw", "report", str(results_dir)])))
    if meta.get("argv") or meta.get("command"):
        doc.p("The measurement was produced by (repeat it to re-measure):")
        doc.code("\n".join(outside(x) for x in (meta.get("command"),
                                                  ui.command_line(meta.get("argv") or [])) if x))
    setting = meta.get("setting") or {}
    if setting:
        st = ", ".join(f"{k}: {v}" for k, v in (setting.get("status") or {}).items()) or "not readable"
        doc.p(f"Speculation setting: {outside(setting.get('speculation') or 'kernel default')} "
              f"({outside(st)}).")
    if meta.get("note"):
        doc.p(f"Note recorded with the results: {outside(meta['note'])}")
    st = meta.get("stages") or {}
    if st:
        doc.table(["stage", "ok", "seconds", "error"],
                  [[outside(k), "yes" if v.get("ok") else "**no**",
                    _stage_seconds(v), outside(v.get("error"))] for k, v in st.items()])


def _stage_seconds(v):
    """A stage's seconds, or which stage measured it (cli/run: the sweeps' second session is
    the tlpi-sweep stage's own time)."""
    if v.get("session"):
        return f"{v.get('seconds')} (session {v['session']} of {outside(v.get('measured_with'))})"
    return f"with {outside(v['measured_with'])}" if v.get("measured_with") else v.get("seconds")


MATRIX_OPS = [("null", None), ("getppid", None), ("write-devnull", 1), ("write-file", 256),
              ("write-sync", 256), ("gettimeofday", None), ("clock_gettime", None)]


def sec_matrix(doc, data, pdir):
    """The per-call matrix at a glance: every mechanism by operation, as a called function
    (the ret shape, what a program pays), ns per call and the ratio to the 64-bit syscall."""
    pc = data.get("percall")
    doc.h(2, "What each way into the kernel costs here")
    if missing(doc, data, "percall"):
        return
    ref = pc["reference"]
    ops = [(op, size) for op, size in MATRIX_OPS
           if any(c["op"] == op and c.get("supported") for c in pc["cells"])]
    rows = []
    for m in registry.mechanisms():
        cells = [percall.find(pc, m.name, op, size) for op, size in ops]
        if not any(cells):
            continue
        line = [m.name]
        for c in cells:
            if c is None:
                line.append("—")
            elif not c.get("supported"):
                line.append(c.get("status") or "unsupported")
            elif c.get("median") is None:
                line.append("unknown")
            else:
                line.append(_matrix_cell(c))
        rows.append(line)
    doc.p(f"ns per call, undisturbed [95%] · × {ref['variant']} {ref['op']} · typical:")
    doc.table(["mechanism"] + [f"{op}" + (f" {size} B" if size else "") for op, size in ops], rows)
    clock = pc.get("core_clock") or {}
    at = (f"at the top clock the host gave the core in this run, {clock['ghz']:.2f} GHz "
          "(the clock its fastest 1% of processes reached, timed by a chain of multiply-adds "
          "before every batch); between runs, compare "
          f"cycles (`undisturbed_cycles`, and `tw compare`'s absolute column) or the ratios to "
          f"{ref['variant']} {ref['op']}: the host moves the core's clock in steps, and a figure "
          "in ns moves with it" if clock.get("ghz") else
          "at the level the host's fast state sat at during this run; between runs, compare "
          f"the ratios to {ref['variant']} {ref['op']}, which hold where that level moves")
    doc.p("The undisturbed cost is what this hardware and kernel charge when the host leaves the "
          f"CPU alone, {at}. The typical cost is "
          "the median a program met during this run, the host's other tenants included "
          "(\"This host during the run\", below). † leads with the typical cost (the cell "
          "measures waiting, or has no trustworthy floor); `*` marks a leading figure that is "
          "unstable. Every cell with its flags is in the per-call section below."
          + _exit_note(data.get("causes"), data.get("exitprice"), data.get("meta")))
    why = {c["variant"]: outside(c.get("reason")) for c in pc["cells"] if c.get("supported") is False}
    if why:
        doc.p("Not measured here: " + "; ".join(f"{k}: {outside(v)}" for k, v in sorted(why.items()))
              + ".")
    doc.plot(plots_module().plot_percall(pc, pdir), "Per-call cost by mechanism on one log scale: "
             "undisturbed (dot) and typical (circle), 95% intervals; red = unstable")


def _exit_note(cz, ep=None, meta=None):
    """A sentence for the matrix when int 0x80 pays VM exits here: its figures carry the
    host's price of an exit at the moment of the matrix, which hosts move over minutes, and
    its intervals hold the price at the run's end too when the exit-price stage priced it
    (analyse/exitdrift.py)."""
    price = (cz or {}).get("exit_price_ns") or {}
    paying = [v for v in ((cz or {}).get("mechanisms") or {}) if causes_mod.exits_paid(cz, v)]
    if price.get("value") is None or not paying:
        return ""
    names = sorted(paying)
    names = " and ".join([", ".join(names[:-1]), names[-1]] if len(names) > 1 else names)
    head = (f" {names} pay{'s' if len(paying) == 1 else ''} a VM exit a call here, so "
            f"{'its' if len(paying) == 1 else 'their'} figures carry the host's price of an exit "
            f"during the matrix (one cpuid: {price['value']:.0f} ns [{price['ci_low']:.0f}, "
            f"{price['ci_high']:.0f}]), which a host moves over minutes")
    tail = (" (docs/report.md, \"Comparing machines\"): `tw compare` decides two runs of one "
            "host at one exit price.")
    if not ep:
        return head + tail
    if ep.get("move") is None:
        return (head + f"; its price at the run's end is unknown ({ep.get('why')}), so their "
                "intervals hold the matrix's moment only" + tail)
    st = (meta or {}).get("stages") or {}
    names_after = [s for s in st if s not in ("doctor", "variants", "bench")]
    later = sum(st[s].get("seconds") or 0 for s in names_after if s != "exit-price")
    moved = (f". At the run's end, {later:.0f} s later, one cpuid cost "
             f"{price['value'] + ep['move_ns']:.0f} ns at the matrix's clock "
             f"({ep['move_pct']:+.1f}% [{ep['move_pct'] - ep['move_half_pct']:+.1f}, "
             f"{ep['move_pct'] + ep['move_half_pct']:+.1f}])")
    # on each side: a rerun's price went the other way from a run's end in 12 of 15 pairs
    other = " and at a price as far the other way, where a rerun may find it"
    if not ep.get("resolved"):
        return (head + moved + ", a move within the two prices' uncertainty; their intervals "
                "hold them at both prices as measured" + other + tail)
    return head + moved + ", and their intervals hold them at both prices" + other + tail


def _matrix_cell(c):
    """undisturbed [CI] · ratio, then typical; or typical first (†) when it is the primary."""
    star = " *" if c.get("unstable") else ""
    typ = _short(c)
    u = percall.figure(c, "undisturbed")
    if c.get("primary") == "typical" or u is None:
        r = c.get("ratio")
        return (f"† typical {typ}" + (f" · {r['median']:.2f}×" if r and r.get("median") else "") + star)
    r = c.get("undisturbed_ratio")
    return (f"{_short(u)}" + (f" · {r['median']:.2f}×" if r and r.get("median") else "")
            + f" · typical {c['median']:.0f}" + star)


def sec_host(doc, data, pdir):
    """This host during the run: a noisy host is a described fact, not a warning."""
    pc = data.get("percall")
    doc.h(2, "This host during the run")
    if missing(doc, data, "percall"):
        return
    h = pc.get("host") or {}
    parts = []
    if h.get("slow_share") is not None:
        parts.append(f"The reference cell ({pc['reference']['variant']} {pc['reference']['op']}) "
                     f"was measured in {h['batches']} batches; {100 * h['slow_share']:.0f}% of them "
                     f"ran more than {100 * h['slow_margin']:.0f}% above its undisturbed cost "
                     f"({h['reference_ns']:.1f} ns): that is how often the host's other tenants "
                     "slowed this CPU.")
    else:
        parts.append(f"The host's state over the run is unknown ({h.get('why') or 'no reference cell'}).")
    if h.get("interference_share_median") is not None:
        parts.append(f"Interference (typical − undisturbed) was {100 * h['interference_share_median']:.0f}% "
                     "of the typical cost in the median cell"
                     + (f", {100 * h['interference_share_reference']:.0f}% in the reference cell"
                        if h.get("interference_share_reference") is not None else "") + ".")
    if h.get("steal_ticks") is not None:
        parts.append(f"syscost counted {h['steal_ticks']} ticks of stolen time and {h['nivcsw']} "
                     "involuntary context switches inside its timed windows (those batches are "
                     "left out of each round's value).")
    else:
        parts.append(f"Steal time and involuntary switches: unknown ({h.get('why_counters')}).")
    clock = pc.get("core_clock") or {}
    if clock.get("ghz"):
        lv = clock.get("levels") or []
        parts.append(
            "The undisturbed figures above depend far less on how often this happened than the "
            "typical ones, which a rerun at another moment will move. The host also moves the "
            "core's clock, in steps that last minutes: syscost timed a chain of multiply-adds "
            "(4 cycles a step) before every batch, and the processes ran at "
            + ", ".join((f"{x['ghz']:.1f} GHz" if x["ghz"] else "other clocks")
                        + f" ({100 * x['share']:.0f}%)" for x in lv)
            + f" of the time. Every undisturbed figure is taken at {clock['ghz']:.2f} GHz, the "
            "clock the fastest 1% of processes reached; "
            "a run that meets another top clock gives other figures in ns, and the same cycles "
            "(docs/syscost.md, \"The core's clock\").")
    else:
        parts.append("The undisturbed figures above depend far less on how often this happened "
                     "than the typical ones, which a rerun at another moment will move. But the "
                     "host's fast level itself can move between runs, and no interval of one run "
                     "sees that: on an Intel KVM guest, two default runs three minutes apart met "
                     "fast levels 7–10% apart (docs/syscost.md). Between runs, compare the ratios "
                     "to the reference: each process is taken against the reference process "
                     "beside it, and those held.")
    doc.p(" ".join(parts))
    if h.get("fast_share") is not None:
        q = [f"What the host allowed: of {h['probes']} probes (the reference's processes, run "
             f"between every few cells), {h['fast_probes']} ({100 * h['fast_share']:.0f}%) were in "
             f"its fast state, within {100 * h['fast_tol']:.0f}% of the fast level (the "
             f"{h['level_rank']}rd fastest probe, {h['fast_level_ns']:.1f} ns), in "
             f"{h['bursts']} stretch(es), the longest "
             f"{h['longest_burst_s']:.1f} s."]
        if h.get("gated"):
            q.append("Each undisturbed figure rests on the processes that ran between two fast "
                     f"probes (the mean of their floors within "
                     f"{100 * percall.sequential.SCREEN:.0f}% of the lowest): "
                     + (f"{h['fast_processes_median_fast_cells']} in the median fast cell "
                        f"(null, getppid, write-devnull; at least "
                        f"{h['fast_processes_min_fast_cells']}), which the matrix measures in "
                        "the host's fast moments first, and "
                        if h.get("fast_processes_median_fast_cells") is not None else "")
                     + f"{h.get('fast_processes_median', 0)} in the median cell (at least "
                     f"{h.get('fast_processes_min', 0)}); a cell with fewer than "
                     f"{percall.GATED_MIN} has no undisturbed figure and leads with its typical "
                     "one.")
        cut = pc.get("interrupted") or {}
        if cut:
            q.append(f"The matrix was interrupted by {outside(cut.get('signal') or 'a signal')} "
                     f"after {cut.get('rounds')} whole rounds"
                     + ("" if h.get("target") else f" of its {h.get('rounds_mode')}")
                     + ": its figures rest on the rounds measured before the signal, kept in "
                     "percall.json.")
        if h.get("stopped") == "deadline":
            q.append(f"The matrix stopped after {h.get('rounds')} of its "
                     f"{h.get('rounds_mode')} rounds, at the report's time "
                     f"for it ({h.get('deadline_s') or 0:.0f} s): its intervals are as wide as "
                     "those rounds allow.")
        if h.get("quiet_first"):
            q.append(f"The matrix waited {h.get('waited_s') or 0:.1f} s for quiet moments"
                     + (f", within a budget of {h['budget_s']:.0f} s" if h.get("budget_s") else "")
                     + ".")
        if h.get("projected_cells"):
            q.append(f"{h['projected_cells']} fast cells are still wider than ±1%: at this fast "
                     f"share, `tw bench --target 1%` would take about "
                     f"{_dur(h['projection_s_median'])} of measuring for the median one and "
                     f"{_dur(h['projection_s_max'])} for the widest"
                     + (f"; for {h['projection_lower_bounds']} of them too few fast processes "
                        "ran to plan, and their time is a lower bound" if
                        h.get("projection_lower_bounds") else "") + ".")
        if h.get("never_quiet"):
            q.append(f"The host was never quiet: {h['never_quiet_why']}.")
        doc.p(" ".join(q))
    doc.plot(plots_module().plot_host(h, pdir), "The reference cell over the run: each dot a batch"
             + (" at the run's top core clock" if h.get("clock_series") else "")
             + "; orange above the slow-state line; below, each probe's state (fast or slow)"
             + ("; at the bottom, the core's clock at each probe (GHz)"
                if h.get("clock_series") else ""))


def _short(c):
    m, lo, hi = c["median"], c["ci_low"], c["ci_high"]
    if m >= 10000:
        return f"{m / 1000:.1f} µs [{lo / 1000:.1f}, {hi / 1000:.1f}]"
    return f"{m:.0f} ns [{lo:.0f}, {hi:.0f}]"


def sec_findings(doc, data):
    fs = findings.findings(data)
    if not fs:
        return
    doc.h(2, "Three things this machine showed")
    for n, f in enumerate(fs, 1):
        # The measured cause where the cost model has one (analyse/causes.py), and where
        # it is taken apart; a cause read from the fingerprint carries outside text.
        cause = (f" Measured cause: {f['cause']}"
                 + (f" ({outside(f['cause_why'])})" if f.get("cause_why") else "")
                 + f"; see \"{present_causes.SECTION}\"." if f.get("cause") else "")
        doc.p(f"{n}. **{f['title'].capitalize()}**: {f['sentence']}{cause}")


def sec_verdict(doc, v, data=None):
    doc.h(2, "Verdict on the seed's hypothesis")
    doc.blocks.append(("verdict", v["verdict"], v.get("headline") or v["sentence"]))
    # Under the verdict on the seed's server, what holds on this machine today and why: the
    # int 0x80 cost against the fast path with its measured cause (analyse/causes.py).
    today = present_causes.today_sentence(
        causes_mod.today((data or {}).get("causes"), (data or {}).get("percall"),
                         (data or {}).get("fingerprint"), typical=True))
    if today:
        doc.p(today)
    noisy = host_line((data or {}).get("percall"))
    if noisy:
        doc.p(noisy)


# The first screen says the host was too noisy when the fast cells' median undisturbed
# half-width is above this.
NOISY_HALF = 0.02


def host_line(pc):
    """One line for the first screen when the host was too noisy for precise figures, with
    what to do; None when it allowed them (or the run has no probes)."""
    h = (pc or {}).get("host") or {}
    if h.get("fast_share") is None:
        return None
    fast_ops = ("null", "getppid", "write-devnull")
    every = [c for c in (pc or {}).get("cells", []) if c.get("supported")
             and c.get("op") in fast_ops]
    fast = [c for c in every if c.get("primary") == "undisturbed" and c.get("undisturbed_ns")
            and c.get("undisturbed_ci_low") is not None]
    none = sum(1 for c in every if c.get("undisturbed_ns") is None)
    halves = sorted((c["undisturbed_ci_high"] - c["undisturbed_ci_low"]) / 2 / c["undisturbed_ns"]
                    for c in fast)
    med = halves[len(halves) // 2] if halves else None
    if h.get("never_quiet"):
        return (f"**This host was never quiet during the run**: {h['never_quiet_why']}. No "
                "undisturbed figure rests on it; run again when the host is quieter, or "
                "`tw bench --target 1% --budget 30m`.")
    if (med is None or med <= NOISY_HALF) and none <= len(every) // 4:
        return None
    proj = h.get("projection_s_median")
    parts = []
    if none:
        parts.append(f"{none} of {len(every)} fast cells have no undisturbed figure (too few "
                     "of their processes met it)")
    if med is not None:
        parts.append(f"the others' undisturbed intervals are ±{100 * med:.1f}% (median)"
                     if none else f"the fast cells' undisturbed intervals are ±{100 * med:.1f}% "
                     "(median)")
    return (f"**This host was noisy**: it was in its fast state in {100 * h['fast_share']:.0f}% "
            f"of the run's probes; " + "; ".join(parts)
            + (f"; ±1% would take this host {'at least' if h.get('projection_lower_bounds') else 'about'} "
               f"{_dur(proj)} of measuring at that share" if proj else "")
            + ": `tw bench --target 1% --budget 30m` measures until then (\"This host during "
            "the run\").")


_dur = present_causes.dur


def sec_verdict_detail(doc, v):
    doc.h(2, "How the verdict was reached")
    # Said here rather than on the first screen, which holds the verdict, today's sentence
    # and the matrix.
    doc.p("The hypothesis: on the seed's Linux 2.6 server, a 32-bit glibc entering by `int "
          "0x80` made small writes slow (docs/seed-report.md).")
    doc.p(v["sentence"])
    doc.p("The rules are in docs/report.md and scripts/twtools/analyse/verdict.py; the numbers "
          "are in `verdict.json`.")
    if v["reasons"] and v["verdict"] != "inconclusive":
        for r in v["reasons"]:
            doc.p(f"Note: {r}")
    rows = [
        ["32-bit glibc entry path (this machine)", outside(v.get("libc32_entry") or "unknown"),
         outside("; ".join(v.get("libc32_evidence") or []))],
        ["32-bit vDSO instruction", outside(v.get("vdso32_instruction") or "unknown"), ""],
        ["32-int80 null call", fmt_cell(v.get("int80_null_ns")), ""],
        ["32-libc null call", fmt_cell(v.get("libc32_null_ns")), ""],
        [f"fast path ({v.get('fast_path') or 'none usable'}) null call", fmt_cell(v.get("fast_null_ns")), ""],
        ["Δ int 0x80 − 32-bit glibc, per call", fmt(v.get("int80_delta_ns")) if v.get("int80_delta_ns") else "unknown", "CI by quadrature"],
        ["Δ int 0x80 − fast path, per call", fmt(v.get("int80_vs_fast_ns")) if v.get("int80_vs_fast_ns") else "unknown", ""],
        ["Δ 32-bit glibc − fast path, per call", fmt(v.get("libc_vs_fast_ns")) if v.get("libc_vs_fast_ns") else "unknown", ""],
    ]
    doc.table(["figure", "value", "evidence"], rows)
    if v.get("seed_rows"):
        doc.p("What this machine's int 0x80 penalty could explain of each seed row at the smallest "
              "BUFFSIZE (calls × Δ per call), against what the row measured (seed's figures, theirs). "
              "The CPU bound is the row's user+sys time plus one 10 ms tick each: no entry cost "
              "can exceed it.")
        doc.table(["seed platform (theirs)", "mode", "calls", "real s", "sys s", "calls×Δ (ms)",
                   "share of real", "CPU bound share"],
                  [[r["platform"], r["mode"], r["calls"], r["real_s"], r["sys_s"],
                    (f"{r['explained_s']['median'] * 1e3:.3f} [{r['explained_s']['ci_low'] * 1e3:.3f}, "
                     f"{r['explained_s']['ci_high'] * 1e3:.3f}]") if r.get("explained_s") else "unknown",
                    f"{100 * r['fraction']:.3f}%" if r.get("fraction") is not None else (outside(r.get("why")) or "unknown"),
                    f"{100 * r['cpu_bound_fraction']:.1f}%" if r.get("cpu_bound_fraction") is not None else "—"]
                   for r in v["seed_rows"]])
    b = v.get("bitness") or {}
    if b:
        doc.p(f"64-bit vs 32-bit glibc on this machine (seed sweep, 256 B): {b.get('seed_claim')}.")
        rows = []
        for mode, m in sorted((b.get("modes") or {}).items()):
            if "why" in m:
                rows.append([mode, "not measured", outside(m["why"]), "", ""])
            else:
                f = m.get("faster_64_pct")
                rows.append([mode, fmt_s(m["real_32_s"]), fmt_s(m["real_64_s"]),
                             fmt(f, "%") if f else "unknown", m.get("calls")])
        doc.table(["mode", "32-libc real", "64-libc real", "64-bit faster by", "calls"], rows)
        for op, parts in sorted((b.get("attribution") or {}).items()):
            doc.p(f"Where the 32 − 64 difference comes from ({op}, attribution): "
                  + "; ".join(f"{k.replace('_ns', '')} {fmt(s) if s else 'unknown'}"
                              for k, s in parts.items()) + ".")


def sec_fingerprint(doc, data):
    doc.h(2, "Machine")
    if missing(doc, data, "fingerprint"):
        return
    f = data["fingerprint"]
    cpu = f.get("cpu") or {}
    mit = f.get("mitigations") or {}
    mit_txt = "; ".join(f"{k}: {v}" for k, v in sorted(mit.items())
                        if v and not v.startswith("Not affected")) or "none reported"
    libc = f.get("libc") or {}
    vd = f.get("vdso32") or {}
    rows = [
        ["CPU", f"{cpu.get('model_name') or cpu.get('model') or 'unknown'} (family {cpu.get('family')}"
                f"{', model ' + str(cpu.get('model')) if cpu.get('model_name') else ''})"],
        ["vendor", cpu.get("vendor") or "unknown"],
        ["virtualisation", f.get("virtualization") or "unknown"],
        ["kernel", f"{(f.get('kernel') or {}).get('release')} {(f.get('kernel') or {}).get('version') or ''}"],
        ["OS", f.get("os") or "unknown"],
        ["mitigations (affected only)", mit_txt],
        ["32-bit vDSO instruction", (vd.get("instruction") or f"unknown ({outside(vd.get('why')) or 'not found'})")
         + (f" — {outside(vd.get('why'))}" if vd.get("instruction") and vd.get("why") else "")],
        ["32-bit libc entry", f"{(libc.get('32') or {}).get('entry') or 'unknown'} "
                              f"({(libc.get('32') or {}).get('path') or 'no path'})"],
        ["64-bit libc entry", (libc.get("64") or {}).get("entry") or "unknown"],
        ["clocksource", f"{f.get('clocksource') or 'unknown'} (invariant TSC: {f.get('invariant_tsc')})"],
        ["IA32 emulation", f.get("ia32_emulation")],
        ["price of one VM exit (cpuid)", present_causes.price_short((data.get("causes") or {})
                                                                    .get("exit_price_ns"))],
        ["FRED", f.get("fred")],
        ["output file system", f"{(f.get('output_fs') or {}).get('fstype') or 'unknown'} at "
                               f"{(f.get('output_fs') or {}).get('path') or '?'}"],
        ["root", f.get("root")],
    ]
    # Every value of this table was read from the machine: all of it is outside text.
    doc.table(["", "this machine"], [[k, outside(v)] for k, v in rows])
    inst = f.get("instruments") or []
    if inst:
        doc.table(["instrument", "works", "why not"],
                  [[outside(i.get("name")), "yes" if i.get("works") else "no",
                    outside(i.get("why"))] for i in inst])
    if data.get("variants"):
        doc.table(["variant", "bits", "ABI", "mechanism", "supported", "reason"],
                  [[v["name"], v["bits"], outside(v["abi"]), outside(v["mechanism"]),
                    "yes" if v["supported"] else "no", outside(v.get("reason"))]
                   for v in data["variants"]])


def sec_field_example(doc, data):
    """A program nobody here wrote, diagnosed beside the seed's hypothesis: the same question
    (how does it enter the kernel, and what does that cost here) asked of a real runtime."""
    fe = data.get("diagnose")
    doc.h(2, "A program from the field: Go for 32-bit x86")
    if fe is None:
        doc.p("Not measured (the field-example stage did not run).")
        return
    if not fe.get("diagnosis"):
        doc.p(f"Not measured: {outside(fe.get('why')) or 'no trace recorded'}.")
        return
    doc.p(f"The seed's hypothesis asked whether a 32-bit runtime entering by `int 0x80` made "
          f"calls slow. Go's 32-bit runtime does exactly that today. The program ({fe['program']}) "
          "was traced as `scripts/tw diagnose` traces any program, and its paths are priced "
          "with this run's own per-call matrix.")
    present_diagnose.report_section(doc, fe["diagnosis"], level=3, title="What the trace shows")


def sec_percall(doc, data, pdir):
    doc.h(2, "Per-call cost, every cell")
    if missing(doc, data, "percall"):
        return
    pc = data["percall"]
    raw = (data.get("raw") or {}).get("percall") or {}
    pm = raw.get("params") or {}
    how = (f"{pm['rounds']} interleaved rounds (one process per cell per round) of "
           f"{pm['batches']} batches of about {pm['batch_ms']} ms "
           f"({pm.get('sync_batches', pm['batches'])} batches for O_SYNC)"
           if all(k in pm for k in ("rounds", "batches", "batch_ms")) else "parameters not recorded")
    doc.p(f"Nanoseconds per call, empty-loop cost removed, over {how}; clock `{raw.get('clock')}`. "
          "Two figures per cell (docs/syscost.md, \"Two figures\" and \"The estimand\"). "
          "Undisturbed: each round's floor (its fastest batch), then the mean of the fastest 20% "
          "of floors, with a 95% interval from a delete-half jackknife over rounds (sampling), "
          "widened by the figure's drift between the run's halves (drift) and its spread between "
          "eight blocks of the run (blocks), and never narrower than the spacing of the levels the "
          "floors sit on (levels) or a clock tick over a batch's calls (resolution); each cell's "
          "`undisturbed.terms` names those that set its interval. A host's move over longer than "
          "the run is in none of them. Typical: each round gives "
          "one value (the median of its batches without a counted disturbance); the interval is "
          "a distribution-free 95% CI over rounds, widened by the drift the early and late "
          "halves of the run show, so that it covers a rerun. Interference is typical − "
          "undisturbed, as a share of the typical. The ratio is to the reference cell "
          f"({pc['reference']['variant']} {pc['reference']['op']}) of the same rounds. Shapes: "
          "`ret` a called stub returning with ret (as libc does), `jmp` the same stub leaving by "
          "an indirect jump, `inline` the instruction in the timed loop.")
    dist = pc.get("disturbance") or {}
    if dist.get("disturbed") is not None:
        doc.p(f"Disturbance: {dist['disturbed']} of {dist['batches']} batches saw an involuntary "
              f"context switch or stolen time in their timed window; {dist['policy']}.")
    else:
        doc.p(f"Disturbance: not counted ({outside(dist.get('why')) or 'unknown'}).")
    rows, shaky = [], []
    for c in pc.get("cells", []):
        r = c.get("undisturbed_ratio") if c.get("primary") == "undisturbed" else c.get("ratio")
        u = percall.figure(c, "undisturbed")
        i = c.get("interference")
        rows.append([c["variant"], c["op"], c.get("size"), c.get("shape"),
                     fmt(u) if u else f"— ({outside(c.get('primary_why')) or 'not measured'})",
                     fmt_cell(c),
                     f"{100 * i['share']:.0f}%" if i else "—",
                     f"{r['median']:.3f} [{r['ci_low']:.3f}, {r['ci_high']:.3f}]" if r else "—",
                     c.get("primary") or "—",
                     c.get("n_rounds") if c.get("supported") else "—",
                     ", ".join(c.get("flags") or []) or "—"])
        if c.get("supported") is not False and c.get("unstable") and c.get("median") is not None:
            size = f" {c['size']} B" if c.get("size") else ""
            shaky.append(f"{c['variant']} {c['op']}{size} {c.get('shape')} ({c.get('unstable_why')})")
    doc.table(["variant", "op", "size", "shape", "undisturbed ns [95%]", "typical ns [95%]",
               "interference", "× reference [95%] (leading figure)", "leading figure", "rounds",
               "flags"], rows)
    if shaky:
        # One warning for the table, grouped by cause: the advice is the same.
        causes = {}
        for c in pc.get("cells", []):
            if c.get("supported") and c.get("unstable") and c.get("median") is not None:
                for why in (c.get("unstable_why") or "no value").split("; "):
                    key = why.split(":")[0] if why.startswith("only") else \
                        "an interval wider than ±10% of the median" if why.startswith("interval") else \
                        "an undisturbed interval wider than ±10%" if why.startswith("undisturbed interval") else why
                    causes.setdefault(key, []).append(f"{c['variant']} {c['op']}"
                                                      + (f" {c['size']} B" if c.get("size") else "")
                                                      + (f" {c['shape']}" if c.get("shape") != "ret" else ""))
        doc.warn(f"{len(shaky)} of {pc['measured']} per-call cells have an unstable leading figure: "
                 + "; ".join(f"{len(v)} with {k} ({', '.join(v[:6])}{', …' if len(v) > 6 else ''})"
                             for k, v in causes.items()) + f". {RERUN_BENCH}", inline=True)
    two = [c for c in pc.get("cells", []) if c.get("supported") and c.get("states_why")]
    if two:
        # issue 62: said in the cell, each level's figure and count, and which one leads
        def lv(c):
            st = c["undisturbed"]["states"]
            return (f"{c['variant']} {c['op']}" + (f" {c['size']} B" if c.get("size") else "")
                    + (f" {c['shape']}" if c.get("shape") != "ret" else "")
                    + f": {st['lower_ns']:.0f} ns in {st['lower_fast']} of "
                    f"{st['fast_processes']} fast processes, {st['upper_ns']:.0f} ns in "
                    f"{st['upper_fast']}" + ("" if st["figure"] == "lower" else
                                             " (leads: the upper, no fast process drew the "
                                             "lower)"))
        # an upper level of two processes may be slow ones the probes did not see: counted
        # apart, so that the paragraph names the cells whose two levels are well sampled
        firm = [c for c in two if c["undisturbed"]["states"]["upper_fast"] >= percall.GATED_MIN]
        thin = len(two) - len(firm)
        doc.p(f"{len(two)} cell{'s' if len(two) > 1 else ''} whose fast processes sit at two "
              "levels further apart than their layout levels, each leading with its lower "
              "level, each level's figure beside it (percall.json's analysis, "
              "`undisturbed.states`)"
              + (": " + "; ".join(lv(c) for c in firm) if firm else "")
              + (f"; in {thin} more the upper level rests on two processes, which may also be "
                 "slow ones the host probes around them did not see" if thin else "")
              + ". A rerun may draw the other level more often; `tw compare` decides level "
                "against level.")
    pens = [p for p in pc.get("penalties", []) if p.get("penalty_ns")]
    doc.h(3, "The return after the call")
    if pens:
        doc.p("Post-return penalty: the same stub left by `ret` minus left by an indirect jump, "
              "paired by round. It is what mispredicting the first return after the kernel "
              "returns costs; every libc wrapper pays it. Not hard-coded: measured, and it may be "
              "zero on another CPU or kernel.")
        doc.table(["variant", "op", "size", "penalty ns [95%]", "ret ns", "jmp ns"],
                  [[p["variant"], p["op"], p.get("size"), fmt(p["penalty_ns"]),
                    f"{p['ret_ns']:.1f}", f"{p['jmp_ns']:.1f}"] for p in pens])
    else:
        doc.p("Not measured: no mechanism in these results was timed in both the `ret` and the "
              "`jmp` shape.")
    acc = percall.accuracy(raw, pc) if raw.get("perf_bench") else None
    if acc:
        r = acc.get("perf_over_twin")
        doc.p("Accuracy check: `perf bench syscall basic` (glibc getppid, a ret shape) "
              + fmt(acc["perf_bench_ns"]) + " against its twin here, 64-libc getppid, "
              + fmt(acc["getppid_libc_ns"])
              + (f": ratio {r['median']:.3f} [{r['ci_low']:.3f}, {r['ci_high']:.3f}]" if r else "")
              + ".")


def _cell(row, key):
    """A sweep row's figure for key: for ns_per_call the one the row leads with
    (analyse.sweeps.lead: undisturbed, or typical where it measures waiting)."""
    if not row:
        return None
    if key == "ns_per_call" and row.get("lead"):
        return row["lead"]
    return row.get(key)


def _what(rs, key):
    """What a sweep table's cells are, in words."""
    if key != "ns_per_call":
        return key.replace("_", " ")
    figs = {row.get("figure") for r in rs for row in r.get("rows", [])}
    whys = sorted({row.get("lead_why") for r in rs for row in r.get("rows", [])
                   if row.get("figure") == "typical" and row.get("lead_why")})
    if figs == {"undisturbed"}:
        return ("ns per call, undisturbed (each run's fastest pass, the mean of the fastest 20% "
                "of those; 95% interval by the jackknife over runs, drift and blocks terms)")
    text = "ns per call, typical (median of passes, 95% interval)"
    return text + (" †: " + "; ".join(outside(w) for w in whys) if whys else "")


def _sweep_table(doc, sw, name, key="ns_per_call", unit="ns", scale=1.0):
    runs = [r for r in sw.get("runs", [])]
    for mode in ("async", "sync"):
        rs = sorted([r for r in runs if r.get("mode") == mode], key=lambda r: r["variant"])
        if not rs:
            continue
        sizes = sorted({row["buffsize"] for r in rs for row in r.get("rows", [])})
        hdr = ["BUFFSIZE", "calls"] + [r["variant"] for r in rs]
        rows = []
        for s in sizes:
            line = [s, None]
            for r in rs:
                if not r.get("supported", True):
                    line.append("unsupported (see below)")
                    continue
                row = next((x for x in r.get("rows", []) if x["buffsize"] == s), None)
                if row and line[1] is None:
                    line[1] = row.get("calls")
                v = _cell(row, key)
                if isinstance(v, dict) and v.get("median") is not None and scale != 1.0:
                    v = stats.scale(v, scale)
                line.append(fmt(v, unit) if (v and not verdict_mod.is_blind(v)) else
                            (f"unknown ({outside(v.get('why'))})" if v else "not measured"))
            rows.append(line)
        doc.p(f"**{mode}** — {_what(rs, key)} ({unit}):")
        doc.table(hdr, rows)
        for r in rs:
            if not r.get("supported", True):
                doc.p(f"{r['variant']} unsupported: {outside(r.get('reason')) or 'no reason given'}.")
        nun = sum(1 for r in rs for row in r.get("rows", []) if (_cell(row, key) or {}).get("unstable"))
        ncell = sum(len(r.get("rows", [])) for r in rs)
        if key == "wait_s" and mode == "async":
            # Without O_SYNC nothing waits: real - user - sys is rounding around 0, and a
            # CV relative to ~0 says nothing.  No warning to chase.
            doc.p("Without O_SYNC the wait is rounding around zero (getrusage accounting), so "
                  "its relative spread is not meaningful and is not warned about.")
        elif nun:
            advice = rerun_sweep((sw or {}).get("reps"),
                                 ((sw or {}).get("rounds_by_mode") or {}).get(mode), mode)
            doc.warn(f"{name}, {mode}, {key.replace('_', ' ')}: {nun} of {ncell} cells are unstable "
                     f"(flagged in the table). {advice}",
                     inline=True)


def missed_text(doc, sw, target=sweeps.REPORT_TARGET):
    """A sweep measured without --target: which async vs_ref rows missed ±target, and the
    `--target` command and time that would meet them (analyse.sweeps.to_target)."""
    e = sweeps.to_target(sw, target)
    if not e:
        return
    pct = f"±{100 * target:g}%"
    if not e["missing"] and not e["held"]:
        doc.p(f"Every async `vs_ref` row is within {pct} ({e['met']} of {e['judged']}).")
        return
    shown = e["missing"][:8]
    text = (f"{e['met']} of {e['judged']} async `vs_ref` rows are within {pct}"
            + (f"; wider: " + ", ".join(f"{outside(m['row'])} ±{100 * m['half_width']:.1f}%"
                                        for m in shown)
               + (f" and {len(e['missing']) - len(shown)} more" if len(e["missing"]) > len(shown)
                  else "") if shown else ""))
    if e["held"]:
        text += ("; held wider by their mechanism's move within the run, which more rounds do "
                 "not narrow: " + ", ".join(f"{outside(m['row'])} ±{100 * m['half_width']:.1f}%"
                                            for m in e["held"][:8]))
    if e["missing"] and e["more_rounds"] is not None:
        when = (f"about {e['more_rounds']} more rounds, at most {e['more_s']:.0f} s at this "
                "run's pace" if e.get("more_s") is not None else
                f"about {e['more_rounds']} more rounds")
        text += (f". To meet {pct} at those sizes: `make report REPORT_ARGS='--target "
                 f"{100 * target:g}%'` ({when}; the rounds past the plan measure the wide sizes "
                 "alone, and the run's three-minute plan gives way, up to `--budget`)")
    doc.p(text + ".")


def wide_rows_text(sw, st, t):
    """The async vs_ref rows a --target sweep left wider than its target, each with why: held
    by its mechanism's move within the run, its interval holding the VM exit's move between
    the sweep and the run's end (analyse/exitdrift.widen_sweep), or the rounds the budget
    allowed."""
    if not st.get("missing"):
        return ""
    held = set(st.get("held") or [])
    out = []
    for run in sw.get("runs") or []:
        if run.get("mode") != "async":
            continue
        for row in run.get("rows") or []:
            name = f"{run.get('variant')} {row.get('buffsize')} B"
            if name not in st["missing"]:
                continue
            vr = row.get("vs_ref") or {}
            h = (vr["ci_high"] - vr["ci_low"]) / 2 / vr["value"] if vr.get("value") else None
            if name in held:
                why = "its mechanism's move within the run holds it there"
            elif ((row.get("undisturbed") or {}).get("exit_drift")):
                why = "it holds the VM exit's move between the sweep and the run's end"
            else:
                why = "the rounds its budget allowed"
            out.append(f"{outside(name)} ±{100 * h:.1f}% ({why})" if h is not None
                       else f"{outside(name)} ({why})")
    return (f" Still wider than ±{100 * t:g}%: " + "; ".join(out[:12])
            + (f"; and {len(out) - 12} more" if len(out) > 12 else "") + ".") if out else ""


def _stopped_early(doc, sw):
    """One line when a sweep stopped at the report's time for it (measure.sweep.Together), or
    a signal cut it (its rounds so far kept)."""
    cut = sw.get("interrupted") or {}
    if cut:
        doc.p(f"This sweep was interrupted by {outside(cut.get('signal') or 'a signal')} after "
              f"{cut.get('rounds')} of its {sw.get('rounds')} rounds: its figures rest on the "
              "rounds measured before the signal, kept in its file.")
    if sw.get("stopped") == "deadline":
        doc.p(f"This sweep stopped after {sw.get('rounds_done')} of its {sw.get('rounds')} "
              "rounds, at the report's time for the sweeps: its intervals are as wide as those "
              "rounds allow.")
    t = sw.get("target")
    if not t and sw.get("runs"):
        missed_text(doc, sw)
    if t and sw.get("runs"):
        # --target (tw run, tw sweep): measured past the plan at the sizes still wide
        st = sweeps.vs_ref_status(sw, t)
        if st["judged"]:
            why = {"target": "every row within it",
                   "reach": "the rows left are held wider by their mechanism's move within the "
                            "run, which more rounds do not narrow",
                   "budget": f"its budget of {sw.get('budget_s') or 0:.0f} s ended"}.get(
                sw.get("stopped"), sw.get("stopped") or "not said")
            doc.p(f"Measured to a target of ±{100 * t:g}% (`--target`): {st['met']} of "
                  f"{st['judged']} async `vs_ref` rows within it after {sw.get('rounds_done')} "
                  f"rounds, at the sizes still wide past the mode's {sw.get('rounds')}; "
                  f"stopped: {why}." + wide_rows_text(sw, st, t))


def _sessions(doc, sw):
    """One line when a sweep was measured in sessions at two moments of the run
    (measure.sweep.Together) and what the move between them did to its async rows' intervals
    (analyse.sweeps._across_sessions)."""
    ss = [x for x in sw.get("sessions") or [] if x.get("rounds")]
    if len(ss) < 2:
        return
    named = [(run.get("variant"), row) for run in sw.get("runs") or []
             if run.get("mode") == "async" for row in run.get("rows") or []
             if (row.get("undisturbed") or {}).get("sessions")]
    rows = [row for _, row in named]
    moved = [row["undisturbed"] for row in rows if row["undisturbed"]["sessions"]["resolved"]]
    big = max(((max(u["sessions"]["figures"]) - min(u["sessions"]["figures"])) / u["value"]
               for u in moved), default=None)
    # which rows moved, and by how much, the largest first (issue 62)
    which = sorted(((f[-1] / f[0] - 1, v, row.get("buffsize")) for v, row in named
                    for f in [row["undisturbed"]["sessions"]["figures"]]
                    if row["undisturbed"]["sessions"]["resolved"] and f[0]),
                   key=lambda x: -abs(x[0]))
    shown = ", ".join(f"{outside(v)} {b} B {100 * m:+.1f}%" for m, v, b in which[:8]) + (
        f" and {len(which) - 8} more" if len(which) > 8 else "")
    chance = f"chance alone gives about {0.05 * len(rows):.1f}"
    def rounds(a, b):
        return f"rounds {a + 1}-{b}" if b - a > 1 else f"round {b}" if b > a else "no round"
    parts = ", ".join(f"{rounds(*x['rounds'])} ({x['seconds']:.0f} s)" for x in ss)
    doc.p(f"Its rounds were measured in {len(ss)} sessions of this run, "
          f"{ss[-1]['start_s'] - ss[0]['start_s']:.0f} s apart: {parts}. A copy-bound row moves "
          "with the host's memory in states that last tens of seconds, which rounds of one "
          "moment all share; so each async row's interval holds its move between the sessions. "
          + (f"Here no move is in them: a session needs {sweeps.SESSION_MIN_ROUNDS} rounds for a "
             "figure of its own." if not rows else
             f"{len(moved)} of the {len(rows)} async rows with rounds in both moved more than "
             f"their sampling errors explain at the 95% level ({chance}), by up to "
             f"{100 * big:.1f}% (second session against the first: {shown}). `vs_ref`, each "
             "row over the other mechanisms at its size in the same rounds, cancels the move "
             "they share and carries no such term." if moved else
             f"None of the {len(rows)} async rows with rounds in both moved more than their "
             f"sampling errors explain at the 95% level ({chance})."))


def _host_state(doc, sw):
    """One line on the host's state over a sweep (analyse.sweeps.host_summary): the matrix's
    probe between its runs, and how many async rows' figures of their fast runs alone agree
    with the ones they lead with, over every run."""
    h = sw.get("host") or {}
    if not h.get("probes"):
        if (sw.get("host_state") or {}).get("why"):
            doc.p(f"The host's state over this sweep: unknown ({outside(h.get('why'))}).")
        return
    doc.p(f"The host's state over this sweep: the matrix's probe (the reference cell) ran "
          f"{h['probes']} times between its runs and found the host fast in "
          f"{100 * h['fast_share']:.0f}% of them. The figures lead over every run. Of the "
          f"{h['undisturbed_rows']} async rows, {h['undisturbed_fast']} had {h['min_runs']} "
          f"runs or more in the fast state, and the undisturbed figure of those alone fell "
          f"within the row's interval in {h['undisturbed_agree']}; `vs_ref` paired within one "
          f"quiet burst (the row and every other mechanism at its size) could be had for "
          f"{h['vs_ref_paired']}, and agreed in {h['vs_ref_agree']} (the JSON's `host` in each "
          "row). The probe is a null system call: it sees what slows the CPU, not what slows "
          "a copy through memory, and left to the fast runs alone the figures reproduced worse "
          "here (docs/sweeps.md, \"The host's state\").")

def _exit_rows(doc, sw):
    """One line when the sweep's rows that pay VM exits hold the exit's move over the run
    (analyse.exitdrift.widen_sweep)."""
    rows = [(run["variant"], row["undisturbed"]["exit_drift"]) for run in sw.get("runs") or []
            for row in run.get("rows") or []
            if (row.get("undisturbed") or {}).get("exit_drift")]
    if not rows:
        return
    names = sorted({v for v, _ in rows})
    sh = max(abs(d["shift_ns"]) for _, d in rows)
    doc.p(f"The {len(rows)} async rows of {' and '.join(names)} pay a VM exit a call; like the "
          "matrix's cells their intervals hold the exit's move over the run, widened by it "
          f"(±{sh:.0f} ns a call) on each side.")


def _host_clock(doc, sw):
    """One line on the host's own speed during a sweep (analyse.sweeps.host_clock): a
    figure in ns moves with it, and it is measured apart from every cell."""
    c = sw.get("host_clock")
    if not c:
        return
    u = c.get("undisturbed") or {}
    if not c.get("supported") or u.get("value") is None or u.get("ci_low") is None:
        doc.p(f"The host's speed for user code during this sweep: unknown "
              f"({outside(c.get('why') or u.get('why') or 'no interval')}).")
        return
    drift = ("" if c.get("drift_rel") is None else
             f", and the figure drifted {100 * c['drift_rel']:.1f}% between the run's halves")
    doc.p(f"The host's speed for user code during this sweep (`hostclock`, a chain of "
          f"multiply-adds with no kernel entry, once per round): {u['value']:.4f} ns per "
          f"multiply-add [{u['ci_low']:.4f}, {u['ci_high']:.4f}]. Its fastest batch per round "
          f"ranged {100 * c['wander_low']:+.1f}% to {100 * c['wander_high']:+.1f}% about their "
          f"median over {c['rounds']} rounds{drift}. Every figure in ns below moves with the "
          "host's speed; `tw sweep --selfcheck` sets two runs' moves beside it.")


def sec_seed_sweep(doc, data, pdir, seed_ref):
    doc.h(2, "The seed's sweep (timewrite, BUFFSIZE 256 B … 128 KiB)")
    if missing(doc, data, "sweep_seed"):
        return
    sw = data["sweep_seed"]
    doc.p(f"{sw.get('input_bytes')} bytes per pass, {sw.get('reps')} repetitions, output on "
          f"{outside(sw.get('fstype'))} ({outside(sw.get('outfile_dir'))}). Real time per write call:")
    _stopped_early(doc, sw)
    _sessions(doc, sw)
    _host_state(doc, sw)
    _exit_rows(doc, sw)
    _host_clock(doc, sw)
    _sweep_table(doc, sw, "Seed sweep")
    _sweep_table(doc, sw, "Seed sweep", key="wait_s", unit="ms", scale=1e3)
    doc.plot(plots_module().plot_sweep_per_byte(sw, pdir), "Real time per byte vs BUFFSIZE, async and sync (log axes)")
    doc.plot(plots_module().plot_acc(sw, pdir, seed_ref),
             "acc = (t_sync − t_async)/t_sync per BUFFSIZE; grey dashed lines are the seed's platforms (theirs)")
    accrows = []
    for v in sorted({r["variant"] for r in sw.get("runs", [])}):
        s = next((r for r in sw["runs"] if r["variant"] == v and r["mode"] == "sync"), None)
        a = next((r for r in sw["runs"] if r["variant"] == v and r["mode"] == "async"), None)
        if s and a and s.get("rows") and a.get("rows"):
            accrows.append([v] + [f"{x:.2f}" for _, x in plots_module().acc_series(s["rows"], a["rows"])])
    sizes = sorted({row["buffsize"] for r in sw.get("runs", []) for row in r.get("rows", [])})
    if accrows:
        doc.table(["variant"] + [str(s) for s in sizes], accrows)
    doc.h(3, "Fit T(size) = a_mech + b·size and the knee")
    _stage_fits(doc, sw)
    doc.plot(plots_module().plot_fit(sw, pdir), "Per-call write cost with the fitted lines (async) and the knee")


def _stage_fits(doc, sw):
    """The sweep's robust weighted fits and knee (twtools.analyse.fits)."""
    def ci(x):
        return (f"{x['value']:.4g} [{x['ci_low']:.4g}, {x['ci_high']:.4g}]"
                if isinstance(x, dict) and x.get("value") is not None else "—")
    rows = []
    for f0 in sw["fits"]:
        for f in (f0, f0.get("copy")):
            if f:
                rows.append([f0["variant"], f0.get("mode"),
                             f"{f.get('figure') or 'typical'}, {f.get('regime') or 'every size'}",
                             ci(f.get("a_ns")), ci(f.get("b_ns_per_byte")),
                             f"{f['r2']:.4f}" if f.get("r2") is not None else "—",
                             f.get("n_points") if "a_ns" in f else f"no fit: {outside(f.get('why'))}"])
    doc.table(["variant", "mode", "figure, sizes", "a (ns per call) [95% CI]",
               "b (ns per byte) [95% CI]", "r²", "points / why"], rows)
    if any(f.get("copy") for f in sw["fits"]):
        doc.p("A write's time is two lines, not one: up to a page each byte goes into one "
              "page-cache page, from two pages the copy runs over whole pages at a lower cost "
              "per byte. The first line's intercept a is the call's constant cost, where the "
              "entry mechanisms differ; the knee lies on the second line.")
    knees = sw.get("knee") or {}
    if isinstance(knees, dict) and ("value" in knees or "why" in knees) and "async" not in knees:
        knees = {"async": knees}
    for mode, k in sorted(knees.items()):
        if not isinstance(k, dict):
            continue
        if k.get("value") is None:
            doc.p(f"Knee ({mode}): unknown ({outside(k.get('why')) or 'not computed'}).")
            continue
        doc.p(f"Knee ({mode}): mechanism differences (Δa = {k.get('delta_a_ns', float('nan')):.0f} ns, "
              f"{k.get('fastest')} to {k.get('slowest')}) drop below {100 * k.get('threshold', 0.01):.0f}% "
              f"of a call from about **{k['value']:.0f} bytes** per write"
              + (f" [{k['ci_low']:.0f}, {k['ci_high']:.0f}]" if k.get("ci_low") is not None else "")
              + (" — extrapolated beyond the largest size measured "
                 f"({k.get('measured_up_to')} B). It cannot be measured inside the seed's "
                 "sweep: a write that large needs an input several times its size, and the "
                 "seed's sizes stop at 128 KiB with an input of 256 KiB (1.31 MB, 5120 writes "
                 "of 256 B, with --long)"
                 if k.get("extrapolated") else "") + ".")
    if sw.get("vs_ref_of"):
        doc.p(_vs_ref_sentence(sw))


def _vs_ref_sentence(sw):
    """What vs_ref is and the knee on it: the size at which the slowest mechanism's excess
    over the fastest (measured at the same size, in the same rounds) falls to the threshold."""
    kv = sw.get("knee_vs_ref") or {}
    thr = 100 * (kv.get("threshold") or 0.01)
    last = kv.get("excess_at_largest") or {}
    pair = f"{kv.get('slowest')} over {kv.get('fastest')}"
    if kv.get("value") is None:
        knee = f"the knee is unknown ({outside(kv.get('why')) or 'not computed'})"
    elif kv.get("measured"):
        knee = (f"the excess of {pair} is below {thr:.0f}% from {kv['value']:.0f} bytes, as "
                "measured")
    else:
        knee = (f"the excess of {pair} falls to {thr:.0f}% at about {kv['value']:.0f} bytes"
                + (f" [{kv['ci_low']:.0f}, {kv['ci_high']:.0f}]" if kv.get("ci_low") is not None
                   else "")
                + (" (extrapolated on the line through 1/excess" if kv.get("extrapolated")
                   else " (on the line through 1/excess")
                + (f"; at {last['size']} B it is {100 * last['value']:.1f}% "
                   f"[{100 * last['ci_low']:.1f}, {100 * last['ci_high']:.1f}]" if last else "")
                + ")")
    return (f"Each async cell also has `vs_ref`: its undisturbed figure over "
            f"{outside(sw['vs_ref_of'])}, so that a move of the host between two runs, "
            "the same for every mechanism at a size, cancels (docs/sweeps.md). On it "
            f"{knee}; each mechanism's line is in the fits' CSV (`figure` vs_ref).")


def sec_tlpi(doc, data, pdir, tlpi_ref):
    doc.h(2, "TLPI sweep (Table 13-2)")
    if missing(doc, data, "sweep_tlpi"):
        if tlpi_ref:
            doc.plot(plots_module().plot_tlpi(None, pdir, tlpi_ref), "TLPI Table 13-2 (theirs) only")
        return
    sw = data["sweep_tlpi"]
    doc.p(f"{sw.get('input_bytes')} bytes per pass here (TLPI wrote far more; compare shapes, "
          "not absolute seconds).")
    _stopped_early(doc, sw)
    _sessions(doc, sw)
    _host_state(doc, sw)
    _exit_rows(doc, sw)
    _host_clock(doc, sw)
    _sweep_table(doc, sw, "TLPI sweep")
    if tlpi_ref:
        doc.p("TLPI's published table (theirs: Linux 2.6.30, ext2, average of 20 runs):")
        doc.table(["buffer", "elapsed s", "total CPU s", "user s", "system s"],
                  [[r["buf_size"], r["elapsed_s"], r["total_cpu_s"], r["user_cpu_s"], r["system_cpu_s"]]
                   for r in tlpi_ref])
    else:
        doc.p(f"TLPI's table is absent ({seedref.where(seedref.TLPI)}).")
    doc.plot(plots_module().plot_tlpi(sw, pdir, tlpi_ref), "Time relative to the largest buffer: this machine vs TLPI (theirs)")


def sec_writev(doc, data):
    doc.h(2, "writev() vs write()")
    if missing(doc, data, "writev"):
        return
    rows, whys = [], set()
    for r in data["writev"].get("rows", []):
        if not r.get("supported"):
            rows.append([r["bits"], "—", "—", "—", "—", "unknown", "—", outside(r.get("reason"))])
            continue
        ratio = r.get("lead") or r.get("ratio")
        und = (ratio or {}).get("figure") == "undisturbed"
        w = r.get("write_ns_undisturbed") if und else r.get("write_ns")
        v = r.get("writev_ns_undisturbed") if und else r.get("writev_ns")
        if und:
            w, v = sweeps.as_summary(w), sweeps.as_summary(v)
        elif r.get("lead_why"):
            whys.add(r["lead_why"])
        rows.append([r["bits"], r["n_buffers"], r["size"], fmt_s(stats.scale(w, 1e-3), "µs"),
                     fmt_s(stats.scale(v, 1e-3), "µs"),
                     (fmt(ratio, "×") + ("" if und else " †")) if ratio else "unknown",
                     "writev" if ratio and ratio.get("ci_high") is not None and ratio["ci_high"] < 1 else
                     "write" if ratio and ratio.get("ci_low") is not None and ratio["ci_low"] > 1 else "tie",
                     r.get("iov_max")])
    doc.p("N write() calls of size S against one writev() of N buffers; ratio = writev/write "
          "(below 1: writev wins, beyond its CI).")
    doc.p(FIGURE_WHY["writev"] + "".join(f" † typical: {w}." for w in sorted(whys)))
    doc.table(["bits", "N", "S (B)", "N × write", "writev", "ratio", "winner", "IOV_MAX"], rows)


def sec_stdio(doc, data, costs_ref):
    doc.h(2, "stdio vs raw write()")
    if missing(doc, data, "stdio"):
        return
    st = data["stdio"]
    doc.p(f"{st.get('bytes')} one-byte writes per run. " + FIGURE_WHY["stdio"])
    doc.table(["bits", "method", "real", "user", "sys", "write calls"],
              [[r["bits"], r["method"], fmt_s(r.get("real_s")), fmt_s(r.get("user_s")), fmt_s(r.get("sys_s")),
                r.get("calls") if r.get("calls") is not None else "unknown (not counted)"]
               for r in st.get("rows", [])])
    if costs_ref:
        doc.p("The seed's blog figures (theirs):")
        doc.table(["source", "platform", "operation", "calls", "sys s", "real s", "µs per call"],
                  [[r["source"], r["platform"], r["operation"], r.get("calls"), r.get("sys_s"),
                    r.get("real_s"), r.get("per_call_us")] for r in costs_ref])


def sec_attribution(doc, data, pdir):
    doc.h(2, "Attribution: entry/exit, post-return penalty, body, waiting")
    if missing(doc, data, "attribution"):
        return
    att = data["attribution"]
    if att.get("method") or att.get("notes"):
        doc.p(f"Method: {outside(att.get('method')) or 'not recorded'}."
              + (" " + " ".join(map(outside, att["notes"])) if isinstance(att.get("notes"), list) else
                 f" {outside(att['notes'])}" if att.get("notes") else ""))
    doc.p(FIGURE_WHY["attribution"])
    unsup = [r for r in att.get("rows", []) if r.get("supported") is False]
    rows = [r for r in att.get("rows", []) if r.get("supported") is not False]
    doc.table(["variant", "op", "size", "total", "loop (removed)", "entry/exit", "post-return penalty",
               "body (of which CPU)", "waiting", "residual", "consistent", "note"],
              [[r["variant"], r["op"], r.get("size"), fmt(r.get("total_ns")), fmt(r.get("loop_ns")),
                fmt(r.get("entry_exit_ns")) + (f" ({r['entry_exit_shape']})" if r.get("entry_exit_shape") else ""),
                fmt(r.get("penalty_ns")) if r.get("penalty_ns") else "—",
                fmt(r.get("body_ns")) + (f" (CPU {fmt(r['body_cpu_ns'])})" if r.get("body_cpu_ns") else ""),
                fmt(r.get("waiting_ns")) if r.get("waiting_ns") else "— (no waiting in this op)",
                fmt(r.get("residual_ns")),
                {True: "yes", False: "**no**", None: "unknown"}[r.get("consistent")], outside(r.get("note"))]
               for r in rows])
    if unsup:
        doc.p("Unsupported here: " + "; ".join(sorted({f"{r['variant']} ({outside(r.get('reason')) or outside(r.get('note')) or 'no reason'})"
                                                       for r in unsup})) + ".")
    bad = [f"{r['variant']} {r['op']}" for r in rows if r.get("consistent") is False]
    unk = [f"{r['variant']} {r['op']}" for r in rows if r.get("consistent") is None]
    doc.p("Consistency: the parts should add up to the total within the residual's tolerance. "
          + (f"Inconsistent: {', '.join(bad)} — do not read their parts as a decomposition. " if bad else
             "Every row with all parts known adds up. ")
          + (f"Not checkable (a part is blind): {', '.join(unk)}." if unk else ""))
    doc.plot(plots_module().plot_attribution({"rows": rows}, pdir),
             "Where a call's time goes, per mechanism (stacked medians; for O_SYNC writes the "
             "body is split into kernel CPU work and waiting for the device)")


def sec_latency(doc, data, pdir):
    doc.h(2, "Per-call write latency, sync vs async")
    if missing(doc, data, "latency"):
        return
    runs = data["latency"].get("runs", [])
    doc.table(["variant", "mode", "BUFFSIZE", "calls", "p50 ns", "p90 ns", "p99 ns", "note"],
              [[r["variant"], r["mode"], r.get("buffsize"), r.get("count"),
                *(f"{(r.get('percentiles') or {}).get(p):.0f}" if (r.get("percentiles") or {}).get(p) is not None
                  else "unknown" for p in ("p50", "p90", "p99")), outside(r.get("why"))] for r in runs])
    doc.plot(plots_module().plot_latency(data["latency"], pdir), "Write latency histograms (log2 bins), sync vs async")


def sec_observer(doc, data):
    doc.h(2, "Observer effect: what each tracer adds")
    if missing(doc, data, "observer"):
        return
    doc.p(FIGURE_WHY["observer"])
    doc.table(["variant", "op", "tracer", "ns per call", "added ns per call", "available / why"],
              [[r["variant"], outside(r["op"]), outside(r["tracer"]),
                outside(fmt(r.get("ns_per_call"))),
                outside(fmt(r.get("added_ns"))) if r.get("added_ns") else "— (baseline)",
                "yes" if r.get("available") else f"no: {outside(r.get('why'))}"] for r in data["observer"].get("rows", [])])


def sec_tracers(doc, data):
    doc.h(2, "Tracer cross-checks")
    if missing(doc, data, "tracers"):
        return
    tr = data["tracers"]
    rows = tr.get("crosscheck") or []
    if rows:
        names = []
        for r in rows:
            names += [k for k in r["by_tracer"] if k not in names]
        doc.p("write() calls to the output file counted by each instrument for the same workload "
              f"(expected: {rows[0].get('expected')}):")
        doc.table(["variant", "expected", "timewrite"] + names + ["agree"],
                  [[r["variant"], r.get("expected"),
                    "—" if r.get("timewrite") is None else r["timewrite"]]
                   + ["not traced" if r["by_tracer"].get(n) is None else r["by_tracer"][n] for n in names]
                   + [{True: "yes", False: "**no**"}.get(r["agree"], outside(r.get("why")) or "not checked")]
                   for r in rows])
    for t_ in tracers.plugins():
        for caption, headers, trows in t_.tables(tr):
            doc.p(caption + ":")
            # A plug-in's rows carry what its tracer printed and the stage file kept.
            doc.table(headers, [[outside(c) if isinstance(c, str) else c for c in r]
                                for r in trows])


def sec_seed_beside(doc, data, pdir, seed_ref):
    doc.h(2, "The seed's published rows beside this machine")
    if not seed_ref:
        doc.p(f"The seed's table is absent ({seedref.where()}).")
        return
    small = min(r["bufsize"] for r in seed_ref)
    rows = [[f"{r['platform']} (seed, theirs)", r["mode"], r["bufsize"], r["loops"], r["user_s"], r["sys_s"],
             r["real_s"], f"{r['real_s'] / r['loops'] * 1e6:.1f}" if r["real_s"] else "below tick"]
            for r in seed_ref if r["bufsize"] == small]
    sw = data.get("sweep_seed") or {}
    for run in sorted(sw.get("runs", []), key=lambda r: (r["variant"], r["mode"])):
        row = next((x for x in run.get("rows", []) if x["buffsize"] == small), None)
        if row:
            rows.append([f"{run['variant']} (this machine)", run["mode"], small, row.get("calls"),
                         fmt_s(row.get("user_s")), fmt_s(row.get("sys_s")), fmt_s(row.get("real_s")),
                         f"{row['ns_per_call']['median'] / 1e3:.2f}" if (row.get("ns_per_call") or {}).get("median") else "unknown"])
    doc.p(f"BUFFSIZE {small} B. The seed's times come from `times()` with 10 ms ticks and one run per row; "
          "their platforms used different inputs (calls column).")
    doc.table(["platform", "mode", "BUFFSIZE", "calls", "user s", "sys s", "real s", "µs per call"], rows)
    doc.plot(plots_module().plot_seed_beside(sw, pdir, seed_ref),
             "Real time per write call: seed platforms (dashed, theirs) beside this machine")


# -- build -----------------------------------------------------------------------------------

def sec_warnings(doc, v, body, data):
    """Hyperfine-style: what is shaky, what was blind, and what to do next."""
    doc.h(2, "Warnings")
    ws = list(v.get("warnings") or [])
    fp = data.get("fingerprint") or {}
    if fp and fp.get("root") is False:
        blind = [i["name"] for i in fp.get("instruments") or [] if not i.get("works")]
        ws.append("This run was not root, so tracing was blind: "
                  + (", ".join(blind) if blind else "bpftrace and perf tracepoints")
                  + " could not run, and the attribution bodies, latency histograms and tracer "
                  "counts that need them are unknown. Run `sudo ./tw-make report` (or `make "
                  "report` as root) to see them.")
    ws += body.warnings
    if ws:
        for w in ws:
            doc.blocks.append(("warn", w))
    else:
        doc.p("None: every cell is stable and every stage ran.")


def build_doc(results_dir):
    """(document, verdict, data) of a results directory; its plots written into DIR/plots,
    drawn side by side with the rest of the work (plots.rendering).  The directory is read
    and analysed first: one that is refused (a damaged or oversized stage file) is refused
    before matplotlib is imported (0.43 s for such a `tw report` here, now 0.17 s)."""
    results_dir = Path(results_dir)
    data = results.load(results_dir)
    with plots_module().rendering():
        return _build_doc(results_dir, data)


def _build_doc(results_dir, data):
    seed_ref = seedref.read(seedref.SEED_RUNS)
    tlpi_ref = seedref.read(seedref.TLPI)
    costs_ref = seedref.read(seedref.COSTS)
    v = verdict_mod.decide(data, seed_ref)
    pdir = results_dir / "plots"
    doc = Doc()
    sec_title(doc, data)
    sec_verdict(doc, v, data)
    walls_line = present_walls.first_line(data.get("walls"))
    if walls_line:
        doc.p(walls_line)
    sec_matrix(doc, data, pdir)
    sec_findings(doc, data)
    body = Doc()
    sec_host(body, data, pdir)
    sec_verdict_detail(body, v)
    sec_field_example(body, data)
    present_census.section(body, data)
    present_walls.section(body, data)
    sec_percall(body, data, pdir)
    present_causes.section(body, data)
    sec_attribution(body, data, pdir)
    sec_fingerprint(body, data)
    atlas.section(body, data)
    sec_seed_sweep(body, data, pdir, seed_ref)
    sec_tlpi(body, data, pdir, tlpi_ref)
    sec_writev(body, data)
    sec_stdio(body, data, costs_ref)
    sec_latency(body, data, pdir)
    sec_observer(body, data)
    sec_tracers(body, data)
    sec_seed_beside(body, data, pdir, seed_ref)
    sec_warnings(doc, v, body, data)
    doc.blocks += body.blocks
    sec_provenance(doc, data, results_dir)
    return doc, v, data


# What `tw report` writes into a results directory, the one list (cli's preflight refuses a
# link or a misplaced directory among them before anything is written); the directories
# among them hold files only.
OUTPUTS = ("report.md", "report.html", "verdict.json", "causes.json", "digest.json", "plots",
           "tables")
OUTPUT_DIRS = ("plots", "tables")


def write_digest(results_dir):
    """DIR/digest.json (analyse/rundigest.py), so that an old directory gets one too; a run
    without a bench stage simply has none, and one whose rounds cannot be digested says why in
    one line (a fleet collecting it then finds no digest, and the run's own stderr the cause)."""
    from ..analyse import rundigest
    from ..core.ui import DataError
    try:
        rundigest.write(results_dir)
    except DataError as e:
        if not str(e).startswith(("percall.json is absent", "fingerprint.json is absent")):
            ui.warn(f"no digest.json: {e}", "a fleet collecting this run cannot compare it")


def build_report(results_dir, formats=("md", "html")):
    """Write DIR/verdict.json, DIR/plots/*, DIR/report.<fmt>; return the first report's path."""
    # Only a results directory is written into, and only through regular files: a copied
    # directory may carry a symbolic link where report.md goes.
    results_dir = results.require_results_dir(results_dir)
    files.refuse_links(results_dir, OUTPUTS, OUTPUT_DIRS)
    doc, v, data = build_doc(results_dir)
    files.write_json(results_dir / "verdict.json", v)
    if data.get("causes"):
        files.write_json(results_dir / "causes.json", data["causes"])
    write_digest(results_dir)
    for table in tables.all_tables(data):
        csv_export.write(table, results_dir / "tables", "csv")
    return export(doc, results_dir, "report", formats)
