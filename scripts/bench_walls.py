#!/usr/bin/env python3
"""make bench-walls: the arguments; the benchmark is twtools/drivers/wallbench.py, whose
docstring says what it compares."""
import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

from twtools.drivers import wallbench  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=wallbench.__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=ROOT / "build" / f"bench-walls-{os.getpid()}")
    ap.add_argument("--pairs", type=int, default=9, choices=range(1, 101), metavar="N",
                    help="seccomp_ab's pairs of bare and filtered processes (default 9)")
    ap.add_argument("--rounds", type=int, help="tw ab's rounds (default: its own)")
    a = ap.parse_args()
    wallbench.run(a.out, a.pairs, a.rounds)


if __name__ == "__main__":
    main()
