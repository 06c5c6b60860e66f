"""The seccomp cache's answers against the kernel's (measure.walls.cachecheck's figures): for
each call, what machine.seccompsim predicts (cached or not) and what the kernel showed.

With /proc/PID/seccomp_cache the kernel says it outright.  Otherwise from the price: behind a
long filter the cache can hold, a cached call pays nothing of the filter and an uncached one
pays all of it, which the same filter headed by an argument load (never cached) prices
beside it.  A call counts as cached when what the long constant filter adds is below half of
what the uncached one adds (the median over rounds of each round's difference with the bare
call), and the check says so only where the uncached filter's price stands clear of the
rounds' spread; else it says unknown.
"""
import statistics

from ..machine import seccomp, seccompsim


def _sizes(t):
    t = t or {}
    if t.get("x86_64") is None or t.get("i386") is None:
        return None
    return {seccompsim.NATIVE: t["x86_64"], seccompsim.COMPAT: t["i386"]}


def verdicts(doc):
    """{'source', 'table_sizes', 'rows': [{..., 'predicted', 'measured', 'agree',
    'added_const', 'added_args'}]}; agree None where the kernel's answer is unknown."""
    sizes = _sizes(doc.get("table_sizes"))
    prog = seccompsim.load(bytes.fromhex(doc["const_hex"]))
    out = {"source": doc.get("source"), "table_sizes": doc.get("table_sizes"),
           "kernel": doc.get("kernel"), "long": doc.get("long"), "rows": []}
    for r in doc.get("rows") or []:
        arch = seccomp.ARCH_VALUES[r["arch"]]
        pred = seccompsim.cached([prog], r["nr"], arch, sizes)
        row = dict(r, predicted=pred, measured=None, agree=None)
        if "cache_file" in r:
            row["measured"] = bool(r["cache_file"])
        elif r.get("bare"):
            dc = [c - b for b, c in zip(r["bare"], r["const"])]
            da = [a - b for b, a in zip(r["bare"], r["args"])]
            row["added_const"], row["added_args"] = statistics.median(dc), statistics.median(da)
            spread = max(da) - min(da) if len(da) > 1 else None
            if row["added_args"] > 0 and (spread is None or
                                         min(da) > 0.5 * row["added_args"]):
                row["measured"] = row["added_const"] < 0.5 * row["added_args"]
            else:
                row["why"] = ("the uncached filter's price does not stand clear of the "
                              "rounds' spread: the host is too noisy to tell")
        if row["measured"] is not None and pred is not None:
            row["agree"] = row["measured"] == pred
        out["rows"].append(row)
    return out


def lines(v):
    """verdicts() as text."""
    t = v.get("table_sizes") or {}
    out = [f"seccomp's cache, predicted against the kernel ({v.get('kernel')}; tables of "
           f"{t.get('x86_64')} x86-64 and {t.get('i386')} i386 calls: {t.get('source')}), "
           + ("from /proc/PID/seccomp_cache" if v["source"] == "seccomp_cache" else
              f"from the price of each call behind a filter of {v.get('long')} compares the "
              "cache can hold, and behind the same headed by an argument load, which it "
              "cannot")]
    for r in v["rows"]:
        word = {True: "cached", False: "not cached", None: "unknown"}
        fig = (f"; the long filter adds {r['added_const']:+.0f} ns, the uncached one "
               f"{r['added_args']:+.0f} ns" if "added_const" in r else "")
        verdict = {True: "agree", False: "DISAGREE", None: "unknown"}[r["agree"]]
        out.append(f"  {r['way']} ({r['arch']}) nr {r['nr']}, {r['what']}: predicted "
                   f"{word[r['predicted']]}, the kernel: {word[r['measured']]}{fig}: {verdict}"
                   + (f" ({r['why']})" if r.get("why") else ""))
    return out
