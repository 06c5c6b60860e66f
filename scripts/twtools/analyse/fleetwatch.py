"""The fleet's readiness for ia32_emulation=0, from each host's `tw watch --report --json`
(fleet/watch.yml's report action keeps it as <collection>/<host>/watch-report.json).

Every report is untrusted input (a host the user does not control wrote it): read through
core.files.read_regular (a regular file, bounded), parsed as JSON, and checked field by field
(types, finite numbers, each within its plausible range: times between 2000 and the period's
end plus a day of clock skew, counts whole and from 0 to MAX_COUNT); a report that fails is
refused with its reason and the rest are shown.  Each host is judged alone: whatever its file
holds (JSON nested 100,000 deep, which Python's parser answers with RecursionError; a time of
1e300, which no clock can print), it is refused with one line and every other host is still
answered.  A host is ready only on a complete, plausible report whose watch covered the whole
period: its schema, a `stop` list, a period (since and until, since <= until, neither before
2000 nor after now + a day of clock skew) and a `coverage` whose `started` is at or before
the period's start and whose `saved` (the watch's last save) is within SAVE_LAG_S of its end.
A host whose watch ran only part of the period, or says nothing of its coverage, is not
known to be ready: it is "unknown", with why.  A host without a report is unknown, with why
(its status.json, or no file)."""
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
MAX_COUNT = 10 ** 15        # execs or windows: 30 years of a million a second is 1e15
# The watch saves at every --interval (at most 3600 s): a state saved more than this before the
# report's end was not being written then (the watch had stopped).
SAVE_LAG_S = 3600.0 + 60.0


def _num(v, what, host, lo=None, hi=None):
    """A finite number from the report, within [lo, hi] when given; None stays None."""
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise DataError(f"{host}: {REPORT}: {what} is not a finite number")
    if (lo is not None and v < lo) or (hi is not None and v > hi):
        raise DataError(f"{host}: {REPORT}: {what} = {v:.6g} is not plausible (from "
                        f"{lo:.6g} to {hi:.6g})")
    return v


def _count(v, what, host):
    v = _num(v, what, host, 0, MAX_COUNT)
    if v is not None and v != int(v):
        raise DataError(f"{host}: {REPORT}: {what} = {v:.6g} is not a whole number")
    return v


def _check(doc, host, now=None):
    if not isinstance(doc, dict) or doc.get("schema") != "timewrite-watch-report/1":
        raise DataError(f"{host}: {REPORT}: not a tw watch report (schema)")
    stop = doc.get("stop")
    if not isinstance(stop, list) or len(stop) > MAX_PROGRAMS:
        raise DataError(f"{host}: {REPORT}: 'stop' is not a list of at most {MAX_PROGRAMS}")
    cov = doc.get("coverage")
    if not isinstance(cov, dict):
        raise DataError(f"{host}: {REPORT}: no coverage (an incomplete report)")
    late = (now or time.time()) + SKEW_S
    since = _num(doc.get("since"), "since", host, EPOCH_MIN, late)
    until = _num(doc.get("until"), "until", host, EPOCH_MIN, late)
    if since is None or until is None:
        raise DataError(f"{host}: {REPORT}: no period (since and until)")
    if since > until:
        raise DataError(f"{host}: {REPORT}: the period is not plausible (since {since:.0f} "
                        f"after until {until:.0f})")
    # Times the host's watch kept: from 2000 to the period's end plus the clock skew allowed.
    top = until + SKEW_S
    started = _num(cov.get("started"), "coverage.started", host, EPOCH_MIN, top)
    saved = _num(cov.get("saved"), "coverage.saved", host, EPOCH_MIN, top)
    _count(cov.get("windows"), "coverage.windows", host)
    _num(cov.get("window_seconds"), "coverage.window_seconds", host, 0, top - EPOCH_MIN)
    out = []
    for s in stop:
        if not isinstance(s, dict) or not isinstance(s.get("program"), str) \
                or not isinstance(s.get("why"), str) or not isinstance(s.get("paths", {}), dict):
            raise DataError(f"{host}: {REPORT}: a program entry is malformed")
        first = _num(s.get("first_seen"), "first_seen", host, EPOCH_MIN, top)
        last = _num(s.get("last_seen"), "last_seen", host, EPOCH_MIN, top)
        if first is not None and last is not None and first > last:
            raise DataError(f"{host}: {REPORT}: a program first seen after it was last seen")
        out.append({"program": s["program"][:4096], "why": s["why"][:200],
                    "execs": _count(s.get("execs"), "execs", host),
                    "first_seen": first, "last_seen": last,
                    "paths": sorted(str(k)[:64] for k in s.get("paths", {}))})
    return {"since": since, "until": until, "started": started, "saved": saved, "stop": out}


def coverage_gap(rep):
    """None when the host's watch covered the report's whole period, else why not, in words:
    it started after the period's start, or its last save is more than SAVE_LAG_S before the
    period's end (it had stopped), or the report does not say."""
    started, saved = rep["started"], rep["saved"]
    if started is None or saved is None:
        return "its report does not say when its watch started and last saved"
    if started > rep["since"]:
        return (f"its watch started {_span(started - rep['since'])} after the period began: "
                f"what ran before is unknown")
    if saved < rep["until"] - SAVE_LAG_S:
        return (f"its watch last saved {_span(rep['until'] - saved)} before the period ended: "
                f"what ran after is unknown")
    return None


def _span(s):
    return f"{s / 86400:.3g} days" if s >= 86400 else f"{s / 3600:.3g} hours" if s >= 3600 \
        else f"{s:.0f} s"


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
        except (RecursionError, MemoryError, TypeError, ValueError, OverflowError, OSError) as err:
            # one host's file, whatever it does to a reader, costs that host only
            refused.append({"host": e.name, "why": f"{e.name}: {REPORT}: could not be read "
                                                   f"({type(err).__name__}: {str(err)[:200]})"})
            continue
        if rep is None:
            hosts.append({"host": e.name, "state": "unknown", "programs": [], "why": why})
            continue
        gap = coverage_gap(rep)
        hosts.append({"host": e.name,
                      "state": "not ready" if rep["stop"] else "unknown" if gap else "ready",
                      "programs": rep["stop"], "since": rep["since"], "until": rep["until"],
                      "started": rep["started"], "saved": rep["saved"],
                      "why": None if rep["stop"] else gap})
    return {"schema": "timewrite-fleet-readiness/1", "hosts": hosts, "refused": refused}
