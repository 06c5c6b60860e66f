"""What the watch costs, from measure.watchcost's raw rounds: per op, the slowdown of each leg
against `off`, paired round by round (the ratio of the two legs' medians in a round, then the
median of the rounds with its 95% interval: analyse.stats.paired), and the ns per call added."""
from . import stats


def analyse(doc):
    out = {"schema": "timewrite-watch-cost-report/1", "variant": doc["variant"], "legs": {}}
    rounds = doc["rounds"]
    for leg in ("exec", "window"):
        for op in doc["ops"]:
            on = [r[leg][op] for r in rounds]
            off = [r["off"][op] for r in rounds]
            ratio = stats.paired(on, off, "ratio")
            diff = stats.paired(on, off, "diff")
            base = stats.summarize([x for r in off for x in r])
            und = stats.undisturbed_ratio(on, off) or {}
            out["legs"].setdefault(leg, {})[op] = {
                "ratio": {k: ratio.get(k) for k in ("median", "ci_low", "ci_high", "n_rounds")},
                "undisturbed_ratio": {k: und.get(k) for k in ("median", "ci_low", "ci_high")},
                "added_ns": {k: diff.get(k) for k in ("median", "ci_low", "ci_high")},
                "off_ns": {k: base.get(k) for k in ("median", "ci_low", "ci_high")}}
    out["resources"] = doc.get("resources")
    return out
