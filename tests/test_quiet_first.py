"""tw bench measures quiet first and its undisturbed figure rests on the host's fast state
(issue 42).

Why it can break: on a cloud host whose neighbours slow it most of the time, the mean of the
fastest 20% of a cell's process floors mixes the host's fast and slow states, and how many
fast processes a rerun draws decides the figure (the recorded AMD guest: 4 or 5 of 32).  The
matrix now probes the host with the reference cell between every few cells, labels each
process by the probes around it, and rests the figure on the fast-labelled processes.  If the
labels stop following the probes, a slow-state process is passed off as undisturbed; if the
gate lets a cell with too few fast processes through unmarked, a noisy run looks precise; if a
run where the host was never quiet does not say so, its lowest state reads as undisturbed.
The synthetic documents below have a known fast state; the live run checks the structure of
what tw bench records, never its figures (the host's noise decides those).
"""
import json
import re
import sys

import numpy as np
import pytest

import hostsim
from conftest import ROOT, need_supported, run

sys.path.insert(0, str(ROOT / "scripts"))
from twtools.analyse import causes, percall, results, stats  # noqa: E402
from twtools.present import report  # noqa: E402

TW = ROOT / "scripts" / "tw"


def _doc(fast_share, n_rounds=40, seed=1, fast_ns=100.0, slow=1.4, target=None,
         fast_rounds=None, levels=(0.0,), mislabel=0.0):
    """A quiet-first percall document: a reference and one other cell, the host in its fast
    state in bursts covering about fast_share of the run (or exactly in fast_rounds); a probe
    before and after each of the cell's processes, which runs slow anyway in a share
    `mislabel` of its fast rounds.  Each of the cell's processes draws one of
    `levels` (shares above fast_ns, equally likely), as a process draws its layout level."""
    rng = np.random.default_rng(seed)
    t, probes, ref_rounds, cell_rounds = 0.0, [], [], []
    fast = True
    for r in range(n_rounds):
        if fast_rounds is not None:
            fast = r in fast_rounds
        elif rng.random() < 0.2:
            fast = rng.random() < fast_share
        k = 1.0 if fast else slow
        pf = 50.0 * k * (1 + abs(rng.normal(0, 0.003)))
        probes.append({"t_s": round(t, 3), "round": r, "floor_ns": pf, "fast": fast,
                       "in_cell": True})
        ref_rounds.append({"round": r, "t_s": round(t, 3), "samples_ns": [pf, pf * 1.01]})
        t += 0.01
        # a mislabel: the cell's process ran slow between two fast probes
        km = slow if mislabel and fast and rng.random() < mislabel else k
        v = fast_ns * km * (1 + levels[rng.integers(len(levels))] + abs(rng.normal(0, 0.003)))
        cell_rounds.append({"round": r, "t_s": round(t, 3), "samples_ns": [v, v * 1.01]})
        t += 0.01
        pf2 = 50.0 * k * (1 + abs(rng.normal(0, 0.003)))
        probes.append({"t_s": round(t, 3), "round": r, "floor_ns": pf2, "fast": fast,
                       "in_cell": False})
        t += 0.01
    return hostsim.percall_doc(probes, ref_rounds, cell_rounds, t, n_rounds, target)


def _cell(a, op="getppid"):
    return next(c for c in a["cells"] if c["op"] == op)


def _undisturbed(d, op="getppid"):
    """The cell's undisturbed figure as percall.analyse(d) gives it: analyse summarises each
    cell with cell_summary and the run's host probes, and only adds to it afterwards (the
    projection of the time a target would take).  The simulations below read only the figure,
    for hundreds of documents, so they summarise the one cell and leave out the reference's
    summary, the ratios and the host's state (three quarters of an analysis); the first
    document of each is checked against analyse itself."""
    cell = next(c for c in d["cells"] if c["op"] == op)
    probes = percall.host_probes(d)[0]
    c = percall.cell_summary(d, cell, probes)
    # and, as analyse does once every cell is summarised, the host's drift over the run
    percall.hold_host_drift(c, percall.host_drift(probes))
    return c["undisturbed"]


def _same_as_analyse(d, u):
    full = _cell(percall.analyse(d))["undisturbed"]
    assert json.dumps({k: full[k] for k in u}, sort_keys=True) == json.dumps(u, sort_keys=True)


def test_the_figure_rests_on_the_fast_state():
    a = percall.analyse(_doc(0.5))
    c = _cell(a)
    g = c["undisturbed"]["host"]
    assert g["used"] and 8 <= g["fast_processes"] < g["processes"]
    # the fast state is 100 ns (+ at most ~1%); the slow one 140
    assert 99.5 <= c["undisturbed_ns"] <= 101.5
    assert c["undisturbed_ci_low"] <= 101 and c["undisturbed_ci_high"] < 110


def test_the_gated_figure_is_the_fast_states_mean_and_covers_a_rerun():
    """At a third of the time quiet, a default run's cell has about ten fast processes; a
    fifth of them is two floors, and which layout levels those drew moves the figure from run
    to run.  The gated figure is the mean of the fast state's floors (those within the screen
    of the lowest): two independent runs of the same host agree within their intervals in at
    least 95% of the pairs of 200 in which both runs met the host's fast state."""
    lv = (0.0, 0.01, 0.02, 0.03)
    agree = []
    for seed in range(200):
        got = []
        for rerun in (0, 1):
            d = _doc(0.3, n_rounds=32, seed=1000 + 2 * seed + rerun, levels=lv)
            if seed == 0:
                _same_as_analyse(d, _undisturbed(d))
            if sum(p["fast"] for p in d["host_state"]["probes"]) < 6:
                # The host never met its fast state: a uniformly slow host looks quiet to
                # any probe inside it (docs/syscost.md, "Quiet first"), so only runs that
                # met the fast state can agree on it (39 of the 400 runs: not summarised).
                continue
            u = _undisturbed(d)
            if not u["host"]["used"]:
                continue
            got.append(u)
            n = u["host"]["fast_processes"]
            # every fast floor within the screen is in the mean (the levels span 3%)
            assert round(u["q"] * n) == n
        if len(got) == 2:
            a, b = got
            agree.append(a["ci_low"] <= b["ci_high"] and b["ci_low"] <= a["ci_high"])
    assert len(agree) >= 150
    assert sum(agree) >= 0.95 * len(agree), f"{sum(agree)} of {len(agree)} reruns agree"


def test_mislabelled_slow_processes_neither_move_nor_widen_the_gated_figure():
    """Beside the neighbour a third of the processes labelled fast ran slow (a default report:
    15 fast-labelled, 10 within 0.7% of each other, the rest 10-40% up), and the interval over
    all of them, each half-sample re-taking its fastest share, came out at 2.5%.  The screen
    keeps them out of the mean and out of the interval: with a third mislabelled the intervals
    are about as wide as with none (the old interval: 13 times as wide), and two runs agree
    in 95% of the pairs."""
    lv = (0.0, 0.01, 0.02, 0.03)
    widths, agree = {0.0: [], 0.33: []}, {0.0: [], 0.33: []}
    for seed in range(100):
        for mis in widths:
            got = []
            for rerun in (0, 1):
                d = _doc(0.4, n_rounds=32, seed=5000 + 2 * seed + rerun, levels=lv,
                         mislabel=mis)
                u = _undisturbed(d)
                if seed == 0:
                    _same_as_analyse(d, u)
                if u["host"]["used"]:
                    got.append(u)
                    widths[mis].append((u["ci_high"] - u["ci_low"]) / 2 / u["value"])
            if len(got) == 2:
                a, b = got
                agree[mis].append(a["ci_low"] <= b["ci_high"] and b["ci_low"] <= a["ci_high"])
    assert len(agree[0.33]) >= 75
    # in 95% of the pairs, as the issue asks of a rerun (95 of 99 when written, 96 of 97
    # without mislabels)
    assert np.mean(agree[0.33]) >= 0.95, {m: f"{sum(a)} of {len(a)}" for m, a in agree.items()}
    med = {m: float(np.median(w)) for m, w in widths.items()}
    assert med[0.33] < 1.5 * med[0.0], med


def test_labels_follow_the_probes_around_a_process():
    probes = [(0.0, 50.0, True), (1.0, 70.0, False), (2.0, 50.0, True), (3.0, 50.0, True)]
    assert percall.host_label(probes, 0.5) is False      # fast before, slow after
    assert percall.host_label(probes, 2.5) is True
    assert percall.host_label(probes, 3.5) is True       # after the last probe: its label
    assert percall.host_label([], 1.0) is None


def test_too_few_fast_processes_are_marked_not_passed_off():
    a = percall.analyse(_doc(0.0, fast_rounds={3, 20}))
    c = _cell(a)
    g = c["undisturbed"]["host"]
    assert g["fast_processes"] == 2
    assert not g["used"] and "fast state" in g["why"]
    # no undisturbed figure from a slow state: the cell leads with its typical one, says why,
    # and gives the lowest floor it saw
    assert c["undisturbed_ns"] is None and c["primary"] == "typical"
    assert "fast state" in c["primary_why"] and c["undisturbed"]["lowest_ns"] > 0


def test_never_quiet_is_said_on_the_first_screen():
    d = _doc(0.0, seed=5)
    # every probe slow but three, none beside another: fast instants, never a fast state
    for i, p in enumerate(d["host_state"]["probes"]):
        p["floor_ns"] = 70.0 + 0.5 * (i % 7)
    for i in (10, 30, 50):
        d["host_state"]["probes"][i]["floor_ns"] = 50.0
    a = percall.analyse(d)
    assert a["host"]["never_quiet"]
    line = report.host_line(a)
    assert line and "never quiet" in line


def test_the_host_section_figures():
    a = percall.analyse(_doc(0.3, seed=2))
    h = a["host"]
    assert 0 < h["fast_share"] < 1 and h["probes"] == 80
    assert h["fast_processes_median"] == _cell(a)["undisturbed"]["host"]["fast_processes"]
    assert h["bursts"] >= 1 and h["longest_burst_s"] >= 0
    assert len(h["probe_series"]) == h["probes"]


def test_a_cell_still_wider_than_one_percent_is_never_said_to_need_no_time():
    """A cell can have as many fast processes as Stein's plan asks for and still an interval
    (the default run's, not Stein's) wider than 1%: here 24 against a plan of 12, at ±1.3%.
    An AMD EPYC guest's report said such cells "would need about 0 s more". The time given is
    the whole of the `tw bench --target 1%` run the report points to: the plan's fast
    processes at this fast share, never zero."""
    a = percall.analyse(_doc(0.3, seed=2, levels=(0.0, 0.01, 0.02, 0.03)))
    u = _cell(a)["undisturbed"]
    pj = u["projection"]
    assert stats.half_width_rel(u, "value") > 0.01 and pj["n"] >= pj["need_n"] and pj["more_seconds"] == 0
    assert pj["seconds"] == pytest.approx(pj["need_n"] / pj["fast_share"] * pj["proc_s"])
    assert a["host"]["projection_s_median"] == pj["seconds"] > 0


def test_a_target_run_reports_the_sequential_rules_figure():
    a = percall.analyse(_doc(0.6, n_rounds=80, seed=4, target=0.01))
    u = _cell(a)["undisturbed"]
    # the sequential rule's interval, and the host's drift over the run beside it
    assert u["terms"][0] == "sequential" and set(u["terms"]) <= {"sequential", "host drift"}
    assert u["sequential"]["target"] == 0.01
    st = percall.target_status(a, 0.01)
    assert st["cells"] == 2
    assert (percall.key(_cell(a)) in st["met_keys"]) == bool(u["sequential"]["met"])


def test_a_run_without_probes_keeps_the_old_figure():
    d = _doc(0.5)
    del d["host_state"]
    a = percall.analyse(d)
    assert "host" not in _cell(a)["undisturbed"] and "fast_share" not in a["host"]


def test_bench_records_probes_and_stops_at_its_budget(build, tmp_path):
    need_supported("syscost", "64-syscall")
    out = tmp_path / "b"
    p = run([sys.executable, TW, "bench", "--variants", "64-syscall",
             "--ops", "null,getppid,write-file", "--sizes", "64", "--shapes", "ret",
             "--rounds", "4", "--target", "0.01%", "--budget", "3s", "--out", out],
            text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    doc = json.loads((out / "percall.json").read_text())
    hs = doc["host_state"]
    assert hs["stopped"] == "budget" and hs["target"] == 0.0001
    # a target run stops at a number of fast processes, not of rounds: it never waits
    assert hs["quiet_first"] is False and hs["waited_s"] == 0
    assert hs["probes"] and all({"t_s", "floor_ns", "fast"} <= set(x) for x in hs["probes"])
    ref = next(c for c in doc["cells"] if c["op"] == "null")
    # each round ran from one of the fresh copies of the program, in turn (issue 46)
    cell = next(c for c in doc["cells"] if c["op"] == "getppid")
    assert doc["params"]["copies"] == 4
    assert [r["copy"] for r in cell["rounds"]] == [r["round"] % 4 for r in cell["rounds"]]
    # every probe that opened a chunk or closed a round is one of the reference's rounds
    assert len(ref["rounds"]) == sum(1 for x in hs["probes"] if x["in_cell"])
    # a cell the target judges is measured every round until it meets it (0.01%: never); one
    # it does not judge (a write to a file) stops at the mode's rounds, leaving them the time
    assert len(cell["rounds"]) == hs["rounds"]
    wf = next(c for c in doc["cells"] if c["op"] == "write-file")
    assert wf["op"] not in percall.FAST_OPS and len(wf["rounds"]) == min(4, hs["rounds"])
    assert "target ±0.01%" in p.stderr and "the budget of 3 s ended first" in p.stderr
    assert f"cells the target does not judge: 1, with the mode's {min(4, hs['rounds'])} " \
        "rounds" in p.stderr
    # the level the fast state sat at and the core clock its figures are at, so that two
    # runs can be set side by side; and what to compare between runs
    assert re.search(r"of probes at a level of [0-9.]+ ns, core clock up to [0-9.]+ GHz; ",
                     p.stderr), p.stderr[-600:]
    assert "between runs, compare cycles" in p.stderr


def test_one_lucky_probe_does_not_set_the_bar():
    # One probe far below the rest (the lowest layout level, a lucky instant) once made every
    # later probe "slow" and the matrix wait 45 s for nothing: the level is the 3rd fastest.
    d = _doc(1.0, seed=6)
    d["host_state"]["probes"][7]["floor_ns"] = 40.0
    a = percall.analyse(d)
    assert a["host"]["fast_share"] > 0.9
    assert _cell(a)["undisturbed"]["host"]["used"]


def _two_mechanisms(fast_share, **kw):
    """_doc with its second cell made another mechanism's null call (64-int80 beside the
    reference's 64-syscall): the two processes of each round meet one host state."""
    d = _doc(fast_share, **kw)
    d["cells"][1].update(variant="64-int80", mechanism="int80", op="null")
    return d


def test_a_difference_is_paired_within_quiet_rounds():
    # Fast state: 100 - 50 = 50 ns; slow: 140 - 70 = 70 ns.  Paired over the rounds whose two
    # processes both met the fast state, the difference is the fast state's.
    d = _two_mechanisms(0.2, n_rounds=60, seed=6)
    # Over every round, the fastest fifth of the floors mixes the states: about 57 ns.
    every = percall.stats.undisturbed_ratio(*percall._by_round(d, d["cells"][1], d["cells"][0]),
                                            how="diff")
    assert every["median"] > 55, every
    probes, _ = percall.host_probes(d)
    quiet = sum(1 for r in d["cells"][1]["rounds"] if percall.host_label(probes, r["t_s"]))
    dp = percall.pair_undisturbed(d, "64-int80", "64-syscall", how="diff")
    assert dp is not None and dp["n_pairs"] == quiet and dp["of_rounds"] == 60, dp
    assert dp["n_pairs"] >= 6
    assert 49.0 <= dp["median"] <= 51.5 and dp["ci_low"] <= 50.5 and dp["ci_high"] < 52, dp
    r = percall.pair_undisturbed(d, "64-int80", "64-syscall")
    assert 1.97 <= r["median"] <= 2.03, r


def test_the_cost_models_difference_is_paired_within_quiet_rounds():
    # causes.json's int 0x80 less its baseline was once the two cells' own figures' difference,
    # each resting on its own quiet processes; with the raw matrix at hand it is paired over
    # the rounds both met the fast state (issue 62, "pair within the bursts").
    d = _two_mechanisms(0.2, n_rounds=60, seed=6)
    a = percall.analyse(d)
    paired = causes.compute_from(a, None, raw=d)["mechanisms"]["64-int80"]["minus_baseline_ns"]
    dp = percall.pair_undisturbed(d, "64-int80", "64-syscall", how="diff")
    assert paired["paired"] is True and paired["n_pairs"] == dp["n_pairs"] >= 6
    assert paired["value"] == pytest.approx(dp["median"])
    assert paired["ci_high"] - paired["ci_low"] == pytest.approx(dp["ci_high"] - dp["ci_low"])
    unpaired = causes.compute_from(a, None)["mechanisms"]["64-int80"]["minus_baseline_ns"]
    assert unpaired["paired"] is False and "n_pairs" not in unpaired
    # too few quiet pairs: the figures' difference, said to be unpaired
    d2 = _two_mechanisms(0.0, n_rounds=30, fast_rounds={4, 17})
    m = causes.compute_from(percall.analyse(d2), None, raw=d2)["mechanisms"].get("64-int80")
    assert m is None or (m.get("minus_baseline_ns") or {}).get("paired") in (False, None)


def test_too_few_quiet_pairs_give_no_paired_figure():
    d = _two_mechanisms(0.0, n_rounds=30, fast_rounds={4, 17})
    assert percall.pair_undisturbed(d, "64-int80", "64-syscall", how="diff") is None


def test_two_bench_directories_are_compared_by_their_ratios(build, tmp_path):
    # Two --target runs beside the neighbour were each within ±1% and 10-14% apart in ns, the
    # host's level having moved; their ratios to the reference held.  So tw bench's directory
    # is one tw compare reads (meta.json, as tw run writes for the bench stage alone), and the
    # comparison carries each cell's relative figure beside the absolute one.
    # The directory also holds the machine's fingerprint, from which tw compare learns whether
    # int 0x80 pays a VM exit here, and so decides two runs' int 0x80 cells at one exit price
    # (tests/test_compare_exit_price.py: the host moved it 1.2% between two runs).
    need_supported("syscost", "64-syscall")
    need_supported("syscost", "64-int80")
    outs = []
    for n in (1, 2):
        out = tmp_path / f"b{n}"
        p = run([sys.executable, TW, "bench", "--variants", "64-syscall,64-int80", "--ops",
                 "null,getppid,cpuid", "--shapes", "ret", "--rounds", "8", "--out", out],
                text=True, timeout=300)
        assert p.returncode == 0, p.stderr[-2000:]
        meta = json.loads((out / "meta.json").read_text())
        assert meta["schema"] == "timewrite-results/1" and meta["state"] == "complete"
        # the exit priced again at the end where int 0x80 pays one here (tw bench's own
        # stage, tests/test_bench_target_exit_price.py)
        assert meta["stages"]["bench"]["ok"] and meta["stages_wanted"] == ["doctor", "bench"] + (
            ["exit-price"] if (out / "exitprice.json").exists() else [])
        assert meta["stages"]["doctor"]["ok"]
        assert json.loads((out / "fingerprint.json").read_text())["cpu"]["vendor"]
        outs.append(out)
    p = run([sys.executable, TW, "compare", "--json", *outs], text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    got = json.loads(p.stdout)
    cell = next(d for d in got["decisions"] if d["op"] == "getppid" and d["variant"] == "64-syscall")
    if cell["figure"] == "typical":
        # a noisy host can leave it no trustworthy floor in 8 rounds; decided on its typical
        # figure, it is its own reference (the same call on the 64-bit syscall, which met
        # the same noise): no relative figure, and no absolute call beyond its own move
        assert cell["relative"] is None
        assert cell["absolute"]["decision"] in ("no difference detected", "within drift")
    else:
        # decided as measured and by what it adds over the base (its body over the null
        # call: analyse/basemodel.py), never by a ratio to a base that may have moved
        assert cell["absolute"]["decision"] and cell["premium"]["decision"]
        assert cell["premium"]["what"] == "body" and cell["relative"] is None
    assert cell["exits_per_call"] is None
    data = [results.load(o) for o in outs]
    paid = causes.exits_paid(data[1]["causes"], "64-int80")
    int80 = next(d for d in got["decisions"] if (d["variant"], d["op"]) == ("64-int80", "null"))
    # Taken out only on the undisturbed figure, with an exit priced in both runs: 4 rounds of
    # a noisy host can leave either without one (too few processes met its fast state).
    priced = int80["figure"] == "undisturbed" and all(
        percall.figure(percall.find(d["percall"], "64-syscall", "cpuid"), "undisturbed")
        for d in data)
    assert int80["exits_per_call"] == (paid if priced else None), (int80, paid, priced)
    if paid and priced:   # a guest whose int 0x80 reads the APIC, and the run's fit agrees
        assert int80["exit_shift_pct"] is not None and int80["absolute"]["at_a_exit_price"]


def test_a_slow_moment_measures_the_cells_the_quiet_is_not_for():
    # The queue the probe's answer picks: fast -> the quiet cells, slow -> the others; slow
    # with no others left -> None (wait); the quiet cells are exactly what the targets judge.
    from twtools.measure import bench
    assert bench.QUIET_OPS == percall.FAST_OPS
    quiet = [("64-syscall", "null", None, "ret")] * 8
    other = [("64-syscall", "write-file", 256, "ret")] * 7
    qs = [list(quiet), list(other)]
    assert bench.next_chunk(qs, False) == other[:bench.REF_EVERY]
    assert bench.next_chunk(qs, True) == quiet[:bench.REF_EVERY]
    assert bench.next_chunk(qs, None) == quiet[bench.REF_EVERY:]      # unknown: as fast
    assert bench.next_chunk(qs, False) == other[bench.REF_EVERY:]
    assert qs == [[], []]
    qs = [list(quiet), []]
    assert bench.next_chunk(qs, False) is None and len(qs[0]) == 8   # nothing taken: wait
    # fast with the quiet cells done: the others, so no round ends with cells unmeasured
    qs = [[], list(other)]
    assert bench.next_chunk(qs, True) == other[:bench.REF_EVERY]
    # one queue (not quiet first): in order, whatever the host
    qs = [list(other)]
    assert bench.next_chunk(qs, False) is None
    assert bench.next_chunk(qs, True) == other[:bench.REF_EVERY]


def test_the_cell_that_prices_an_exit_waits_for_the_quiet():
    # cpuid ret prices one VM exit, which the int 0x80 cells pay once a call: `tw compare` and
    # the exit-price stage take the exit's move out at its figure, so it must rest on the fast
    # state as theirs does (measured in the slow moments, 10 of its 32 processes met it on an
    # AMD guest, +-1.3% against their +-0.4%); its jmp twin and the file writes need not.
    from twtools.measure import bench
    assert bench._quiet(("64-syscall", "cpuid", None, "ret"))
    assert bench._quiet(("32-int80", "getppid", None, "jmp"))
    assert not bench._quiet(("64-syscall", "cpuid", None, "jmp"))
    assert not bench._quiet(("64-syscall", "write-file", 256, "ret"))
