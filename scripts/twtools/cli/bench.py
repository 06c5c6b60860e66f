"""`tw bench`: measure the per-call matrix, then analyse and print it."""
import json
import socket
import time
from dataclasses import replace
from pathlib import Path

from ..analyse import peers as peers_analysis, percall, results, selfcheck as check
from ..core import files, paths, ui
from ..machine import registry
from ..measure import bench, peers
from ..present import percall as present, selfcheck as present_selfcheck
from . import options


def _sizes(text):
    try:
        out = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ValueError(f"--sizes: '{text}' is not a comma-separated list of integers")
    if not out or any(s < 1 or s > (64 << 20) for s in out):
        raise ValueError("--sizes: each size must be 1 .. 67108864 bytes")
    return out


def add_arguments(parser, name):
    parser.description = (
        "Measure ns per system call for every mechanism (variants/registry), operation and loop "
        "shape with build/syscost-*, in interleaved rounds; print the matrix with 95% intervals "
        "and ratios to the 64-bit syscall, and write percall.json (raw rounds).  Where a "
        "measured call pays VM exits, the price of one exit is measured again at the end (up "
        "to 8 s, exitprice.json), and those cells' intervals hold its move.")
    q, lg, d = bench.MODES["quick"], bench.MODES["long"], bench.MODES["default"]
    options.add_mode_arguments(
        parser, f"a few seconds: {q['rounds']} rounds, write-file 256 B only",
        f"{lg['rounds']} rounds (processes) instead of {d['rounds']}: intervals about "
        f"{(lg['rounds'] / d['rounds']) ** 0.5:.1f}x narrower, a few minutes")
    parser.add_argument("--out", metavar="DIR", type=options.fresh_dir,
                        help="results directory (default results/bench-<host>-<UTC time>)")
    parser.add_argument("--variants", metavar="V,V", type=options.names_of(registry.names(), "variant"),
                        help="variants to run (default: all)")
    parser.add_argument("--ops", metavar="OP,OP", type=options.names_of(
        sorted({o for m in registry.mechanisms() for o in m.ops}), "operation"),
        help="operations (default: each mechanism's own)")
    parser.add_argument("--shapes", metavar="S,S", type=options.names_of(registry.SHAPES, "shape"),
                        help="loop shapes: inline, ret, jmp (default: each mechanism's own)")
    parser.add_argument("--sizes", metavar="N,N", type=options.checked(_sizes),
                        help="write-file sizes in bytes (default 256,4096; --quick 256)")
    parser.add_argument("--rounds", type=options.int_range(1, 10000), metavar="R",
                        help="override the mode's rounds")
    parser.add_argument("--cpu", type=options.allowed_cpu, metavar="N",
                        help="pin to CPU N (default: the last one this process may use)")
    parser.add_argument("--clock", choices=["auto", "tsc", "monotonic"], default=None,
                        help="syscost's clock (default auto: the TSC when invariant)")
    parser.add_argument("--dir", metavar="DIR", type=options.writable_dir,
                        help="where write-file/write-sync write (default: the --out directory)")
    parser.add_argument("--accuracy", action="store_true",
                        help="also run perf bench syscall basic and print accuracy/precision figures")
    options.add_target_arguments(
        parser, "keep measuring past the mode's rounds until every fast cell's undisturbed "
                "half-width is within PCT (e.g. 1%%), or --budget ends; cells that reach it are "
                "left alone; the last line names the cells still wider and why",
        "the matrix's time budget (90s, 10m, 1h): with --target, when to stop trying (default "
        "10m); without, how long it may wait for the host's quiet moments (default: 1.1 times "
        "what its rounds take on a quiet host; --long: twice)")
    parser.add_argument("--no-quiet-first", dest="quiet_first", action="store_false",
                        help="measure at once whatever the host's state, instead of waiting "
                             "for its fast state while the budget allows (a --target run never "
                             "waits: it measures until enough fast-state processes are in)")
    parser.add_argument("--no-realtime", dest="realtime", action="store_false",
                        help="do not ask for SCHED_FIFO (default: ask; needs root)")
    parser.add_argument("--json", action="store_true",
                        help="print the analysed matrix as JSON instead of the table")
    parser.add_argument("--selfcheck", action="store_true",
                        help="run the matrix twice, back to back (with --accuracy), and print how "
                             "the first run's intervals fare in the second (make bench)")
    parser.add_argument("--peers", action="store_true",
                        help="alternate 64-libc getppid with perf bench syscall basic (and "
                             "stress-ng --x86syscall where it runs) for --reps repetitions, and "
                             "print how far each tool's figure moves (make bench)")
    parser.add_argument("--reps", type=options.int_range(2, 1000), default=10, metavar="N",
                        help="repetitions for --peers (default 10)")


def main(args, name):
    sizes = args.sizes or ([256] if args.mode == "quick" else None)
    # A new directory of its own unless --out: two runs in one second must not share one.
    out = Path(args.out) if args.out else \
        files.new_directory(paths.RESULTS, f"bench-{socket.gethostname()}")
    ui.progress(f"bench: {args.mode} mode, results into {out}")
    if args.selfcheck:
        return selfcheck(args, out, sizes)
    if args.peers:
        doc = peers.run_peers(out, reps=args.reps, cpu=args.cpu, realtime=args.realtime)
        a = peers_analysis.analyse(doc)
        if args.json:
            print(json.dumps(a, indent=1))
        else:
            print("\n".join(present.format_peers(doc, a)))
        ui.progress(f"bench: wrote {out / 'peers.json'} in {doc['wall_s']:.1f} s")
        return 0
    target = getattr(args, "target", None)
    budget = getattr(args, "budget", None)
    if target is not None and budget is None:
        budget = options.TARGET_BUDGET_S
    judge, skip = target_rule(target) if target is not None else (None, None)
    t0 = time.monotonic()
    try:
        doc = bench.run(out, replace(settings(args, sizes), accuracy=args.accuracy,
                                     target=target, budget_s=budget,
                                     quiet_first=getattr(args, "quiet_first", True),
                                     should_stop=judge, skip=skip))
    except ui.Interrupted as e:
        interrupted(out, args.mode, e, time.monotonic() - t0)
        raise
    analysed = percall.analyse(doc)
    fp, facts_s = facts(out)
    if target is not None:
        met = percall.target_status(analysed, target)
        line = (f"bench: target ±{100 * target:g}%: {met['met']} of {met['cells']} fast cells "
                f"within it after {time.monotonic() - t0:.0f} s "
                f"({doc['params']['rounds']} rounds; host fast in "
                f"{100 * (analysed['host'].get('fast_share') or 0):.0f}% of probes"
                + (f" at a level of {analysed['host']['fast_level_ns']:.1f} ns"
                   if analysed["host"].get("fast_level_ns") else "")
                + (f", core clock up to {analysed['core_clock']['ghz']:.2f} GHz"
                   if (analysed.get("core_clock") or {}).get("ghz") else "") + "; "
                + ("stopped at the target" if doc["host_state"]["stopped"] == "target" else
                   f"the budget of {budget:.0f} s ended first") + ")")
        held = sum(1 for c in analysed["cells"] if ((c.get("undisturbed") or {}).get(
            "sequential") or {}).get("held_by_drift"))
        if held:
            line += (f"; {held} of them planned for the whole ±{100 * target:g}% because the "
                     "host's drift alone takes it (named below)")
        others = sum(1 for c in doc["cells"] if c["supported"] and c["op"] not in percall.FAST_OPS)
        if others:
            line += (f"; cells the target does not judge: {others}, with the mode's "
                     f"{min(doc['params']['rounds'], doc['params']['rounds_mode'])} rounds "
                     "as without --target")
        ui.progress(line)
    # every run prices the exit again at its end, as tw run's exit-price stage does: the host
    # moves that price over minutes, and the exit-paying cells' intervals hold the move
    exit_doc = exit_price(out, args.mode, analysed, fp)
    hold_exit_move(analysed, fp, exit_doc)
    if target is not None:
        reported_line(analysed, target)
        # The figures in ns are at the top core clock the run met, which moved 10% between
        # two such runs beside the neighbour (docs/syscost.md); the cycles and the ratios held.
        ref = analysed["reference"]
        ui.progress("bench: between runs, compare cycles (--json: undisturbed_cycles; tw compare) "
                    f"or the ratios to the reference (the column \"x {ref['variant']} "
                    f"{ref['op']}\"): a figure in ns carries the core clock the host gave")
    write_meta(out, args.mode, doc, facts_s, exit_doc)
    if args.json:
        print(json.dumps(analysed, indent=1))
    else:
        print("\n".join(present.format_table(doc, analysed)))
        if args.accuracy:
            print("\n".join(present.format_accuracy(percall.accuracy(doc, analysed))))
    w = present.unstable_warning(analysed)
    if w:
        ui.warn(*w)
    ui.progress(f"bench: wrote {out / 'percall.json'} in {doc['wall_s']:.1f} s")
    broken = sorted({c["variant"] for c in analysed["cells"] if c.get("status") == "broken"})
    if broken:
        raise ui.UserError(f"broken here: {', '.join(broken)} (they must work on this machine)",
                           "see tw doctor", code=ui.EXIT_FAILED)
    if not analysed["measured"]:
        raise ui.UserError("no cell could be measured", "see tw doctor", code=ui.EXIT_FAILED)
    return 0


def settings(args, sizes):
    """The matrix's settings (measure.bench.Settings) from the arguments tw bench and its
    self-check share: what to measure, the rounds, the CPU, the clock, SCHED_FIFO."""
    return bench.Settings(mode=args.mode, variants=args.variants, ops=args.ops, sizes=sizes,
                          shapes=args.shapes, rounds=args.rounds, cpu=args.cpu,
                          clock=args.clock, realtime=args.realtime, file_dir=args.dir)


def interrupted(out, mode, e, seconds):
    """meta.json for a matrix a signal cut (measure.bench keeps its rounds so far in
    percall.json, marked interrupted): the run's state "interrupted", the bench stage cut with
    what it kept, and the one line tw prints, which says where the rounds are and how to read
    them (the README's exit statuses: "the results directory marked interrupted")."""
    stage = results.STAGE_OF["percall"]
    meta = results.new_meta(mode, [stage], "interrupted")
    kept = (Path(out) / "percall.json").exists()
    meta["stages"][stage] = {"ok": False, "interrupted": True, "seconds": round(seconds, 2),
                             "error": f"interrupted by {e.name}"}
    if kept:
        meta["stages"][stage]["kept"] = "percall.json"
    meta.update(signal=e.name, finished_utc=results.now_utc())
    try:
        files.write_json(Path(out) / "meta.json", meta)
    except OSError:
        pass
    e.message = (f"interrupted by {e.name}; {out} is marked interrupted"
                 + ("; percall.json keeps the rounds measured so far: "
                    + ui.command_line(["scripts/tw", "report", str(out)]) + " reads them"
                    if kept else " (no round was measured)"))


def facts(out):
    """(the machine's fingerprint, the seconds it took), written beside the matrix
    (fingerprint.json, tw run's doctor stage): `tw compare` reads from it whether int 0x80
    pays a VM exit here, to decide two runs' int 0x80 cells at one exit price
    (analyse/compare.between_runs)."""
    from ..machine import doctor
    t = time.monotonic()
    fp = doctor.fingerprint(Path(out) / "fingerprint.json", fs_path=str(out))
    return fp, time.monotonic() - t


def exit_price(out, mode, analysed, fp):
    """The price of a VM exit again, after the matrix, as tw run's exit-price stage
    prices it after its others (measure/exitprice.py, judged by analyse/exitdrift.judge):
    exitprice.json, or None when the matrix priced no exit (no cpuid cell).

    A --target run takes minutes and its intervals are +-1% or narrower, while the host moves
    the exit's price over minutes: two `tw bench --target 1%` runs beside the neighbour on an
    AMD EPYC guest (family 25, model 17) each had 48 of 48 fast cells within +-1%, and three
    of their int 0x80 cells moved -1.3% to -1.6% from one run to the next, outside both
    intervals.  A default run's are +-0.6% (median) and it takes under a minute, and still:
    beside the neighbour on an Intel guest (family 6, model 207), one exit cost 1.9% less in
    the next of two back-to-back default runs and two int 0x80 cells missed.  So every run
    prices it again (up to 8 s), unless no cell it measured pays an exit here (bare metal,
    or no int 0x80 cell)."""
    from ..analyse import causes, exitdrift
    from ..measure import exitprice
    x = percall.exit_cell(analysed)
    if not (x and x.get("supported")):
        return None
    cz = causes.compute_from(analysed, fp)
    if not any(causes.exits_paid(cz, c["variant"]) for c in analysed["cells"]
               if c.get("supported")):
        ui.progress("bench: no measured call pays a VM exit here (the kernel's facts and this "
                    "run's fit), so the exit is not priced again")
        return None
    ui.progress("bench: the price of a VM exit again, at the run's end (as tw run's exit-price "
                "stage)")
    return exitprice.stage(out, mode, judge=exitdrift.judge(analysed, mode))


def hold_exit_move(analysed, fp, exit_doc):
    """The exit-paying cells' intervals widened in place to hold the exit's move between the
    matrix and exit_doc (analyse/exitdrift.hold, as results.load does for the directory),
    with a line that says so; the number of cells widened."""
    if not exit_doc:
        return 0
    from ..analyse import causes, exitdrift
    s = exitdrift.hold(exit_doc, analysed, causes.compute_from(analysed, fp))
    if s and not s.get("paying"):
        ui.progress("bench: no measured variant pays VM exits here (the kernel's facts and "
                    "this run's fit), so no interval carries the exit's price")
        return 0
    if not s or s.get("move") is None:
        ui.progress(f"bench: the exit's price at the end is unknown ({(s or {}).get('why')}); "
                    "the intervals hold the matrix's moment only")
        return 0
    n = s["widened"]
    lo, hi = s["move_pct"] - s["move_half_pct"], s["move_pct"] + s["move_half_pct"]
    ui.progress(f"bench: one exit cost {s['move_pct']:+.2f}% [{lo:+.2f}, {hi:+.2f}] at the end "
                f"against the matrix; the {n} cells that pay exits have intervals that hold "
                "both prices and as far the other way (tw compare decides them at one price)")
    return n


def reported_line(analysed, target):
    """The target judged again on the figures the run reports, after every widening (the
    exit's move held): the stopping rule judged the matrix's moment, and a cell it counted
    within can leave the target once its interval holds the exit's move.  Recorded in the
    analysis (--json: target_reported) and said in one line that names each wider cell and
    why (percall.reported_status)."""
    st = percall.reported_status(analysed, target)
    analysed["target_reported"] = st
    if not st["cells"]:
        return st
    line = (f"bench: as reported, {st['within']} of {st['cells']} fast cells within "
            f"±{100 * target:g}%")
    if st["wide"]:
        shown = [f"{w['cell']} "
                 + (f"±{100 * w['half_width']:.2f}%" if w["half_width"] is not None
                    else "unknown") + f" ({w['why']})" for w in st["wide"][:6]]
        more = len(st["wide"]) - len(shown)
        line += "; wider: " + "; ".join(shown) + (f"; and {more} more (--json)" if more > 0 else "")
    ui.progress(line)
    return st


def write_meta(out, mode, doc, facts_s=None, exit_doc=None):
    """meta.json for the matrix's directory, as tw run writes it for a run of the bench stage
    (and the doctor's, when facts_s says it ran, and the exit-price stage's, when exit_doc)
    alone, so that `tw compare` and `tw report` read the directory: two --target runs are set
    side by side by their ratios, which hold where the figures in ns move with the host."""
    stage = results.STAGE_OF["percall"]
    stages = ([results.STAGE_OF["fingerprint"]] if facts_s is not None else []) + [stage] + (
        [results.STAGE_OF["exitprice"]] if exit_doc else [])
    meta = results.new_meta(mode, stages, "complete")
    if facts_s is not None:
        meta["stages"][results.STAGE_OF["fingerprint"]] = {"ok": True,
                                                           "seconds": round(facts_s, 2)}
    meta["stages"][stage] = {"ok": True, "seconds": round(doc["wall_s"], 2)}
    if exit_doc:
        meta["stages"][results.STAGE_OF["exitprice"]] = {"ok": True,
                                                         "seconds": round(exit_doc["wall_s"], 2)}
    files.write_json(Path(out) / "meta.json", meta)


def target_rule(target):
    """(should_stop, skip) for the matrix's Settings: the analysis judges the document so far; a cell
    that reached the target is left out of later rounds (its figure is fixed from then on),
    and so is a cell the target does not judge (percall.FAST_OPS: a write to a file, the
    clocks, cpuid) once it has the mode's rounds.  Those cells took more than half of a
    --target run's processes beside the noisy neighbour (32 190 of 57 442 in 600 s), time
    the fast cells' plans were short of."""
    done = set()
    last = {}

    def should_stop(doc):
        a = percall.analyse(doc)
        st = percall.target_status(a, target)
        done.clear()
        done.update(st["met_keys"])
        h = a.get("host") or {}
        share = h.get("fast_share")
        wall, rounds = doc["wall_s"], (doc.get("params") or {}).get("rounds") or 1
        # a round's time since the last judgement: past the mode's rounds, with the cells that
        # are done left out, a round is shorter than the mean of all rounds so far
        per = ((wall - last["wall"]) / (rounds - last["rounds"])
               if last and rounds > last["rounds"] else wall / rounds)
        last.update(wall=wall, rounds=rounds)
        left = ""
        if st["met"] < st["cells"] and share:
            # one process of each cell a round, a share of them fast: the slowest cell's plan
            secs = st["more_fast_processes"] * per / share
            left = f"; about {secs:.0f} s more at this fast share"
        return st["met"] == st["cells"], (f"{st['met']} of {st['cells']} fast cells within "
                                          f"±{100 * target:g}%, fast time seen "
                                          f"{100 * (share or 0):.0f}% of probes{left}")

    def skip(key, past_mode):
        return key in done or (past_mode and key[1] not in percall.FAST_OPS)
    return should_stop, skip


def selfcheck(args, out, sizes):
    """Two runs back to back, each as `tw bench` reports it (the exit priced again at its
    end, its move held), and how the first run's intervals fare in the second."""
    runs = []
    fp = facts(out)[0]
    for n in (1, 2):
        ui.progress(f"bench: self-check run {n} of 2")
        doc = bench.run(out / f"run{n}", replace(settings(args, sizes), accuracy=True))
        a = percall.analyse(doc)
        hold_exit_move(a, fp, exit_price(out / f"run{n}", args.mode, a, fp))
        runs.append((doc, a))
    f = check.figures(runs, fp)
    return options.selfcheck_end("bench", out / "selfcheck.json", f, present_selfcheck.lines,
                                 f["short"], "and each run's percall.json", args.json)
