"""tw lesson [--results DIR] [--out DIR] | tw lesson --class DIR... [--out DIR]: the lesson page
of this machine, or the class page over many students' results directories.

The lesson (present.lesson) takes its costs from a results directory (default results/latest)
and its evidence live from this machine (measure.lesson: strace, one raw_syscalls event per
mechanism, the live vDSO's bytes, the 32-bit processes running); it writes lesson.html
(self-contained) and lesson.md, and the diagrams under plots/.  The class page reads each
student's results directory as `tw fleet` reads a host's (a damaged one is a line, the rest are
shown) and writes index.html, plus one page per student with their machine marked.
"""
import hashlib
import socket
from pathlib import Path

from ..analyse import atlas
from ..core import files, paths, ui
from ..core.ui import UserError
from ..present import explain, lesson
from ..present.document import export
from . import options

USAGE = "tw lesson [--results DIR] [--out DIR] | tw lesson --class DIR [DIR ...] [--out DIR]"


def add_arguments(p, name):
    p.usage = USAGE
    p.add_argument("--results", metavar="DIR",
                   help="the results directory whose costs the lesson shows (default: "
                        "results/latest)")
    p.add_argument("--out", metavar="DIR", type=options.fresh_dir,
                   help="where to write (default: DIR/lesson in the results directory, or a new "
                        "folder under results/)")
    p.add_argument("--class", dest="students", nargs="+", metavar="DIR",
                   help="the class page over these students' results directories (or folders "
                        "of them, as tw fleet takes)")


def _write(doc, svgs, out, stem):
    plots = out / "plots"
    plots.mkdir(parents=True, exist_ok=True)
    with files.confined(out):
        for name, svg in svgs.items():
            files.write_text(plots / f"{name}.svg", svg)
        export(doc, out, stem, ("md", "html"))
    return out / f"{stem}.html"


def page_name(label):
    """A student's page file: plain characters and a short hash, so that no label makes a
    path and two labels never share a page."""
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in label)[:60].lstrip(".")
    return f"class-{safe}-{hashlib.sha1(label.encode()).hexdigest()[:8]}.html"


def one(args):
    rdir = args.results or explain.default_results()
    if args.results and not (Path(args.results).is_dir()):
        raise UserError(f"--results {args.results}: no such directory",
                        "give a results directory made by tw run")
    data, label = explain.costs_from(rdir)
    fp, entries = explain.collect(None, data)
    ui.progress("lesson: gathering live evidence (strace, raw_syscalls, the vDSO)")
    from ..measure import lesson as mlesson
    ev = mlesson.gather()
    digests, skipped = atlas.load()
    ctx = {"fp": fp, "entries": entries, "data": data, "label": label, "evidence": ev,
           "atlas": digests, "host": socket.gethostname(),
           "kernel_update": atlas.kernel_update(digests)}
    doc, svgs = lesson.build(ctx)
    if args.out:
        out = Path(args.out)
    elif rdir is not None:
        out = Path(rdir) / "lesson"
        if out.exists():
            out = files.new_directory(Path(rdir), "lesson")
    else:
        out = files.new_directory(paths.RESULTS, f"lesson-{socket.gethostname()}")
    out.mkdir(parents=True, exist_ok=True)
    page = _write(doc, svgs, out, "lesson")
    print(page)
    return 0


def klass(args):
    from . import fleet as cli_fleet
    jobs, refused = cli_fleet.discover(args.students)
    if not jobs:
        raise UserError("no student's results directory could be read (each refused above)"
                        if refused else "give the students' results directories")
    # --out inside a student's results directory, or a folder of students given here, would
    # be read as a student (a bogus one) by the next class page: refused before anything.
    cli_fleet.refuse_out_inside(args.out, jobs + [(None, d) for d in args.students
                                                  if Path(d).is_dir()])
    # Two students whose folders share a name are two students: each its own label (the
    # second named with its path, as tw fleet does), so each its own page.
    jobs = cli_fleet.unique_labels(jobs)
    digests, bad = cli_fleet.compare(jobs, progress=True)
    refused += bad
    for r in refused:
        ui.warn(f"lesson: {r['host']}: {r['why']}", "that student is left out; the rest are shown")
    students = [{"label": d["host"], "digest": d, "page": page_name(d["host"])}
                for d in sorted(digests, key=lambda d: d["host"])]
    out = Path(args.out) if args.out else files.new_directory(paths.RESULTS, "class")
    out.mkdir(parents=True, exist_ok=True)
    print(write_class(students, refused, out))
    return 0


def write_class(students, refused, out):
    """index.html (the whole class) and one page per student (the class's distribution
    beside their machine: a size that does not grow with the class) in out; returns the
    index's path."""
    summary = lesson.class_summary(students)
    doc, svgs = lesson.class_page(students, refused, summary=summary)
    index = _write(doc, svgs, out, "index")
    for s in students:
        doc, svgs = lesson.class_page(students, refused, mark=s, summary=summary)
        _write(doc, svgs, out, s["page"][:-len(".html")])
    return index


def main(args, name):
    if args.students:
        if args.results:
            raise UserError("--class and --results are two different pages; give one")
        return klass(args)
    return one(args)
