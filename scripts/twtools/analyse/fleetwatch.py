"""The fleet's readiness for ia32_emulation=0, from each host's `tw watch --report --json`
(fleet/watch.yml's report action keeps it as <collection>/<host>/watch-report.json).

Every report is untrusted input (a host the user does not control wrote it): read through
core.files.read_regular (a regular file, bounded), parsed as JSON, and checked field by field
(types, finite numbers); a report that fails is refused with its reason and the rest are
shown.  A host is ready when its report names no program in the period; a host without a
report is unknown, with why (its status.json, or no file)."""
import json
import math
import os

from ..core import files
from ..core.ui import DataError

REPORT = "watch-report.json"
STATUS = "status.json"
MAX_BYTES = 16 * 2 ** 20
MAX_PROGRAMS = 10000


def _num(v, what, host):
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise DataError(f"{host}: {REPORT}: {what} is not a finite number")
    return v


def _check(doc, host):
    if not isinstance(doc, dict) or doc.get("schema") != "timewrite-watch-report/1":
        raise DataError(f"{host}: {REPORT}: not a tw watch report (schema)")
    stop = doc.get("stop")
    if not isinstance(stop, list) or len(stop) > MAX_PROGRAMS:
        raise DataError(f"{host}: {REPORT}: 'stop' is not a list of at most {MAX_PROGRAMS}")
    out = []
    for s in stop:
        if not isinstance(s, dict) or not isinstance(s.get("program"), str) \
                or not isinstance(s.get("why"), str) or not isinstance(s.get("paths", {}), dict):
            raise DataError(f"{host}: {REPORT}: a program entry is malformed")
        out.append({"program": s["program"][:4096], "why": s["why"][:200],
                    "execs": _num(s.get("execs"), "execs", host),
                    "first_seen": _num(s.get("first_seen"), "first_seen", host),
                    "last_seen": _num(s.get("last_seen"), "last_seen", host),
                    "paths": sorted(str(k)[:64] for k in s.get("paths", {}))})
    cov = doc.get("coverage") if isinstance(doc.get("coverage"), dict) else {}
    return {"since": _num(doc.get("since"), "since", host), "until": _num(doc.get("until"), "until", host),
            "started": _num(cov.get("started"), "coverage.started", host), "stop": out}


def host_report(host_dir):
    """(report or None, why none)."""
    host = os.path.basename(os.path.normpath(host_dir))
    raw = files.read_regular(os.path.join(host_dir, REPORT), inside=host_dir, limit=MAX_BYTES,
                             what="watch report")
    if raw is None:
        st = files.read_regular(os.path.join(host_dir, STATUS), inside=host_dir, limit=2 ** 16,
                                what="status file")
        why = "no watch report"
        if st is not None:
            try:
                d = json.loads(st)
                why = f"{d.get('state')}: {d.get('why')}" if isinstance(d, dict) else why
            except ValueError:
                pass
        return None, why
    try:
        doc = json.loads(raw)
    except ValueError as e:
        raise DataError(f"{host}: {REPORT}: not JSON ({e})")
    return _check(doc, host), None


def readiness(collection):
    """{hosts: [{host, state: ready|not ready|unknown, programs, since, until, why}],
    refused: [{host, why}]} over a collection folder's host folders."""
    hosts, refused = [], []
    for e in sorted(os.scandir(collection), key=lambda e: e.name):
        if not e.is_dir(follow_symlinks=False) or e.name.startswith("."):
            continue
        try:
            rep, why = host_report(e.path)
        except DataError as err:
            refused.append({"host": e.name, "why": str(err)})
            continue
        if rep is None:
            hosts.append({"host": e.name, "state": "unknown", "programs": [], "why": why})
            continue
        hosts.append({"host": e.name, "state": "not ready" if rep["stop"] else "ready",
                      "programs": rep["stop"], "since": rep["since"], "until": rep["until"],
                      "started": rep["started"], "why": None})
    return {"schema": "timewrite-fleet-readiness/1", "hosts": hosts, "refused": refused}
