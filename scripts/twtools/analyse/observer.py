"""What each tracer adds to a call: traced minus bare, from observer.json's raw batches."""
from . import stats

ANALYSIS = "observer/2"


def analyse(raw):
    if not raw:
        return None
    rows, bare = [], {}
    for r in raw.get("rows", []):
        out = {k: r.get(k) for k in ("variant", "op", "tracer", "supported", "available", "why")}
        if r.get("available") and r.get("samples"):
            out["ns_per_call"] = stats.summarize(r["samples"])
        elif r.get("available") and r.get("ns_per_call"):
            out["ns_per_call"] = dict(r["ns_per_call"], from_stored_summary=True)
        else:
            out["ns_per_call"] = {"value": None, "why": r.get("why") or "not measured"}
        if r.get("tracer") == "none":
            bare[r["variant"]] = out["ns_per_call"]
        rows.append(out)
    for out in rows:
        if out["tracer"] == "none":
            out["added_ns"] = None
            continue
        b = bare.get(out["variant"])
        if out["ns_per_call"].get("median") is not None and b and b.get("median") is not None:
            out["added_ns"] = stats.diff_summary(out["ns_per_call"], b)
        else:
            out["added_ns"] = {"value": None, "why": out.get("why") or "no bare run to subtract"}
    return {"analysis": ANALYSIS, "mode": raw.get("mode"), "op": raw.get("op"),
            "method": raw.get("method"), "rows": rows}
