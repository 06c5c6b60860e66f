"""The stage commands: `tw sweep`, `tw trace`, `tw attribute`, `tw observer`, `tw legs`.

Each measures one stage into a results directory (raw samples only), then analyses it and
prints its table(s) through the one table exporter (--format text, csv, md or json).
"""
import socket
import time
from pathlib import Path

from ..analyse import attribution as a_attribution, legs as a_legs, observer as a_observer, \
    percall, sweeps, tracers as a_tracers
from ..core import files, paths, ui
from ..machine import registry
from ..measure import attribution, bench, legs, observer, sweep, trace
from ..present import export, sweepcheck as present_sweepcheck, tables
from . import options

SWEEPS = {"seed": (sweep.seed_sweep, "sweep_seed"), "tlpi": (sweep.tlpi_sweep, "sweep_tlpi"),
          "writev": (sweep.writev_bench, "writev"), "stdio": (sweep.stdio_bench, "stdio")}


def _out(args, stage):
    if args.out:
        return Path(args.out)
    # A new directory of its own (microseconds and the pid in its name, made with mkdir(2)):
    # two stage commands started in the same second must not share one.
    return files.new_directory(paths.RESULTS, f"{stage}-{socket.gethostname()}")


def add_arguments(p, name):
    quick = {"sweep": "small inputs, few reps (all four sweeps in ~15 s)",
             "trace": "a 23-write workload", "attribute": "2 traced runs per cell",
             "observer": "5 batches per run, the headline's mechanisms alone",
             "legs": "8 blocks of the headline's mechanisms (the 64-bit syscall, the int "
                     "0x80s, the 32-bit fast entries), 5 batches of 100 calls"}[name]
    options.add_mode_arguments(p, quick, "more repetitions for tighter intervals")
    p.add_argument("--out", metavar="DIR", type=options.fresh_dir, help="results directory (default: a new one under results/)")
    p.add_argument("--variants", metavar="V,V", type=options.names_of(registry.names(), "variant"),
                   help="variants (default: all)")
    p.add_argument("--format", choices=sorted(export.EXPORTERS), default="text",
                   help="how to print the tables (default text)")
    if name == "legs":
        p.add_argument("--shape", choices=("ret", "jmp"), default="ret",
                       help="the stub returns by ret, as libc's wrappers (default), or leaves by "
                            "an indirect jump, which no return prediction follows")
        options.add_target_arguments(
            p, "keep adding blocks past the mode's until every leg, total and tracer's cost is "
               "within PCT (e.g. 2%%) by Stein's two-stage rule over the blocks that met the "
               "host's fast state, or --budget ends",
            "with --target, when to stop trying (90s, 10m, 1h; default 10m)")
    if name == "sweep":
        p.add_argument("--only", metavar="LIST", type=options.names_of(SWEEPS, "sweep"),
                       default=list(SWEEPS), help="comma list of: seed, tlpi, writev, stdio (default: all)")
        p.add_argument("--selfcheck", action="store_true",
                       help="the benchmark of the sweeps: two back-to-back `tw run --only "
                            "doctor,variants,seed-sweep,tlpi-sweep` runs (in --out DIR/run1 and "
                            "run2), and how their cells reproduce, each figure beside its target")
        p.add_argument("--json", action="store_true", help="with --selfcheck: print the figures "
                                                           "as JSON")
        options.add_target_arguments(
            p, "the seed and TLPI sweeps: keep adding runs past the mode's, at the sizes still "
               "wide, until every async vs_ref row's 95%% half-width is within PCT (e.g. 2%%), "
               "or more runs narrow nothing, or --budget ends (a sweep of one mechanism, "
               "without vs_ref: every async cell's undisturbed figure, by Stein's two-stage "
               "rule); with --selfcheck, each tw run measures so",
            "with --target, when each sweep stops trying (90s, 10m, 1h; default 10m)")
        p.add_argument("--reps", type=options.int_range(1, 100000), metavar="N",
                       help="override the mode's repetitions (for seed and tlpi: the runs "
                            "of timewrite per cell, each timing its passes)")


def legs_judge(target):
    """measure.legs's judge for --target: (met, the progress line's words) of the document so
    far: figures within the target, the blocks that met the host's fast state, and the time the
    rule's plan still asks for at the fast share seen so far."""
    from ..analyse import sequential

    def judge(doc, per_block):
        a = a_legs.analyse(doc)
        st = a_legs.target_status(a, target)
        fast = len(a.get("fast_blocks") or [])
        words = (f": {st['met']} of {st['judged']} figures within ±{100 * target:g}%, "
                 f"{fast} of {doc['blocks']} blocks in the host's fast state")
        if st["first_stage_incomplete"]:
            words += (f"; {st['first_stage_incomplete']} still in the rule's first stage "
                      f"({sequential.N0_MIN} fast values)")
        elif st["more_fast_blocks"] and fast:
            left = st["more_fast_blocks"] * doc["blocks"] / fast * per_block
            words += f", about {left:.0f} s left at that share"
        return st["met"] == st["judged"] and st["judged"] > 0, words
    return judge


def legs_known(variant="64-syscall"):
    """measure.legs's `known` for a whole run: whether the reference's three legs are known
    in the blocks so far (the issue on kernels side by side asks them of every default and
    quick report), and the progress line's words when they are not."""
    def known(doc):
        left = a_legs.unknown_legs(a_legs.analyse(doc), variant)
        return not left, ("; " + variant + "'s " + ", ".join(k for k, _ in left)
                          + " still unknown") if left else ""
    return known


# sweep_judge: rows held by their mechanism's move are measured on until the sweep has this many
# times its mode's rounds.
HELD_FINAL = 2


def sweep_judge(target):
    """measure.sweep's judge for --target: (met, the progress line's words, the sizes more
    rounds should measure) of a sweep so far.

    A sweep with vs_ref (two async mechanisms or more) is judged on it, the figure it leads
    with between runs (analyse.sweeps.vs_ref_status): met once every vs_ref row is within the
    target; the sizes still wide are the ones more rounds measure.  A row whose mechanism's
    move within the run alone is as wide as the target is held there while that move holds;
    until the sweep has HELD_FINAL times its mode's rounds its size is measured on (a move
    that filled one of the four stretches of a short run, a burst of the host's, is diluted
    by more: on the AMD EPYC guest a seed row held at ±2.4% after 36 rounds was not after 37),
    then no more rounds are run for it (met False with no sizes: measure.sweep stops,
    `stopped` "reach").  The absolute figures' count by Stein's rule
    (analyse.sweeps.target_status) is said beside it.  A sweep without vs_ref is judged on its
    absolute figures, every size measured."""
    from ..analyse import sequential

    def judge(obj):
        a = sweeps.sweep(obj)
        st = sweeps.target_status(a, target)
        vr = sweeps.vs_ref_status(a, target)
        pct = f"±{100 * target:g}%"
        absolute = f"{st['met']} of {st['judged']} async cells' absolute figures within {pct}"
        if vr["judged"]:
            words = f": {vr['met']} of {vr['judged']} vs_ref rows within {pct}"
            sizes = vr["wide_sizes"]
            if vr["held"]:
                words += (f" ({len(vr['held'])} held wider by their mechanism's move within the "
                          "run: " + ", ".join(f"{v} ±{100 * h:.1f}%"
                                              for v, h in sorted(vr["held_by"].items())))
                if (obj.get("rounds_done") or 0) < HELD_FINAL * (obj.get("rounds") or 0):
                    sizes = sorted(set(sizes) | set(vr["held_sizes"]))
                    words += (f"; measured on until {HELD_FINAL * obj['rounds']} rounds, in case "
                              "the move passes")
                else:
                    words += "; more rounds do not narrow them"
                words += ")"
            if sizes:
                words += "; more rounds at " + ", ".join(str(s) for s in sizes) + " B"
            words += f"; {absolute}"
            return vr["met"] == vr["judged"], words, sizes
        words = f": {absolute}"
        if st["first_stage_incomplete"]:
            words += (f"; {st['first_stage_incomplete']} still in the rule's first stage "
                      f"({sequential.N0_MIN} runs within {100 * sequential.SCREEN:.0f}% of "
                      "their lowest)")
        if st["wide"]:
            words += (f"; {st['wide']} with runs enough whose interval, the host's drift over "
                      "the sweep in it, is still wider")
        if st["more_runs"] and obj.get("rounds_done"):
            per = obj["seconds"] / obj["rounds_done"]
            words += (f", {'at least ' if st['first_stage_incomplete'] else 'about '}"
                      f"{st['more_runs'] * per:.0f} s more at the fast share seen")
        return st["met"] == st["judged"] and st["judged"] > 0, words, None
    return judge


def sweep_summary(name, raw, analysed, target):
    """tw sweep --target's closing line for one sweep: its vs_ref rows within the target (what
    the judge stops on when the sweep has them, sweep_judge), and its async cells' absolute
    figures by Stein's rule, after how many runs and why it stopped."""
    st = sweeps.target_status(analysed, target)
    vr = sweeps.vs_ref_status(analysed, target)
    line = f"{name}: target ±{100 * target:g}%: "
    if vr["judged"]:
        line += (f"{vr['met']} of {vr['judged']} vs_ref rows within it (median half-width "
                 f"±{100 * vr['median_half_width']:.2f}%), ")
    line += (f"{st['met']} of {st['judged']} async cells"
             + ("' absolute figures too" if vr["judged"] else " within it")
             + f" after {raw.get('rounds_done')} runs a cell in {raw['seconds']:.0f} s ("
             + _why_stopped(raw) + ")")
    if vr["judged"]:
        return line + _not_yet(vr["missing"], 5)
    return (line + (f"; at the fast share seen, at least "
                    f"{st['more_runs'] * raw['seconds'] / raw['rounds_done']:.0f} s more"
                    if st["missing"] and st["more_runs"] and raw.get("rounds_done") else "")
            + _not_yet(st["missing"], 5))


def legs_summary(raw, analysed):
    """tw legs's closing line: the blocks, how many met the host's fast state, the clock, and
    with --target how many figures reached it and why the stage stopped."""
    fast = analysed.get("fast_blocks")
    line = f"legs: {raw.get('blocks', 0)} blocks in {raw.get('seconds', 0):.0f} s"
    if fast is not None:
        line += f", {len(fast)} met the host's fast state (bpftrace attached)"
    clk = analysed.get("core_clock")
    if clk:
        line += f"; core clock up to {clk['ghz']:.2f} GHz, figures at that clock"
    t = raw.get("target")
    if t:
        st = a_legs.target_status(analysed, t)
        line += (f"; target ±{100 * t:g}%: {st['met']} of {st['judged']} figures within it ("
                 + _why_stopped(raw) + ")" + _not_yet(st["missing"], 6))
    return line


def _why_stopped(raw):
    """Why a --target run (a legs or sweep stage file) stopped, in the closing line's words."""
    return ("stopped at the target" if raw.get("stopped") == "target" else
            "stopped where more rounds narrow nothing: the rows left are held wider by their "
            "mechanism's move within the run" if raw.get("stopped") == "reach" else
            f"the budget of {raw.get('budget_s') or 0:.0f} s ended first")


def _not_yet(missing, shown):
    """': not yet a, b and N more' of the figures a --target run did not bring within it."""
    if not missing:
        return ""
    return ": not yet " + ", ".join(missing[:shown]) + (
        f" and {len(missing) - shown} more" if len(missing) > shown else "")


# tw run's stage of each sweep (meta.json names stages as tw run does)
SWEEP_STAGE = {"seed": "seed-sweep", "tlpi": "tlpi-sweep", "writev": "writev", "stdio": "stdio"}


def write_meta(out, mode, wanted, ran, cut=None, e=None, seconds=None):
    """meta.json for what a stage command measured (tw sweep, tw legs), as tw run writes it for
    its stages, so that `tw report` and `tw compare` read the directory: `ran` {stage:
    seconds} of the stages done; with cut and e (ui.Interrupted), the stage a signal cut, its
    seconds and the file that keeps its rounds so far, when it wrote one (measure/ marks it
    interrupted).  Returns the kept file's name, or None."""
    from ..analyse import results
    meta = results.new_meta(mode, wanted, "interrupted" if cut else
                            "complete" if set(ran) >= set(wanted) else "in-progress")
    for st, secs in ran.items():
        meta["stages"][st] = {"ok": True, "seconds": round(secs, 2)}
    kept = None
    if cut:
        kept = next((f"{stem}.json" for stem, st in results.STAGE_OF.items()
                     if st == cut and (Path(out) / f"{stem}.json").exists()), None)
        meta["stages"][cut] = {"ok": False, "interrupted": True, "seconds": round(seconds, 2),
                               "error": f"interrupted by {e.name}"}
        if kept:
            meta["stages"][cut]["kept"] = kept
        meta.update(signal=e.name, finished_utc=results.now_utc())
    try:
        files.write_json(Path(out) / "meta.json", meta)
    except OSError:
        if not cut:
            raise
    return kept


def interrupted_line(e, out, cut, kept):
    """The one line tw prints for a stage command a signal cut, saying what it kept."""
    e.message = (f"interrupted by {e.name} during {cut}; {out} is marked interrupted"
                 + (f"; {kept} keeps the rounds measured so far: "
                    + ui.command_line(["scripts/tw", "report", str(out)]) + " reads them"
                    if kept else " (no whole round was measured)"))


SELFCHECK_STAGES = "doctor,variants,seed-sweep,tlpi-sweep"


def selfcheck(args, out):
    """tw sweep --selfcheck: two tw run in turn, their sweeps compared (analyse.sweepcheck)."""
    import subprocess
    import sys
    from ..analyse import results, sweepcheck
    analysed, reports = [], []
    for n in (1, 2):
        d = out / f"run{n}"
        ui.progress(f"sweep: self-check run {n} of 2: tw run --only {SELFCHECK_STAGES} --out {d}")
        mode = [] if args.mode == "default" else [f"--{args.mode}"]
        mode += options.target_argv(args.target, args.budget)
        p = subprocess.run([sys.executable, str(paths.ROOT / "scripts" / "tw"), "run", *mode,
                            "--only", SELFCHECK_STAGES, "--out", str(d)])
        if p.returncode != 0:
            raise ui.UserError(f"tw run exited {p.returncode} in self-check run {n}",
                               f"see {d}/meta.json", code=ui.EXIT_FAILED)
        analysed.append({stem: sweeps.sweep(results.read_stage(d, stem)[0])
                         for stem in ("sweep_seed", "sweep_tlpi")})
        rep = d / "report.md"
        reports.append(files.read_regular(rep, inside=d).decode("utf-8", "replace")
                       if rep.exists() else "")
    f = sweepcheck.figures(*analysed, reports=reports)
    return options.selfcheck_end("sweep", out / "sweepcheck.json", f, present_sweepcheck.lines,
                                 f["vs_ref"]["short"], "and each run's results directory",
                                 args.json)


def main(args, name):
    if name in ("legs", "sweep"):
        options.budget_needs_target(args)
    if name == "sweep" and args.target is not None and not args.selfcheck and \
            not {"seed", "tlpi"} & set(args.only):
        raise ui.UserError("--target is for the seed and TLPI sweeps",
                           "give --only seed, tlpi or both")
    out = _out(args, name)
    out.mkdir(parents=True, exist_ok=True)
    shown = []
    if name == "sweep" and args.selfcheck:
        return selfcheck(args, out)
    if name == "sweep":
        wanted = [SWEEP_STAGE[s] for s in args.only]
        ran = {}
        for s in args.only:
            fn, stem = SWEEPS[s]
            t0 = time.monotonic()
            kw = {"reps": args.reps}
            if s in ("seed", "tlpi"):
                # the seed and TLPI sweeps repeat runs of their program, each of many passes
                kw = {"rounds": args.reps, "variants": args.variants}
                if args.target is not None:
                    kw.update(target=args.target, budget_s=args.budget or options.TARGET_BUDGET_S,
                              judge=sweep_judge(args.target))
            try:
                raw = fn(out, mode=args.mode, **kw)
            except ui.Interrupted as e:
                interrupted_line(e, out, SWEEP_STAGE[s], write_meta(
                    out, args.mode, wanted, ran, SWEEP_STAGE[s], e, time.monotonic() - t0))
                raise
            ran[SWEEP_STAGE[s]] = time.monotonic() - t0
            write_meta(out, args.mode, wanted, ran)
            ui.progress(f"{s}: {time.monotonic() - t0:.1f} s")
            if stem.startswith("sweep_"):
                a = sweeps.sweep(raw)
                shown += [tables.sweep(a, stem), tables.fits(a, stem)]
                if args.target is not None:
                    ui.progress(sweep_summary(s, raw, a, args.target))
            else:
                shown.append(getattr(tables, stem)(getattr(sweeps, stem)(raw)))
    elif name == "trace":
        shown.append(tables.crosscheck(a_tracers.analyse(trace.run_tracers(out, args.mode, args.variants))))
    elif name == "observer":
        shown.append(tables.observer(a_observer.analyse(observer.observe(out, args.mode, args.variants))))
    elif name == "legs":
        budget = args.budget if args.budget is not None else (
            options.TARGET_BUDGET_S if args.target is not None else None)
        t0 = time.monotonic()
        try:
            raw = legs.stage(out, mode=args.mode, variants=args.variants, shape=args.shape,
                             target=args.target, budget_s=budget,
                             judge=legs_judge(args.target) if args.target is not None else None)
        except ui.Interrupted as e:
            interrupted_line(e, out, "legs", write_meta(out, args.mode, ["legs"], {}, "legs", e,
                                                        time.monotonic() - t0))
            raise
        write_meta(out, args.mode, ["legs"], {"legs": time.monotonic() - t0})
        if raw.get("why"):
            raise ui.UserError(f"not measured: {raw['why']}",
                               "run as root with bpftrace installed" if legs.why_not() else
                               "give --variants that enter by a system call (`tw doctor` says "
                               "which work here)", code=ui.EXIT_FAILED)
        analysed = a_legs.analyse(raw)
        shown.append(tables.legs(analysed))
        ui.progress(legs_summary(raw, analysed))
    elif name == "attribute":
        raw_pc = files.read_json(out / "percall.json")
        if raw_pc is None:
            ui.progress(f"attribute: no percall.json in {out}: measuring the per-call cells first")
            raw_pc = bench.run(out, bench.Settings(mode=args.mode, variants=args.variants,
                                                   ops=[op for op, _ in attribution.OPS],
                                                   sizes=[256]))
        att = attribution.attribute(out, mode=args.mode, variants=args.variants)
        shown.append(tables.attribution(a_attribution.analyse(att, percall.analyse(raw_pc))))
    for t in shown:
        print(export.render(t, args.format), end="")
    ui.progress(f"{name}: raw results in {out}")
    return 0
