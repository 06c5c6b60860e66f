"""The fleet compares the report's own undisturbed figure, the host's fast state's, never the
fastest fifth of every process.

Why it can break: a fleet digest computed its figure ungated, the fastest fifth of every
process's floor, so on a noisy host it mixed the host's fast and slow states (issue 42: 4 or 5
of 32 processes met the fast state on the recorded AMD guest) and differed from the report's
figure for the same run; a machine could then look slow in the fleet only because its host's
neighbours were busy.  Now the digest takes percall's figure through one function.  If the two
drift apart, a fleet and a report disagree on one run; if a cell too few of whose processes
met the fast state is given a figure, the slow state is passed off as undisturbed; if the
probes that do the labelling are not checked, a hostile host moves figures with them.
"""
import copy
import json
import lzma

import pytest

from conftest import ROOT
from test_quiet_first import _doc
from twtools.analyse import fleet, percall
from twtools.core.ui import DataError

AA = ROOT / "tests" / "fixtures" / "machines" / "amd-epyc-zen4-kvm" / "aa-runs"


def _recorded():
    doc = json.loads(lzma.open(AA / "r1-percall.json.xz").read())
    fp = json.loads((AA / "fingerprint.json").read_text())
    return doc, fp


def test_the_digest_is_the_reports_figure_on_a_recorded_run():
    doc, fp = _recorded()
    dg = fleet.digest_doc(copy.deepcopy(doc), fp, {}, "vm")
    a = percall.analyse(doc)
    n = 0
    for c in a["cells"]:
        if not c.get("supported"):
            continue
        d = dg["cells"][fleet.cell_name(c["variant"], c["op"], c.get("size"), c["shape"])]
        assert (d["value"], d["ci_low"], d["ci_high"]) == (
            c["undisturbed_ns"], c["undisturbed_ci_low"], c["undisturbed_ci_high"]), c["op"]
        n += 1
    assert n == 8
    # at the run's top clock, through the host's probes: not the ungated figure
    ungated = fleet.undisturbed(doc, doc["cells"][0], "cells[0]")
    assert ungated["value"] != dg["cells"][fleet.cell_name(
        doc["cells"][0]["variant"], doc["cells"][0]["op"], None, "ret")]["value"]


def test_a_cell_too_few_of_whose_processes_met_the_fast_state_is_left_out():
    doc, fp = _recorded()
    probes, _ = percall.host_probes(doc)
    # every process of the cpuid cell started in one slow moment: the probes around it slow
    slow = next(t for (t, _, fast), (_, _, after) in zip(probes, probes[1:])
                if not fast and not after)
    cpuid = next(c for c in doc["cells"] if c["op"] == "cpuid")
    for rd in cpuid["rounds"]:
        rd["t_s"] = slow
    assert percall.find(percall.analyse(doc), "64-syscall", "cpuid")["undisturbed_ns"] is None
    dg = fleet.digest_doc(doc, fp, {}, "vm")
    assert "64-syscall cpuid" not in dg["cells"] and "64-syscall null" in dg["cells"]
    # and a run none of whose cells met it has nothing to compare: one line, not a figure
    none = _doc(0.5, n_rounds=24, fast_rounds={0, 1})
    with pytest.raises(DataError, match="no measured cell"):
        fleet.digest_doc(none, {}, {}, "h")


@pytest.mark.parametrize("key,value", [("floor_ns", -1.0), ("floor_ns", "50"),
                                       ("floor_ns", 1e300), ("t_s", None), ("chain_ns", 0.0),
                                       ("floor_ns", True)])
def test_a_hostile_probe_costs_its_host_one_line(key, value):
    doc = _doc(0.5, n_rounds=8)
    doc["host_state"]["probes"][3][key] = value
    with pytest.raises(DataError) as e:
        fleet.digest_doc(doc, {}, {}, "h")
    assert "host_state.probes[3]" in str(e.value) and "\n" not in str(e.value)


def test_a_preempted_batch_of_the_clock_chain_keeps_the_digest():
    # Under load one batch's chain took 1000 ns and more a step (preempted midway), and
    # the whole run's digest was refused; the step that scales is the fastest batch's.
    doc, fp = _recorded()
    rd = doc["cells"][2]["rounds"][0]
    rd["chain_ns"] = [1.1] * len(rd.get("chain_ns") or [0, 0]) + [2500.0]
    assert fleet.digest_doc(doc, fp, {}, "vm")["cells"]


@pytest.mark.parametrize("value", [[0.0], [-1.0], [1e9], ["1.1"], 5, [1.1, 0.0],
                                   [1500.0, 2500.0]])
def test_a_hostile_clock_chain_costs_its_host_one_line(value):
    doc, fp = _recorded()
    doc["cells"][2]["rounds"][0]["chain_ns"] = value
    with pytest.raises(DataError) as e:
        fleet.digest_doc(doc, fp, {}, "vm")
    assert "chain_ns" in str(e.value) and "\n" not in str(e.value)
