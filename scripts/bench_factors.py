#!/usr/bin/env python3
"""What a run holds fixed (make bench-factors): the arguments; the benchmark itself is
twtools/drivers/factors.py, whose docstring says what each factor is and how it is read."""
import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

from twtools.drivers import factors  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=factors.__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=ROOT / "build" / f"bench-factors-{os.getpid()}")
    ap.add_argument("--rounds", type=int, default=32)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--analyse-only", action="store_true")
    ap.add_argument("--copies", type=int, default=12,
                    help="fresh copies of each program for the file factor (default 12)")
    ap.add_argument("--factors", default=",".join(factors.ALL_FACTORS),
                    help=f"the factors to measure (default {','.join(factors.ALL_FACTORS)}); the "
                         "others' runs already in --out are kept")
    a = ap.parse_args()
    chosen = a.factors.split(",")
    if not set(chosen) <= set(factors.ALL_FACTORS):
        ap.error(f"--factors: each of {', '.join(factors.ALL_FACTORS)}")
    if a.copies < 2 or a.rounds < 2:
        ap.error("--copies and --rounds: at least 2")
    factors.run(a.out, a.rounds, a.reps, a.copies, chosen, a.analyse_only)


if __name__ == "__main__":
    main()
