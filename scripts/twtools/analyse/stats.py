"""Summaries with uncertainty: every figure a user sees is computed here, from raw samples.

Three kinds of estimate, one method each:

  summarize(samples)       a median with a distribution-free 95% CI (Hettmansperger-Sheather
                           interpolated order statistics, scipy.stats.mstats.median_cihs): for
                           samples that are independent of each other, such as repetitions of
                           one pass of timewrite.
  clustered(rounds, ...)   the same, with the process run (a round) as the unit: batches of one
                           process share its caches, placement and neighbours, so they are not
                           independent; each round gives one value (the median of its usable
                           batches) and the CI comes from those values (Kalibera & Jones:
                           replicate at the level where the variance lives).  The slow drift of
                           the host within the run is estimated from the early and late halves
                           of the rounds and folded into the interval, so that it covers a rerun.
  paired(a, b, ...)        a ratio or difference of two cells measured in the same rounds, one
                           value per round: drift that moves both cells cancels.
  undisturbed(rounds)      the cost when the host leaves the CPU alone, averaged over processes:
                           each round's floor (its fastest batch), then the mean of the
                           fastest UNDISTURBED_Q share of the floors (a lower-tail mean), with
                           a 95% interval from a delete-half jackknife (rounds are the
                           independent unit) and Student's t with rounds - 1 degrees of
                           freedom, widened by the run's drift and blocks terms and held to
                           the floors' level spacing.  A fixed share, not a fixed count: the
                           figure does not fall as more rounds are measured, as a k-best
                           minimum does.  docs/syscost.md, "The estimand", says why.
  undisturbed_ratio(a, b)  a/b of two cells' undisturbed figures measured in the same rounds,
                           with the same jackknife deleting each round from both at once.
  undisturbed_pooled(r)    the old method (before percall/4): the fastest 5% of every batch
                           pooled, kept to read old results beside the new.

Independent estimates combine by quadrature (diff_summary, ratio_summary, on the log scale for
ratios).  bootstrap() is the one resampling helper, for statistics with no closed form.
"""
import functools
import itertools
import math

import numpy as np
import statistics

CONFIDENCE = 0.95
# scipy.stats.norm.ppf(0.975), to the last bit (statistics.NormalDist gives 1 ulp more);
# tests/test_stats.py checks it against scipy.
Z = 1.959963984540054 if CONFIDENCE == 0.95 else statistics.NormalDist().inv_cdf(
    0.5 + CONFIDENCE / 2)


def _scipy():
    """scipy.stats, imported when a figure first needs it: the import alone takes over a
    second, which a warm `tw fleet` view (its figures read from the database) never needs."""
    from scipy import stats as sstats
    return sstats
# An estimate is unstable when its interval is wider than this share of its value: then
# a rerun could land anywhere in a range too wide to rank mechanisms by.
UNSTABLE_REL = 0.10
# k-best floor (LEBench): the mean of the K smallest values, trusted when they lie within
# FLOOR_SPREAD of each other; a median far above the floor says some runs were disturbed.
FLOOR_K = 5
FLOOR_SPREAD = 0.05
FLOOR_GAP = 0.25
# The undisturbed cost is the mean of this share of a cell's processes' floors (each round's
# fastest batch).  Chosen on two recorded pairs of back-to-back runs (docs/syscost.md, "The
# estimand"): on the AMD guest 0.1, 0.2 and 0.33 all overlapped in 122 of 122 cells; on the
# Ice Lake guest, whose host's fast state meets about a quarter of processes, 0.33 already
# reaches into the slow state (fast-cell half-widths 3.2%), 0.2 stays below it (1.1%); 0.1
# rests a --quick run's figure on one process.
UNDISTURBED_Q = 0.2
# The old method's share of every batch pooled (undisturbed_pooled), for old results.
POOLED_Q = 0.05
def method(tail="the fastest 20% of rounds"):
    """The undisturbed figure's method line, with the floors its mean takes (`tail`): a gated
    cell's are the fast state's (analyse.percall.gated_q)."""
    return (f"process floors: each round's fastest batch, then the mean of {tail}; 95% "
            "interval: delete-half jackknife over rounds, Student's t, widened by the figure's "
            "drift between the run's halves and its spread between eight blocks of the run, "
            "never narrower than the levels' spacing or the clock's resolution")


METHOD = method()
METHOD_POOLED = ("old method (pooled tail): the mean of the fastest 5% of all batches pooled; "
                 "delete-half jackknife over rounds, widened by the drift between halves")
# Floors closer than this share of the figure (or than the clock's resolution) are one level:
# the levels are about a core cycle apart (0.27 ns, 0.2% of a
# 135 ns call on the AMD guest of docs/syscost.md), a level's own jitter a hundredth of that.
LEVEL_TOL = 0.001
# Below this many rounds a jackknife has too few units to estimate its own spread: the
# interval is then flagged (the t quantile already widens it).
UNDISTURBED_MIN_ROUNDS = 8
# P(two independent 95% intervals of one value, of equal width, do not overlap): |Z| > Z sqrt(2).
# The self-checks (analyse.selfcheck, analyse.sweepcheck) give this share of their pairs as
# what chance alone would miss.
MISS_BY_CHANCE = 2 * (1 - statistics.NormalDist().cdf(Z * math.sqrt(2)))
SUMMARY_KEYS = ("median", "ci_low", "ci_high", "min", "max", "cv", "n", "unstable")


def median_ci(x, confidence=CONFIDENCE, *, sorted_median=None):
    """(low, high) of a distribution-free CI for the median of x, or (m, m) for one value.

    From 6 values on, Hettmansperger-Sheather interpolation (coverage close to nominal
    without assuming a distribution); below that, the range of the values, whose coverage
    for the median is 1 - 2 * 0.5**n (94% for 5 values, 50% for 2): honest, and wide.

    sorted_median: x's median when x is already a sorted float array (_sorted_median), from
    a summary that sorts its values once for both."""
    if sorted_median is None:
        a = np.sort(np.asarray(x, dtype=float))
    else:
        a = x
    if a.size == 0:
        return None, None
    if a.size == 1 or a[0] == a[-1]:
        return float(a[0]), float(a[-1])
    if a.size < 6:
        return float(a[0]), float(a[-1])
    lo, hi = _median_cihs(a, 1 - confidence)
    # Interpolating between tied neighbours can land an ulp past the median itself.
    med = float(np.median(a)) if sorted_median is None else sorted_median
    return min(lo, med), max(hi, med)


def _sorted_median(a):
    """float(np.median(a)) of a sorted array of numbers (no NaN): the middle value, or the
    mean of the two middle ones as np.median takes it ((x + y) / 2), without its partition:
    the summaries sort their values for the interval anyway."""
    n = a.size
    return float(a[n // 2]) if n % 2 else float((a[n // 2 - 1] + a[n // 2]) / 2)


def _median(x):
    """float(np.median(x)) of a non-empty float array, from its sort (_sorted_median): a tenth
    of np.median's cost on the few values the undisturbed figure's terms take it of, each
    figure four times.  A NaN (np.sort puts it last) goes to np.median, which says NaN."""
    a = np.sort(x)
    return _sorted_median(a) if not np.isnan(a[-1]) else float(np.median(x))


@functools.lru_cache(maxsize=256)
def _half_binom_cdf(n):
    """The CDF of Binomial(n, 1/2) at 0..n, read-only: the pmf's logarithm by the recurrence
    C(n, i+1) = C(n, i) (n - i) / (i + 1), so no factorial overflows at any n."""
    i = np.arange(n, dtype=float)
    logc = np.concatenate(([0.0], np.cumsum(np.log((n - i) / (i + 1)))))
    pmf = np.exp(logc - logc.max())
    cdf = np.cumsum(pmf) / pmf.sum()
    cdf.setflags(write=False)
    return cdf


def _median_cihs(a, alpha):
    """scipy.stats.mstats.median_cihs of the sorted array a, in numpy: the order statistics
    k and n-k-1 that bracket the median with at least 1 - alpha, interpolated between their
    neighbours so that coverage is close to 1 - alpha (Hettmansperger and Sheather 1986).
    Written out because importing scipy.stats for it costs a second in every `tw fleet`
    view; tests/test_stats.py checks it against scipy."""
    n = a.size
    alpha = min(alpha, 1 - alpha)
    cdf = _half_binom_cdf(n)

    def c(k):
        return cdf[k] if k >= 0 else 0.0

    k = int(np.searchsorted(cdf, alpha / 2 * (1 - 1e-12)))
    gk = c(n - k) - c(k - 1)
    if gk < 1 - alpha:
        k -= 1
        gk = c(n - k) - c(k - 1)
    gkk = c(n - k - 1) - c(k)
    w = (gk - 1 + alpha) / (gk - gkk)
    lam = (n - k) * w / float(k + (n - 2 * k) * w)
    return (float(lam * a[k] + (1 - lam) * a[k - 1]),
            float(lam * a[n - k - 1] + (1 - lam) * a[n - k]))


# The types of a list of plain numbers (bool excluded: a flag is not a figure), which the
# readers here and in percall.py and fleet.py take whole rather than value by value.
NUMBER = frozenset({float, int})


def _finite(samples):
    if isinstance(samples, np.ndarray) and samples.dtype.kind == "f":
        # A float array (what the fleet's digests hand over): no value is None.
        return samples[np.isfinite(samples)] if samples.size else samples
    if type(samples) is list and samples and set(map(type, samples)) <= NUMBER:
        # a list of numbers alone (nearly every one: a stage file's samples) converted in one
        # step, its non-finite values dropped by one mask: the same values in the same order
        a = np.asarray(samples, dtype=float)
        return a[np.isfinite(a)]
    return np.asarray([s for s in samples if s is not None and math.isfinite(s)], dtype=float)


def _small_median(x):
    """np.median of a short float array, the same value (the middle one, or the mean of the
    two middle ones), without numpy's per-call overhead: a round holds a few batches, and
    an analysis takes tens of thousands of them."""
    v = sorted(x.tolist())
    n = len(v)
    return v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2


def summarize(samples):
    """{median, ci_low, ci_high, min, max, cv, n, unstable} of independent samples.

    Non-finite values are dropped (and counted in 'dropped'); an empty list gives a
    summary whose median is None, never NaN."""
    raw = list(samples)
    a = _finite(raw)
    if a.size == 0:
        return {"median": None, "ci_low": None, "ci_high": None, "min": None, "max": None,
                "cv": None, "n": 0, "unstable": True, "dropped": len(raw)}
    # one sort for the median, its interval and the extremes (the mean and the spread are
    # summed over the values in their own order, as before)
    srt = np.sort(a)
    med = _sorted_median(srt)
    lo, hi = median_ci(srt, sorted_median=med)
    mean = float(np.mean(a))
    cv = float(np.std(a, ddof=1) / abs(mean)) if a.size > 1 and mean else 0.0
    out = {"median": med, "ci_low": lo, "ci_high": hi, "min": float(srt[0]),
           "max": float(srt[-1]), "cv": cv, "n": int(a.size),
           "unstable": unstable(med, lo, hi)}
    if len(raw) != a.size:
        out["dropped"] = len(raw) - int(a.size)
    return out


def unstable(med, lo, hi):
    """Whether an estimate's interval is too wide to rank by (see UNSTABLE_REL)."""
    if med is None or lo is None or hi is None:
        return True
    if med == 0:
        return hi != lo
    return bool((hi - lo) / 2 / abs(med) > UNSTABLE_REL)


def floor(values, k=FLOOR_K, spread=FLOOR_SPREAD):
    """The k-best floor: mean of the k smallest values, and whether they agree within
    `spread` of each other (LEBench's K=5 within 5%)."""
    a = np.sort(_finite(values))
    if a.size == 0:
        return {"value": None, "why": "no values", "k": 0, "agree": None}
    best = a[:min(k, a.size)]
    agree = bool(best[-1] <= best[0] * (1 + spread)) if best[0] > 0 else None
    return {"value": float(best.mean()), "k": int(best.size), "agree": agree,
            "why": None if best.size == k else f"only {best.size} values"}


def clustered(rounds, times=None):
    """The estimate of one cell measured in several process runs.

    rounds: one list of batch values per round (already without disturbed batches, or all of
    them when the caller keeps them); times: each round's start, in seconds, for the drift
    split (rounds in list order when None).  Returns the summary keys plus:

      ci_stat_low/high  the CI from the round values alone
      drift             how far the value moves over one run's length (drift_of), in the
                        cell's unit: where a rerun started right after would land
      ci_low/high       the CI widened by the drift, in quadrature: the interval a rerun
                        is expected to fall in
      floor             the k-best floor over every batch, and gap_to_floor = median/floor - 1
      n_rounds, n       rounds and batches used"""
    vals, per_round_n, order, kept = [], [], [], []
    for i, a in enumerate(_finite_each(list(rounds))):
        if a.size:
            vals.append(_small_median(a))
            per_round_n.append(int(a.size))
            order.append(times[i] if times is not None else i)
            kept.append(a)
    if not vals:
        out = summarize([])
        out.update(n_rounds=0, drift=None, floor=floor([]), gap_to_floor=None)
        return out
    v = np.asarray(vals)[np.argsort(order, kind="stable")]
    srt = np.sort(v)
    med = _sorted_median(srt)
    lo, hi = median_ci(srt, sorted_median=med)
    drift = drift_of(v)
    d = drift or 0.0
    wlo = med - math.hypot(med - lo, d)
    whi = med + math.hypot(hi - med, d)
    # every batch, the rounds' finite values laid end to end (as floats, whatever the rounds'
    # own type), rather than each value taken out of its round one by one again
    allb = np.concatenate(kept).astype(float, copy=False)
    fl = floor(allb)
    mean = float(np.mean(v))
    return {"median": med, "ci_low": wlo, "ci_high": whi, "ci_stat_low": lo, "ci_stat_high": hi,
            "min": float(allb.min()), "max": float(allb.max()),
            "cv": float(np.std(v, ddof=1) / abs(mean)) if v.size > 1 and mean else 0.0,
            "n": int(sum(per_round_n)), "n_rounds": int(v.size), "drift": drift,
            "floor": fl, "gap_to_floor": (med / fl["value"] - 1) if fl["value"] else None,
            "unstable": unstable(med, wlo, whi)}


def drift_of(v):
    """Slow drift in a time-ordered series of round values: how far the cell's value moves
    over one run's length, which is how far a rerun started right after this run is expected
    to land from it.  The medians of the early and late halves lie half a run apart, so
    their difference, less what the halves' own scatter explains (method of moments), is
    doubled.  None with fewer than 6 rounds (3 per half), too few to tell drift from scatter."""
    v = np.asarray(v, dtype=float)
    if v.size < 6:
        return None
    h = v.size // 2
    early, late = np.sort(v[:h]), np.sort(v[-h:])
    me, ml = _sorted_median(early), _sorted_median(late)
    delta = ml - me
    se = 0.0
    for half, med in ((early, me), (late, ml)):
        lo, hi = median_ci(half, sorted_median=med)
        se += ((hi - lo) / 2 / Z) ** 2
    return 2 * math.sqrt(max(0.0, delta ** 2 - se))


def paired(a_rounds, b_rounds, how="ratio"):
    """a/b (or a-b) of two cells measured in the same rounds: one value per round, from the
    medians of each round's batches, then a median with its CI over rounds.  Rounds where
    either cell has no value are left out."""
    return paired_medians(map(round_median, a_rounds), map(round_median, b_rounds), how)


def round_median(r):
    """The median of a round's finite batch values (what paired() takes of each round), or
    None when it has none."""
    x = _finite(r)
    return _small_median(x) if x.size else None


def paired_medians(a_medians, b_medians, how="ratio"):
    """paired() from each round's median (round_median; None for a round without a value), for
    a caller that pairs one cell's rounds with many others' (analyse/percall.py: every cell
    with the reference) and takes each round's median once."""
    vals = []
    for ma, mb in zip(a_medians, b_medians):
        if ma is None or mb is None:
            continue
        if how == "ratio":
            if mb == 0:
                continue
            vals.append(ma / mb)
        else:
            vals.append(ma - mb)
    s = summarize(vals)
    s["n_rounds"] = s["n"]
    return s


def half_width(s, mid="median"):
    """The larger of an interval's two halves around its figure (s[mid]): what a delta-method
    sum or difference adds in quadrature."""
    return max(s[mid] - s["ci_low"], s["ci_high"] - s[mid])


def half_width_rel(s, mid="median"):
    """CI half-width relative to the figure (s[mid]), or None."""
    if not s or s.get(mid) in (None, 0) or s.get("ci_low") is None or s.get("ci_high") is None:
        return None
    return (s["ci_high"] - s["ci_low"]) / 2 / abs(s[mid])


def diff_summary(a, b):
    """Summary-like estimate of a - b for two independent summaries (CI by quadrature)."""
    if not a or not b or a.get("median") is None or b.get("median") is None:
        return None
    d = a["median"] - b["median"]
    lo = math.hypot(a["median"] - a["ci_low"], b["ci_high"] - b["median"])
    hi = math.hypot(a["ci_high"] - a["median"], b["median"] - b["ci_low"])
    return {"median": d, "ci_low": d - lo, "ci_high": d + hi, "min": None, "max": None,
            "cv": None, "n": min(a.get("n") or 0, b.get("n") or 0),
            "unstable": bool(a.get("unstable") or b.get("unstable"))}


def ratio_summary(a, b, positive=False):
    """a/b for two independent summaries, b positive.  The CI comes by quadrature on the log
    scale when a's interval is positive too, else by first-order propagation of the relative
    errors (a can then be a difference that crosses zero).  positive: a is a quantity that
    cannot be negative (a cost), so an interval reaching below zero is cut at zero, never
    given a negative lower bound."""
    if not a or not b or a.get("median") is None or not b.get("median") or b["median"] <= 0 \
            or a.get("ci_low") is None or b.get("ci_low") is None:
        return None
    r = a["median"] / b["median"]
    base = {"min": None, "max": None, "cv": None, "n": min(a.get("n") or 0, b.get("n") or 0),
            "unstable": bool(a.get("unstable") or b.get("unstable"))}
    if a["median"] > 0 and a["ci_low"] > 0 and b["ci_low"] > 0:
        lo = math.hypot(math.log(a["median"] / a["ci_low"]), math.log(b["ci_high"] / b["median"]))
        hi = math.hypot(math.log(a["ci_high"] / a["median"]), math.log(b["median"] / b["ci_low"]))
        return dict(base, median=r, ci_low=r * math.exp(-lo), ci_high=r * math.exp(hi))
    ra = (a["ci_high"] - a["ci_low"]) / 2
    rb = (b["ci_high"] - b["ci_low"]) / 2 / b["median"]
    e = math.hypot(ra / b["median"], r * rb)
    return dict(base, median=r, ci_low=max(0.0, r - e) if positive else r - e, ci_high=r + e)


def bootstrap(data, statistic, n_resamples=2000, seed=1, confidence=CONFIDENCE):
    """(low, high): the one resampling helper, scipy.stats.bootstrap's BCa interval of
    statistic(*data) where each element of data is resampled on its own.  The seed is fixed
    so that a report rebuilt from the same samples gives the same interval."""
    arrays = tuple(np.asarray(d, dtype=float) for d in data)
    if any(a.size < 2 for a in arrays):
        v = float(statistic(*arrays)) if all(a.size for a in arrays) else None
        return v, v
    res = _scipy().bootstrap(arrays, statistic, confidence_level=confidence, n_resamples=n_resamples,
                           method="BCa", vectorized=False, random_state=seed)
    lo, hi = float(res.confidence_interval.low), float(res.confidence_interval.high)
    if not (math.isfinite(lo) and math.isfinite(hi)):
        res = _scipy().bootstrap(arrays, statistic, confidence_level=confidence,
                               n_resamples=n_resamples, method="percentile", vectorized=False,
                               random_state=seed)
        lo, hi = float(res.confidence_interval.low), float(res.confidence_interval.high)
    return lo, hi


def scale(s, k):
    """A summary multiplied by a positive constant (None stays None)."""
    if s is None:
        return None
    out = dict(s)
    for key in ("median", "ci_low", "ci_high", "ci_stat_low", "ci_stat_high", "min", "max", "drift"):
        if out.get(key) is not None:
            out[key] = out[key] * k
    return out


def tail_mean(values, q=POOLED_Q):
    """The mean of the lowest share q of values: the sample lower-tail mean, an L-statistic
    that weights the value straddling the cut by its fraction, so that it estimates the same
    population figure whatever the number of values (at least one value always counts)."""
    return _tail_sorted(np.sort(_finite(values)), q)


def _t_within(t, df):
    """P(|T| <= t) for Student's t with a whole number df of degrees of freedom: the finite
    series of Abramowitz and Stegun 26.7.3 (df odd) and 26.7.4 (df even), in theta =
    atan(t / sqrt(df)); every term is positive, so the sum is stable."""
    th = math.atan(t / math.sqrt(df))
    c2 = math.cos(th) ** 2
    if df % 2:
        term = acc = math.cos(th) if df > 1 else 0.0
        for k in range(1, (df - 1) // 2):
            term *= c2 * (2 * k) / (2 * k + 1)
            acc += term
        return 2 / math.pi * (th + math.sin(th) * acc)
    term = acc = 1.0
    for k in range(1, df // 2):
        term *= c2 * (2 * k - 1) / (2 * k)
        acc += term
    return math.sin(th) * acc


@functools.lru_cache(maxsize=1024)
def t_quantile(df, p):
    """Student's t quantile at p (0.5 < p < 1) for a whole number df >= 1 of degrees of
    freedom, without scipy: importing scipy.stats for it costs 60-70 MB of memory, which tw
    watch's window analysis must not keep.  Bisection on the series above to a relative
    1e-13; past df 2000, the Cornish-Fisher expansion about the normal quantile to df^-4
    (its error is below 1e-15 there).  tests/test_stats.py checks it against scipy.stats.t."""
    df = int(df)
    z = statistics.NormalDist().inv_cdf(p)
    if df > 2000:
        g = [(z ** 3 + z) / 4, (5 * z ** 5 + 16 * z ** 3 + 3 * z) / 96,
             (3 * z ** 7 + 19 * z ** 5 + 17 * z ** 3 - 15 * z) / 384,
             (79 * z ** 9 + 776 * z ** 7 + 1482 * z ** 5 - 1920 * z ** 3 - 945 * z) / 92160]
        return z + sum(gk / df ** (k + 1) for k, gk in enumerate(g))
    within = 2 * p - 1
    lo, hi = 0.0, max(z, 1.0)
    while _t_within(hi, df) < within:
        lo, hi = hi, hi * 2
    while hi - lo > 1e-13 * hi:
        mid = (lo + hi) / 2
        if _t_within(mid, df) < within:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def _t(n, confidence=CONFIDENCE):
    """Student's t quantile for n units (two-sided, at confidence)."""
    return t_quantile(max(n - 1, 1), 0.5 + confidence / 2)


def _tail_sorted(a, q):
    """tail_mean of an already sorted, finite array."""
    m = q * a.size
    if a.size == 0:
        return None
    if m <= 1:
        return float(a[0])
    f = int(m)
    return float((a[:f].sum() + (m - f) * (a[f] if f < a.size else 0.0)) / m)


# The delete-half jackknife's subsets: this many, drawn with a fixed seed so that a report
# rebuilt from the same samples gives the same interval (all of them when there are fewer).
HALF_SUBSETS = 200


def _tails(a, keep, q):
    """The tail mean of the sorted values `a` kept by each row of the boolean matrix `keep`,
    vectorised: the kept values stay in sorted order, so cumulative counts and sums along a
    row give the sum of the lowest floor(q*n) of them and the next one.  Only a prefix of `a`
    is read when every row finds its tail there (the tail is a few per cent of the values)."""
    n = keep.sum(axis=1).astype(float)
    m = q * n
    f = np.floor(m).astype(int)
    need = int(f.max()) + 1
    k = min(a.size, max(64, 4 * need))
    while True:
        w = keep[:, :k]
        cnt = np.cumsum(w, axis=1, dtype=np.int32)
        if k == a.size or bool(np.all(cnt[:, -1] >= np.minimum(f + 1, n))):
            break
        k = min(a.size, 2 * k)
    csum = np.cumsum(w * a[:k], axis=1)
    rows = np.arange(len(n))
    f1 = np.maximum(f, 1)
    i_f = np.argmax(cnt >= f1[:, None], axis=1)
    nxt = np.argmax(cnt >= (f + 1)[:, None], axis=1)
    has_next = (f + 1) <= n
    s = np.where(f >= 1, csum[rows, i_f], 0.0)
    nv = np.where(has_next, a[:k][nxt], 0.0)
    first = a[:k][np.argmax(cnt >= 1, axis=1)]
    return np.where(m <= 1, first, (s + (m - f) * nv) / np.where(m > 0, m, 1))


def _tails_one_each(a, keep, q):
    """_tails when every round gave one value (the floors), or as many values as each other
    round (_one_size), so every row keeps the same number of values: they are picked out whole
    as a matrix, sorted along each row as `a` is, and summed in the same order as _tails sums
    them (the same figures, to the last bit: the zeros _tails adds for the values a row
    leaves out change no sum), in a handful of array operations instead of a search per
    row.  `a` may carry leading axes
    (stretches: `a` stretch x round, `keep` stretch x subset x round), done together."""
    k = int(np.count_nonzero(keep.reshape(-1, keep.shape[-1])[0]))
    m = q * k
    # Only the first `need` kept values of a row count (the tail and the one after it): when
    # they are few against the row (the pooled figure's fastest 5% of every batch), only as
    # much of each row is read as holds them, as _tails does, and the kept values beyond
    # them are masked off.
    need = 1 if m <= 1 else min(int(m) + 1, k)
    n = keep.shape[-1]
    w = n if need == k or 4 * need + 16 >= n else 4 * need + 16
    while True:
        sel = keep[..., :w]
        if need < k:
            cnt = np.cumsum(sel, axis=-1, dtype=np.int32)
            if w < n and not bool(np.all(cnt[..., -1] >= need)):
                w = min(n, 2 * w)
                continue
            sel = sel & (cnt <= need)
        break
    # a boolean mask picks the kept values row by row, in order: one call, where finding
    # their places first (np.nonzero) and gathering them took three times as long
    kept = np.broadcast_to(a[..., None, :w], sel.shape)[sel].reshape(keep.shape[:-1] + (need,))
    if m <= 1:
        return kept[..., 0].copy()
    f = int(m)
    # the running sum's last (a sum of one value is that value)
    s = kept[..., 0] if f == 1 else np.cumsum(kept[..., :f], axis=-1)[..., -1]
    nv = kept[..., f] if f < k else 0.0
    return (s + (m - f) * nv) / m


def _one_each(vals):
    """Whether every round gave one value: vals is one array of them (the floors, as
    _floor_values gives them), or a list of arrays of one value each."""
    return isinstance(vals, np.ndarray) or all(v.size == 1 for v in vals)


def _tails_of(vals, a, keep, q):
    return (_tails_one_each if _one_size(vals) else _tails)(a, keep, q)


def _one_size(vals):
    """Whether every round has as many values as each other (one each, the floors, or as many
    batches each): then every delete-half subset keeps as many values, which is what
    _tails_one_each asks."""
    if isinstance(vals, np.ndarray):
        return True
    size = vals[0].size
    return all(v.size == size for v in vals)


def _sorted_rounds(vals):
    """(the rounds' values sorted, each one's round), of a list of arrays or of one array of
    one value a round (then the round of each value is its place: np.repeat of one each)."""
    if isinstance(vals, np.ndarray):
        order = np.argsort(vals, kind="stable")
        return vals[order], order
    lab = np.repeat(np.arange(len(vals)), [v.size for v in vals])
    allv = np.concatenate(vals)
    order = np.argsort(allv, kind="stable")
    return allv[order], lab[order]


@functools.lru_cache(maxsize=64)
def _half_subsets(n, seed=1):
    """(boolean matrix, d): row k marks the rounds delete-half subset k leaves out.  Every
    subset when there are few, else HALF_SUBSETS drawn with a fixed seed; the same n always
    gives the same matrix (cached: every cell of a run has the same number of rounds)."""
    d = n // 2
    if math.comb(n, d) <= HALF_SUBSETS:
        rows = list(itertools.combinations(range(n), d))
        m = np.zeros((len(rows), n), bool)
        for k, sub in enumerate(rows):
            m[k, list(sub)] = True
    else:
        r = np.random.default_rng(seed).random((HALF_SUBSETS, n))
        m = r <= np.sort(r, axis=1)[:, d - 1:d]
    m.setflags(write=False)
    return m, d


def _tail_jackknife(vals, q, other=None, how="ratio"):
    """(estimate, standard error) of the tail mean of the rounds' values pooled (or of its
    ratio to `other`'s, or with how="diff" its difference from it, whose round i was measured
    with round i of vals; each an array a round, or one array of a value a round, as
    _floor_values gives the floors), the error from the
    delete-half jackknife over rounds: leave out half the rounds, at random, many times.
    Deleting one round at a time is inconsistent for a statistic that rests on a few extreme
    values (as for quantiles): when the fastest batches sit in one or two rounds, most
    one-round deletions change nothing, and the interval comes out too narrow; deleting half
    of them is consistent there (Shao and Wu 1989).  The error is None below 2 rounds."""
    n = len(vals)
    a, lab = _sorted_rounds(vals)
    est = _tail_sorted(a, q)
    if other is not None:
        b, labb = _sorted_rounds(other)
        eb = _tail_sorted(b, q)
        if not eb:
            return None, None
        est = est / eb if how == "ratio" else est - eb
    if n < 2:
        return est, None
    dropped, d = _half_subsets(n)
    th = _tails_of(vals, a, ~dropped[:, lab], q)
    if other is not None:
        tb = _tails_of(other, b, ~dropped[:, labb], q)
        th = th / np.where(tb != 0, tb, np.nan) if how == "ratio" else th - tb
        th = th[np.isfinite(th)]
        if th.size < 2:
            return est, None
    se = math.sqrt((n - d) / (d * th.size) * float(np.sum((th - th.mean()) ** 2)))
    return est, se


def _rounds_in_order(rounds, times):
    """The rounds' finite values as arrays, in time order (list order when times is None),
    rounds with none left out."""
    order = range(len(rounds)) if times is None else \
        sorted(range(len(rounds)), key=lambda i: times[i])
    vals = _finite_each(rounds)
    return [vals[i] for i in order if vals[i].size]


def _finite_each(rounds):
    """[_finite(r) for r in rounds]; float arrays with no value to drop (the fleet's digests,
    percall's rounds) as they are, checked in one call, where _finite copies each whole."""
    if rounds and all(type(r) is np.ndarray and r.dtype == np.float64 and r.ndim == 1
                      for r in rounds) and np.isfinite(np.concatenate(rounds)).all():
        return list(rounds)
    return [_finite(r) for r in rounds]


def _floor_values(vals):
    """Each round's floor: its fastest usable batch.  A process keeps one layout level for its
    whole life (docs/syscost.md, "The estimand"), so the floor is that process's level plus the
    luck of its best batch; the rounds' floors are what a rerun draws anew.  One array, a
    floor a round (vals not empty), which the jackknives take as it is (_one_each)."""
    # every round's minimum in one pass over the rounds' values laid end to end (each round
    # has at least one: _rounds_in_order leaves the empty ones out)
    starts = np.cumsum([0] + [v.size for v in vals[:-1]])
    return np.minimum.reduceat(np.concatenate(vals), starts)


def _two_lowest_gaps(vals):
    """Each round's second-lowest value less its lowest (every round of vals has two or more),
    the rounds laid as rows of one matrix padded with infinity, so that one partition finds
    both in every row: the values np.sort(v)[:2] of each gives, without a sort a round."""
    sizes = [v.size for v in vals]
    if min(sizes) == max(sizes):
        # rounds of one size (most cells): the same matrix without padding, laid out whole
        m = np.concatenate(vals).astype(float, copy=False).reshape(len(vals), sizes[0])
    else:
        m = np.full((len(vals), max(sizes)), np.inf)
        rows = np.repeat(np.arange(len(vals)), sizes)
        cols = np.arange(rows.size) - np.repeat(np.cumsum([0] + sizes[:-1]), sizes)
        m[rows, cols] = np.concatenate(vals)
    low = np.partition(m, 1, axis=1)
    return low[:, 1] - low[:, 0]


def _levels(vals, floors, resolution, q):
    """(spacing, jitter, levels) of the levels the rounds' floors sit on.  Floors more than
    LEVEL_TOL of the figure (and the clock's resolution) above the level below are a level of
    their own; spacing is the median gap between neighbouring levels where the figure lives
    (the tail's levels and the one above), about one core cycle per call on the AMD guest of
    docs/syscost.md; None when the floors show one level.  jitter, how far a process's two
    fastest batches lie apart (the median over rounds), is reported beside it: the noise
    within one level."""
    two = [v for v in vals if v.size >= 2]
    jitter = _median(_two_lowest_gaps(two)) if two else 0.0
    fl = np.sort(_one_array(floors))
    tol = max(resolution or 0.0, LEVEL_TOL * float(fl[0]))
    levels = []
    # Python floats where they are the array's (numpy's scalars cost ten times as much in
    # this loop); another dtype keeps its own arithmetic
    for x in (fl.tolist() if fl.dtype == np.float64 else fl):
        if not levels or x - levels[-1][0] > tol:
            levels.append([float(x), 0])
        levels[-1][1] += 1
    # The figure lives on the levels of its tail (the fastest q of the floors) and on the next
    # level up, the one a rerun may draw in their place; the slow state's scatter above it
    # is not a level spacing.
    need, near = max(1, math.ceil(q * len(floors))), []
    for lv, count in levels:
        near.append(lv)
        if need <= 0:
            break           # the tail is full: this is the level above it
        need -= count
    gaps = np.diff(near)
    return (_median(gaps) if gaps.size else None), jitter, len(levels)


def undisturbed(rounds, q=UNDISTURBED_Q, confidence=CONFIDENCE, times=None, resolution=None):
    """{value, ci_low, ci_high, se, drift, n_rounds, n, q, method, terms, ...} of one cell's
    undisturbed cost from its rounds (one list of batch values per process run; times: each
    round's start, for the drift split, list order when None; resolution: the clock's
    resolution per call, one tick over the calls in a batch, in the values' unit); value None
    with 'why' when there is nothing to estimate from.

    The estimand averages over processes (docs/syscost.md, "The estimand"): each round's
    floor (its fastest usable batch), then the mean of the fastest UNDISTURBED_Q share of those
    floors, which leaves out the processes that met the host's slow state.  The interval:
      sampling  a delete-half jackknife over rounds and Student's t (rounds - 1 df);
      drift     the figure's move between the run's early and late halves (a trend in the
                host's state over the run's minutes, which the spread between rounds cannot
                see), in quadrature;
      blocks    the spread between eight stretches of the run beyond their own sampling
                error (a state that comes and goes), in quadrature;
      levels    never narrower than one spacing of the levels the floors show on each side,
                nor than the clock's resolution: a tail that happens to sit on one level has
                no spread, but a rerun may draw the next one.
    'terms' names those that set it."""
    vals = _rounds_in_order(rounds, times)
    if not vals:
        return {"value": None, "ci_low": None, "ci_high": None, "why": "no batches", "q": q,
                "n_rounds": 0, "n": 0}
    fl = _floor_values(vals)
    est, se = _tail_jackknife(fl, q)
    n = len(vals)
    out = {"value": est, "q": q, "n_rounds": n, "n": int(sum(v.size for v in vals)),
           "method": METHOD}
    if se is None:
        out.update(ci_low=None, ci_high=None, se=None, drift=None,
                   why=f"only {n} round(s): no interval can be computed")
        return out
    drift = _tail_drift(fl, q)
    blocks = _tail_blocks(fl, q)
    spacing, jitter, n_levels = _levels(vals, fl, resolution, q)
    h_stat = _t(n, confidence) * se
    h_blocks = Z * blocks if blocks else 0.0
    h = math.hypot(h_stat, drift or 0.0, h_blocks)
    terms = ["sampling"] + (["drift"] if drift else []) + (["blocks"] if blocks else [])
    h_min = max(spacing or 0.0, resolution or 0.0)
    if h < h_min:
        h = h_min
        terms = ["levels" if (spacing or 0) >= (resolution or 0) else "resolution"]
    one_level = n_levels == 1
    out.update(ci_low=est - h, ci_high=est + h, se=se, drift=drift, blocks=blocks,
               ci_stat_low=est - h_stat, ci_stat_high=est + h_stat,
               level_spacing=spacing, level_jitter=jitter, levels=n_levels,
               resolution=resolution,
               terms=terms, few_rounds=n < UNDISTURBED_MIN_ROUNDS)
    if one_level:
        out["one_level"] = ("every round's floor sits on one level: the interval is the "
                            "jackknife's, no narrower than the clock's resolution")
    return out


def undisturbed_pooled(rounds, q=POOLED_Q, confidence=CONFIDENCE, times=None):
    """The old method (before percall/4), kept to read old results beside the new: the mean of
    the fastest q of every batch pooled over rounds, the same jackknife and drift.  It depends
    on whether a run happened to draw the rarest low layout level (docs/syscost.md)."""
    vals = _rounds_in_order(rounds, times)
    if not vals:
        return {"value": None, "ci_low": None, "ci_high": None, "why": "no batches", "q": q,
                "n_rounds": 0, "n": 0, "method": METHOD_POOLED}
    est, se = _tail_jackknife(vals, q)
    n = len(vals)
    out = {"value": est, "q": q, "n_rounds": n, "n": int(sum(v.size for v in vals)),
           "method": METHOD_POOLED}
    if se is None:
        out.update(ci_low=None, ci_high=None)
        return out
    h = math.hypot(_t(n, confidence) * se, _tail_drift(vals, q) or 0.0)
    out.update(ci_low=est - h, ci_high=est + h)
    return out


# The run's rounds cut into this many blocks in time order for the reproducibility term (a
# default run's 32 rounds give blocks of 4; fewer than 4 rounds a block give no term).
BLOCKS = 8


def _tail_blocks(vals, q, blocks=BLOCKS):
    """The host's move between blocks of the run (ISO 5725's between-condition term, measured
    within one run): the figure of each of BLOCKS consecutive stretches of rounds, their
    spread (the MAD's, as a standard deviation) less what their own jackknife errors explain.
    A robust spread, because a block that the host's slow state met throughout is what the
    figure leaves out, not a move to widen it by: a plain variance over 4 blocks once gave
    an int 0x80 cell ±1300 ns from one busy block.  It sees a state that comes and goes
    within the run, which the halves' drift (a trend) misses; a move over longer than the run stays unseen, and the report says
    which terms an interval has.  None below 4 rounds a block."""
    n = len(vals)
    if n < 4 * blocks:
        return None
    parts = np.array_split(np.arange(n), blocks)
    if _one_each(vals):
        ests, ses = _block_jackknifes(_one_array(vals), parts, q)
    else:
        ests, ses = [], []
        for ix in parts:
            e, se = _tail_jackknife([vals[i] for i in ix], q)
            ests.append(e)
            ses.append(se or 0.0)
    e = np.asarray(ests)
    sd = 1.4826 * _median(np.abs(e - _median(e)))
    v = sd ** 2 - _median(np.square(ses))
    return math.sqrt(v) if v > 0 else None


def _one_array(vals):
    """The values of rounds of one value each as one array (vals may be that array)."""
    return vals if isinstance(vals, np.ndarray) else np.concatenate(vals)


def _block_jackknifes(x, parts, q):
    """([estimate], [standard error]) of _tail_jackknife for each stretch of one-value rounds
    (x[ix] for ix in parts), the stretches of one length done together as one array: the same
    subsets, sorts and sums as _tail_jackknife's, so the same figures to the last bit
    (test_stats), in a few array operations instead of a dozen a stretch."""
    ests, ses = [None] * len(parts), [0.0] * len(parts)
    for m in sorted({len(ix) for ix in parts}):
        which = [i for i, ix in enumerate(parts) if len(ix) == m]
        if m < 2:           # no jackknife below two rounds (_tail_jackknife's error is None)
            for i in which:
                ests[i] = _tail_sorted(np.sort(x[parts[i]]), q)
            continue
        X = x[np.concatenate([parts[i] for i in which])].reshape(len(which), m)
        order = np.argsort(X, axis=1, kind="stable")
        A = X[np.arange(len(which))[:, None], order]
        dropped, d = _half_subsets(m)
        keep = ~np.transpose(dropped[:, order], (1, 0, 2))          # stretch x subset x round
        th = _tails_one_each(A, keep, q)
        # Each stretch's estimate and error along the rows at once: a reduction along the
        # last axis sums each row as the same reduction sums that row alone, so the figures
        # are _tail_sorted's and the per-stretch error's to the last bit.
        est = _tail_sorted_rows(A, q)
        ss = np.sum((th - th.mean(axis=1, keepdims=True)) ** 2, axis=1).tolist()
        k = (m - d) / (d * th.shape[1])
        for j, i in enumerate(which):
            ests[i] = est[j]
            ses[i] = math.sqrt(k * ss[j]) or 0.0
    return ests, ses


def _tail_sorted_rows(A, q):
    """[_tail_sorted(row, q) for row in A] of a matrix of sorted rows (no empty row)."""
    n = A.shape[1]
    m = q * n
    if m <= 1:
        return A[:, 0].tolist()
    f = int(m)
    return ((A[:, :f].sum(axis=1) + (m - f) * (A[:, f] if f < n else 0.0)) / m).tolist()


def _tail_drift(vals, q):
    """How far the undisturbed figure moves over one run's length: the early and late halves'
    figures lie half a run apart, so their difference, less what their own jackknife errors
    explain, is doubled (as drift_of).  None below UNDISTURBED_MIN_ROUNDS rounds."""
    n = len(vals)
    if n < UNDISTURBED_MIN_ROUNDS:
        return None
    h = n // 2
    if _one_each(vals):
        (e1, e2), (s1, s2) = _block_jackknifes(_one_array(vals),
                                               [np.arange(h), np.arange(n - h, n)], q)
    else:
        parts = []
        for half in (vals[:h], vals[-h:]):
            e, se = _tail_jackknife(half, q)
            parts.append((e, se or 0.0))
        (e1, s1), (e2, s2) = parts
    return 2 * math.sqrt(max(0.0, (e2 - e1) ** 2 - s1 ** 2 - s2 ** 2))


def undisturbed_ratio(a_rounds, b_rounds, q=UNDISTURBED_Q, confidence=CONFIDENCE, how="ratio"):
    """a/b (or with how="diff", a - b) of two cells' undisturbed figures, where a_rounds[i] and
    b_rounds[i] come from the same round: the jackknife leaves the same rounds out of both, so
    whatever a round shared cancels as far as it can.  A summary (median = the ratio or the
    difference, ci_low, ci_high), or None."""
    a_rounds, b_rounds = list(a_rounds), list(b_rounds)
    n = min(len(a_rounds), len(b_rounds))
    pairs = zip(_finite_each(a_rounds[:n]), _finite_each(b_rounds[:n]))
    pairs = [(x, y) for x, y in pairs if x.size and y.size]
    if len(pairs) < 2:
        return None
    est, se = _tail_jackknife(_floor_values([p[0] for p in pairs]), q,
                              other=_floor_values([p[1] for p in pairs]), how=how)
    if est is None or se is None or not math.isfinite(est):
        return None
    n = len(pairs)
    h = _t(n, confidence) * se
    return {"median": est, "ci_low": est - h, "ci_high": est + h, "se": se, "n_rounds": n,
            "n": n, "min": None, "max": None, "cv": None,
            "unstable": unstable(est, est - h, est + h)}


def grouped_ratio(a_groups, b_groups, q=UNDISTURBED_Q, confidence=CONFIDENCE, how="ratio"):
    """a/b of two cells' undisturbed figures when each side ran from several files (copies of
    one binary): a_groups[g] and b_groups[g] are the rounds (lists of batch values) that ran
    from copy g of each side, round i of a group measured in the same moment on both sides.

    The same bytes cost about 1% more or less depending on which file they run from (where
    the file's pages landed), a factor that lasts as long as the file, so rounds of one copy
    are not independent draws of it: the copy is the unit to replicate over (Kalibera and
    Jones 2013).  Each group gives one ratio of its own undisturbed figures (the mean of the
    fastest q of its rounds' floors, each side), and the figure is their geometric mean with a
    Student's t interval over the groups (groups - 1 df): the spread between groups holds both
    the rounds' sampling error and the copies' placement, whatever its size.  'placement' is
    the part of that spread the rounds' own errors (a delete-half jackknife within each group)
    do not explain, as a relative standard deviation of one group's ratio: the between-copy
    term.  A summary like undisturbed_ratio's, or None below two usable groups.

    how="diff": a - b instead, each group's difference of its own undisturbed figures, their
    mean with a Student's t interval over the groups (what a wall adds, in ns); placement_rel
    is then None."""
    logs, within = [], []
    for ga, gb in zip(a_groups, b_groups):
        pairs = [(_finite(x), _finite(y)) for x, y in zip(ga, gb)]
        pairs = [(x, y) for x, y in pairs if x.size and y.size]
        if not pairs:
            continue
        est, se = _tail_jackknife(_floor_values([p[0] for p in pairs]), q,
                                  other=_floor_values([p[1] for p in pairs]), how=how)
        if how == "diff":
            if est is not None and math.isfinite(est):
                logs.append(est)
            continue
        if est is None or not math.isfinite(est) or est <= 0:
            continue
        logs.append(math.log(est))
        within.append((se / est) ** 2 if se is not None else None)
    if how == "diff":
        k = len(logs)
        if k < 2:
            return None
        d = np.asarray(logs)
        est, sd = float(d.mean()), float(d.std(ddof=1))
        h = _t(k, confidence) * sd / math.sqrt(k)
        return {"median": est, "ci_low": est - h, "ci_high": est + h, "se": sd / math.sqrt(k),
                "n_rounds": sum(len(g) for g in a_groups), "n": k, "groups": k, "min": None,
                "max": None, "cv": None, "group_sd_rel": None, "placement_rel": None,
                "unstable": unstable(est, est - h, est + h)}
    k = len(logs)
    if k < 2:
        return None
    lg = np.asarray(logs)
    mean = float(lg.mean())
    sd = float(lg.std(ddof=1))
    se = sd / math.sqrt(k)
    h = _t(k, confidence) * se
    est = math.exp(mean)
    lo, hi = math.exp(mean - h), math.exp(mean + h)
    w = [x for x in within if x is not None]
    placement = math.sqrt(max(0.0, sd ** 2 - float(np.mean(w)))) if len(w) == k else None
    return {"median": est, "ci_low": lo, "ci_high": hi, "se": se * est, "n_rounds":
            sum(len(g) for g in a_groups), "n": k, "groups": k, "min": None, "max": None,
            "cv": None, "group_sd_rel": sd, "placement_rel": placement,
            "unstable": unstable(est, lo, hi)}


def undisturbed_over_gmean(cells, q=UNDISTURBED_Q, confidence=CONFIDENCE):
    """Each cell's undisturbed figure over the geometric mean of all the cells' figures, where
    cells[c][i] is cell c's batches in round i (every cell measured in every round i): one
    summary (median = the ratio, ci_low, ci_high, se, n_rounds) per cell, or None for all when
    fewer than two rounds have every cell.

    The figure of each cell is the one undisturbed() gives (each round's floor, the mean of the
    fastest q of the floors); the delete-half jackknife leaves the same rounds out of every cell
    and of the mean at once, so what a round shared cancels as far as it can.  A mean over many
    cells moves on its own by little: one cell that moves alone between two runs moves the mean
    by 1/len(cells) of it (docs/sweeps.md, "vs_ref")."""
    rows = [[_finite(x) for x in c] for c in cells]
    keep_r = [i for i in range(min(len(c) for c in rows)) if all(c[i].size for c in rows)]
    n = len(keep_r)
    if n < 2 or len(rows) < 2:
        return None
    fl = np.array([[float(c[i].min()) for i in keep_r] for c in rows])      # cells x rounds
    order = np.argsort(fl, axis=1, kind="stable")
    srt = np.take_along_axis(fl, order, axis=1)
    est = np.array([_tail_sorted(a, q) for a in srt])
    if not np.all(est > 0):
        return None
    dropped, d = _half_subsets(n)
    th = np.array([_tails(srt[c], ~dropped[:, order[c]], q) for c in range(len(rows))])
    with np.errstate(divide="ignore", invalid="ignore"):
        g_sub = np.exp(np.mean(np.log(th), axis=0))
        rat = th / g_sub
    g = float(np.exp(np.mean(np.log(est))))
    h_t = _t(n, confidence)
    out = []
    for c in range(len(rows)):
        r = rat[c][np.isfinite(rat[c])]
        e = float(est[c] / g)
        if r.size < 2:
            out.append(None)
            continue
        se = math.sqrt((n - d) / (d * r.size) * float(np.sum((r - r.mean()) ** 2)))
        h = h_t * se
        out.append({"median": e, "ci_low": e - h, "ci_high": e + h, "se": se, "n_rounds": n,
                    "n": n, "min": None, "max": None, "cv": None,
                    "unstable": unstable(e, e - h, e + h)})
    return out
