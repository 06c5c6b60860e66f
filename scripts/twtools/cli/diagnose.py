"""`tw diagnose [--pid PID | -- CMD ARGS...]`: how a program enters the kernel, live, and
what that costs on this machine.

  1. trace the program (twtools.measure.diagnose: bpftrace's traces/diagnose.bt, else strace);
  2. find the per-call cost of each entry path it used and of the fastest path available to
     it: from a results directory's percall.json (results/latest by default), or, when there
     is none or it lacks a path, a short per-call matrix measured here with build/syscost-*;
  3. measure what the tracer itself adds per call (syscost bare and under the tracer);
  4. analyse (twtools.analyse.diagnose) and print (twtools.present.diagnose).
"""
import argparse
import sys
from pathlib import Path

from ..analyse import diagnose as analyse
from ..core import ui
from ..machine import registry
from ..measure import diagnose as measure
from ..present import diagnose as present
from ..service import matrix
from . import options


def add_arguments(parser, name):
    parser.description = (
        "Trace a program (or a running process) and report its system calls per entry path "
        "(compat or native; from the vDSO or from its own text, by instruction and symbol), "
        "per-syscall latency, and what its entry path cost on this machine against the "
        "fastest path available to it, with 95% intervals.  Uses bpftrace (root), else "
        "strace.  Exit status: the program's own when it ran, 2 on bad usage, 1 when it "
        "could not be traced, 3 when --results DIR/percall.json is damaged or not a regular "
        "file inside DIR (checked before the program runs).")
    parser.usage = "tw diagnose [options] (--pid PID | -- CMD [ARGS...])"
    parser.add_argument("--pid", type=options.int_range(1, 1 << 22), metavar="PID",
                        help="trace this running process (and children it starts) instead of a command")
    parser.add_argument("--seconds", type=float, metavar="S",
                        help="with --pid: stop after S seconds (default: when it exits, or Ctrl-C)")
    parser.add_argument("--tracer", choices=("auto",) + measure.TRACERS, default="auto",
                        help="auto (default): bpftrace where it can run, else strace")
    options.add_costs_source(parser)
    parser.add_argument("--no-overhead", dest="overhead", action="store_false",
                        help="do not measure the tracer's own cost (the run time is then the traced one)")
    parser.add_argument("--json", action="store_true",
                        help="print the diagnosis as JSON (the program's stdout goes to stderr)")
    parser.add_argument("command", nargs=argparse.REMAINDER, metavar="CMD",
                        help="the command to run, after --")


def needed_variants(raw):
    """The registry variants the cost needs: each path's, and the fast ones of the bitness."""
    rows, _ = analyse.classify_rows(raw)
    groups = analyse.group_paths(rows)
    bits = (raw.get("process") or {}).get("bits") or 64
    out = []
    for g in groups:
        v = registry.find(g["bits"], g["entry"]) if g["entry"] in registry.ENTRIES else None
        if v and v not in out:
            out.append(v)
    fast = registry.fast32() if bits == 32 else [registry.find(64, "syscall")]
    out += [v for v in fast if v and v not in out]
    dominant = None
    if groups:
        g = groups[0]
        dominant = registry.find(g["bits"], g["entry"]) if g["entry"] in registry.ENTRIES else None
    return out, dominant or fast[0]


def run(cmd=None, pid=None, seconds=None, tracer="auto", results=None, measure_here=False,
        overhead=True, stdout=None):
    """Trace, price and analyse: the diagnosis document (twtools.analyse.diagnose), with the
    raw run's exit status under program.status.  cmd (a list) or pid.  results: a results
    directory to take per-call costs from (default results/latest, else measured here).
    Raises measure.DiagnoseError with a one-line reason.  A report stage can call this."""
    if cmd:
        ui.progress(f"diagnose: running {' '.join(map(str, cmd))} (tracer: {tracer})")
        raw = measure.trace_command([str(c) for c in cmd], tracer=tracer, stdout=stdout)
    else:
        ui.progress(f"diagnose: tracing process {pid}")
        raw = measure.trace_pid(pid, seconds=seconds, tracer=tracer)
    needed, dominant = needed_variants(raw)
    doc, source = matrix.for_variants(needed, results, measure_here)
    ov = None
    if overhead:
        ui.progress(f"diagnose: measuring what {raw['tracer']} adds per call (syscost-{dominant})")
        ov = measure.tracer_overhead(dominant, raw["tracer"])
    return analyse.diagnose(raw, doc, source, ov)


def main(args, name):
    cmd = list(args.command or [])
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    if args.pid is None and not cmd:
        raise ui.UserError("give a command after -- (tw diagnose -- CMD ARGS) or --pid PID",
                           "see tw diagnose --help")
    if args.pid is not None and cmd:
        raise ui.UserError("--pid and a command exclude each other")
    if args.seconds is not None and (args.pid is None or not args.seconds > 0):
        raise ui.UserError("--seconds needs --pid and a positive number of seconds")
    results_arg = None
    if args.results:
        # Read and validated before the program runs: a damaged percall.json is one line
        # naming it, not a traceback after a traced run.
        results_arg = (Path(args.results), matrix.given(args.results))
    try:
        d = run(cmd=cmd, pid=args.pid, seconds=args.seconds, tracer=args.tracer,
                results=results_arg, measure_here=args.measure, overhead=args.overhead,
                stdout=sys.stderr.fileno() if args.json else None)
    except measure.DiagnoseError as e:
        raise ui.UserError(str(e), code=ui.EXIT_USAGE if e.usage else ui.EXIT_FAILED) from None
    print(present.to_json(d) if args.json else present.format_text(d))
    status = d["program"]["status"]
    if not isinstance(status, int):
        return 0
    return status if status >= 0 else 128 - status      # killed by a signal: as a shell says
