"""`tw report DIR [--format FMT,FMT]`: report.md, report.html, plots/, tables/ and verdict.json
from a results directory, built by present/report.py.  It reads only the directory (cli's
preflight has refused anything else, and confined every write to it) and measures nothing."""
from pathlib import Path

from ..core import ui
from ..present import document, report


def add_arguments(p, name):
    p.description = ("Build report.md, report.html, plots/, tables/ and verdict.json from a "
                     "results directory; nothing is re-measured.")
    p.add_argument("dir", help="results directory (e.g. results/latest)")
    p.add_argument("--format", default=["md", "html"], metavar="FMT,FMT", type=document.formats,
                   help="comma-separated: md, html (default both)")


def main(args, name):
    path = report.build_report(Path(args.dir), args.format)
    ui.progress(f"report: {path}")
    return 0
