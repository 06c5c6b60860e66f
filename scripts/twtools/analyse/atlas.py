"""The reference atlas shipped in the repository (data/machines/): every machine the project
has measured, so that any run can be placed among them.

Layout (data/machines/README.md): one folder per machine, and inside it runs/<run>/ holding
that run's meta.json and fingerprint.json as tw wrote them, and percall.json.xz, the raw
rounds of its per-call matrix, compressed.  Raw rounds rather than analysed figures, so that
the analysis of this checkout (the undisturbed estimate included, whatever its method version)
always applies to the atlas exactly as to the user's own run.

Each run is read like any results directory (twtools.analyse.results: validated meta and
fingerprint) and digested by twtools.analyse.fleet, the same digest `tw fleet` compares, so
the report's atlas section and the fleet view use one figure.  A damaged atlas entry is
skipped with its reason, never a failed report.
"""
from pathlib import Path

from ..core import files, paths
from ..core.ui import DataError
from . import fleet, results

ATLAS = paths.ROOT / "data" / "machines"


def _percall_xz(run):
    path = run / "percall.json.xz"
    raw = files.read_regular(path, inside=run)
    if raw is None:
        raise DataError(f"{path}: absent")
    return fleet._json(path, fleet.unxz(path, raw))


def runs(root=ATLAS):
    """[(machine, run path)] of the atlas, in name order."""
    root = Path(root)
    out = []
    if not root.is_dir():
        return out
    for m in sorted(p for p in root.iterdir()
                    if p.is_dir() and not p.is_symlink() and not p.name.startswith(".")):
        rd = m / "runs"
        if rd.is_dir():
            out += [(m.name, r) for r in sorted(rd.iterdir())
                    if r.is_dir() and not r.is_symlink() and not r.name.startswith(".")]
    return out


def load(root=ATLAS):
    """([digest with 'machine' and 'run' added], [{machine, run, why}] skipped)."""
    got, skipped = [], []
    for machine, run in runs(root):
        try:
            meta, _ = results.read_stage(run, "meta")
            fp, _ = results.read_stage(run, "fingerprint")
            d = fleet.digest_doc(_percall_xz(run), fp, meta, f"{machine}/{run.name}")
        except DataError as e:
            skipped.append({"machine": machine, "run": run.name, "why": e.line()})
            continue
        d["machine"], d["run"] = machine, run.name
        d["pid"] = (meta or {}).get("pid")
        got.append(d)
    return got, skipped


def machines(digests):
    """{machine: [digests of its runs]}."""
    out = {}
    for d in digests:
        out.setdefault(d["machine"], []).append(d)
    return out
