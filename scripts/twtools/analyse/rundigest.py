"""digest.json: the small summary each run writes beside its raw rounds, so that a fleet of any
size compares digests instead of parsing every host's percall.json on the controller.

What it holds (schema timewrite-digest/1):
  - per supported cell: the undisturbed cost with its interval (the figure the fleet compares,
    analyse.fleet.undisturbed) and the typical cost (the median of the usable batches with its
    distribution-free interval, stats.median_ci), and each cell's ratio to the run's reference;
  - the fingerprint facts the fleet groups by (analyse.fleet.facts);
  - the exit price and exits per int 0x80 call (analyse.causes.brief);
  - the method version (METHOD) and the sha256 of the raw rounds it was made from.

The raw rounds stay the truth.  A digest is only ever used when its method is this checkout's
and its sha256 is that of the percall file beside it; an older method is recomputed from the
raw rounds (never trusted), a newer one, or any figure that is not a plausible number, costs
that host one line (load()).  The sha256 binds a digest to its rounds; it does not prove that a
hostile host computed the figures honestly, which only recomputing does (`tw fleet --verify`).
"""
import hashlib
import math
from pathlib import Path

import numpy as np
from ..core import files
from ..core.ui import DataError
from . import fleet, percall, stats

DIGEST_FILE = "digest.json"
SCHEMA = "timewrite-digest/1"
# The method version: bump it whenever a figure the digest carries would be computed
# differently (fleet.ANALYSIS names the fleet's figure; the integer orders versions).
METHOD = 2
METHOD_NAME = f"{fleet.ANALYSIS}+typical/1"
# A digest larger than this is not one tw wrote (a default run's is about 100 KB).
MAX_BYTES = 4 << 20
# Cells one digest may hold (issue 25 class 5: work bounded by an explicit cap).
MAX_CELLS = fleet.MAX_CELLS


def _raw_file(d):
    """(path, bytes) of the raw rounds as stored: percall.json, else the atlas's .xz."""
    for name in ("percall.json", "percall.json.xz"):
        raw = files.read_regular(Path(d) / name, inside=d)
        if raw is not None:
            return Path(d) / name, raw
    raise DataError("percall.json is absent: the bench stage did not run there")


def _typical(doc, c, where):
    """{value, ci_low, ci_high} of a raw cell: the median of its usable batches."""
    rounds, _ = percall.rounds_of(doc, c)
    vals, _ = fleet._round_values(where, rounds)
    a = np.concatenate(vals) if vals else np.empty(0)
    if not a.size:
        return {"value": None, "ci_low": None, "ci_high": None}
    lo, hi = stats.median_ci(a)
    return {"value": float(np.median(a)), "ci_low": float(lo), "ci_high": float(hi)}


def compute(d, host=None):
    """The digest document of one results directory, from its raw rounds."""
    d = Path(d)
    path, raw = _raw_file(d)
    doc = fleet._json(path, fleet.unxz(path, raw) if path.suffix == ".xz" else raw)
    from . import results
    meta, _ = results.read_stage(d, "meta")
    fp, _ = results.read_stage(d, "fingerprint")
    if fp is None:
        raise DataError("fingerprint.json is absent: the doctor stage did not run there")
    dg = fleet.digest_doc(doc, fp, meta, host or (meta or {}).get("host") or d.name)
    for i, c in enumerate(doc.get("cells") or []):
        if not isinstance(c, dict) or not c.get("supported"):
            continue
        name = fleet.cell_name(c.get("variant"), c.get("op"), c.get("size"),
                               c.get("shape") or "ret")
        if name in dg["cells"]:
            dg["cells"][name]["typical"] = _typical(doc, c, f"cells[{i}]")
    dg.update(schema=SCHEMA, method=METHOD, method_name=METHOD_NAME,
              raw={"file": path.name, "sha256": hashlib.sha256(raw).hexdigest(),
                   "bytes": len(raw)})
    return dg


def write(d):
    """Compute and write DIR/digest.json; returns its path.  Called by `tw run` and `tw report`."""
    d = Path(d)
    files.write_json(d / DIGEST_FILE, compute(d))
    return d / DIGEST_FILE


def _num(v, where, positive=True):
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) \
            or abs(v) >= fleet.MAX_NS or (positive and v < 0):
        raise DataError(f"{DIGEST_FILE}: {where}: {v!r} is not a measurement")
    return float(v)


def _checked(dg):
    """dg with every field the fleet uses checked for type and a plausible size."""
    if not isinstance(dg, dict):
        raise DataError(f"{DIGEST_FILE}: not an object")
    cells = dg.get("cells")
    if not isinstance(cells, dict) or not cells:
        raise DataError(f"{DIGEST_FILE}: has no cells")
    if len(cells) > MAX_CELLS:
        raise DataError(f"{DIGEST_FILE}: {len(cells)} cells, more than the {MAX_CELLS} "
                        "any run measures")
    for name, c in cells.items():
        if not isinstance(c, dict) or len(name) > 200:
            raise DataError(f"{DIGEST_FILE}: a cell is not what tw writes")
        w = f"cells[{name[:40]!r}]"
        # A jackknife interval of a cell near zero (a vDSO read) may reach below it; the
        # figure itself never does.
        for k in ("value", "ci_low", "ci_high"):
            c[k] = _num(c.get(k), f"{w}.{k}", positive=k == "value")
        if c["value"] is None:
            raise DataError(f"{DIGEST_FILE}: {w}: has no figure")
        if c["ci_low"] is not None and not (c["ci_low"] <= c["value"] <= (c["ci_high"] or 0)):
            raise DataError(f"{DIGEST_FILE}: {w}: its interval does not hold its figure")
        for k in ("ratio", "ratio_low", "ratio_high"):
            c[k] = _num(c.get(k), f"{w}.{k}", positive=k == "ratio")
        for k in ("variant", "op", "shape"):
            if not isinstance(c.get(k), str) or len(c[k]) > 64:
                raise DataError(f"{DIGEST_FILE}: {w}.{k}: not what tw writes")
    f = dg.get("facts")
    if not isinstance(f, dict) or not all(isinstance(f.get(k), str) and len(f[k]) <= 200
                                          for k in fleet.FACTS):
        raise DataError(f"{DIGEST_FILE}: facts: not what tw writes")
    if not isinstance(dg.get("reference"), str):
        raise DataError(f"{DIGEST_FILE}: reference: not a cell name")
    cz = dg.get("causes")
    if cz is not None and not isinstance(cz, dict):
        raise DataError(f"{DIGEST_FILE}: causes: not an object")
    return dg


def load(d, host):
    """The digest of results directory d for the fleet: DIR/digest.json when it is this
    checkout's method and made from the raw rounds beside it; None when there is none or
    it is of an older method (the caller recomputes from the raw rounds); DataError with
    one line when it is newer, damaged, or disagrees with its raw rounds."""
    d = Path(d)
    raw = files.read_regular(d / DIGEST_FILE, inside=d, limit=MAX_BYTES, what="digest")
    if raw is None:
        return None
    dg = fleet._json(d / DIGEST_FILE, raw)
    if not isinstance(dg, dict) or dg.get("schema") != SCHEMA:
        raise DataError(f"{DIGEST_FILE}: schema {str(dg.get('schema') if isinstance(dg, dict) else None)[:40]!r}"
                        f" is not {SCHEMA}", "re-run `tw report DIR` on that host")
    m = dg.get("method")
    if isinstance(m, bool) or not isinstance(m, int):
        raise DataError(f"{DIGEST_FILE}: method: not a version number")
    if m > METHOD:
        raise DataError(f"{DIGEST_FILE}: method {m} is newer than this checkout's ({METHOD})",
                        "update this checkout")
    if m < METHOD:
        return None
    rawinfo = dg.get("raw")
    path, rounds = _raw_file(d)
    if not isinstance(rawinfo, dict) or rawinfo.get("file") != path.name \
            or rawinfo.get("sha256") != hashlib.sha256(rounds).hexdigest():
        raise DataError(f"{DIGEST_FILE}: disagrees with its raw rounds ({path.name} is not "
                        "the file it was made from)", "re-run `tw report DIR` on that host")
    dg = _checked(dg)
    dg["host"] = host
    return dg
