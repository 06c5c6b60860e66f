"""The undisturbed figure over processes whose floors sit on layout levels.

Why it can break: a process's fastest batch takes one of a few discrete levels (about one
core cycle per call apart on an AMD EPYC guest) and keeps it for its life.  A figure pooled
over every batch then rests on whichever process drew the rarest low level, and its interval,
made from identical fastest batches, has no width: two back-to-back runs of that guest
overlapped in 114 of 122 cells, and 12 intervals were zero-width to four digits.  The
estimator that averages over processes' floors must hold on that pair, cover a known mixture
of levels with a slow host state at its stated level, and never give an interval narrower
than the clock allows.

The pair is tests/fixtures/aa-pair/ (two default `tw bench` runs back to back on a family 25
model 17 guest, raw rounds, recorded 2026-11-25).
"""
import json
import lzma
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
from twtools.analyse import percall, stats  # noqa: E402

PAIR = ROOT / "tests" / "fixtures" / "aa-pair"


@pytest.fixture(scope="module")
def pair():
    """The two runs' cells as {key: (rounds of usable batches, resolution per call)}."""
    out = []
    for n in (1, 2):
        doc = json.loads(lzma.decompress((PAIR / f"run{n}-percall.json.xz").read_bytes()))
        cells = {}
        for c in doc["cells"]:
            if c.get("supported"):
                cells[percall.key(c)] = ([percall.usable(rd)[0] for rd in c["rounds"]],
                                         percall.resolution(doc, c))
        out.append(cells)
    return out


@pytest.fixture(scope="module")
def figures(pair):
    """Each run's cells' figures over processes' floors, {key: stats.undisturbed}: computed
    once for the tests that read them (the pair's two runs, 122 cells each)."""
    return [{k: stats.undisturbed(rounds, resolution=res) for k, (rounds, res) in cells.items()}
            for cells in pair]


def _overlap(a, b):
    return a["ci_low"] <= b["ci_high"] and b["ci_low"] <= a["ci_high"]


def test_the_new_figure_holds_on_the_pair_where_the_old_one_did_not(pair, figures):
    """The old pooled figure misses in more than 5% of cells (so more than chance, about
    0.6%, allows); the figure over processes' floors overlaps in at least 95%."""
    c1, c2 = pair
    keys = [k for k in c1 if k in c2]
    old = [_overlap(stats.undisturbed_pooled(c1[k][0]), stats.undisturbed_pooled(c2[k][0]))
           for k in keys]
    new = [_overlap(figures[0][k], figures[1][k]) for k in keys]
    assert len(keys) == 122
    assert sum(old) / len(old) < 0.95, sum(old)
    assert sum(new) / len(new) >= 0.95, sum(new)


def test_the_issues_cell_the_rare_low_level(pair, figures):
    """32-vdso null jmp: 5 of 32 processes reached 135.08 ns in run 1 and none in run 2.
    Pooled, the figures were 135.08 and 135.89 with intervals apart (the second of width
    0.005 ns); over processes they overlap, and neither interval is narrower than the
    level spacing the rounds show."""
    k = ("32-vdso", "null", None, "jmp")
    r1, r2 = pair[0][k][0], pair[1][k][0]
    o1, o2 = stats.undisturbed_pooled(r1), stats.undisturbed_pooled(r2)
    assert not _overlap(o1, o2)
    assert o2["ci_high"] - o2["ci_low"] < 0.01
    n1, n2 = figures[0][k], figures[1][k]
    assert _overlap(n1, n2)
    for n in (n1, n2):
        assert n["level_spacing"] is not None and 0.1 < n["level_spacing"] < 1.0
        assert (n["ci_high"] - n["ci_low"]) / 2 >= n["level_spacing"] - 1e-12
        assert n["terms"], n


def test_no_interval_of_the_pair_is_narrower_than_the_clock(pair, figures):
    for cells, figs in zip(pair, figures):
        for k, (rounds, res) in cells.items():
            u = figs[k]
            assert res and u["ci_high"] - u["ci_low"] >= 2 * res * (1 - 1e-9), k


LEVELS = np.array([135.08, 135.89, 136.16, 136.43, 136.70, 136.97, 137.51])
WEIGHTS = np.array([0.06, 0.30, 0.08, 0.30, 0.08, 0.12, 0.06])
SLOW_SHARE, SLOW_FACTOR, JITTER, BATCHES = 0.3, 1.12, 0.01, 4


def mixture(rng, n):
    """n processes' batches: each draws its layout level once; a process the host's slow
    state meets (SLOW_SHARE of them) runs 12% slower for its life; each batch adds a jitter
    of up to a few hundredths of a ns, and one in ten a disturbance."""
    level = rng.choice(LEVELS, size=n, p=WEIGHTS)
    slow = np.where(rng.random(n) < SLOW_SHARE, SLOW_FACTOR, 1.0)
    b = (level * slow)[:, None] + rng.exponential(JITTER, (n, BATCHES))
    b += np.where(rng.random((n, BATCHES)) < 0.1, rng.exponential(20.0, (n, BATCHES)), 0.0)
    return b


def test_intervals_cover_the_mixtures_true_figure():
    """The target, the mean of the fastest UNDISTURBED_Q of the floors' population, from half
    a million processes (drawn apart from the runs; two million moved it by 0.0015 ns, a
    three-hundredth of the intervals' half-width); 200 runs of 32 processes: the interval
    holds it at least 95% of the time."""
    big = np.sort(mixture(np.random.default_rng(34), 500_000).min(axis=1))
    want = stats.tail_mean(big, stats.UNDISTURBED_Q)
    rng = np.random.default_rng(33)
    hits, widths = 0, []
    for _ in range(200):
        u = stats.undisturbed([list(r) for r in mixture(rng, 32)])
        hits += u["ci_low"] <= want <= u["ci_high"]
        widths.append((u["ci_high"] - u["ci_low"]) / 2 / want)
    assert hits >= 190, (hits, want)
    # ...and it is not so wide that it says nothing: about a level either side.
    assert np.median(widths) < 0.01, np.median(widths)


def test_one_level_gets_the_interval_the_clock_allows():
    """Every round's floor one value: the jackknife sees no spread, so the interval is the
    clock's resolution either side, and the figure says why."""
    rounds = [[100.0, 100.0, 100.2, 100.4] for _ in range(32)]
    u = stats.undisturbed(rounds, resolution=0.002)
    assert u["value"] == 100.0
    assert u["ci_low"] == pytest.approx(99.998) and u["ci_high"] == pytest.approx(100.002)
    assert u["terms"] == ["resolution"] and "one level" in u["one_level"]
    # Without a known resolution there is nothing to widen it by, and it says so.
    assert "one level" in stats.undisturbed(rounds)["one_level"]


def test_resolution_is_a_tick_over_the_calls_in_a_batch():
    doc = {"clock": "tsc", "tsc_hz": 2.5e9}
    assert percall.resolution(doc, {"calls_per_batch": 4000}) == pytest.approx(0.4 / 4000)
    assert percall.resolution({"clock": "monotonic"}, {"calls_per_batch": 100}) == 0.01
    assert percall.resolution(doc, {"calls_per_batch": None}) is None
    assert percall.resolution({"clock": "tsc"}, {"calls_per_batch": 10}) is None


def test_the_bench_self_check_counts_misses_against_chance_and_says_when_short():
    """`tw bench --selfcheck`'s figures on the recorded pair: the overlap with the misses
    chance allows, no zero-width interval, nothing short; then the second run's 32-bit
    cells made 3% dearer: short, in words."""
    from twtools.analyse import selfcheck
    docs = [json.loads(lzma.decompress((PAIR / f"run{n}-percall.json.xz").read_bytes()))
            for n in (1, 2)]
    analysed = [percall.analyse(d) for d in docs]
    f = selfcheck.figures(list(zip(docs, analysed)))
    u = f["undisturbed"]
    assert u["overlap_share"] >= 0.95 and u["zero_width"] == [] and f["short"] == []
    assert u["expected_misses"] == pytest.approx(selfcheck.MISS_BY_CHANCE * 122, abs=0.01)
    assert 0.005 < selfcheck.MISS_BY_CHANCE < 0.006
    slow = docs[1]           # read no more as it was: made dearer in place, not deep-copied
    for c in slow["cells"]:
        if c["bits"] == 32:
            for rd in c.get("rounds") or []:
                rd["samples_ns"] = [x * 1.03 for x in rd["samples_ns"]]
    f = selfcheck.figures([(docs[0], analysed[0]), (slow, percall.analyse(slow))])
    assert f["short"] and "chance gives about" in f["short"][0], f["short"]
