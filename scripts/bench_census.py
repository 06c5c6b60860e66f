#!/usr/bin/env python3
"""make bench-census: the arguments; the benchmark is twtools/drivers/censusbench.py, whose
docstring says what it compares."""
import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

from twtools.drivers import censusbench  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=censusbench.__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=ROOT / "build" / f"bench-census-{os.getpid()}")
    ap.add_argument("--loops", type=int, default=4, choices=range(1, 17), metavar="N",
                    help="32-bit int 0x80 loops running throughout (default 4)")
    ap.add_argument("--seconds", type=float, default=2.0, help="each census's window (default 2)")
    ap.add_argument("--runs", type=int, default=3, choices=range(1, 101), metavar="N",
                    help="censuses in a row (default 3)")
    ap.add_argument("--beside-bench", action="store_true",
                    help="run a default tw bench beside the censuses, as a busy host does")
    ap.add_argument("--results", type=Path, help="per-call costs for the census (tw census --results)")
    a = ap.parse_args()
    if not 0.5 <= a.seconds <= 600:
        ap.error("--seconds must be between 0.5 and 600")
    censusbench.run(a.out, a.loops, a.seconds, a.runs, a.beside_bench, a.results)


if __name__ == "__main__":
    main()
