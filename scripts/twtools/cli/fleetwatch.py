"""`tw fleet --readiness DIR...`: which hosts of a fleet could boot with ia32_emulation=0, from
each host's tw watch report (fleet/watch.yml -e tw_watch_action=report collects them):
the hosts where a 32-bit program (or a 64-bit one entering by int 0x80) ran in the period,
and which programs; the hosts with no report, or whose watch did not cover the whole
period, and why."""
import json
import time

from ..analyse import fleetwatch
from ..core import escape, ui


def _utc(t):
    try:
        return time.strftime("%Y-%m-%d %H:%M:%SZ", time.gmtime(t)) if t else "unknown"
    except (OverflowError, ValueError, OSError):     # analyse.fleetwatch bounds every time
        return "unknown"


def main(args):
    docs = [fleetwatch.readiness(d) for d in args.dirs]
    doc = {"schema": docs[0]["schema"], "hosts": [h for d in docs for h in d["hosts"]],
           "refused": [r for d in docs for r in d["refused"]]}
    for r in doc["refused"]:
        ui.say(f"tw fleet: {r['why']}")
    if args.json:
        print(json.dumps(doc, indent=1))
    else:
        n = {s: sum(1 for h in doc["hosts"] if h["state"] == s) for s in ("ready", "not ready", "unknown")}
        print(f"ia32_emulation=0 readiness: {n['ready']} ready, {n['not ready']} not ready, "
              f"{n['unknown']} unknown, {len(doc['refused'])} refused")
        for h in doc["hosts"]:
            head = f"  {escape.terminal(h['host'])}: {h['state']}"
            if h["state"] == "unknown":
                period = (f", {_utc(h['since'])} to {_utc(h['until'])}" if h.get("since") else "")
                print(f"{head}{period} ({escape.terminal(h['why'])})")
                continue
            print(f"{head}, {_utc(h['since'])} to {_utc(h['until'])}"
                  + (f" (watched since {_utc(h['started'])})" if h.get("started") and h["started"] > (h["since"] or 0) else ""))
            for p in h["programs"]:
                print(f"    {escape.shown_name(p['program'])} ({escape.terminal(p['why'])}): "
                      f"{p['execs']} exec(s), last seen {_utc(p['last_seen'])}"
                      + (f"; paths {', '.join(escape.terminal(x) for x in p['paths'])}"
                         if p["paths"] else ""))
    if not doc["hosts"]:
        raise ui.DataError("no host folder with a watch report or a status")
    return ui.EXIT_DATA if doc["refused"] else ui.EXIT_OK
