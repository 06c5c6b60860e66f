"""The per-call matrix a command prices entry paths with: the one home for "read a results
directory's percall.json as the user gave it", used by tw diagnose, tw census and tw watch.

Where it comes from, in this order: the directory given with --results (read and checked
before any tracing, so a damaged file is one line at once, not after an hour's window); a
short matrix measured here (--measure); results/latest when it was measured on this host and
holds what is needed; else, for diagnose and census, measured here; for the watch, none (its
costs are then unknown, and it says why).
"""
import socket
from pathlib import Path

from ..core import paths, ui

# The analysis and the runners are imported inside the functions that use them: tw watch
# imports this module and runs for months within a memory budget, and numpy, once imported,
# is never given back (docs/watch.md, "What it costs").


def read(d):
    """DIR/percall.json as the analysis reads it (analyse.results.read_stage): a regular file
    inside DIR, bounded, valid JSON of the percall schema with finite numbers in physical
    bounds; DataError naming the file (exit 3) otherwise.  None when there is none."""
    from ..analyse import results
    return results.read_stage(d, "percall")[0]


def given(d):
    """The percall.json of a directory the user named (--results DIR), read and validated;
    a UserError when it is no directory or has none."""
    if not Path(d).is_dir():
        raise ui.UserError(f"--results {d} is not a directory")
    doc = read(Path(d))
    if doc is None:
        raise ui.UserError(f"{d} has no percall.json", "run make report, or use --measure")
    return doc


def _cells(doc):
    from ..analyse import diagnose as adiagnose
    return {c["variant"] for c in doc.get("cells", []) if c.get("op") == adiagnose.OP
            and (c.get("shape") or "ret") == adiagnose.SHAPE}


def _has(doc, needed):
    return set(needed) <= _cells(doc)


def _source(d, doc):
    return f"{paths.shown(d)}/percall.json (host {doc.get('host', 'unknown')}, {doc.get('mode', '?')} mode)"


def for_variants(needed, given_dir=None, measure_here=False):
    """(percall.json document, where it came from) holding the cells `needed` (diagnose and
    census): the given directory, or (directory, its document already read by given()),
    else results/latest when it fits, else a short matrix measured here."""
    if given_dir:
        d, doc = given_dir if isinstance(given_dir, tuple) else (Path(given_dir), None)
        doc = doc if doc is not None else given(d)
        return doc, _source(d, doc)
    if not measure_here:
        latest = paths.RESULTS / "latest"
        doc = read(latest) if latest.exists() else None
        if doc is not None and _has(doc, needed) and doc.get("host") in (None, socket.gethostname()):
            return doc, _source(latest, doc)
        why = ("no results/latest/percall.json" if doc is None else
               "results/latest was measured on another host" if doc.get("host") not in (None, socket.gethostname())
               else "results/latest lacks " + ", ".join(sorted(set(needed) - _cells(doc))))
    else:
        why = "--measure"
    from ..measure import diagnose as mdiagnose
    ui.progress(f"diagnose: measuring per-call costs here ({why}): {', '.join(needed)}")
    doc = mdiagnose.percall_on_the_spot(needed)
    return doc, f"measured here just now ({why}): build/syscost-* op null, {doc['params']['rounds']} interleaved rounds"


# What tw watch --measure times: every way in a window can price (each against the fastest
# path open to its program), op null, and the cpuid cell that prices one VM exit
# (analyse.causes).
WATCH_ENTRIES = ("syscall", "sysenter", "int80", "vdso32-call")


def _measure_for_watch():
    from ..machine import registry
    from ..measure import bench
    vs = []
    for bits in (32, 64):
        for e in WATCH_ENTRIES:
            v = registry.find(bits, e)
            if v and v not in vs:
                vs.append(v)
    vs += [v for v in registry.fast32() if v not in vs]
    ui.progress(f"watch: measuring the per-call costs here (--measure): {', '.join(vs)}")
    doc = bench.run(None, bench.Settings(mode="quick", variants=vs, ops=["null", "cpuid"],
                                         shapes=["ret"], rounds=10))
    return doc, (f"measured here at the watch's start (--measure): build/syscost-* op null and "
                 f"cpuid, {doc['params']['rounds']} interleaved rounds")


def for_watch(given_dir=None, measure_here=False):
    """(percall document, source) or (None, why) for tw watch, which never measures unasked:
    the given directory, measured here with --measure, or results/latest of this host."""
    if measure_here:
        return _measure_for_watch()
    if given_dir:
        return given(given_dir), f"{given_dir}/percall.json"
    latest = paths.RESULTS / "latest"
    doc = read(latest) if latest.exists() else None
    if doc is None:
        return None, "no per-call matrix (no results/latest/percall.json; give --results DIR)"
    if doc.get("host") not in (None, socket.gethostname()):
        return None, "results/latest was measured on another host; give --results DIR"
    return doc, "results/latest/percall.json"


def walls_for(given_dir=None, measure_here=False, raw=False):
    """(analysed walls.json, where it came from) that prices the processes behind walls (tw
    census): the given directory's, else a short walls stage measured here with --measure (the
    container profile on the 64-bit syscall and int 0x80, a few seconds), else
    results/latest's when this host measured it; (None, why) when none is to be had.  raw: the
    walls.json document as stored, not analysed (tw watch analyses it in its window's child)."""
    import tempfile
    latest = paths.RESULTS / "latest"
    if not given_dir and not measure_here and not (latest / "walls.json").exists():
        # nothing to read: the analysis (numpy with it) is not imported, so that a watch
        # without results stays small (docs/watch.md, "What it costs")
        return None, "no walls measured: no results/latest/walls.json (use --measure)"
    from ..analyse import results, walls
    if given_dir:
        d = given_dir[0] if isinstance(given_dir, tuple) else Path(given_dir)
        doc = results.read_stage(d, "walls")[0]
        return ((doc if raw else walls.analyse(doc)), f"{paths.shown(d)}/walls.json") if doc else \
            (None, f"{paths.shown(d)} has no walls.json (tw run's walls stage)")
    if measure_here:
        from ..measure import trace, walls as mwalls
        with tempfile.TemporaryDirectory(prefix="tw-walls-", dir=trace.tmp_dir()) as tmp:
            doc = mwalls.stage(Path(tmp), mode="quick")
        return (doc if raw else walls.analyse(doc)), \
            "measured here just now (--measure): the container profile"
    doc = results.read_stage(latest, "walls")[0] if latest.exists() else None
    if doc is None:
        return None, "no walls measured: no results/latest/walls.json (use --measure)"
    return (doc if raw else walls.analyse(doc)), f"{paths.shown(latest)}/walls.json"
