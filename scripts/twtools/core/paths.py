"""Where things are: the checkout, the build, the bpftrace tools, the project's own data."""
import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
# The built programs: build/ in the checkout, or $TW_BUILD (another build of the same tree, such
# as the one scripts/bench_factors.py makes with other code alignment).
BUILD = Path(os.environ["TW_BUILD"]).absolute() if os.environ.get("TW_BUILD") else ROOT / "build"
TRACES = ROOT / "traces"


def binary(program, variant):
    """build/<program>-<variant>, e.g. binary('timewrite', '32-int80')."""
    return BUILD / f"{program}-{variant}"


# Where `tw run` makes its results directories and keeps `latest`: results/ in the checkout,
# or $TW_RESULTS (the fault tests point it at a small tmpfs; a user at a bigger disk).
# An installed copy (make deb: the file VERSION beside scripts/, in /usr/lib/timewrite) is
# read-only: its results/ is the current directory's.
INSTALLED = (ROOT / "VERSION").is_file()
RESULTS = Path(os.environ["TW_RESULTS"]).absolute() if os.environ.get("TW_RESULTS") \
    else Path("results").absolute() if INSTALLED else ROOT / "results"
SEED = ROOT / "data" / "seed"  # the seed's published numbers (data/seed/README.md)


def shown(p):
    """A path as a message shows it: relative to the checkout when inside it (the same on
    every clone, and what a user in the checkout types), else as given."""
    p = Path(p)
    try:
        return str(p.absolute().relative_to(ROOT))
    except ValueError:
        return str(p)
