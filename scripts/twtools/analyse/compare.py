"""Decisions: is B slower or faster than A, by how much, and what could have been detected.

Two kinds of comparison, one rule:

  between runs (tw compare)   A and B are two results directories.  Each cell's interval
                              already holds its run's drift (stats.clustered), so the ratio of
                              two cells, with its CI by quadrature, holds the run-to-run
                              component of both.  Cells are compared as absolute figures and
                              as ratios to each run's own reference cell (64-bit syscall,
                              null), which removes a machine-wide change of speed.
  within a session (tw ab)    A and B alternate in interleaved rounds; each round gives one
                              B/A ratio, and the decision rests on those paired ratios.

Both decide on the undisturbed figure (analyse.percall: the cost when the host leaves the CPU
alone), and show the typical one (the median) beside it; a cell whose primary figure is the
typical one (write-sync, or no trustworthy floor) is decided on that, and says so.

The rule: B is called slower (or faster) by X% only when the interval of B/A excludes 1 and
the call survives the Benjamini-Hochberg procedure over every decision of the comparison
(adjust): a comparison decides a hundred cells at once, and at 95% each interval misses one
time in twenty, so about five false calls per hundred are what chance alone gives without
it.  Otherwise the answer is "no difference detected", with the smallest difference the
interval could have detected: its larger half-width, in percent.
"""
import math

from . import exitdrift, percall, stats
from .percall import figure, ratio_of

# The false discovery rate the Benjamini-Hochberg procedure holds a comparison's calls to.
FDR = 0.05

SLOWER, FASTER, SAME = "slower", "faster", "no difference detected"

# The variant whose cells measure the host's own move between two runs (reference_of).
REF_VARIANT = "64-syscall"

# The most of its file a write-file batch overwrites (syscost.c FILE_SPAN): a batch sized by its
# time alone spanned 2.5-4.9 MiB for 4 KiB writes, and its figure followed the host's
# last-level cache (370 or 490 ns for whole runs on one guest).  Two cells whose batches
# spanned one within it and one well past it measured different things.
FILE_SPAN_BYTES = 128 * 1024


def file_span(c):
    """The bytes of its file one batch of a write-file cell overwrote (calls a batch x size),
    or None."""
    if (c or {}).get("op") != "write-file" or not c.get("calls_per_batch") or not c.get("size"):
        return None
    return c["calls_per_batch"] * c["size"]


def span_differs(a_cell, b_cell):
    """Why two write-file cells cannot be compared, or None: one's batches stayed within
    FILE_SPAN_BYTES of its file and the other's spanned more than twice that (a run from
    before the cap, or a --calls given by hand)."""
    sa, sb = file_span(a_cell), file_span(b_cell)
    if not sa or not sb:
        return None
    lo, hi = sorted((sa, sb))
    if hi <= 2 * FILE_SPAN_BYTES or hi <= 2 * lo:
        return None
    return (f"A's batches overwrote {sa / 1024:.0f} KiB of the file and B's "
            f"{sb / 1024:.0f} KiB; past the core's cache a write's cost follows the host's "
            "memory, so the two measured different things (docs/syscost.md)")


def decide(ratio, what="B"):
    """{decision, pct, pct_ci, detectable_pct, sentence} from a B/A ratio summary, or a
    decision of 'unknown' with why when the ratio is missing or not finite."""
    if not ratio or ratio.get("median") is None or ratio.get("ci_low") is None \
            or ratio.get("ci_high") is None \
            or not all(math.isfinite(ratio[k]) for k in ("median", "ci_low", "ci_high")):
        why = (ratio or {}).get("why") or "one side has no value"
        return {"decision": "unknown", "why": why, "sentence": f"unknown ({why})"}
    m, lo, hi = ratio["median"], ratio["ci_low"], ratio["ci_high"]
    pct = 100 * (m - 1)
    ci = [100 * (lo - 1), 100 * (hi - 1)]
    if lo > 1:
        d = SLOWER
    elif hi < 1:
        d = FASTER
    else:
        d = SAME
    detectable = max(abs(ci[0] - pct), abs(ci[1] - pct))
    p = p_value(ratio)
    if d == SAME:
        sentence = (f"{SAME}: {pct:+.1f}% [{ci[0]:+.1f}, {ci[1]:+.1f}]; differences smaller "
                    f"than about {detectable:.1f}% could not have been detected")
    else:
        sentence = f"{what} is {d} by {abs(pct):.1f}% [{ci[0]:+.1f}, {ci[1]:+.1f}]"
    return {"decision": d, "pct": pct, "pct_ci": ci, "detectable_pct": detectable,
            "sentence": sentence, "p": p, "what": what}


def chance_allows(tests, alpha=0.05, level=0.95):
    """The most calls that `tests` decisions with no difference behind them make by chance in
    `level` of such checks: the smallest m with P(Binomial(tests, alpha) > m) <= 1 - level."""
    cdf = 0.0
    for k in range(tests + 1):
        cdf += math.comb(tests, k) * alpha ** k * (1 - alpha) ** (tests - k)
        if 1 - cdf <= 1 - level + 1e-12:
            return k
    return tests


def _norm_sf(x):
    """The standard normal's survival function: scipy.stats.norm.sf's own function,
    scipy.special.ndtr(-x), the same value to the last bit.  scipy.special alone (0.2 s to
    import here) is imported, not scipy.stats (0.5 s), and here, not with the module: every
    `tw bench`, `tw ab` and `tw compare` imports this module, most of them (and every
    mistyped command line) without a p-value."""
    from scipy import special
    return float(special.ndtr(-x))


def p_value(ratio):
    """The two-sided p-value of B/A = 1 that the ratio's 95% interval implies, on the log
    scale (the interval's half-width there is z standard errors); None when it cannot be had."""
    m, lo, hi = ratio.get("median"), ratio.get("ci_low"), ratio.get("ci_high")
    if not m or m <= 0 or not lo or lo <= 0 or not hi or hi <= lo:
        if m and lo is not None and hi is not None and hi > lo:
            se = (hi - lo) / 2 / stats.Z
            return 2 * _norm_sf(abs(m - 1) / se)
        return None
    se = (math.log(hi) - math.log(lo)) / 2 / stats.Z
    return 2 * _norm_sf(abs(math.log(m)) / se)


def adjust(decisions, fdr=FDR):
    """Benjamini-Hochberg over a family of decisions (dicts from decide, changed in place):
    a call whose p-value does not survive becomes "no difference detected", with why.  Returns
    {tests, called_uncorrected, called, expected_by_chance, fdr, method}: expected_by_chance is
    how many of the uncorrected calls chance alone would give if nothing differed."""
    ds = [d for d in decisions if d and d.get("decision") in (SLOWER, FASTER, SAME)
          and d.get("p") is not None]
    m = len(ds)
    raw_calls = sum(1 for d in ds if d["decision"] in (SLOWER, FASTER))
    out = {"tests": m, "called_uncorrected": raw_calls, "called": raw_calls,
           "expected_by_chance": round((1 - stats.CONFIDENCE) * m, 1), "fdr": fdr,
           "method": "Benjamini-Hochberg"}
    if not m:
        return out
    order = sorted(range(m), key=lambda i: ds[i]["p"])
    k = 0
    for rank, i in enumerate(order, 1):
        if ds[i]["p"] <= fdr * rank / m:
            k = rank
    keep = set(order[:k])
    qv = [0.0] * m
    running = 1.0
    for rank in range(m, 0, -1):
        i = order[rank - 1]
        running = min(running, ds[i]["p"] * m / rank)
        qv[i] = running
    called = 0
    for i, d in enumerate(ds):
        d["q"] = qv[i]
        if d["decision"] in (SLOWER, FASTER) and i not in keep:
            pct, ci = d["pct"], d["pct_ci"]
            d["decision_uncorrected"] = d["decision"]
            d["decision"] = SAME
            d["sentence"] = (f"{SAME}: {pct:+.1f}% [{ci[0]:+.1f}, {ci[1]:+.1f}] excludes 0 alone, "
                             f"but not after correcting for {m} tests (Benjamini-Hochberg, "
                             f"q = {qv[i]:.2f}); differences smaller than about "
                             f"{d['detectable_pct']:.1f}% could not have been detected")
        elif d["decision"] in (SLOWER, FASTER):
            called += 1
    out["called"] = called
    return out


def drift_share(a, b):
    """How much of a difference drift alone could explain, in percent of A: the two runs'
    drift estimates combined in quadrature (None when neither run could estimate drift)."""
    da, db = (a or {}).get("drift"), (b or {}).get("drift")
    if (da is None and db is None) or not (a or {}).get("median"):
        return None
    return 100 * math.hypot(da or 0.0, (db or 0.0) * a["median"] / b["median"]
                            if b and b.get("median") else 0.0) / a["median"]


def at_a_exit_price(fb, xa, xb, k, per=1.0):
    """B's figure at A's price of a VM exit: B - k (xB - xA) / per, where k is the exits B's
    cell pays a call, xA and xB each run's price of one exit (its cpuid cell) and per what B's
    figure is counted in (1 for an absolute figure, B's reference for a ratio to it).  Its
    half-width is B's and the two prices' in quadrature."""
    m = fb["median"] - k * (xb["median"] - xa["median"]) / per
    h = math.hypot(stats.half_width(fb),
                   k * math.hypot(stats.half_width(xa), stats.half_width(xb)) / per)
    return dict(fb, median=m, ci_low=m - h, ci_high=m + h)


def _exit_priced(d, raw, shift, k):
    """A decision made at A's exit price (d), against the one as measured (raw): a call that
    the exit's move explains is "within drift", with both in its sentence."""
    d["as_measured"] = {x: raw.get(x) for x in ("decision", "pct", "pct_ci")}
    d["at_a_exit_price"] = True
    what = (f"this host's VM exit (cpuid) moved {shift:+.1f}% between the runs and this cell "
            f"pays {k:g} exit{'' if k == 1 else 's'} a call")
    if raw["decision"] in (SLOWER, FASTER) and d["decision"] == SAME:
        d["decision"] = "within drift"
        d["sentence"] = (f"no decision: {raw['pct']:+.1f}% [{raw['pct_ci'][0]:+.1f}, "
                         f"{raw['pct_ci'][1]:+.1f}] as measured, but {what}: at A's exit price "
                         f"{d['pct']:+.1f}% [{d['pct_ci'][0]:+.1f}, {d['pct_ci'][1]:+.1f}]")
    else:
        d["sentence"] = f"at A's exit price ({what}): {d['sentence']}"
    return d


def figure_of(a_cell, b_cell):
    """The figure two runs' cell is decided on: 'typical' when either run's cell leads with its
    typical figure (write-sync, or no trustworthy floor), else 'undisturbed'."""
    return "typical" if "typical" in ((a_cell or {}).get("primary"),
                                      (b_cell or {}).get("primary")) else "undisturbed"


def reference_of(op, size, which="undisturbed"):
    """(variant, op, size) of the cell whose move between two runs of one host measures the
    host's own move for a cell of this op and size decided on `which` figure: the 64-bit
    syscall's null call (the CPU), or for a cell decided on its typical figure the 64-bit
    syscall's same call of the same size.  A typical figure carries the host's noise as much
    as the call, and a call that waits on the device or touches memory carries more of it
    than the null call: an A/A pair once saw every O_SYNC cell 11% faster, and one beside a
    cache-thrashing neighbour the write-file cells' typical figures 15-24% faster where the
    null call's moved 5.8%."""
    if op in percall.WAITING_OPS or which == "typical":
        return REF_VARIANT, op, size
    return REF_VARIANT, "null", None


def _same_cell(x, y):
    return x is y or all((x or {}).get(k) == (y or {}).get(k)
                         for k in ("variant", "op", "size", "shape"))


def _levels(c):
    """{level: {value, ci_low, ci_high}} of a cell's undisturbed figure: each of its two
    levels' (analyse/percall.two_states) with an interval, or its one figure as 'only'."""
    st = ((c or {}).get("undisturbed") or {}).get("states") or {}
    out = {side: st[f"{side}_figure"] for side in ("lower", "upper")
           if (st.get(f"{side}_figure") or {}).get("ci_low") is not None}
    if not out and (c or {}).get("undisturbed_ci_low") is not None:
        out["only"] = {"value": c["undisturbed_ns"], "ci_low": c["undisturbed_ci_low"],
                       "ci_high": c["undisturbed_ci_high"]}
    return out


def _at_level(c, f):
    """The cell with its undisturbed figure (ns, cycles and the ratio to the reference, each
    scaled alike) at one of its levels."""
    old = c.get("undisturbed_ns")
    if not old or f["value"] == old:
        return c
    k = f["value"] / old
    out = dict(c, undisturbed_ns=f["value"], undisturbed_ci_low=f["ci_low"],
               undisturbed_ci_high=f["ci_high"])
    cy = c.get("undisturbed_cycles")
    if cy:
        kc = cy["value"] / old
        out["undisturbed_cycles"] = {"value": f["value"] * kc, "ci_low": f["ci_low"] * kc,
                                     "ci_high": f["ci_high"] * kc}
    r = c.get("undisturbed_ratio")
    if r and r.get("median") is not None:
        out["undisturbed_ratio"] = dict(r, median=r["median"] * k, ci_low=r["ci_low"] * k,
                                        ci_high=r["ci_high"] * k)
    return out


def same_state(a_cell, b_cell):
    """(a, b, the levels compared or None): when either cell's fast processes sit at two
    levels (analyse/percall.two_states) and the two figures' intervals miss each other, each
    side's figure at the levels nearest each other,
    so that a rerun whose fast processes drew the other level more often is no difference
    (issue 62: on an AMD EPYC Zen 3 guest, 64-syscall getppid inline gave 183.5 ns
    [183.0, 183.9] from 5 fast processes at its upper level and 139.8 [135.1, 144.5] from 3
    of 5 at its lower, the next run's upper 180.3 [118.3, 242.2] from its other 2)."""
    la, lb = _levels(a_cell), _levels(b_cell)
    if not la or not lb or (set(la) == {"only"} and set(lb) == {"only"}):
        return a_cell, b_cell, None
    fa, fb = figure(a_cell, "undisturbed"), figure(b_cell, "undisturbed")
    if fa and fb and fa["ci_low"] <= fb["ci_high"] and fb["ci_low"] <= fa["ci_high"]:
        return a_cell, b_cell, None         # the figures agree as they are
    x, y = min(((x, y) for x in la for y in lb),
               key=lambda p: abs(math.log(la[p[0]]["value"] / lb[p[1]]["value"])))
    return _at_level(a_cell, la[x]), _at_level(b_cell, lb[y]), {"a": x, "b": y}


def between_runs(a_cell, b_cell, a_ref=None, b_ref=None, same_host=False, which=None,
                 a_exit=None, b_exit=None, exits=None, speed=None, speed_for_typical=False):
    """The comparison of one cell in two runs on one figure (`which`: 'undisturbed',
    'typical', or None for the cell's primary one): absolute and relative to each run's
    reference, each with its decision, the typical figure's decision beside, and how much
    drift alone could explain.

    Each cell's interval holds its own run's spread, but not a change of the machine's speed
    between the runs (the host's other guests come and go: one Intel guest ran 11% faster an
    hour later).  When both runs come from the same host, the reference cell's own change
    (a_ref, b_ref: each run's 64-bit syscall null) measures that change, so drift alone
    could explain at least that much, and an absolute difference no larger than it is not
    called one.  Between different machines the reference's change is part of the machines'
    difference and cannot be told apart from drift: there the relative column is the answer.

    The host also sets the price of a VM exit, and moves it between runs: on an AMD EPYC guest
    (family 25, model 17) one cpuid cost 3600 ns [3593, 3608] and, three minutes later,
    3556 [3537, 3574], and every int 0x80 cell, which pays one exit a call there, moved with
    it, so an A/A comparison called 8 of them.  When both runs are one host's and each priced
    an exit (a_exit, b_exit: their cpuid cells), a cell that pays exits (exits: B's exits per
    call, as the kernel's facts predict and its own run's fit agrees, analyse/causes.py) is
    decided at A's exit price, absolute and relative: what the kernel does, not what the host
    charged at that moment.  The figure as measured stays beside it (as_measured).

    speed: the change of speed fitted over every kernel-entering cell of the two runs
    (analyse/basemodel.py, its scale {value, ci_low, ci_high}).  Where it is given, it is the
    machine's move for the undisturbed figure, not the reference cell's: a kernel that adds a
    constant to every entry (one VERW on every exit to user) moves the 64-bit syscall's null
    call by +213% on the same CPU without the CPU's speed moving at all.  speed_for_typical:
    the same for a typical figure (the caller's choice where the base moved by an added
    constant, which the 64-bit syscall's same call then carries as well)."""
    if which is None:
        which = figure_of(a_cell, b_cell)
    levels = None
    if which == "undisturbed":
        a_cell, b_cell, levels = same_state(a_cell, b_cell)
    out = {"figure": which, "levels": levels, "absolute": None, "relative": None, "typical": None,
           "drift_pct": drift_share(a_cell, b_cell) if which == "typical" else None,
           "machine_shift_pct": None,
           "why_figure": (a_cell or {}).get("primary_why") or (b_cell or {}).get("primary_why")
           if which == "typical" else None}
    pricing = bool(same_host and exits and which == "undisturbed")
    if pricing and figure(a_exit, which) and figure(b_exit, which):
        # The exit's price is taken out below, at each run's matrix's own moment: the
        # intervals as measured there, not those widened over the run's later price
        # (analyse/exitdrift.py), which would count the move twice.
        a_cell, b_cell = exitdrift.at_moment(a_cell), exitdrift.at_moment(b_cell)
    fa, fb = figure(a_cell, which), figure(b_cell, which)
    ra_ref, rb_ref = figure(a_ref, which), figure(b_ref, which)
    # Both runs timed the core's clock (analyse/coreclock.py): the absolute decision is on
    # cycles, which do not move when the host runs the core at another clock (a step is 3.7%,
    # and two runs minutes apart met clocks 10% apart).
    ca, cb = (figure(a_cell, "cycles"), figure(b_cell, "cycles")) if which == "undisturbed" \
        else (None, None)
    out["unit"] = "ns"
    if ca and cb:
        fa, fb, out["unit"] = ca, cb, "cycles"
        ra_ref, rb_ref = figure(a_ref, "cycles"), figure(b_ref, "cycles")
    by_speed = bool(speed and speed.get("value") and (which == "undisturbed" or speed_for_typical))
    if same_host and by_speed:
        shift = 100 * (speed["value"] - 1)
        out["machine_shift_pct"] = shift
        out["drift_pct"] = max(out["drift_pct"] or 0.0, abs(shift))
    elif same_host and ra_ref and rb_ref and ra_ref.get("median") and rb_ref.get("median"):
        shift = 100 * (rb_ref["median"] / ra_ref["median"] - 1)
        out["machine_shift_pct"] = shift
        out["drift_pct"] = max(out["drift_pct"] or 0.0, abs(shift))
    unit = "cycles" if out["unit"] == "cycles" else "undisturbed"
    xa, xb = (figure(a_exit, unit), figure(b_exit, unit)) if pricing else (None, None)
    priced = bool(xa and xb and xa.get("median") and fa and fb)
    out["exits_per_call"] = exits if priced else None
    out["exit_shift_pct"] = 100 * (xb["median"] / xa["median"] - 1) if priced else None
    if fa and fb:
        r = stats.ratio_summary(fb, fa)
        out["absolute"] = dict(decide(r), ratio=r, figure=which)
        if priced:
            raw = out["absolute"]
            r = stats.ratio_summary(at_a_exit_price(fb, xa, xb, exits), fa)
            out["absolute"] = _exit_priced(dict(decide(r), ratio=r, figure=which), raw,
                                           out["exit_shift_pct"], exits)
        shift = out["machine_shift_pct"]
        if shift is not None and out["absolute"]["decision"] in (SLOWER, FASTER) \
                and abs(out["absolute"]["pct"]) <= abs(shift) + out["absolute"]["detectable_pct"]:
            out["absolute"]["decision"] = "within drift"
            out["absolute"]["sentence"] = (
                f"no decision: {out['absolute']['pct']:+.1f}% "
                f"[{out['absolute']['pct_ci'][0]:+.1f}, {out['absolute']['pct_ci'][1]:+.1f}], "
                + (f"but this machine's speed moved {shift:+.1f}% between the runs (fitted over "
                   "every kernel-entering cell): read the premium column" if by_speed else
                   f"but this machine's own 64-bit syscall moved {shift:+.1f}% between the runs: "
                   "read the relative column"))
        ra, rb = ratio_of(a_cell, which), ratio_of(b_cell, which)
        if which == "typical" and a_ref and b_ref:
            # A typical figure carries the host's noise, and a call that touches more memory
            # or a device carries more of it than the null call does: beside a neighbour that
            # thrashed the caches, the 64-bit null call's typical figure moved -5.8% between
            # two runs and the write-file cells -15% to -24%.  The reference passed for a
            # typical figure is the same call's on the 64-bit syscall (present/compare
            # _reference), which met the same noise; the reference itself has no relative
            # figure.  The two figures' intervals, each holding its run's drift, combine in
            # quadrature: a ratio paired round by round is narrower but holds only the
            # run's own share of noise (+12-20% on write-sync in an A/A pair of a quiet
            # host, on intervals of +-5%).
            ra, rb = (None, None) if _same_cell(a_cell, a_ref) else \
                (stats.ratio_summary(fa, figure(a_ref, which)),
                 stats.ratio_summary(fb, figure(b_ref, which)))
        if ra and rb:
            rr = stats.ratio_summary(rb, ra)
            out["relative"] = dict(decide(rr), ratio=rr, figure=which)
            if priced and rb_ref and rb_ref.get("median"):
                raw = out["relative"]
                rr = stats.ratio_summary(at_a_exit_price(rb, xa, xb, exits, rb_ref["median"]),
                                         ra)
                out["relative"] = _exit_priced(dict(decide(rr), ratio=rr, figure=which), raw,
                                               out["exit_shift_pct"], exits)
        rel = out["relative"]
        if same_host and which == "typical" and rel and out["absolute"]["decision"] in (SLOWER, FASTER) \
                and rel["decision"] != out["absolute"]["decision"]:
            # Two runs of one host met different shares of its noise, and a typical figure
            # moves with that share: beside the neighbour, an A/A pair whose host was fast in
            # 50% and 79% of its probes moved five write-file cells' typical figures by -15%
            # to -24%, beyond the null call's -5.8%.  On one host the relative column, against
            # the same call that met the same noise, is the decision.
            d = out["absolute"]
            d["decision"] = "within drift"
            d["sentence"] = (f"no decision: {d['pct']:+.1f}% [{d['pct_ci'][0]:+.1f}, "
                             f"{d['pct_ci'][1]:+.1f}] as measured, but a typical figure moves "
                             "with the share of the host's noise a run met: read the relative "
                             "column, against the same call on the 64-bit syscall")
    if which != "typical":
        ta, tb = figure(a_cell, "typical"), figure(b_cell, "typical")
        if ta and tb:
            out["typical"] = dict(decide(stats.ratio_summary(tb, ta)), figure="typical")
    return out


# Rounds below which the halves of a run are not compared: 8 a half, as the drift term's.
HALVES_MIN_ROUNDS = 16


def paired_rounds(a_rounds, b_rounds, which="undisturbed", copies=None):
    """The decision from interleaved rounds: B/A of the undisturbed figures with a jackknife
    over rounds (stats.undisturbed_ratio), or of the typical ones, one B/A per round
    (stats.paired).  copies: each round's copy index (tw ab runs each side from several fresh
    copies of its binary): the undisturbed B/A then replicates over the copies
    (stats.grouped_ratio), so the interval holds the placement of the binaries' files.  With
    enough rounds, also B/A of each half of the run ('halves') and 'moved': whether the two
    halves' intervals miss each other.  The decision stands on the whole run, but a B/A that
    moved during it has no one size: a rerun lands elsewhere."""
    def undisturbed(ix):
        if copies is None:
            return stats.undisturbed_ratio([b_rounds[i] for i in ix], [a_rounds[i] for i in ix])
        groups = sorted({copies[i] for i in ix})
        return stats.grouped_ratio([[b_rounds[i] for i in ix if copies[i] == g] for g in groups],
                                   [[a_rounds[i] for i in ix if copies[i] == g] for g in groups])
    n = len(a_rounds)
    if which == "undisturbed":
        r = undisturbed(range(n))
    else:
        r = stats.paired(b_rounds, a_rounds, "ratio")
    out = dict(decide(r), ratio=r, figure=which)
    if which == "undisturbed":
        # What B adds per call, in ns (tw ab --wall): the same rounds, the same copies.
        if copies is None:
            out["added"] = stats.undisturbed_ratio(b_rounds, a_rounds, how="diff")
        else:
            groups = sorted(set(copies))
            out["added"] = stats.grouped_ratio(
                [[b_rounds[i] for i in range(n) if copies[i] == g] for g in groups],
                [[a_rounds[i] for i in range(n) if copies[i] == g] for g in groups], how="diff")
        out["a"] = stats.undisturbed(a_rounds)
    if which == "undisturbed" and n >= HALVES_MIN_ROUNDS:
        h = n // 2
        halves = [undisturbed(range(h)), undisturbed(range(h, n))]
        if all(halves):
            out["halves"] = [{k: x[k] for k in ("median", "ci_low", "ci_high")} for x in halves]
            x, y = halves
            out["moved"] = bool(x["ci_high"] < y["ci_low"] or y["ci_high"] < x["ci_low"])
    return out


def ab(doc):
    """The decisions of a tw ab run (ab.json): per cell, B/A of the undisturbed figures from
    the rounds both sides have, the typical figures' B/A beside, and the Benjamini-Hochberg
    correction over the cells (returned as the rows' common 'family')."""
    from .percall import usable
    out = []
    for c in (doc or {}).get("cells", []):
        ra = {r["round"]: usable(r)[0] for r in c["a"]["rounds"]}
        rb = {r["round"]: usable(r)[0] for r in c["b"]["rounds"]}
        common = sorted(set(ra) & set(rb))
        # tw ab/2: the copy of each side's binary a round ran from (the same index on both)
        cp = {r["round"]: r.get("copy") for r in c["a"]["rounds"]}
        copies = [cp[i] for i in common] if common and all(
            isinstance(cp[i], int) for i in common) else None
        row = {k: c[k] for k in ("variant", "op", "shape")}
        why = c["a"].get("reason") or c["b"].get("reason")
        if why or len(common) < 2:
            row.update(decision="unknown", figure=None,
                       sentence=f"unknown ({why or f'only {len(common)} paired round(s)'})")
        else:
            which = "typical" if c["op"] == "write-sync" else "undisturbed"
            row.update(paired_rounds([ra[i] for i in common], [rb[i] for i in common], which,
                                     copies))
            if which == "undisturbed":
                row["typical"] = paired_rounds([ra[i] for i in common], [rb[i] for i in common],
                                               "typical")
            row["rounds"] = len(common)
        out.append(row)
    family = adjust(out)
    for row in out:
        row["family"] = family
    return out
