"""Where things are: the checkout, the build, the bpftrace tools, the project's own data."""
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
BUILD = ROOT / "build"
TRACES = ROOT / "traces"
RESULTS = ROOT / "results"
SEED = ROOT / "data" / "seed"  # the seed's published numbers (data/seed/README.md)
