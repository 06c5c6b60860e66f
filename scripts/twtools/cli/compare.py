"""`tw compare DIR1 DIR2 ... [--out DIR] [--seed-reference] [--format FMT,FMT] [--json]`.

The page is built by present/compare.py; this module checks the command line: every DIR is a
results directory, and OUT is new, empty, or an earlier comparison, all before any work.
"""
import argparse
import json
from pathlib import Path

from ..analyse import results
from ..core import ui
from ..present import compare, document


def output_dir(text):
    """--out: a new directory, an empty one, or an earlier comparison; refused before any
    work when it is a file, a symbolic link, or a directory holding anything else."""
    p = Path(text)
    if p.is_symlink():
        raise argparse.ArgumentTypeError(
            f"{text} is a symbolic link; give the path of a directory (tw writes only into "
            "directories it can confine its writes to)")
    if p.exists() and not p.is_dir():
        raise argparse.ArgumentTypeError(
            f"{text} exists and is not a directory; give a new or empty directory")
    if p.is_dir():
        other = sorted(x.name for x in p.iterdir() if x.name not in compare.OUTPUTS)
        if other:
            raise argparse.ArgumentTypeError(
                f"{text} holds other files ({', '.join(other[:3])}{', ...' if len(other) > 3 else ''}), "
                "not only an earlier comparison; give a new or empty directory")
    return text


def add_arguments(p, name):
    p.description = ("Compare results directories cell by cell on the undisturbed cost, with "
                     "the typical cost beside it: a decision per cell, corrected for testing "
                     "many cells at once (Benjamini-Hochberg), and what each could have detected.")
    p.add_argument("dirs", nargs="+", metavar="DIR", help="results directories (first = base A)")
    p.add_argument("--out", metavar="DIR", type=output_dir,
                   help="where to write compare.md/html and plots/: a new or empty directory, "
                        "or an earlier comparison (default: DIR1/compare)")
    p.add_argument("--seed-reference", action="store_true",
                   help="add the seed report's published table as a results set (theirs)")
    p.add_argument("--format", default=["md", "html"], metavar="FMT,FMT", type=document.formats,
                   help=f"comma list of: {', '.join(document.EXPORTERS)} (default: md,html)")
    p.add_argument("--json", action="store_true",
                   help="print every decision, with the figure it used, as JSON on stdout "
                        "(writes no page)")


def main(args, name):
    for d in args.dirs:
        results.require_results_dir(d)
    if args.json:
        sets = [compare.ResultSet.from_dir(d) for d in args.dirs]
        print(json.dumps(compare.decisions_json(sets), indent=1))
        return 0
    out = Path(args.out) if args.out else Path(args.dirs[0]) / "compare"
    if not args.out:
        try:
            output_dir(str(out))
        except argparse.ArgumentTypeError as e:
            raise ui.UserError(f"{out}: {e}", "give --out DIR") from None
    path = compare.build_compare(args.dirs, out, args.seed_reference, args.format)
    ui.progress(f"compare: {path}")
    return 0
