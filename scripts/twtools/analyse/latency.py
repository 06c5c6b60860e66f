"""Per-call write latency: percentiles from latency.json's raw bpftrace histograms."""
ANALYSIS = "latency/2"
PERCENTILES = (50, 90, 99)


def _pct(buckets, p):
    """(value, bucket width) of percentile p by linear interpolation inside its bucket, or
    (None, None) when it falls in the open overflow bucket or there are no counts."""
    total = sum(b["count"] for b in buckets)
    if total == 0:
        return None, None
    target, acc = total * p / 100.0, 0
    for b in buckets:
        if b["count"] and acc + b["count"] >= target:
            if b["hi_ns"] is None:
                return None, None
            frac = (target - acc) / b["count"]
            return b["lo_ns"] + frac * (b["hi_ns"] - b["lo_ns"]), b["hi_ns"] - b["lo_ns"]
        acc += b["count"]
    return None, None


def percentiles(hists, ps=PERCENTILES):
    """Each percentile from whichever histogram puts it in the narrowest bucket."""
    out = {}
    for p in ps:
        best = None
        for h in hists:
            v, w = _pct(h or [], p)
            if v is not None and (best is None or w < best[1]):
                best = (v, w)
        out[f"p{p}"] = best[0] if best else None
    return out


def analyse(raw):
    if not raw:
        return None
    runs = []
    for r in raw.get("runs", []):
        out = dict(r)
        fine, coarse = r.get("lin_ns") or r.get("linear") or [], r.get("lin_us") or []
        n = r.get("count") or 0
        over = sum(b["count"] for b in fine if b["hi_ns"] is None)
        # the fine histogram (100 ns steps up to 10 us) when most calls fit in it; else the
        # coarse one (50 us steps up to 5 ms: O_SYNC writes)
        out["linear"] = fine if (fine and over <= n * 0.10) or not coarse else coarse
        out["linear_step_ns"] = ((out["linear"][0]["hi_ns"] - out["linear"][0]["lo_ns"])
                                 if out["linear"] and out["linear"][0]["hi_ns"] else None)
        out["percentiles"] = percentiles([fine, r.get("log2"), coarse]) if n else {}
        runs.append(out)
    return {"analysis": ANALYSIS, "runs": runs}
