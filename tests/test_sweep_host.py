"""The sweeps' runs are labelled by the host's state as the matrix's processes are, and each row
gives the figure of its fast runs beside the one it leads with.

Why it can break: the sweeps run the matrix's probe of the host (the reference cell, judged by
measure.bench.HostProbe) between their timewrite runs and record each run's start (t_s);
analyse/sweeps labels a run fast when the probes on each side of it were fast (the matrix's
percall.host_label, relabelled from the whole sweep), gives beside each async row's figure
(over every run: docs/sweeps.md says why) the figure of its fast runs when at least
HOST_FAST_MIN are, and beside its vs_ref the ratio over the rounds in which every cell at its
size met the fast state within one quiet burst.  A label read from the wrong probe, a slow run
let in, a pair split across two bursts, a lead figure that changed, or a missing figure that
says nothing, breaks a test here.  The runs are a recorded default seed sweep (the AMD EPYC Zen 4
guest, 11 rounds, 64-syscall and 32-vdso); the run times and the probes are laid out here so
that which runs are fast is known: each round 10 s, each run in its own second.
"""
import copy
import json
import lzma

from conftest import ROOT
from twtools.analyse import stats, sweeps

FIX = ROOT / "tests" / "fixtures" / "machines" / "amd-epyc-zen4-kvm" / "sweep-memory-states"
FAST, SLOW = 100.0, 200.0


def _doc():
    return json.loads(lzma.open(FIX / "sweep_seed-r1.json.xz", "rt").read())


def _probed(doc, slow=(), split=()):
    """doc with run times and probes: round r's run of the i-th variant starts at r*10 + 2i +
    0.5, between probes at r*10 + 2i and r*10 + 2i + 1 (and one at r*10 + 2i + 1.5, between
    two runs); a probe is slow when its (round, its time within the round) is in slow, and the
    one between the runs of round r is slow when r is in split."""
    out = copy.deepcopy(doc)
    n = len(out["runs"])
    for i, run in enumerate(out["runs"]):
        for row in run["rows"]:
            row["samples"]["t_s"] = [r * 10 + 2 * i + 0.5 for r in row["samples"]["round"]]
    probes = []
    for r in range(out["rounds_done"]):
        for k in range(n):
            for dt in (2 * k, 2 * k + 1):
                probes.append({"t_s": r * 10 + dt, "floor_ns": SLOW if (r, dt) in slow else FAST,
                               "fast": (r, dt) not in slow})
            if k < n - 1:
                probes.append({"t_s": r * 10 + 2 * k + 1.5,
                               "floor_ns": SLOW if r in split else FAST, "fast": r not in split})
    out["host_state"] = {"probes": probes, "every": 1, "why": None}
    return out


def _slow_round(r, n=2):
    """Every probe of round r slow: each of its runs slow."""
    return {(r, dt) for dt in range(2 * n)}


def _runs_of(row, keep):
    smp = row["samples"]
    g = {}
    for r, v in zip(smp["round"], smp["ns_per_call"]):
        if r in keep:
            g.setdefault(r, []).append(v)
    return [g[k] for k in sorted(g)]


def test_a_row_gives_the_figure_of_its_fast_runs_beside_its_own():
    raw = _doc()
    # rounds 1 and 4 slow by the probes; their passes made the fastest of all, so that a slow
    # run let in would take the figure
    for run in raw["runs"]:
        for row in run["rows"]:
            smp = row["samples"]
            smp["real_s"] = [v * (0.5 if r in (1, 4) else 1) for v, r in
                             zip(smp["real_s"], smp["round"])]
    a = sweeps.sweep(_probed(raw, slow=_slow_round(1) | _slow_round(4)))
    plain = sweeps.sweep(raw)
    fast = set(range(11)) - {1, 4}
    for run, run0 in zip(a["runs"], plain["runs"]):
        for row, row0 in zip(run["rows"], run0["rows"]):
            u, h = row["undisturbed"], row["undisturbed"]["host"]
            assert (h["fast_runs"], h["runs"], h["min"]) == (9, 11, sweeps.HOST_FAST_MIN)
            want = stats.undisturbed(_runs_of(row, fast))
            assert h["fast"]["value"] == want["value"] and h["fast"]["n_rounds"] == 9
            # the row leads over every run, as without probes: the halved slow rounds lead it
            assert u["value"] == row0["undisturbed"]["value"] < 0.8 * h["fast"]["value"]
            f = h["fast"]
            assert h["agrees"] is (f["ci_low"] <= u["ci_high"] and u["ci_low"] <= f["ci_high"])
            assert "host" not in row0["undisturbed"]
    assert a["host"]["undisturbed_fast"] == a["host"]["undisturbed_rows"] == 10
    assert a["host"]["undisturbed_agree"] == sum(
        row["undisturbed"]["host"]["agrees"] for run in a["runs"] for row in run["rows"])
    assert a["host"]["probes"] == 11 * 5 and a["host"]["fast_probes"] == 11 * 5 - 8


def test_too_few_fast_runs_give_no_fast_figure_and_say_why():
    raw = _doc()
    slow = set().union(*(_slow_round(r) for r in range(5)))
    a = sweeps.sweep(_probed(raw, slow=slow))
    plain = sweeps.sweep(raw)
    for run, run0 in zip(a["runs"], plain["runs"]):
        for row, row0 in zip(run["rows"], run0["rows"]):
            u = row["undisturbed"]
            assert u["host"]["fast"] is None and u["host"]["fast_runs"] == 6
            assert "6 of its 11 runs" in u["host"]["why"]
            assert u["value"] == row0["undisturbed"]["value"]
            vr = row["vs_ref"]
            assert vr["host"]["paired"] is None and vr["host"]["paired_in_burst"] == 6
            assert "no ratio paired" in vr["host"]["why"]
            assert vr["value"] == row0["vs_ref"]["value"]
    assert a["host"]["undisturbed_fast"] == a["host"]["vs_ref_paired"] == 0


def test_vs_ref_pairs_the_row_and_its_reference_within_one_burst():
    raw = _doc()
    # round 2: the probe after 32-vdso's run slow (that run alone slow); rounds 5 and 7: both
    # runs fast, but a slow probe between them, so they are in two bursts
    a = sweeps.sweep(_probed(raw, slow={(2, 3)}, split={5, 7}))
    plain = sweeps.sweep(raw)
    for run, run0 in zip(a["runs"], plain["runs"]):
        for row, row0 in zip(run["rows"], run0["rows"]):
            vr, u = row["vs_ref"], row["undisturbed"]
            h = vr["host"]
            assert (h["paired_in_burst"], h["rounds"]) == (8, 11)
            assert h["paired"]["n_rounds"] == 8 and vr["n_rounds"] == 11
            assert vr["value"] == row0["vs_ref"]["value"]
            assert h["agrees"] is (h["paired"]["ci_low"] <= vr["ci_high"]
                                   and vr["ci_low"] <= h["paired"]["ci_high"])
            # each row's own figure keeps the runs that were fast, whatever the other's
            assert u["host"]["fast_runs"] == (10 if run["variant"] == "32-vdso" else 11)
    # the paired ratio is that of the rounds paired within a burst, as the statistics give it
    keep = set(range(11)) - {2, 5, 7}
    for size in sorted({row["buffsize"] for row in a["runs"][0]["rows"]}):
        rows = [next(r for r in run["rows"] if r["buffsize"] == size) for run in a["runs"]]
        want = stats.undisturbed_over_gmean([_runs_of(r, keep) for r in rows])
        assert [r["vs_ref"]["host"]["paired"]["value"] for r in rows] == \
            [w["median"] for w in want]


def test_a_sweep_without_probes_reads_as_before():
    a = sweeps.sweep(_doc())
    assert "why" in a["host"] and "probes" not in a["host"]
    for run in a["runs"]:
        for row in run["rows"]:
            assert "host" not in row["undisturbed"] and "host" not in row["vs_ref"]
    failed = dict(_doc(), host_state={"probes": [], "why": "the host's probe failed: X"})
    assert sweeps.sweep(failed)["host"] == {"why": "the host's probe failed: X"}


def test_the_report_says_how_many_rows_rest_on_the_fast_runs():
    from twtools.present import document, report
    raw = _doc()
    a = sweeps.sweep(_probed(raw, slow={(2, 3)}, split={5, 7}))
    d = document.Doc()
    report._host_state(d, a)
    text = " ".join(str(b[1]) for b in d.blocks)
    # 52 of 55 probes fast; 64-syscall: 11 fast runs, 32-vdso: 10; vs_ref: 8 rounds in a burst
    h = a["host"]
    assert "ran 55 times between its runs and found the host fast in 95% of them" in text
    assert (f"Of the 10 async rows, 10 had {sweeps.HOST_FAST_MIN} runs or more in the fast "
            f"state, and the undisturbed figure of those alone fell within the row's interval "
            f"in {h['undisturbed_agree']}") in text
    assert f"could be had for 10, and agreed in {h['vs_ref_agree']}" in text
    few = sweeps.sweep(_probed(raw, slow=set().union(*(_slow_round(r) for r in range(5)))))
    d = document.Doc()
    report._host_state(d, few)
    assert "Of the 10 async rows, 0 had" in repr(d.blocks)
    d = document.Doc()
    report._host_state(d, sweeps.sweep(_doc()))
    assert not d.blocks
