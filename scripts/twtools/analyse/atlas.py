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

Digesting every run's raw rounds took about a second of each report (and of each lesson),
the same work every time, so a run's digest is kept in the user's cache folder
($XDG_CACHE_HOME/timewrite/atlas-digests, else ~/.cache/timewrite/...), named by a hash of
all that decides it: the run's three files and name, the source of the analysis (twtools's
analyse and every package it imports) and numpy's version.  An edit of the atlas or of the
analysis is a new name, never a stale figure; a kept digest that is not this user's regular
file, or does not read back as written, is computed again; a cache that cannot be written
is only slower.
"""
import functools
import hashlib
import json
import os
import stat
from pathlib import Path

from ..core import files, paths
from ..core.ui import DataError
from . import fleet, results

ATLAS = paths.ROOT / "data" / "machines"
CACHE_MAX = 4 << 20          # a digest is tens of kB: anything far larger is not one of ours
ANALYSIS_SOURCE = ("analyse", "core", "machine", "store")    # every package analyse imports


def _percall_raw(run):
    path = run / "percall.json.xz"
    raw = files.read_regular(path, inside=run)
    if raw is None:
        raise DataError(f"{path}: absent")
    return path, raw


def _percall_xz(run):
    path, raw = _percall_raw(run)
    return fleet._json(path, fleet.unxz(path, raw))


def cache_dir():
    """Where the atlas's digests are kept (the module docstring)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "timewrite" / "atlas-digests"


@functools.lru_cache(maxsize=None)
def _analysis_key():
    """A hash of the analysis's source and numpy's version: what else decides a digest."""
    import numpy
    h = hashlib.sha256(numpy.__version__.encode())
    here = Path(__file__).resolve().parents[1]
    for p in sorted(p for pkg in ANALYSIS_SOURCE for p in here.glob(f"{pkg}/*.py")):
        h.update(p.name.encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


def _key(name, run, percall):
    h = hashlib.sha256(_analysis_key().encode() + b"\0" + name.encode() + b"\0" + percall)
    for stem in ("meta.json", "fingerprint.json"):
        h.update(b"\0" + (files.read_regular(run / stem, inside=run) or b""))
    return h.hexdigest()


def _kept(key):
    """The digest kept under key, or None (absent, not this user's regular file, damaged)."""
    try:
        fd = os.open(cache_dir() / f"{key}.json", os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid() or st.st_size > CACHE_MAX:
            return None
        obj = json.loads(os.read(fd, CACHE_MAX + 1))
    except (OSError, ValueError):
        return None
    finally:
        os.close(fd)
    if isinstance(obj, dict) and obj.get("key") == key and isinstance(obj.get("digest"), dict):
        return obj["digest"]
    return None


def _keep(key, digest):
    """Keep a digest under key, atomically; a cache that cannot be written is left alone."""
    d = cache_dir()
    tmp = d / f".{key}.{os.getpid()}.tmp"
    try:
        text = json.dumps({"key": key, "digest": digest}, allow_nan=False)
        d.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, d / f"{key}.json")
    except (OSError, ValueError, TypeError):
        try:
            os.unlink(tmp)
        except OSError:
            pass


def _digest(run, fp, meta, name):
    """A run's digest, kept or computed (and then kept)."""
    path, raw = _percall_raw(run)
    key = _key(name, run, raw)
    d = _kept(key)
    if d is None:
        d = fleet.digest_doc(fleet._json(path, fleet.unxz(path, raw)), fp, meta, name)
        _keep(key, d)
    return d


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
            d = _digest(run, fp, meta, f"{machine}/{run.name}")
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


def kernel_update(digests, root=ATLAS):
    """The atlas's clearest case of one CPU model that costs more after a kernel update: of
    every kernel update the atlas holds (fleet.bases_by_kernel: each kernel of a CPU model
    against the one measured before it), the one whose fitted added part excludes zero and is
    largest, a pair whose runs both priced a VM exit first, with both runs' fingerprints, what
    changed between them (machine.mitigations.facts_changed: the mitigations first, each with
    where its work runs) and each way's premium over its baseline (basemodel.between_digests).
    None when the atlas has no such pair.  {a, b (the digests), fp_a, fp_b, base, premiums,
    facts_changed}."""
    from ..machine import mitigations
    from . import basemodel
    best = None
    for b in fleet.bases_by_kernel(digests):
        add = b.get("added") or {}
        if add.get("ci_low") is None or add["ci_low"] <= 0:
            continue
        if best is None or (b["priced"], add["value"]) > (best["priced"], best["added"]["value"]):
            best = b
    if best is None:
        return None
    by = {d["host"]: d for d in digests}
    a, b = by[best["a"]], by[best["b"]]
    fps = []
    for d in (a, b):
        try:
            fp, _ = results.read_stage(Path(root) / d["machine"] / "runs" / d["run"], "fingerprint")
        except DataError:
            fp = None
        fps.append(fp or {})
    base, prem = basemodel.between_digests(a, b)
    return {"a": a, "b": b, "fp_a": fps[0], "fp_b": fps[1], "base": base, "premiums": prem,
            "facts_changed": mitigations.facts_changed(fps[0], fps[1])}
