"""Each call split into parts, from the per-call matrix and the traced bodies.

Per mechanism and operation (the ret shape: how a program calls through a stub or libc):

  total_ns       the per-call matrix's cell, its empty loop already removed
  loop_ns        that empty loop (what was removed)
  entry_exit_ns  the null call in the jmp shape (or inline) of the same mechanism: entering,
                 dispatching and leaving, without the return's misprediction; the ret shape
                 when the mechanism has no other (libc: its wrappers always return by ret;
                 then entry/exit includes the penalty, and the row says so)
  penalty_ns     the post-return penalty of this operation: ret shape minus jmp shape,
                 paired by round (twtools.analyse.percall); missing when there is no jmp shape
  body_ns        traced op minus traced null (traces/body.bt, one sample per process): the
                 operation's own kernel work; tracer cost and dispatch cancel
  waiting_ns     write-file and write-sync: off-CPU time in the very batches of the total
  body_cpu_ns    write-sync only: body minus waiting, the kernel's own CPU work (the traced
                 body of an O_SYNC write contains the wait for the device)
  residual_ns    total - entry/exit - penalty - body
  consistent     whether the residual's interval contains 0 (None for the null row, the
                 reference itself, and where a part is unknown)

An attribution.json written before bodies were kept raw carries its rows as computed then;
they are used as stored, and labelled so.
"""
from . import percall, stats

ANALYSIS = "attribution/2"
NOTES = {"null": "reference row: entry/exit by definition; body is 0 by construction",
         "write-sync": "the traced body includes the wait for the device (the task sleeps "
                       "inside write); waiting shows how much of it",
         "write-file": "without O_SYNC nothing should wait: waiting near 0"}


def _blind(why):
    return {"value": None, "why": why}


def _has(s):
    return bool(s) and s.get("median") is not None


def analyse(raw, pc):
    """The attribution rows from attribution.json (raw) and the analysed per-call matrix."""
    if not raw:
        return None
    if "bodies" not in raw:
        return dict(raw, source="stored summaries (written before bodies were kept raw)")
    bodies = {(b["variant"], b["op"]): b["samples_ns"] for b in raw.get("bodies", [])}
    penalties = {(p["variant"], p["op"], p.get("size")): p.get("penalty_ns")
                 for p in (pc or {}).get("penalties", [])}
    rows = []
    for v in raw.get("variants", []):
        name = v["name"]
        ops = raw.get("ops", [])
        if not v.get("supported"):
            rows += [{"variant": name, "op": o["op"], "size": o["size"], "supported": False,
                      "reason": v.get("reason")} for o in ops]
            continue
        null_traced = stats.summarize(bodies.get((name, "null"), []))
        ee, ee_shape = None, None
        for shape in ("jmp", "inline", "ret"):
            c = percall.find(pc, name, "null", shape=shape)
            if _has(c):
                ee, ee_shape = c, shape
                break
        for o in ops:
            op, size = o["op"], o["size"]
            total = percall.find(pc, name, op, size)
            if not _has(total):
                why = (total or {}).get("reason") or "not in the per-call matrix"
                rows.append({"variant": name, "op": op, "size": size, "supported": True,
                             "total_ns": _blind(why), "consistent": None, "note": why})
                continue
            traced = stats.summarize(bodies.get((name, op), []))
            if op == "null":
                body = {"median": 0.0, "ci_low": 0.0, "ci_high": 0.0, "n": 0, "unstable": False}
            elif _has(traced) and _has(null_traced):
                body = stats.diff_summary(traced, null_traced)
            else:
                body = _blind(raw.get("why") or "bpftrace saw no calls of this op")
            pen = penalties.get((name, op, size)) if ee_shape != "ret" else None
            wait = total.get("offcpu_ns") if op in ("write-sync", "write-file") else None
            above = stats.diff_summary(total, ee) if _has(ee) else None
            if above and _has(pen):
                above = stats.diff_summary(above, pen)
            if above and _has(body) and op != "null":
                resid = stats.diff_summary(above, body)
                consistent = bool(resid["ci_low"] <= 0 <= resid["ci_high"])
            else:
                resid = above if op == "null" else _blind("needs entry/exit and the traced body")
                consistent = None
            note = NOTES.get(op, "")
            if ee_shape == "ret":
                note = (note + "; " if note else "") + \
                    "entry/exit includes the post-return penalty (no jmp shape for this mechanism)"
            body_cpu = stats.diff_summary(body, wait) if op == "write-sync" and _has(wait) \
                and _has(body) else None
            rows.append({"variant": name, "op": op, "size": size, "supported": True,
                         "total_ns": total, "loop_ns": total.get("loop_ns"),
                         "entry_exit_ns": ee, "entry_exit_shape": ee_shape,
                         "penalty_ns": pen if _has(pen) else _blind(
                             "no jmp shape measured for this mechanism and operation"),
                         "body_ns": body, "body_cpu_ns": body_cpu, "waiting_ns": wait,
                         "traced_interval_ns": traced if _has(traced) else None,
                         "traced_null_interval_ns": null_traced if _has(null_traced) else None,
                         "residual_ns": resid, "consistent": consistent, "note": note})
    notes = [raw["why"]] if raw.get("why") else []
    return {"analysis": ANALYSIS, "mode": raw.get("mode"), "method": raw.get("method"),
            "rows": rows, "notes": notes, "source": "raw bodies"}
