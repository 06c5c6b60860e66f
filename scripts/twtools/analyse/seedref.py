"""The seed's published numbers (data/seed/*.csv), read from the repository only."""
import csv

from ..core import paths

SEED_RUNS = "seed_timewrite_runs.csv"
TLPI = "tlpi_table_13_2.csv"
COSTS = "seed_syscall_costs.csv"
INTEGER_COLUMNS = ("bufsize", "loops", "calls", "buf_size")


def read(name=SEED_RUNS):
    """Rows of a seed CSV as dicts with numbers converted; None when the file is absent."""
    path = paths.SEED / name
    if not path.exists():
        return None
    rows = []
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            out = {}
            for k, v in r.items():
                try:
                    out[k] = float(v) if v not in ("", None) else None
                    if out[k] is not None and out[k].is_integer() and k in INTEGER_COLUMNS:
                        out[k] = int(out[k])
                except ValueError:
                    out[k] = v
            rows.append(out)
    return rows


def where(name=SEED_RUNS):
    """The file's path relative to the checkout, for messages."""
    return (paths.SEED / name).relative_to(paths.ROOT)
