"""`tw ab`: two settings alternated round by round in one session, with a decision.

A kernel developer bisecting a system-call regression, or anyone asking whether a mitigation
or a build changes the cost of a call, gets a yes or no with its numbers, decided on the
undisturbed cost (each round's fastest batch, the mean of each side's fastest 20% of those, B/A with a jackknife over
the rounds both sides share), the typical cost's B/A beside it: "B is slower by X% [CI]" only
when the interval excludes 1 and the call survives the Benjamini-Hochberg correction over the
cells, else the smallest difference the run could have detected.
"""
import socket
from dataclasses import replace
from pathlib import Path

from ..analyse import compare
from ..core import files, paths, ui
from ..machine import hostwalls, registry
from ..measure import ab, walls
from ..present import export
from . import options


# Rounds per mode (measure/ab.py says why these).
ROUNDS = ab.ROUNDS
# A/A runs of --selfcheck: 20 give chance (5% a run) one call on average, at most 3 in 95%.
SELFCHECK_RUNS = 20
WALL_VARIANTS, WALL_OPS, wall_variants = walls.WALL_VARIANTS, walls.WALL_OPS, walls.wall_variants


def _wall_spec(text):
    """--wall's argument type: the spec parsed (a bad one is a usage error, exit 2)."""
    try:
        return walls.parse(text)["spec"]
    except walls.WallError as e:
        raise options.argparse.ArgumentTypeError(e.line()) from None


def make_wall(args, spec, enable_audit=False):
    """The wall --wall names, with --runtime and --caps."""
    caps, text = args.caps or (None, "docker")
    return walls.make(spec, enable_audit=enable_audit, runtime=args.runtime, caps=caps,
                      caps_text=text)


def add_arguments(p, name):
    p.description = ("Measure A and B alternately, round by round, and decide whether B is "
                     "slower or faster than A. A is the kernel default with this build; B is "
                     "the same with --speculation, another build (--build-b), or the same "
                     "binary behind a wall (--wall): a seccomp filter, audit rules or a "
                     "tracer, with what the wall adds per call in ns.")
    g = p.add_mutually_exclusive_group()
    p.add_argument("--wall", metavar="SPEC", type=_wall_spec,
                   help="B: the same copies behind this wall, put up for B's runs only: "
                        + walls.SPEC_HELP + " (docs/walls.md); with --selfcheck, both sides "
                        "behind it")
    g.add_argument("--speculation", choices=("ssbd", "indirect-branch", "all"),
                   help="B: syscost with this per-process speculation mitigation switched on (prctl)")
    g.add_argument("--build-b", metavar="DIR", type=options.readable_dir,
                   help="B: syscost-<variant> from another build directory")
    g.add_argument("--selfcheck", metavar="N", nargs="?", const=SELFCHECK_RUNS,
                   type=options.int_range(1, 1000),
                   help=f"the tool's own check: N A/A runs (default {SELFCHECK_RUNS}), A against "
                        "byte-identical fresh copies of itself; prints how many called a "
                        "difference against how many chance allows, exit 1 when more")
    p.add_argument("--build-a", metavar="DIR", type=options.readable_dir,
                   help="A: syscost-<variant> from this build directory instead of this "
                        "tree's (with --build-b: two builds, neither of them this one)")
    options.add_wall_arguments(p)
    p.add_argument("--enable-audit", action="store_true",
                   help="with --wall audit:...: where audit is off, turn it on for the run. It "
                        "stays paid for: every process started later in this boot gets an "
                        "audit context and pays for it on every call until reboot")
    p.add_argument("--variants", metavar="V,V", type=options.names_of(registry.names(), "variant"),
                   help="variants (default: 64-syscall; with --wall, every way in that works "
                        "here of " + ", ".join(WALL_VARIANTS) + ")")
    p.add_argument("--ops", metavar="OP,OP", type=options.names_of(
        sorted({o for m in registry.mechanisms() for o in m.ops}), "operation"),
        help="operations (default: null,getppid; with --wall " + ",".join(WALL_OPS) + ")")
    p.add_argument("--shapes", metavar="S,S", type=options.names_of(registry.SHAPES, "shape"),
                   default=["ret"], help="loop shapes (default: ret)")
    options.add_mode_arguments(p, f"{ROUNDS['quick']} rounds: a first look",
                               f"{ROUNDS['long']} rounds: intervals about half as wide, for "
                               "a change of a per cent or less")
    p.add_argument("--rounds", type=options.int_range(2, 10000), metavar="R",
                   help=f"rounds, each measuring A and B once per cell (default "
                        f"{ROUNDS['default']}; --quick {ROUNDS['quick']}, --long "
                        f"{ROUNDS['long']})")
    p.add_argument("--copies", type=options.int_range(2, 64), metavar="K", default=ab.COPIES,
                   help=f"fresh copies of each side's binary, spread over the rounds, so the "
                        f"interval holds where the files' pages landed (default {ab.COPIES})")
    p.add_argument("--cpu", type=options.allowed_cpu, metavar="N", help="pin to CPU N")
    p.add_argument("--out", metavar="DIR", type=options.fresh_dir,
                   help="a new or empty directory for ab.json (default: a new results/ab-<host>-<UTC time>)")
    p.add_argument("--format", choices=sorted(export.EXPORTERS), default="text")


def selfcheck(args):
    """N A/A runs: A against fresh copies of its own binary, each run with copies of its own;
    how many called a difference, against the most that chance gives 95% of the time.  With
    --wall, both sides run behind the wall: the wall's own A/A."""
    where = f" behind {args.wall}" if args.wall else ""
    if args.wall:       # every refusal before the output folder is made
        say_before(make_wall(args, args.wall, args.enable_audit), args.variants, args.ops)
    a = ab.side((f"A (build {args.build_a})" if args.build_a else "A (default)") + where,
                build=args.build_a)
    b = ab.side(f"A' (copies of {args.build_a or 'this build'}){where}", build=args.build_a)
    settings = ab.Settings(a=a, b=b, variants=args.variants, ops=args.ops, shapes=args.shapes,
                           mode=args.mode, rounds=args.rounds, cpu=args.cpu,
                           copies=args.copies, wall_both=True)
    rounds = settings.rounds
    base = Path(args.out) if args.out else files.new_directory(
        paths.RESULTS, f"ab-selfcheck-{socket.gethostname()}")
    base.mkdir(parents=True, exist_ok=True)
    n, called, tests, lines = args.selfcheck, 0, 0, []
    for i in range(n):
        ui.progress(f"ab: self-check, A/A run {i + 1} of {n}")
        wall = make_wall(args, args.wall, args.enable_audit) if args.wall else None
        doc = ab.run_ab(base / f"aa-{i + 1:03d}", replace(settings, wall=wall))
        rows = compare.ab(doc)
        for r in rows:
            if r["decision"] == "unknown":
                continue
            tests += 1
            called += r["decision"] in (compare.SLOWER, compare.FASTER)
            lines.append(f"A/A {i + 1}: {r['variant']} {r['op']} {r['shape']}: {r['sentence']}")
            print(lines[-1], flush=True)
    if not tests:
        raise ui.UserError("ab: the self-check decided nothing: no cell ran (see the warnings)")
    allowed = compare.chance_allows(tests)
    verdict = "within" if called <= allowed else "MORE than"
    print(f"A/A self-check: {called} of {tests} decisions called a difference; chance alone "
          f"(5% each) gives {0.05 * tests:g} on average and at most {allowed} in 95% of such "
          f"checks: {verdict} chance ({rounds} rounds, {args.copies} copies a side; in {base})")
    return 0 if called <= allowed else 1


def say_before(wall, variants, ops):
    """Before anything runs: what the wall will do that the user should hear (a measured call
    it logs, traps or kills), and any program already on raw_syscalls, which every call of A
    and B will pay for (its name is repeated beside the figures)."""
    cells = [(v, op) for v in variants for op in ops if op in registry.get(v).ops]
    for what, todo in wall.notices(cells):
        ui.warn(f"ab: {what}", todo)
    rows, why = hostwalls.raw_syscalls_tracers()
    seen = set()
    for r in rows or []:
        key = (r.get("pid"), r.get("comm"), r.get("kind"))
        if key in seen:
            continue
        seen.add(key)
        ui.warn(f"ab: {r.get('comm')} (pid {r.get('pid')}, {r.get('kind')}) is on the "
                f"raw_syscalls tracepoints now: every call of A and B will pay for it",
                "the figures say so beside them; stop it for a clean measurement")


def main(args, name):
    if not (args.wall or args.speculation or args.build_b or args.selfcheck):
        raise ui.UserError("no B to compare A with: give one of --wall, --speculation, --build-b or "
                           "--selfcheck")
    if args.wall and (args.speculation or args.build_b):
        raise ui.UserError("--wall compares the same build bare and behind the wall",
                           "leave out --speculation and --build-b")
    if args.enable_audit and not (args.wall or "").startswith("audit:"):
        raise ui.UserError("--enable-audit goes with --wall audit:...")
    if args.variants is None:
        args.variants = wall_variants() if args.wall else [registry.find(64, "syscall")]
    if args.ops is None:
        args.ops = list(WALL_OPS) if args.wall else ["null", "getppid"]
    if args.selfcheck:
        if args.build_b or args.speculation:
            raise ui.UserError("--selfcheck compares A with copies of itself",
                               "leave out --build-b and --speculation")
        return selfcheck(args)
    if args.build_a and not args.build_b:
        raise ui.UserError("--build-a compares two builds", "give B's with --build-b as well")
    wall = None
    if args.wall:
        if args.build_a:
            raise ui.UserError("--wall compares this tree's build with itself behind the wall",
                               "leave out --build-a")
        wall = make_wall(args, args.wall, args.enable_audit)
        say_before(wall, args.variants, args.ops)
    a = ab.side(f"A (build {args.build_a})", build=args.build_a) if args.build_a else \
        ab.side("A (bare)" if wall else "A (default)")
    b = ab.side(f"B (--speculation {args.speculation})" if args.speculation else
                f"B (behind {args.wall})" if wall else
                f"B (build {args.build_b})", speculation=args.speculation, build=args.build_b)
    # A new directory of its own unless --out: two runs in one second must not share one.
    out = Path(args.out) if args.out else files.new_directory(paths.RESULTS, f"ab-{socket.gethostname()}")
    out.mkdir(parents=True, exist_ok=True)
    settings = ab.Settings(a=a, b=b, variants=args.variants, ops=args.ops, shapes=args.shapes,
                           mode=args.mode, rounds=args.rounds, cpu=args.cpu,
                           copies=args.copies, wall=wall)
    rounds = settings.rounds
    ui.progress(f"ab: {a['label']} against {b['label']}, {rounds} rounds, into {out}")
    stopped = None
    try:
        doc = ab.run_ab(out, settings)
    except ui.Interrupted as e:
        # What was measured is in ab.json, marked interrupted: its decisions are printed too.
        if getattr(e, "partial", None) is None:
            raise
        stopped, doc = e, e.partial
        ui.warn(f"ab: interrupted by {e.name} after {doc['rounds_done']} of {rounds} rounds; "
                f"{out}/ab.json keeps them, marked interrupted",
                "the decisions below rest on those rounds only")
    rows = compare.ab(doc)
    if wall is not None:
        from ..analyse import walls as wall_analysis
        wall_analysis.explain_rows(rows, doc)
    cols = ["variant", "op", "shape", "figure", "decision", "B/A", "ci_low", "ci_high",
            "typical B/A", "rounds"]
    if wall is not None:
        cols += ["a_ns", "added_ns", "added_ci_low", "added_ci_high", "why"]
    t = export.Table("ab", cols + ["sentence"],
                     caption=f"{b['label']} against {a['label']}: B/A of the undisturbed cost "
                             "(typical for write-sync), rounds paired"
                             + ("; added_ns: what the wall adds per call, B - A, in ns, with "
                                "its 95% interval" if wall else ""))
    for r in rows:
        ratio = r.get("ratio") or {}
        typ = ((r.get("typical") or {}).get("ratio") or {}).get("median")
        row = [r["variant"], r["op"], r["shape"], r.get("figure"), r["decision"],
               None if ratio.get("median") is None else round(ratio["median"], 4),
               None if ratio.get("ci_low") is None else round(ratio["ci_low"], 4),
               None if ratio.get("ci_high") is None else round(ratio["ci_high"], 4),
               None if typ is None else round(typ, 4), r.get("rounds")]
        if wall is not None:
            added, a_fig = r.get("added") or {}, (r.get("a") or {}).get("value")
            row += [None if a_fig is None else round(a_fig, 1)] + [
                None if added.get(k) is None else round(added[k], 1)
                for k in ("median", "ci_low", "ci_high")] + [r.get("why")]
        t.rows.append(row + [r["sentence"]])
    print(export.render(t, args.format), end="")
    if wall is not None:
        for line in wall_analysis.host_lines(doc):
            (print if args.format == "text" else ui.progress)(line)
    for r in rows:
        if r.get("moved"):
            x, y = r["halves"]
            ui.warn(f"ab: {r['variant']} {r['op']} {r['shape']}: B/A moved during the run, "
                    f"{x['median']:.4f} [{x['ci_low']:.4f}, {x['ci_high']:.4f}] in its first half "
                    f"and {y['median']:.4f} [{y['ci_low']:.4f}, {y['ci_high']:.4f}] in its second",
                    "the difference's size depends on the moment: run it again later"
                    + ("" if args.mode == "long" else ", or with --long,")
                    + " before quoting one size")
    fam = rows[0]["family"] if rows and rows[0].get("family") else None
    if fam and fam["tests"]:
        line = (f"{fam['tests']} decisions; {fam['called_uncorrected']} intervals exclude no "
                f"difference (chance alone would give about {fam['expected_by_chance']:g}); "
                f"{fam['called']} {'call' if fam['called'] == 1 else 'calls'} after the "
                f"Benjamini-Hochberg correction")
        if args.format == "text":
            print(line)
        else:
            ui.progress(f"ab: {line}")
    if stopped is not None:
        stopped.message = (f"interrupted by {stopped.name} after {doc['rounds_done']} of "
                           f"{rounds} rounds; {out}/ab.json keeps them, marked interrupted")
        raise stopped       # exit 128 + the signal, as every interrupted command does
    return 1 if all(r["decision"] == "unknown" for r in rows) else 0
