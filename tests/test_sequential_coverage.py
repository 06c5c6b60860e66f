"""The sequential stopping rule keeps its coverage on a noisy host (issue 42, "Tested for real").

A synthetic host (tests/hostsim.py) is fast a share 5%, 20% or 80% of the time in bursts of 3 s
(as the noisy AMD guest was quiet in 4-8% of its batches, in bursts of seconds), and mislabels
2% of the processes.  200 runs of `tw bench --target 1%`'s rule each: the interval must cover
the fast state's true mean in at least 95% of them.  With 200 runs a rule whose coverage is
exactly 95% fails that half the time; analyse/sequential.py's is built conservative (its
docstring, "margin"), and the seed is fixed so the test is deterministic (the report of the
branch that added it gives the counts for other seeds).

The rule that stops the first time a plain t-interval looks narrow is simulated beside it and
must undercover, so that this test can tell the two apart."""
import functools
import math

import numpy as np
import pytest

import hostsim
from twtools.analyse import legs, sequential, stats

RUNS = 200
TARGET = 0.01
SEED = 42


def stein_run(stream, target=TARGET, **kw):
    """The interval at which the rule stops on one run's fast-labelled floors, in order: the
    plan from the first stage, then as many values as it needs (or all there are)."""
    p = sequential.plan(stream, target, **kw)
    if not p["ready"]:
        return sequential.interval(stream, p)
    kept = np.cumsum(stream <= p["ceiling"])
    idx = np.nonzero(kept >= p["need_n"])[0]
    return sequential.interval(stream[:idx[0] + 1] if idx.size else stream, p)


def naive_run(stream, target=TARGET, n_min=3):
    """Stop at the first n >= n_min whose 95% t-interval is within the target, with the same
    screen for mislabelled slow processes as the rule's (so only the stopping differs)."""
    x = stream[:0]
    for k in range(1, stream.size + 1):
        pre = stream[:k]
        x = pre[pre <= pre.min() * (1 + sequential.SCREEN)]
        if x.size < n_min:
            continue
        m = float(x.mean())
        h = stats.t_quantile(x.size - 1, 0.975) * float(x.std(ddof=1)) / math.sqrt(x.size)
        if h <= target * m:
            break
    m = float(x.mean())
    h = stats.t_quantile(x.size - 1, 0.975) * float(x.std(ddof=1)) / math.sqrt(x.size)
    return {"ci_low": m - h, "ci_high": m + h, "n": int(x.size), "met": h <= target * m}


def simulate(share, seed=SEED, runs=RUNS, rule=stein_run, budget_fast=60, **cell):
    """(covered, met, median n) of `runs` runs of `rule` at fast share `share`: each run has
    rounds enough for about budget_fast fast processes (the budget); cell: hostsim.Host's
    lower_p and lower_drop."""
    host = hostsim.Host(share, burst_s=3.0, mislabel=0.02, **cell)
    rounds = int(budget_fast / share) + 50
    floors, labels, _ = host.draw(np.random.default_rng(seed), runs, rounds)
    covered = met = 0
    ns = []
    for r in range(runs):
        iv = rule(floors[r][labels[r]])
        assert iv["ci_low"] is not None, "the budget ended before the first stage"
        assert iv["ci_high"] > iv["ci_low"], "a zero-width interval"
        covered += iv["ci_low"] <= host.mu <= iv["ci_high"]
        met += bool(iv["met"])
        ns.append(iv["n"])
    return covered, met, float(np.median(ns))


@pytest.mark.parametrize("screen", [sequential.SCREEN, legs.BLOCK_SCREEN],
                         ids=["matrix-screen", "legs-screen"])
@pytest.mark.parametrize("share", [0.05, 0.20, 0.80])
def test_stein_covers_at_least_95_percent(share, screen):
    """The matrix's and the sweeps' screen (5%) and tw legs's wider one for the traced side
    (10%, which keeps more of the mislabelled slow processes)."""
    covered, met, n = simulate(share, rule=functools.partial(stein_run, screen=screen))
    assert covered >= 0.95 * RUNS, f"covered {covered}/{RUNS} at fast share {share}"
    assert met >= 0.95 * RUNS, f"the target was met in {met}/{RUNS} runs only"


@pytest.mark.parametrize("share", [0.05, 0.20, 0.80])
def test_stein_covers_a_lower_state_that_comes_late(share):
    """A cell whose fast state runs 24% lower in 15% of its processes (as 64-bit getppid's
    inline loop did on an AMD EPYC guest): the rule must take the lower state's figure however
    many of the upper state came first, and cover it.  The budget holds about 200 fast
    processes, 30 of them in the lower state."""
    covered, met, n = simulate(share, budget_fast=200, lower_p=0.15, lower_drop=0.24)
    assert covered >= 0.95 * RUNS, f"covered {covered}/{RUNS} at fast share {share}"
    assert met >= 0.9 * RUNS, f"the target was met in {met}/{RUNS} runs only"


def test_naive_stopping_undercovers():
    """Pooled over the three shares (600 runs): the naive rule's coverage is about 89-91% at
    each, too close to 95% for 200 runs to tell apart every time."""
    covered = sum(simulate(share, rule=naive_run)[0] for share in (0.05, 0.20, 0.80))
    assert covered < 0.93 * 3 * RUNS, f"the naive rule covered {covered}/{3 * RUNS}: the " \
        "test cannot tell a biased rule from a sound one"


def test_simulated_host_has_the_share_and_bursts_it_was_given():
    host = hostsim.Host(0.05, burst_s=3.0)
    _, _, fast = host.draw(np.random.default_rng(1), 50, 4000)
    assert abs(fast.mean() - 0.05) < 0.01
    # consecutive rounds (1.34 s apart) stay fast together far more often than by chance
    both = (fast[:, 1:] & fast[:, :-1]).mean() / fast[:, :-1].mean()
    assert both > 0.4
