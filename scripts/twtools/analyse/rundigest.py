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
hostile host computed the figures honestly, which only recomputing does (`tw fleet --verify
DIR...` recomputes each digest from its raw rounds and lists those that disagree).
"""
import hashlib
import math
import re
from pathlib import Path

import numpy as np
from ..core import files
from ..core.ui import DataError
from . import fleet, percall, stats

DIGEST_FILE = "digest.json"
SCHEMA = "timewrite-digest/1"
# The method version: bump it whenever a figure the digest carries would be computed
# differently (fleet.ANALYSIS names the fleet's figure; the integer orders versions).
METHOD = 4
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


def _num(v, where, positive=True, src=DIGEST_FILE, bound=None):
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) \
            or abs(v) >= (bound or fleet.MAX_NS) or (positive and v < 0):
        raise DataError(f"{src}: {where}: '{str(v)[:40]}' is not a measurement")
    return float(v)


# An estimator's name (analyse.fleet: undisturbed_ns, floor_ns, or a comma list of them).
ESTIMATOR = re.compile(r"[a-z_]{1,40}(,[a-z_]{1,40}){0,3}")
# Exits per int 0x80 call: a handful on any kernel (issue 24); a fit far beyond is no fit.
MAX_EXITS = 1e3


def _interval(d, where, src, positive, bound=None):
    """{value, ci_low, ci_high} of a figure with its interval, each a plausible number."""
    if d is None:
        return None
    if not isinstance(d, dict):
        raise DataError(f"{src}: {where}: not an object")
    return {k: _num(d.get(k), f"{where}.{k}", positive and k == "value", src, bound)
            for k in ("value", "ci_low", "ci_high")}


def _text(v, where, src, limit=500):
    if v is None or (isinstance(v, str) and len(v) <= limit):
        return v
    raise DataError(f"{src}: {where}: not what tw writes")


def check_causes(cz, src=DIGEST_FILE):
    """A digest's causes (analyse.causes.brief), returned as it is once every field the
    fleet reads is checked: each number plausible (the exit price positive and under
    fleet.MAX_NS, exits per call under MAX_EXITS), each string short."""
    if cz is None:
        return None
    if not isinstance(cz, dict):
        raise DataError(f"{src}: causes: not an object")
    out = {"exit_price": None, "int80": None}
    price = cz.get("exit_price")
    if price is not None:
        out["exit_price"] = _interval(price, "causes.exit_price", src, True)
        out["exit_price"]["why"] = _text(price.get("why"), "causes.exit_price.why", src)
    m = cz.get("int80")
    if m is not None:
        if not isinstance(m, dict):
            raise DataError(f"{src}: causes.int80: not an object")
        w = "causes.int80"
        holds = m.get("holds")
        if holds is not None and not isinstance(holds, bool):
            raise DataError(f"{src}: {w}.holds: not what tw writes")
        out["int80"] = {
            "variant": _text(m.get("variant"), f"{w}.variant", src, 64),
            "baseline": _text(m.get("baseline"), f"{w}.baseline", src, 64),
            "exits_per_call": _interval(m.get("exits_per_call"), f"{w}.exits_per_call", src,
                                        False, MAX_EXITS),
            "predicted_exits": _num(m.get("predicted_exits"), f"{w}.predicted_exits", False,
                                    src, MAX_EXITS),
            "minus_baseline_ns": _interval(m.get("minus_baseline_ns"), f"{w}.minus_baseline_ns",
                                           src, False),
            "residual_ns": _interval(m.get("residual_ns"), f"{w}.residual_ns", src, False),
            "holds": holds}
        if not isinstance(out["int80"]["variant"], str):
            raise DataError(f"{src}: {w}.variant: not a variant")
    return cz


def _checked(dg, src=DIGEST_FILE, some_cells=True):
    """dg with every field the fleet uses checked for type and a plausible size; src names
    where it was read (digest.json, or a database's table and row).  some_cells False: no
    cell is no error (a view of one op reads back that op's cells alone)."""
    if not isinstance(dg, dict):
        raise DataError(f"{src}: not an object")
    cells = dg.get("cells")
    if not isinstance(cells, dict) or (some_cells and not cells):
        raise DataError(f"{src}: has no cells")
    if len(cells) > MAX_CELLS:
        raise DataError(f"{src}: {len(cells)} cells, more than the {MAX_CELLS} "
                        "any run measures")
    for name, c in cells.items():
        if not isinstance(c, dict) or len(name) > 200:
            raise DataError(f"{src}: a cell is not what tw writes")
        w = f"cells['{name[:40]}']"
        # A cell that costs about nothing (the 64-bit vDSO's time(), ~1 ns) may come out
        # below zero, its figure as well as its interval: a batch's value is its time less
        # the empty loop's (analyse.fleet.MAX_LOOP_NS), and a host that slowed the core
        # during the empty loops left one at -2.6 ns.  The figure lies among its batches'
        # values, so the bound that admits them admits it; below that it is no cost.
        for k in ("value", "ci_low", "ci_high"):
            c[k] = _num(c.get(k), f"{w}.{k}", False, src)
        if c["value"] is None:
            raise DataError(f"{src}: {w}: has no figure")
        if c["value"] < -fleet.MAX_LOOP_NS:
            raise DataError(f"{src}: {w}.value: '{c['value']:g}' is not a measurement (from "
                            f"0, less the empty loop's cost, up to {fleet.MAX_LOOP_NS:g} ns)")
        if c["ci_low"] is not None and not (c["ci_low"] <= c["value"] <= (c["ci_high"] or 0)):
            raise DataError(f"{src}: {w}: its interval does not hold its figure")
        for k in ("ratio", "ratio_low", "ratio_high"):
            # negative with its figure (above), never with a reference that is not a cost
            c[k] = _num(c.get(k), f"{w}.{k}", False, src)
        for k in ("variant", "op", "shape"):
            if not isinstance(c.get(k), str) or len(c[k]) > 64:
                raise DataError(f"{src}: {w}.{k}: not what tw writes")
        est = c.get("estimator")
        if est is not None and not (isinstance(est, str) and ESTIMATOR.fullmatch(est)):
            raise DataError(f"{src}: {w}.estimator: not what tw writes")
    f = dg.get("facts")
    if not isinstance(f, dict) or not all(isinstance(f.get(k), str) and len(f[k]) <= 200
                                          for k in fleet.FACTS):
        raise DataError(f"{src}: facts: not what tw writes")
    if not isinstance(dg.get("reference"), str):
        raise DataError(f"{src}: reference: not a cell name")
    dg["causes"] = check_causes(dg.get("causes"), src)
    return dg


checked = _checked       # for store.fleetdb.load: a run read back from the database


def load(d, host):
    """The digest of results directory d for the fleet: DIR/digest.json when it is this
    checkout's method and made from the raw rounds beside it; None when there is none or
    it is of an older method (the caller recomputes from the raw rounds); DataError with
    one line when it is newer, damaged, or disagrees with its raw rounds."""
    d = Path(d)
    raw = files.read_regular(d / DIGEST_FILE, inside=d, limit=MAX_BYTES, what="digest")
    if raw is None:
        return None
    # Every repeated key refused, not only a second "cells": a second "causes" says two things
    # as well, and the fast parser would keep one of them silently.
    dg = fleet._json(d / DIGEST_FILE, raw, every_key=True)
    if not isinstance(dg, dict) or dg.get("schema") != SCHEMA:
        raise DataError(f"{DIGEST_FILE}: schema '{str(dg.get('schema') if isinstance(dg, dict) else None)[:40]}'"
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


# ---- tw fleet --verify ----------------------------------------------------------------------

def _differences(stored, fresh, path="", out=None, limit=5):
    """The paths at which two digests differ (numbers to a relative 1e-9: the same rounds
    give the same figures bit for bit here), at most `limit` of them."""
    out = [] if out is None else out
    if len(out) >= limit:
        return out
    if isinstance(stored, dict) and isinstance(fresh, dict):
        for k in sorted(set(stored) | set(fresh), key=str):
            if k == "host":
                continue
            _differences(stored.get(k), fresh.get(k), f"{path}.{k}" if path else str(k), out,
                         limit)
        return out
    if isinstance(stored, list) and isinstance(fresh, list) and len(stored) == len(fresh):
        for i, (a, b) in enumerate(zip(stored, fresh)):
            _differences(a, b, f"{path}[{i}]", out, limit)
        return out
    num = (int, float)
    if isinstance(stored, num) and isinstance(fresh, num) and not isinstance(stored, bool) \
            and not isinstance(fresh, bool):
        if math.isclose(stored, fresh, rel_tol=1e-9, abs_tol=1e-12):
            return out
    elif stored == fresh:
        return out
    out.append(f"{path}: {str(stored)[:40]} in {DIGEST_FILE}, {str(fresh)[:40]} from the rounds")
    return out


def verify(d, host):
    """(state, why) of results directory d's digest.json against its raw rounds: 'agrees',
    'disagrees' (why lists the first differing figures), or 'none' (no digest.json: the
    fleet digests that host's rounds itself).  DataError when either cannot be read."""
    d = Path(d)
    raw = files.read_regular(d / DIGEST_FILE, inside=d, limit=MAX_BYTES, what="digest")
    if raw is None:
        return "none", f"no {DIGEST_FILE}: tw fleet digests its raw rounds itself"
    stored = fleet._json(d / DIGEST_FILE, raw, every_key=True)
    if not isinstance(stored, dict) or stored.get("schema") != SCHEMA:
        raise DataError(f"{DIGEST_FILE}: not a {SCHEMA} digest")
    if stored.get("method") != METHOD:
        return "none", (f"{DIGEST_FILE}: method {str(stored.get('method'))[:20]}, not this "
                        f"checkout's ({METHOD}): tw fleet recomputes it from the raw rounds")
    fresh = compute(d, host)
    diff = _differences(stored, orjson_roundtrip(fresh))
    return ("disagrees", "; ".join(diff)) if diff else ("agrees", None)


def orjson_roundtrip(obj):
    """obj as digest.json would hold it once written (tuples as lists, numpy as numbers)."""
    import json
    return json.loads(json.dumps(files._clean(obj), default=files._jsonable))


def safe_verify(job):
    """verify() for a worker process: (host, state, why), a damaged directory being
    ('refused', its one line)."""
    host, d = job
    try:
        return (host, *verify(d, host))
    except DataError as e:
        return host, "refused", e.line()
    except OSError as e:
        return host, "refused", f"{e.filename or d}: {e.strerror}"
    except (ValueError, TypeError, KeyError, AttributeError, ArithmeticError,
            RecursionError) as e:
        return host, "refused", f"its results hold something tw does not read ({type(e).__name__})"


# ---- the digest the fleet compares ------------------------------------------------------------

def digest(d, host, interval_ops=None):
    """The digest of one results directory the fleet compares (analyse/fleet.py's docstring):
    the host's own when it can be used, else computed from its raw rounds; DataError with
    one line saying what is wrong."""
    from . import results
    d = results.require_results_dir(d)
    # The host's own digest (digest.json) when it is this checkout's method and made from the
    # raw rounds beside it; otherwise the raw rounds, digested here.
    dg = load(d, host)
    if dg is not None:
        dg["interval_ops"] = "all"          # the host's digest has every cell's interval
        return dg
    meta, _ = results.read_stage(d, "meta")
    fp, _ = results.read_stage(d, "fingerprint")
    if fp is None:
        raise DataError("fingerprint.json is absent: the doctor stage did not run there")
    dg = fleet.digest_doc(fleet.read_percall(d), fp, meta, host, interval_ops=interval_ops)
    # The run's identity in a fleet database (store/fleetdb.py) is the sha256 of its raw
    # rounds, whether its digest was written on the host or computed here.
    path, raw = _raw_file(d)
    dg["raw"] = {"file": path.name, "sha256": hashlib.sha256(raw).hexdigest(),
                 "bytes": len(raw)}
    dg["interval_ops"] = "all" if interval_ops is None else ",".join(interval_ops)
    return dg


def safe_digest(job):
    """digest() for a worker process: (digest, None) or (None, why).  Only expected
    failures become a why; a bug still raises."""
    host, d, ops = job if len(job) == 3 else (*job, None)
    try:
        return digest(d, host, ops), None
    except DataError as e:
        return None, e.line()
    except OSError as e:
        return None, f"{e.filename or d}: {e.strerror}"
    except (ValueError, TypeError, KeyError, AttributeError, ArithmeticError, RecursionError) as e:
        # What a host sent is outside input: a shape no check foresaw costs that host one
        # line, and the rest of the fleet is still compared (issue 25, class 6).
        return None, f"its results hold something tw does not read ({type(e).__name__})"
