"""When to stop measuring a cell: a sequential rule whose interval keeps its coverage.

`tw bench --target 1%` (issue 42) measures until every fast cell's undisturbed figure is known
to within the target, or a budget ends.  Each cell is measured in many processes (rounds); each
process gives one value, its floor (the fastest batch), and a label from the host-state
calibrator, fast or slow.  The figure is the mean of the fast-labelled processes' floors.

Why not "stop when the interval first looks narrow": the chance that a t-interval looks narrow
is highest when the sample's spread happens to be small, which is when it also covers least.
Stopping there picks the undercovering moments, and with floors that sit on a few layout
levels the first handful of values often share one level and look perfectly tight.
tests/test_sequential_coverage.py shows it: that rule covers the fast state's true figure in
well under 95% of simulated runs.

The rule used here is Stein's two-stage procedure (Stein 1945, "A two-sample test for a linear
hypothesis whose power is independent of the variance"):

  stage 1   the first n0 fast values (n0 >= N0_MIN) give the mean m0 and the standard
            deviation s0;
  plan      the total needed is N = max(n0, ceil((t * s0 / d)^2)), where d = target * m0 and t
            is Student's t quantile with n0 - 1 degrees of freedom;
  stage 2   measure until N fast values are in hand; the interval is the mean of all of them
            +/- t * s0 / sqrt(n), which is <= d once n >= N.

Under normality the mean of n values and s0 are independent (s0 depends only on the first
stage's deviations, n only on s0 and on what other cells need), so sqrt(n) (mean - mu) / s0 is
exactly Student's t with n0 - 1 df whatever n turns out to be: the coverage is the nominal one
exactly, including for a run that the budget stops before N (its interval is then wider than
the target, and says so: met False).  This is what the naive rule lacks.

Three departures from the textbook, each for a fact of this data:

  levels    floors sit on a few layout levels 0.5-2% apart, so a first stage may land on one
            level and give s0 = 0, i.e. N = n0 and a zero-width interval.  s0 is never taken
            below half a level spacing (the largest standard deviation two neighbouring levels
            can give), the spacing being the one the values show or, when they show a single
            level, LEVEL_FALLBACK of the figure; and the half-width is never below the clock's
            resolution per call (as stats.undisturbed's level and resolution terms).
  screen    the calibrator mislabels a few processes: a slow one labelled fast has a floor
            10-60% above the fast state's and would pull the mean up by far more than the
            target.  Values more than SCREEN above the first stage's lowest are set aside
            (counted, never used): the labeller's own rule (analyse/hoststate.py: fast is
            within 5% of the fastest).  The lowest, not the median: at a fast share of 5% and
            2% mislabels a quarter of the fast-labelled values are slow, and a first stage
            whose median fell among them kept them all.  This assumes the fast state's floors
            lie within SCREEN of their lowest, which holds for the level spacings seen
            (0.5-2%, a few levels); a host whose fast state spreads wider would have its upper
            levels cut and its figure biased low, so `screened` is reported for every cell.
            A value that comes later, more than SCREEN below the first stage's lowest, says
            the stage sat above the cell's lowest state: the first stage is taken again with
            it (_first_stage), as stats.undisturbed's screen would take it.
  margin    the rule is built at NOMINAL (0.99) with a first stage of N0_MIN = 12, and its
            interval is reported as a 95% one: a conservative one.  Normality holds neither for
            a skewed mixture of a few levels nor for a screened sample, and a t-interval
            undercovers there at small n: for the simulated fast state of tests/hostsim.py
            (four levels, the rarest 3% up), a plain t-interval of 8 values covers 92% at a
            nominal 95%, and 95% at 97.5%.  Built at 0.99 from 12 values, the rule covers
            97.3-97.8% of 4000 simulated runs at each of fast shares 5%, 20% and 80% (bursts
            of 3 s, 2% mislabels); docs/syscost.md, "Stopping when precise enough", has the
            figures.  A test at 200 runs asks for 95%, which a rule of exactly 95% would fail
            half the time.

Chow and Robbins' fully sequential rule (stop at the first n with t s_n / sqrt(n) <= d plus a
correction) reaches the target with fewer values, but its coverage is only asymptotic and would
have to be shown by simulation for every shape of data; Stein's is exact under its assumption,
the stopping cannot pick a lucky moment (N is fixed by stage 1), and the price is the first
stage's t: 3.11 for n0 = 12 at NOMINAL, against 1.96.

numpy only, with stats.t_quantile for Student's t: tw watch and the bench loop avoid scipy.
"""
import math

import numpy as np

from . import stats

# The first stage's size: at least this many fast values before a plan.  Fewer make t (and the
# second stage) large, and a skewed mixture of levels covers worse at small n (the module's
# docstring, "margin"): t_{n0-1} at NOMINAL is 5.84 for n0 = 4, 3.50 for 8, 3.11 for 12.
N0_MIN = 12
# The level the rule is built at (the module's docstring, "margin"), for a reported 95%.
NOMINAL = 0.99
# Values this far above the first stage's lowest are set aside as mislabelled slow processes.
SCREEN = 0.05
# The level spacing assumed when the values show a single level (the layout levels of the
# fast state are 0.5-2% apart on the hosts in docs/syscost.md).
LEVEL_FALLBACK = 0.005


def _finite(values):
    a = np.asarray(list(values) if not isinstance(values, np.ndarray) else values, dtype=float)
    return a[np.isfinite(a) & (a > 0)]


def _spacing(values, resolution=None):
    """The median gap between neighbouring levels of the values (floors within
    stats.LEVEL_TOL of the lowest, or the resolution, of each other are one level), or None
    when they show one level."""
    v = np.sort(values)
    tol = max(resolution or 0.0, stats.LEVEL_TOL * float(v[0]))
    levels = [float(v[0])]
    for x in v[1:]:
        if x - levels[-1] > tol:
            levels.append(float(x))
    gaps = np.diff(levels)
    return float(np.median(gaps)) if gaps.size else None


def _first_stage(vals, n0_min, screen):
    """(prefix length, kept mask over the prefix, ceiling) of the shortest prefix of the
    values in arrival order whose values within `screen` above their own lowest number n0_min;
    None when the values never get there.

    A value that comes after that prefix more than `screen` below its lowest says the stage
    sat on a higher state of the cell: the stage is taken again from the shortest prefix that
    holds it.  Seen on an AMD EPYC guest: 64-bit getppid in an inline loop ran at 156 ns a call
    in most batches and at 119 ns in a few, in the host's fast state alike; a --target run
    whose first twelve fast values all sat at 156 kept the 119s that came later under its
    ceiling and gave 153.1 ns +-0.8%, where its rerun, which met a 119 early, gave 119.1 ns
    +-0.7%.  A later value within the screen moves nothing: the plan stays the first
    stage's."""
    start = n0_min
    while True:
        for k in range(start, vals.size + 1):
            pre = vals[:k]
            ceiling = float(pre.min()) * (1 + screen) if screen is not None else math.inf
            kept = pre <= ceiling
            if int(kept.sum()) >= n0_min:
                break
        else:
            return None
        if screen is None:
            return k, kept, ceiling
        below = np.nonzero(vals[k:] * (1 + screen) < float(pre.min()))[0]
        if not below.size:
            return k, kept, ceiling
        start = k + int(below[0]) + 1


def plan(first_stage_values, target_rel, confidence=stats.CONFIDENCE, n0_min=N0_MIN,
         resolution=None, screen=SCREEN, nominal=NOMINAL):
    """The plan from the first stage: {ready, need_n, n0, mean0, s0, s_floor, t, d, target_rel,
    confidence, nominal, ceiling, first_stage, screened, spacing, resolution, why}.

    first_stage_values: the fast values in the order they came (more than the first stage is
    fine: only the shortest prefix that gives n0_min values inside the screen is used, so the
    plan made after stage 1 and one made again later agree).  need_n counts values inside the
    screen; resolution is the clock's resolution per call in the values' unit.  ready False
    (with why, and need_n = n0_min) while the first stage is incomplete."""
    if not 0 < target_rel < 1:
        raise ValueError(f"target_rel must be in (0, 1), not {target_rel!r}")
    if n0_min < 2:
        raise ValueError("the first stage needs at least 2 values")
    level = nominal if nominal is not None else confidence
    vals = _finite(first_stage_values)
    base = {"target_rel": target_rel, "confidence": confidence, "nominal": level,
            "resolution": resolution, "screen": screen, "n0_min": n0_min}
    fs = _first_stage(vals, n0_min, screen)
    if fs is None:
        inside = int((vals <= float(vals.min()) * (1 + screen)).sum()) \
            if vals.size and screen is not None else int(vals.size)
        why = (f"{int(vals.size)} fast value(s), the first stage needs {n0_min}"
               if inside == vals.size else
               f"{int(vals.size)} fast value(s), {inside} of them within {100 * screen:.0f}% "
               f"of the lowest; the first stage needs {n0_min}")
        return dict(base, ready=False, need_n=n0_min, n0=None, first_stage=None, why=why)
    k, kept, ceiling = fs
    x = vals[:k][kept]
    n0 = int(x.size)
    m0 = float(x.mean())
    spacing = _spacing(x, resolution)
    s_floor = max(spacing if spacing is not None else LEVEL_FALLBACK * m0, resolution or 0.0) / 2
    s0 = max(float(x.std(ddof=1)), s_floor)
    t = stats.t_quantile(n0 - 1, 0.5 + level / 2)
    d = target_rel * m0
    need = max(n0, math.ceil((t * s0 / d) ** 2))
    return dict(base, ready=True, need_n=int(need), n0=n0, first_stage=k, mean0=m0, s0=s0,
                s_floor=s_floor, spacing=spacing, t=t, d=d, ceiling=ceiling,
                screened=int(k - n0), why=None)


def interval(all_values, plan_):
    """{value, ci_low, ci_high, half_rel, n, need_n, met, screened} from every fast value in
    hand (the first stage's included, in arrival order) and the plan made from its first
    stage.  Values above the plan's ceiling are left out (screened).  met: n >= need_n, when
    the half-width is within the target.  value None while the plan is not ready."""
    vals = _finite(all_values)
    if not plan_.get("ready"):
        return {"value": None, "ci_low": None, "ci_high": None, "half_rel": None,
                "n": int(vals.size), "need_n": plan_["need_n"], "met": False,
                "screened": 0, "why": plan_.get("why")}
    kept = vals[vals <= plan_["ceiling"]]
    n = int(kept.size)
    value = float(kept.mean())
    h = max(plan_["t"] * plan_["s0"] / math.sqrt(n), plan_.get("resolution") or 0.0)
    return {"value": value, "ci_low": value - h, "ci_high": value + h, "half_rel": h / value,
            "n": n, "need_n": plan_["need_n"], "met": n >= plan_["need_n"],
            "screened": int(vals.size - n), "confidence": plan_["confidence"],
            "nominal": plan_["nominal"], "method": "stein-two-stage", "why": None}


def progress(values, target_rel, confidence=stats.CONFIDENCE, n0_min=N0_MIN, resolution=None,
             screen=SCREEN, nominal=NOMINAL):
    """plan() and interval() at once, for a loop that calls it after every round: {plan,
    interval, met, more_n}, more_n being how many more fast values the plan needs (n0_min
    minus those in hand while stage 1 is incomplete)."""
    p = plan(values, target_rel, confidence, n0_min, resolution, screen, nominal)
    iv = interval(values, p)
    if p["ready"]:
        more = max(0, p["need_n"] - iv["n"])
    else:
        fs_kept = _finite(values)
        more = max(1, n0_min - int(fs_kept.size))
    return {"plan": p, "interval": iv, "met": iv["met"], "more_n": more}


def projection(values, fast_share, proc_s, target_rel, confidence=stats.CONFIDENCE,
               n0_min=N0_MIN, resolution=None, screen=SCREEN, nominal=NOMINAL):
    """How long this host would need for +/-target_rel at the fast share it showed:
    {seconds, more_seconds, need_n, n, fast_share, proc_s, why}.  A cell's process takes
    proc_s seconds of the bench's time and a share fast_share of them are fast, so need_n fast
    values take need_n / fast_share processes.  seconds: the whole of that from the start;
    more_seconds: what is left beyond the fast values in hand.  When the values are too few for
    a plan, need_n is the first stage's n0_min (a lower bound: why says so); when the host was
    never fast, seconds is None."""
    p = plan(values, target_rel, confidence, n0_min, resolution, screen, nominal)
    n = int(_finite(values).size) if not p["ready"] else interval(values, p)["n"]
    out = {"need_n": p["need_n"], "n": n, "fast_share": fast_share, "proc_s": proc_s,
           "target_rel": target_rel, "why": p.get("why")}
    if not fast_share or fast_share <= 0:
        return dict(out, seconds=None, more_seconds=None,
                    why="the host was never in its fast state: no time is enough at this share")
    per_fast = proc_s / fast_share
    out.update(seconds=p["need_n"] * per_fast,
               more_seconds=max(0, p["need_n"] - n) * per_fast)
    if not p["ready"]:
        out["why"] = (f"{p['why']}: the time is a lower bound, for the first stage alone")
    return out
