"""Known answers for the statistics every figure goes through (twtools.analyse.stats).

Why it can break: a wrong confidence level or quantile, an interval computed over batches
when the variance lives between processes, a drift estimate that fires on pure scatter, or a
paired ratio that stops cancelling what two cells share.  Each test draws synthetic samples
whose true value is known, with a fixed seed, and checks that the 95% intervals cover it in
about 95% of the draws (93-97% over 2,000 draws, a band of about +-2 binomial standard
errors): a CI computed at 50%, or from the wrong unit, fails."""
import math

import numpy as np
import pytest

from twtools.analyse import stats
from twtools.core.fmt import fmt

DRAWS = 2000


def coverage(make, estimate, truth, seed, draws=DRAWS):
    rng = np.random.default_rng(seed)
    hit = 0
    for _ in range(draws):
        s = estimate(make(rng))
        hit += s["ci_low"] <= truth <= s["ci_high"]
    return hit / draws


@pytest.mark.parametrize("n", [8, 20, 60])
def test_median_ci_covers_the_true_median(n):
    # Right-skewed, like timings: lognormal with median 100.
    c = coverage(lambda r: r.lognormal(np.log(100), 0.15, n), stats.summarize, 100.0, seed=n)
    assert 0.93 <= c <= 0.97, c


def test_median_ci_is_scipys_hettmansperger_sheather():
    # stats writes the interval out in numpy so that a fleet view need not import
    # scipy.stats; an off-by-one order statistic or a CDF that loses precision at large n
    # moves the bounds by a whole gap between values.  One test for every size and level:
    # scipy.stats (half a second to import) is then imported by one make check worker only,
    # as no other test of the tier needs it.
    from scipy.stats import mstats
    for n in [6, 7, 31, 200, 5001, 100000]:
        x = np.sort(np.random.default_rng(n).lognormal(0, 1, n))
        for confidence in [0.95, 0.90, 0.50]:
            lo, hi = stats.median_ci(x, confidence)
            want = mstats.median_cihs(x, alpha=1 - confidence)
            assert lo == pytest.approx(want[0], rel=1e-9) and \
                hi == pytest.approx(want[1], rel=1e-9), (n, confidence)


def test_a_smaller_confidence_level_fails_the_coverage_band(monkeypatch):
    monkeypatch.setattr(stats, "CONFIDENCE", 0.50)
    monkeypatch.setattr(stats.median_ci, "__defaults__", (0.50,))
    c = coverage(lambda r: r.lognormal(np.log(100), 0.15, 20), stats.summarize, 100.0, seed=3)
    assert c < 0.80          # the band above would have caught this level


def rounds_with_process_effect(rng, n_rounds=20, batches=8, between=0.05, within=0.01):
    """Batches of one process share its effect: the variance lives between rounds.  Drawn as
    one array (a coverage below draws 2500 runs of them)."""
    process = np.exp(rng.normal(0, between, (n_rounds, 1)))
    return (100 * process * np.exp(rng.normal(0, within, (n_rounds, batches)))).tolist()


def test_clustered_ci_replicates_at_the_process_level():
    c = coverage(rounds_with_process_effect, stats.clustered, 100.0, seed=11)
    assert c >= 0.93, c
    # Pooling the same batches as if independent claims far more than it knows (about 55%
    # coverage: 500 draws, a standard error of about 2%, decide the 85% bound as 2000 do).
    pooled = coverage(lambda r: [x for rd in rounds_with_process_effect(r) for x in rd],
                      stats.summarize, 100.0, seed=11, draws=500)
    assert pooled < 0.85, pooled


def test_clustered_intervals_of_back_to_back_runs_overlap_under_drift():
    """Two runs, back to back, of a machine that drifts: the intervals with the within-run
    drift folded in overlap as two honest intervals of one quantity should; the bare
    round-to-round CIs mostly do not."""
    rng = np.random.default_rng(5)
    with_drift = bare = 0
    for _ in range(400):
        # 40 rounds, the first run's 20 then the second's, each a little slower: a slow
        # upward drift
        level = 100.0 * np.cumprod(np.exp(rng.normal(0.002, 0.002, (40, 1))), axis=0)
        rounds = level * np.exp(rng.normal(0, 0.01, (40, 8)))
        a, b = stats.clustered(rounds[:20].tolist()), stats.clustered(rounds[20:].tolist())
        with_drift += a["ci_low"] <= b["ci_high"] and b["ci_low"] <= a["ci_high"]
        bare += a["ci_stat_low"] <= b["ci_stat_high"] and b["ci_stat_low"] <= a["ci_stat_high"]
    assert with_drift / 400 >= 0.90, with_drift
    assert bare / 400 < 0.5, bare


def test_drift_is_not_invented_from_scatter():
    rng = np.random.default_rng(2)
    d = [stats.drift_of(rng.normal(100, 2, 20)) for _ in range(500)]
    assert np.median(d) == 0.0                 # most flat series show no drift at all
    trend = np.linspace(95, 105, 20) + rng.normal(0, 0.2, 20)
    assert 8 < stats.drift_of(trend) < 13      # 10 over the run: halves' centres 5 apart
    assert stats.drift_of([1, 2, 3]) is None   # too few rounds to tell


def test_paired_ratio_cancels_what_both_cells_share():
    rng = np.random.default_rng(9)
    hit, widths = 0, []
    for _ in range(DRAWS):
        shared = np.exp(rng.normal(0, 0.08, (20, 1)))      # the host's speed each round
        a = (300 * shared * np.exp(rng.normal(0, 0.01, (20, 8)))).tolist()
        b = (100 * shared * np.exp(rng.normal(0, 0.01, (20, 8)))).tolist()
        s = stats.paired(a, b, "ratio")
        hit += s["ci_low"] <= 3.0 <= s["ci_high"]
        widths.append((s["ci_high"] - s["ci_low"]) / 2 / 3.0)
    assert 0.93 <= hit / DRAWS <= 0.97
    # The shared 8% round-to-round scatter is gone: the ratio is known to about 1%.
    assert np.median(widths) < 0.02


def test_paired_difference_and_missing_rounds():
    a = [[10, 11], [12], [], [13]]
    b = [[5, 5], [6], [7], []]
    s = stats.paired(a, b, "diff")
    assert s["n_rounds"] == 2 and s["median"] == pytest.approx(5.75)


def test_quadrature_combinations():
    a = {"median": 10.0, "ci_low": 9.0, "ci_high": 11.0, "n": 5}
    b = {"median": 4.0, "ci_low": 3.0, "ci_high": 5.0, "n": 7}
    d = stats.diff_summary(a, b)
    assert d["median"] == 6.0 and d["ci_low"] == pytest.approx(6 - math.sqrt(2))
    r = stats.ratio_summary(a, b)
    assert r["median"] == 2.5 and r["ci_low"] < 2.5 < r["ci_high"]
    assert r["ci_low"] == pytest.approx(2.5 * math.exp(-math.hypot(math.log(10 / 9), math.log(5 / 4))))
    neg = stats.ratio_summary({"median": -1.0, "ci_low": -2.0, "ci_high": 0.5, "n": 3}, b)
    assert neg["median"] == -0.25 and neg["ci_low"] < -0.25 < neg["ci_high"]


def test_floor_and_nan_never_become_numbers():
    f = stats.floor([100, 101, 102, 103, 104, 150, 200])
    assert f["value"] == pytest.approx(102) and f["agree"] is True
    assert stats.floor([100, 120, 140, 160, 180])["agree"] is False
    s = stats.summarize([float("nan"), float("inf"), 3.0])
    assert s["median"] == 3.0 and s["n"] == 1 and s["dropped"] == 2
    assert stats.summarize([float("nan")])["median"] is None
    assert fmt({"median": float("nan")}).startswith("unknown")


@pytest.mark.parametrize("p", [0.9, 0.975, 0.995, 0.9995])
def test_t_quantile_is_scipys(p):
    """stats.t_quantile is written out so that tw watch's window analysis imports no scipy
    (60-70 MB it would keep): it must stay scipy.stats.t.ppf across small df (the series, odd
    and even), the switch at df 2000, and large df (the expansion).  t.ppf is
    scipy.special.stdtrit(df, p), read here without importing scipy.stats."""
    from scipy import special
    for df in [*range(1, 80), 127, 128, 999, 1000, 1999, 2000, 2001, 2500, 10 ** 4, 10 ** 6]:
        want = float(special.stdtrit(df, p))
        assert stats.t_quantile(df, p) == pytest.approx(want, rel=2e-12), (df, p)


def test_the_per_call_analysis_imports_no_scipy():
    """tw watch analyses the per-call matrix in every window's child: in a fresh interpreter,
    percall.analyse of a recorded matrix gives every cell its interval and imports no scipy
    (the child's memory stays under the watch's cap)."""
    import subprocess
    import sys
    from conftest import ROOT
    code = ("import sys, json; sys.path.insert(0, sys.argv[1]); "
            "from twtools.analyse import percall; "
            "d = percall.analyse(json.load(open(sys.argv[2]))); "
            "assert sum(c.get('undisturbed_ci_high') is not None for c in d['cells']) > 5; "
            "print('scipy' in sys.modules)")
    r = subprocess.run([sys.executable, "-c", code, str(ROOT / "scripts"),
                        str(ROOT / "tests" / "fixtures" / "results-fixture" / "percall.json")],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "False", r.stderr[-2000:]


def test_z_is_scipys_normal_quantile():
    """stats.Z is written out so that importing stats needs no scipy; it must stay scipy's
    (scipy.stats.norm.ppf is scipy.special.ndtri)."""
    from scipy import special
    assert stats.Z == float(special.ndtri(0.5 + stats.CONFIDENCE / 2))


def test_the_floors_fast_path_gives_the_general_tails_to_the_last_bit():
    """stats._tails_one_each, used when every round gave one value (the floors), must give
    what the general _tails gives for the same subsets: the jackknife of every undisturbed
    figure runs through it, and a rebuilt report must not move."""
    rng = np.random.default_rng(7)
    for n in (2, 3, 4, 5, 8, 9, 16, 31, 32, 40):
        for q in (0.05, 0.2, 0.5, 1.0):
            vals = [np.asarray([100 + rng.gamma(2, 3)]) for _ in range(n)]
            a, lab = stats._sorted_rounds(vals)
            dropped, _ = stats._half_subsets(n)
            keep = ~dropped[:, lab]
            fast, general = stats._tails_one_each(a, keep, q), stats._tails(a, keep, q)
            assert fast.tolist() == general.tolist(), (n, q)


def test_the_median_from_a_sort_is_numpys_to_the_last_bit():
    """stats._median (and _sorted_median, which summarize, clustered and drift_of take of the
    values they sort anyway) stand in for np.median in every undisturbed figure's terms: they
    must give its value, the mean of the two middle values included, and NaN for a NaN."""
    rng = np.random.default_rng(17)
    for n in (1, 2, 3, 4, 7, 8, 31, 32, 200):
        for x in (100 + rng.gamma(2, 3, size=n), rng.normal(0, 1, size=n),
                  np.round(rng.normal(0, 3, size=n))):
            assert stats._median(x) == float(np.median(x)), n
            assert stats._sorted_median(np.sort(x)) == float(np.median(x)), n
    assert math.isnan(stats._median(np.asarray([1.0, np.nan, 2.0])))


def test_rounds_of_one_size_take_the_fast_path_to_the_last_bit():
    """Rounds of as many batches each (the pooled figure's, where no batch was disturbed) go
    through stats._tails_one_each too: it must give what the general _tails gives, which
    adds a zero for every value a subset leaves out.  Rounds of unequal sizes keep _tails."""
    rng = np.random.default_rng(5)
    for n in (2, 3, 8, 9, 32):
        for size in (2, 3, 7):
            for q in (0.05, 0.2, 0.5, 1.0):
                vals = [100 + rng.gamma(2, 3, size=size) for _ in range(n)]
                assert stats._one_size(vals)
                a, lab = stats._sorted_rounds(vals)
                dropped, _ = stats._half_subsets(n)
                keep = ~dropped[:, lab]
                fast, general = stats._tails_one_each(a, keep, q), stats._tails(a, keep, q)
                assert fast.tolist() == general.tolist(), (n, size, q)
    # The tail reads only as much of each row as holds its values, and reads further when a
    # row's first kept values lie deeper: here every round's values lie above the last's, so
    # a subset that leaves out the first rounds finds nothing kept in the first stretch.
    for n, size, q in ((4, 40, 0.02), (6, 30, 0.05), (32, 40, 0.05), (9, 100, 0.01)):
        vals = [i + rng.random(size) for i in range(n)]
        a, lab = stats._sorted_rounds(vals)
        keep = ~stats._half_subsets(n)[0][:, lab]
        assert stats._tails_one_each(a, keep, q).tolist() == stats._tails(a, keep, q).tolist()
    assert not stats._one_size([np.ones(2), np.ones(3)])


def test_the_stretches_taken_together_give_each_stretchs_own_jackknife_to_the_last_bit():
    """stats._block_jackknifes (the 'blocks' term's eight stretches of one-value rounds done as
    one array) must give what _tail_jackknife gives for each stretch alone, stretches of
    unequal lengths included."""
    rng = np.random.default_rng(11)
    for n in (32, 33, 39, 40, 64, 71):
        for q in (0.05, 0.2, 0.5):
            x = 100 + rng.gamma(2, 3, size=n)
            parts = np.array_split(np.arange(n), stats.BLOCKS)
            ests, ses = stats._block_jackknifes(x, parts, q)
            for ix, e, se in zip(parts, ests, ses):
                e1, se1 = stats._tail_jackknife([np.asarray([x[i]]) for i in ix], q)
                assert (e, se) == (e1, se1 or 0.0), (n, q, list(ix))


def test_the_drifts_halves_taken_together_give_the_same_drift_and_short_stretches_no_error():
    rng = np.random.default_rng(13)
    for n in (8, 9, 16, 33):
        vals = [np.asarray([100 + rng.gamma(2, 3)]) for _ in range(n)]
        h = n // 2
        want = []
        for half in (vals[:h], vals[-h:]):
            e, se = stats._tail_jackknife(half, 0.2)
            want.append((e, se or 0.0))
        (e1, s1), (e2, s2) = want
        assert stats._tail_drift(vals, 0.2) == \
            2 * math.sqrt(max(0.0, (e2 - e1) ** 2 - s1 ** 2 - s2 ** 2)), n
    # a stretch of one round has an estimate and no jackknife, as _tail_jackknife says
    ests, ses = stats._block_jackknifes(np.asarray([5.0, 3.0, 4.0]), [np.arange(1),
                                                                    np.arange(1, 3)], 0.5)
    assert ests[0] == 5.0 and ses[0] == 0.0
    assert (ests[1], ses[1]) == (lambda e, s: (e, s or 0.0))(
        *stats._tail_jackknife([np.asarray([3.0]), np.asarray([4.0])], 0.5))
