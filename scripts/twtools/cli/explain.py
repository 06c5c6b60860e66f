"""`tw explain`: every way into the kernel, for the machine this runs on, with live
disassembly and the measured costs of a results directory (twtools.present.explain builds
the text and the Markdown; this is the command)."""
import json

from ..core import escape, ui
from ..present import explain
from . import options


def add_arguments(parser, name):
    parser.add_argument("--results", metavar="DIR",
                        help="results directory whose costs to show (default: results/latest)")
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.add_argument("--markdown", action="store_true", help="print the Markdown live section")
    parser.add_argument("--wall", metavar="SPEC",
                        help="every way in through this wall (tw ab --wall's specs: a seccomp "
                             "profile, audit rules, the tracer): the path each call takes, the "
                             "filter's instructions and cache, what this machine measured "
                             "behind it, and for a seccomp filter the architecture hole")
    options.add_wall_arguments(parser)
    parser.add_argument("--check-cache", action="store_true",
                        help="with --wall seccomp:...: check the cache's answers against the "
                             "kernel for a cached call, an unassigned number below the table's "
                             "size and one past it, natively and as a compat call "
                             "(/proc/PID/seccomp_cache where the kernel offers it, else the "
                             "measured price of each behind a long filter; about 10 s)")
    parser.add_argument("--update-doc", metavar="FILE",
                        help="replace the live section of FILE (docs/mechanisms.md), between its "
                             f"{explain.BEGIN} and {explain.END} markers; the file is "
                             "replaced whole or not at all, never written through a link")


def wall(args):
    """tw explain --wall SPEC."""
    import platform
    import tempfile
    from ..analyse import results, walls as a_walls
    from ..machine import registry
    from ..measure import trace, walls, workflags
    caps, text = args.caps or (None, "docker")
    bp = walls.blueprint(args.wall, runtime=args.runtime, caps=caps, caps_text=text)
    host = None
    if bp["kind"] == "audit":
        # audit explained as the host is: whether a process started now gets a context
        with tempfile.TemporaryDirectory(prefix="tw-explain-audit-", dir=trace.tmp_dir()) as t:
            host = workflags.audit_host(t)
    if args.check_cache:
        return check_cache(args, bp)
    rdir = args.results or explain.default_results()
    measured = None
    if rdir:
        try:
            doc = results.read_stage(rdir, "walls")[0]
        except ui.DataError:
            doc = None
        measured = a_walls.analyse(doc) if doc else None
    variants = [v for v in walls.WALL_VARIANTS if v in registry.names()]
    e = a_walls.explain(bp, variants, measured, platform.release(), host)
    if args.json:
        print(json.dumps(e, indent=1, default=str))
    else:
        print("\n".join(a_walls.explain_lines(e, escape.terminal)))
    return 0


def check_cache(args, bp):
    """tw explain --wall SPEC --check-cache: the simulator's cache answers against the
    kernel's (measure.walls.cachecheck)."""
    from ..analyse import cachecheck as a_check
    from ..measure.walls import cachecheck
    if bp["kind"] != "seccomp":
        raise ui.UserError("--check-cache goes with --wall seccomp:...")
    ui.progress("explain: checking the seccomp cache's answers against the kernel")
    doc = cachecheck.run()
    v = a_check.verdicts(doc)
    if args.json:
        print(json.dumps({"check": doc, "verdicts": v}, indent=1, default=str))
    else:
        print("\n".join(escape.terminal(x) for x in a_check.lines(v)))
    return 0 if all(r["agree"] is not False for r in v["rows"]) else 1


def main(args, name):
    if args.check_cache and not args.wall:
        raise ui.UserError("--check-cache goes with --wall seccomp:...")
    if args.wall:
        return wall(args)
    rdir = args.results or explain.default_results()
    data, label = explain.costs_from(rdir)
    fp, entries = explain.collect(None, data)
    if args.markdown or args.update_doc:
        md = explain.render_markdown(fp, entries, label, data)
        if args.update_doc:
            explain.update_doc(args.update_doc, md)
            ui.progress(f"updated the live section of {args.update_doc}")
        else:
            print(md, end="")
        return 0
    if args.json:
        # JSON escapes control characters itself (\u001b): no further escaping.
        print(json.dumps({"machine": {k: fp.get(k) for k in ("host", "kernel", "cpu", "fred",
                                                             "ia32_emulation", "vdso32", "libc")},
                          "costs_from": label, "paths": entries,
                          # The cost model (timewrite-causes/1), as causes.json holds it.
                          "causes": (data or {}).get("causes"),
                          "return_after_call": explain.return_text(fp, data),
                          "fred": explain.fred_text(fp)},
                         indent=1, default=str))
    else:
        print(explain.render_text(fp, entries, label, data))
        print()
        print(escape.terminal("The return after the call: " + explain.return_text(fp, data)))
        print()
        print(escape.terminal(explain.fred_text(fp)))
    return 0
