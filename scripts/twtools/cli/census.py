"""`tw census [--seconds S] [--json]`: every process on the machine, how it enters the kernel,
what its slow paths cost per second, and what booting with ia32_emulation=0 would stop.

  1. watch every process (twtools.measure.census: one bpftrace session, traces/census.bt, as
     root; /proc alone otherwise);
  2. price each path against the fastest open to its process, from results/latest's per-call
     matrix or one measured here (as tw diagnose does: service.matrix.for_variants);
  3. analyse (twtools.analyse.census) and print (twtools.present.census).
"""
import json
from pathlib import Path

from ..analyse import census as analyse
from ..core import ui
from ..machine import registry
from ..measure import census as measure
from ..measure import diagnose as mdiagnose
from ..present import census as present
from ..service import matrix
from . import options

MAX_SECONDS = 3600


def _seconds(text):
    try:
        v = float(text)
    except ValueError:
        raise ValueError(f"'{text}' is not a number of seconds")
    if not 0 < v <= MAX_SECONDS:
        raise ValueError(f"{text}: give a number of seconds above 0 and at most {MAX_SECONDS}")
    return v


def add_arguments(parser, name):
    parser.description = (
        "Watch every process on this machine for S seconds and say, per process (pid, command, "
        "executable, bitness), how many calls it made by each entry path (native syscall; "
        "compat through the 32-bit vDSO; compat int 0x80 from its own text or a library; the "
        "vsyscall page), its top system calls, and what its slow paths cost per second here "
        "against the fastest path open to it, with 95% intervals.  The first lines say what "
        "booting with ia32_emulation=0 would stop.  Needs root (bpftrace); without it, only "
        "which running processes are 32-bit, from /proc.  Exit status 1 when bpftrace should "
        "have traced here and could not attach (the output says why).")
    parser.usage = "tw census [--seconds S] [--results DIR | --measure] [--json | --raw]"
    parser.add_argument("--seconds", type=options.checked(_seconds), default=5.0, metavar="S",
                        help=f"how long to watch (default 5, at most {MAX_SECONDS})")
    options.add_costs_source(parser)
    out = parser.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true",
                     help=f"print the census as JSON ({analyse.SCHEMA}, the raw census under "
                          "'raw' so that another checkout can analyse it again)")
    out.add_argument("--raw", action="store_true",
                     help=f"print only the raw census ({measure.SCHEMA}), unpriced: the "
                          "census.json a results directory holds")


def needed(raw):
    """The registry variants the prices need: each path's, and the fast ones it is priced
    against."""
    out = []
    probe = analyse.analyse(raw)          # paths only: no matrix yet
    for p in probe["processes"]:
        for g in p["paths"]:
            v = g.get("variant")
            if v and v not in out and g["entry"] != "vsyscall-call":
                out.append(v)
    if any(v.startswith("32-") for v in out):
        out += [v for v in registry.fast32() if v not in out]
    if any(v.startswith("64-") for v in out):
        s = registry.find(64, "syscall")
        if s not in out:
            out.append(s)
    return out


def run(seconds, results=None, measure_here=False):
    """Census, priced and analysed: the census document."""
    raw = measure.run(seconds=seconds)
    doc = source = None
    if raw.get("trace") is not None:
        vs = needed(raw)
        if vs:
            try:
                doc, source = matrix.for_variants(vs, results, measure_here)
            except mdiagnose.DiagnoseError as e:
                raise ui.UserError(str(e))
    walls, walls_source = (None, None)
    if raw.get("trace") is not None:
        walls, walls_source = matrix.walls_for(results[0] if results else None, measure_here)
    d = analyse.analyse(raw, doc, source, walls=walls)
    if isinstance(d.get("walls"), dict):
        d["walls"]["source"] = walls_source
    d["raw"] = raw
    return d


def main(args, name):
    if args.raw:
        # The stage file itself, as tw run's census stage writes census.json: what a results
        # directory holds (the fleet playbook's census task keeps it there), and what
        # tw report analyses with the same directory's percall.json.  Nothing is priced.
        raw = measure.run(seconds=args.seconds)
        print(json.dumps(raw, indent=1))
        return ui.EXIT_FAILED if raw.get("failed") else ui.EXIT_OK
    results = None
    if args.results:
        # Read and checked before the window, not after it: with --seconds 3600 a user would
        # otherwise wait an hour to learn the folder has no percall.json (issue 25, class 14).
        results = (Path(args.results), matrix.given(args.results))
    d = run(args.seconds, results, args.measure)
    print(present.to_json(d) if args.json else present.format_text(d))
    # Without root the census is /proc alone, as documented; a tracer that should have
    # attached here and did not is a failed measurement.
    return ui.EXIT_FAILED if d["raw"].get("failed") else ui.EXIT_OK
