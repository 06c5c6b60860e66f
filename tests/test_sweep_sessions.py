"""A sweep measured in two sessions holds each row's move between them.

Why it can break: a copy-bound row of the seed sweep (a write of 8 KiB or more, whose time is
the copy into the page cache) moves with the host's memory, in states that last tens of
seconds.  Every round of one moment shares the state, so neither the spread between its
rounds nor the drift between its halves sees it, and a rerun in the other state misses.  Two
default runs three minutes apart on the AMD EPYC guest (tests/fixtures/machines/
amd-epyc-zen4-kvm/sweep-memory-states): each of the first run's 11 rounds met a state in which
the 64 KiB row cost 15-19% more than in the second's fast one, while the rows of 4 KiB or less
moved by under 1.3%.  tw run now measures the sweeps in two sessions a minute apart
(measure.sweep.Together, cli/run._together) and analyse/sweeps widens each row by the move
between the sessions' own figures beyond their sampling errors.  Here the two recorded runs
stand in for one sweep's two sessions.
"""
import copy
import json
import lzma

from conftest import ROOT
from twtools.analyse import stats, sweeps
from twtools.cli import run
from twtools.measure import sweep

FIX = ROOT / "tests" / "fixtures" / "machines" / "amd-epyc-zen4-kvm" / "sweep-memory-states"


def _runs():
    return [json.loads(lzma.open(FIX / f"sweep_seed-{r}.json.xz", "rt").read())
            for r in ("r1", "r2")]


def _cut(doc, rounds):
    """doc with only the rounds whose number is in `rounds`, renumbered from 0 in order."""
    out = copy.deepcopy(doc)
    new = {r: i for i, r in enumerate(sorted(rounds))}
    for run_ in out["runs"]:
        for row in run_["rows"]:
            smp = row["samples"]
            keep = [i for i, r in enumerate(smp["round"]) if r in new]
            for k in ("user_s", "sys_s", "real_s"):
                smp[k] = [smp[k][i] for i in keep]
            smp["round"] = [new[smp["round"][i]] for i in keep]
    out["rounds"] = out["rounds_done"] = len(new)
    return out


def _joined(a, b, sessions=True):
    """One sweep whose rounds are a's then b's, as two sessions (or with no sessions said)."""
    out = copy.deepcopy(a)
    na = a["rounds_done"]
    for ra, rb in zip(out["runs"], b["runs"]):
        for x, y in zip(ra["rows"], rb["rows"]):
            for k in ("user_s", "sys_s", "real_s"):
                x["samples"][k] += y["samples"][k]
            x["samples"]["round"] += [r + na for r in y["samples"]["round"]]
    out["rounds"] = out["rounds_done"] = na + b["rounds_done"]
    if sessions:
        out["sessions"] = [{"rounds": [0, na], "start_s": 0.0, "seconds": 20.0},
                           {"rounds": [na, na + b["rounds_done"]], "start_s": 80.0,
                            "seconds": 20.0}]
        out["sessions_planned"] = 2
    return out


def _row(analysed, variant, size):
    run_ = next(r for r in analysed["runs"] if r["variant"] == variant and r["mode"] == "async")
    return next(x for x in run_["rows"] if x["buffsize"] == size)["undisturbed"]


def test_the_recorded_runs_each_miss_the_others_memory_state():
    # The premise: analysed alone, each run's 64 KiB row misses the other's, by 15-19%; its
    # 4 KiB row does not move beyond its interval.
    a, b = (sweeps.sweep(d) for d in _runs())
    for v in ("64-syscall", "32-vdso"):
        x, y = _row(a, v, 65536), _row(b, v, 65536)
        assert x["ci_low"] > y["ci_high"]
        assert 0.12 < x["value"] / y["value"] - 1 < 0.19
        x, y = _row(a, v, 4096), _row(b, v, 4096)
        assert abs(x["value"] / y["value"] - 1) < 0.013


def test_a_row_holds_both_sessions_figures():
    # Four rounds of one moment and three of the other (fewer than stats' 8 for a drift term,
    # as a default report's sweep on a noisy host often has; the second run's 13th to 15th, in
    # its fast state): with the sessions said, each copy-bound row's interval holds both
    # moments' figures; the same rounds with no sessions said miss one, which is the miss a
    # rerun would make.
    r1, r2 = _runs()
    a, b = _cut(r1, range(4)), _cut(r2, range(12, 15))
    fa, fb = sweeps.sweep(a), sweeps.sweep(b)
    both = sweeps.sweep(_joined(a, b))
    blind = sweeps.sweep(_joined(a, b, sessions=False))
    for v in ("64-syscall", "32-vdso"):
        for size in (8192, 65536, 131072):
            u = _row(both, v, size)
            figs = (_row(fa, v, size)["value"], _row(fb, v, size)["value"])
            assert "sessions" in u["terms"], (v, size)
            assert u["ci_low"] <= min(figs) and u["ci_high"] >= max(figs), (v, size, u, figs)
            assert len(u["sessions"]["figures"]) == 2 and u["sessions"]["resolved"]
            nb = _row(blind, v, size)
            assert "sessions" not in nb and "drift" not in nb["terms"]
            assert nb["ci_high"] < max(figs) or nb["ci_low"] > min(figs), (v, size)


def test_sessions_that_agree_add_nothing():
    # The same rounds as both sessions: their figures are equal, the term is zero and the
    # interval is the one the rounds give without sessions.
    r2 = _cut(_runs()[1], range(6))
    both = sweeps.sweep(_joined(r2, r2))
    blind = sweeps.sweep(_joined(r2, r2, sessions=False))
    for size in (256, 4096, 65536):
        u, nb = _row(both, "64-syscall", size), _row(blind, "64-syscall", size)
        assert u["sessions"]["term"] == 0 and not u["sessions"]["resolved"]
        assert "sessions" not in u["terms"]
        assert (u["ci_low"], u["ci_high"]) == (nb["ci_low"], nb["ci_high"])


def test_a_session_of_one_round_gives_no_figure_and_no_term():
    # A --quick run's second session can hold one round: no figure of its own, so nothing is
    # said of a move and the interval is the rounds' own.
    r1, r2 = _runs()
    doc = _joined(_cut(r1, range(3)), _cut(r2, range(1)))
    u = _row(sweeps.sweep(doc), "64-syscall", 65536)
    assert "sessions" not in u and "sessions" not in u["terms"]
    assert sweeps.SESSION_MIN_ROUNDS == 2


def test_the_term_is_the_sessions_move_beyond_their_sampling_errors():
    # The arithmetic, on the 64 KiB row: sqrt(d^2 - se1^2 - se2^2) of the two sessions' own
    # figures, in quadrature with the rounds' half-width about the whole figure.
    r1, r2 = _runs()
    a, b = _cut(r1, range(4)), _cut(r2, range(12, 15))
    doc = _joined(a, b)
    u = _row(sweeps.sweep(doc), "64-syscall", 65536)
    row = next(x for r in doc["runs"] if r["variant"] == "64-syscall" for x in r["rows"]
               if x["buffsize"] == 65536)
    per = [[] for _ in range(7)]
    for r, s, n in zip(row["samples"]["round"], row["samples"]["real_s"],
                       [row["calls"]] * len(row["samples"]["round"])):
        per[r].append(s / n * 1e9)
    whole, s1, s2 = stats.undisturbed(per), stats.undisturbed(per[:4]), stats.undisturbed(per[4:])
    term = ((s1["value"] - s2["value"]) ** 2 - s1["se"] ** 2 - s2["se"] ** 2) ** 0.5
    # seven rounds: no drift term (8 are needed) and no blocks (32), so the sampling term alone
    assert whole["drift"] is None and not whole["blocks"]
    h = whole["value"] - whole["ci_stat_low"]
    assert abs(u["sessions"]["term"] - term) < 1e-6 * term
    assert abs((u["ci_high"] - u["value"]) - (h ** 2 + term ** 2) ** 0.5) < 1e-6 * term
    assert u["terms"] == ["sampling", "sessions"]


def test_the_halves_drift_and_the_sessions_are_one_move_not_two():
    # Eight rounds of each moment: the halves' drift (stats, doubled as a trend) sees the same
    # move as the sessions; the interval takes the larger, never both in quadrature.
    r1, r2 = _runs()
    doc = _joined(_cut(r1, range(8)), _cut(r2, range(8)))
    u = _row(sweeps.sweep(doc), "64-syscall", 65536)
    assert u["drift"] and u["sessions"]["term"]
    e, h_stat = u["value"], u["value"] - u["ci_stat_low"]
    move = max(u["drift"], u["sessions"]["term"])
    assert abs((u["ci_high"] - e) - (h_stat ** 2 + move ** 2) ** 0.5) < 1e-6 * e
    assert ("sessions" in u["terms"]) == (u["sessions"]["term"] > u["drift"])
    assert ("drift" in u["terms"]) == (u["sessions"]["term"] <= u["drift"])


def test_a_whole_run_puts_the_second_session_before_the_legs():
    names = [n for n, _ in run._together(run.STAGES)]
    assert names.index("tlpi-sweep") == names.index("legs") - 1
    assert names.index("seed-sweep") + 1 < names.index("tlpi-sweep")
    assert sorted(names) == sorted(n for n, _ in run.STAGES)


def test_with_nothing_between_them_the_sweeps_are_one_session():
    # --only seed-sweep,tlpi-sweep (and the legs): no stage lies between the sweeps and the
    # legs, so a second session would be the same moment; one session measures both.
    wanted = [s for s in run.STAGES if s[0] in ("seed-sweep", "tlpi-sweep", "legs")]
    assert [n for n, _ in run._together(wanted)] == ["seed-sweep", "tlpi-sweep", "legs"]


class _Sweep:
    """The part of measure.sweep._Rounds that _Turns drives."""

    def __init__(self, rounds, log, name):
        self.rounds, self.log, self.name, self.done = rounds, log, name, 0

    def round(self, r, focus=None):
        self.log.append((self.name, r))
        self.done = r + 1


def test_two_sessions_run_every_turn_once_in_order():
    log = []
    a, b = _Sweep(36, log, "seed"), _Sweep(12, log, "tlpi")
    turns = sweep._Turns(a, b)
    assert turns.session(share=0.5) is None
    assert len(log) == 24 and a.done == 18 and b.done == 6
    assert turns.session() is None
    assert log == [(("seed", "tlpi")[w], r) for _, w, r in sweep._order(a, b)]


def test_a_first_session_gives_each_sweep_two_rounds_before_its_deadline():
    # The deadline alone once stopped at the first turn of a sweep with its MIN_ROUNDS: on the
    # AMD EPYC guest the first session then held four seed rounds and one TLPI round (the long
    # one with the O_SYNC passes), which gave the TLPI sweep no figure of that moment.  In
    # sessions each gets SESSION_MIN_ROUNDS in every one; in one session each gets MIN_ROUNDS
    # (the seed sweep's turns between the TLPI sweep's: 11 of them by then).
    import time
    for each, seed, tlpi in ((0, 11, sweep.MIN_ROUNDS),
                             (sweep.SESSION_MIN_ROUNDS, sweep.MIN_ROUNDS + 1,
                              sweep.SESSION_MIN_ROUNDS)):
        log = []
        a, b = _Sweep(36, log, "seed"), _Sweep(12, log, "tlpi")
        turns = sweep._Turns(a, b)
        assert turns.session(time.monotonic() - 1, share=0.5 if each else 1.0,
                             each=each) == "deadline"
        assert (a.done, b.done) == (seed, tlpi)
    assert sweep.SESSION_MIN_ROUNDS == sweeps.SESSION_MIN_ROUNDS


def test_the_report_counts_the_rows_that_moved_beside_chance():
    # Many rows are judged at once: the line says how many moved beyond their sampling errors
    # at the 95% level and what chance alone gives (5% of them), not the rows whose term is
    # above zero, which a third of rows that did not move have.
    from twtools.present import document, report
    r1, r2 = _runs()
    doc = sweeps.sweep(_joined(_cut(r1, range(4)), _cut(r2, range(12, 15))))
    d = document.Doc()
    report._sessions(d, doc)
    text = repr(d.blocks)
    rows = [x for r in doc["runs"] if r["mode"] == "async" for x in r["rows"]]
    moved = sum(x["undisturbed"]["sessions"]["resolved"] for x in rows)
    assert 0 < moved < len(rows)
    assert f"{moved} of the {len(rows)} async rows" in text
    assert f"chance alone gives about {0.05 * len(rows):.1f}" in text
