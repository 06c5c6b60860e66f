"""The fleet's readiness for ia32_emulation=0, from each host's `tw watch --report --json`
(fleet/watch.yml's report action keeps it as <collection>/<host>/watch-report.json).

Every report is untrusted input (a host the user does not control wrote it): read through
core.files.read_regular (a regular file, bounded), parsed as JSON, and checked field by field
(types, finite numbers); a report that fails is refused with its reason and the rest are
shown.  Each host is judged alone: whatever its file holds (JSON nested 100,000 deep, which
Python's parser answers with RecursionError), it is refused with one line and every other host
is still answered.  A host is ready only on a complete, plausible report: its schema, a `stop`
list, a period (since and until, since <= until, neither before 2000 nor after now + a day of
clock skew) and a `coverage` whose `started` is not in the future; one that is not is refused,
never ready.  A host without a report is unknown, with why (its status.json, or no file)."""
import json
import math
import os
import time

from ..core import files
from ..core.ui import DataError

REPORT = "watch-report.json"
STATUS = "status.json"
MAX_BYTES = 16 * 2 ** 20
MAX_PROGRAMS = 10000
MAX_DEPTH = 32              # a report nests 4 deep; a deeper one is refused before it is parsed
EPOCH_MIN = 946684800.0     # 2000-01-01: no watch ran before
SKEW_S = 86400.0            # a host's clock may run ahead of ours by this much


def _num(v, what, host):
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise DataError(f"{host}: {REPORT}: {what} is not a finite number")
    return v


def _check(doc, host, now=None):
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
        if isinstance(s.get("execs"), (int, float)) and s["execs"] < 0:
            raise DataError(f"{host}: {REPORT}: a negative count of execs")
        out.append({"program": s["program"][:4096], "why": s["why"][:200],
                    "execs": _num(s.get("execs"), "execs", host),
                    "first_seen": _num(s.get("first_seen"), "first_seen", host),
                    "last_seen": _num(s.get("last_seen"), "last_seen", host),
                    "paths": sorted(str(k)[:64] for k in s.get("paths", {}))})
    cov = doc.get("coverage")
    if not isinstance(cov, dict):
        raise DataError(f"{host}: {REPORT}: no coverage (an incomplete report)")
    since, until = _num(doc.get("since"), "since", host), _num(doc.get("until"), "until", host)
    started = _num(cov.get("started"), "coverage.started", host)
    late = (now or time.time()) + SKEW_S
    if since is None or until is None:
        raise DataError(f"{host}: {REPORT}: no period (since and until)")
    if not EPOCH_MIN <= since <= until <= late:
        raise DataError(f"{host}: {REPORT}: the period is not plausible (since {since:.0f}, "
                        f"until {until:.0f}: since <= until, from 2000 to now)")
    if started is not None and not EPOCH_MIN <= started <= late:
        raise DataError(f"{host}: {REPORT}: coverage.started {started:.0f} is not plausible "
                        "(from 2000 to now)")
    return {"since": since, "until": until, "started": started, "stop": out}


def _depth(raw):
    """How deep the JSON text's arrays and objects nest (brackets inside strings not counted):
    a C loop through bytes.translate and split, not a Python loop over 16 MB."""
    text = raw if isinstance(raw, bytes) else raw.encode("utf-8", "surrogatepass")
    if text.count(b"[") + text.count(b"{") <= MAX_DEPTH:
        return 0
    # strings out: every "..." (escaped quotes first), then only the brackets are left
    text = text.replace(b"\\\\", b"").replace(b'\\"', b"")
    parts = text.split(b'"')
    outside = b"".join(parts[0::2])
    depth = top = 0
    for ch in outside.translate(None, bytes(c for c in range(256) if c not in b"[]{}")):
        depth += 1 if ch in b"[{" else -1
        top = max(top, depth)
        if top > MAX_DEPTH:
            break
    return top


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
    if _depth(raw) > MAX_DEPTH:
        raise DataError(f"{host}: {REPORT}: nested more than {MAX_DEPTH} deep (not a tw watch "
                        "report)")
    try:
        doc = json.loads(raw)
    except (ValueError, RecursionError) as e:
        raise DataError(f"{host}: {REPORT}: not JSON ({str(e)[:200]})")
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
        except (RecursionError, MemoryError, TypeError, ValueError, OSError) as err:
            # one host's file, whatever it does to a reader, costs that host only
            refused.append({"host": e.name, "why": f"{e.name}: {REPORT}: could not be read "
                                                   f"({type(err).__name__}: {str(err)[:200]})"})
            continue
        if rep is None:
            hosts.append({"host": e.name, "state": "unknown", "programs": [], "why": why})
            continue
        hosts.append({"host": e.name, "state": "not ready" if rep["stop"] else "ready",
                      "programs": rep["stop"], "since": rep["since"], "until": rep["until"],
                      "started": rep["started"], "why": None})
    return {"schema": "timewrite-fleet-readiness/1", "hosts": hosts, "refused": refused}
