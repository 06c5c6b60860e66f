"""A window whose int 0x80 path is priced in CPU time but not in VM exits says why, in the
state, in --report's JSON and in its text.

Why it can break: the exits per second are the path's per-call excess over the price of one
exit (the matrix's cpuid cell).  When that cell has no undisturbed figure (a short --measure on
a host that is seldom quiet) the figure was dropped without a word: the report printed the CPU
time alone, the JSON said None, and CI failed on a host where a live test expected a number.
The state's `why` column carries the reason the cost is unknown, else the reason the exits are.
"""
import time

from twtools.analyse import watch as analyse
from twtools.store import watchdb
from twtools.present import watch as present

WHY = "unknown: the cpuid cell has no undisturbed interval (too few quiet processes)"


def _window(t, exits):
    q = {"calls": 1000, "ns_per_s": {"median": 5e6, "ci_low": 4e6, "ci_high": 6e6},
         "why": None, "label": "int 0x80 in text"}
    q.update(exits_per_s=exits) if exits else q.update(exits_why=WHY)
    return {"t0": t - 4, "t1": t, "seconds": 4.0, "added_ns": None, "added_why": "x",
            "programs": [{"program": "/opt/go386", "is32": True, "stops": "32-bit",
                          "paths": {"compat_int80_text": q}}], "wlat": []}


def _report(tmp_path, exits):
    t = time.time()
    db = watchdb.path_in(tmp_path)
    s = analyse.State(max_programs=1000)
    s.started = t - 60
    w = _window(t, exits)
    rows, lat = s.add_window(w)
    watchdb.save(db, s, [(w, rows, lat)])
    con = watchdb.connect(db, read_only=True)
    try:
        doc = analyse.readiness(watchdb.programs_since(con, t - 86400),
                                [dict(r, seconds=4.0) for r in watchdb.paths_since(con, t - 86400)],
                                t - 86400, t + 1)
    finally:
        con.close()
    return doc["stop"][0]["paths"]["compat_int80_text"], present.format_text(
        {**doc, "host": "h", "coverage": {}})


def test_exits_unknown_say_why_through_the_state(tmp_path):
    q, text = _report(tmp_path, None)
    assert q["ns_per_s"]["median"] == 5e6 and q["why"] is None
    assert q["exits_per_s"] is None and q["exits_why"] == WHY, q
    assert "VM exits " + WHY in text, text


def test_known_exits_carry_no_reason(tmp_path):
    q, text = _report(tmp_path, {"median": 2e5, "ci_low": 1e5, "ci_high": 3e5})
    assert q["exits_per_s"]["median"] == 2e5 and "exits_why" not in q, q
    assert "VM exits per second" in text and "unknown" not in text, text
