"""The fleet view's figures, with known answers: the digest's floor (the k-best floor of the
usable batches, disturbed ones left out), ratios without invented intervals, groups by what
differs, outliers with their gap, the ranked explaining facts, and the atlas shipped in
data/machines/ placed in a report.

Breaks when the digest stops leaving disturbed batches out, when a figure without an interval
gains one, when a fact every machine shares starts grouping, when an outlier rule or the
variance share changes, or when the atlas stops reading."""

import copy
from pathlib import Path

import pytest

from conftest import ROOT
from twtools.analyse import atlas, fleet, results, stats
from twtools.core.ui import DataError
from twtools.present import atlas as patlas
from twtools.present.document import Doc, plain

FP = {"cpu": {"vendor": "GenuineIntel", "family": 6, "model": 106, "model_name": "Xeon"},
      "virtualization": "kvm", "kernel": {"release": "6.18"}, "mitigations_cmdline": None,
      "ia32_emulation": True, "fred": False, "vdso32": {"instruction": "sysenter"}}


def doc_of(cells):
    """A percall.json document: cells {(variant, op): [rounds of (value, disturbed)]}."""
    out = {"schema": "timewrite-percall/2", "reference": {"variant": "64-syscall", "op": "null",
                                                          "shape": "ret"}, "cells": []}
    for (variant, op), rounds in cells.items():
        out["cells"].append({"variant": variant, "op": op, "size": None, "shape": "ret",
                             "supported": True, "rounds": [
                                 {"round": i, "samples_ns": [v for v, _ in r],
                                  "disturbed": [d for _, d in r]} for i, r in enumerate(rounds)]})
    return out


def test_digest_is_the_undisturbed_figure_without_the_disturbed_batches():
    ref = [[(100, False), (50, True), (101, False)], [(102, False), (103, False), (104, False)]]
    int80 = [[(6000, False), (6100, False), (1, True)], [(6050, False), (6200, False), (6300, False)]]
    doc = doc_of({("64-syscall", "null"): ref, ("64-int80", "null"): int80,
                  ("64-int80", "getppid"): int80})
    d = fleet.digest_doc(doc, FP, {}, "h", interval_ops=("null",))
    r = d["cells"]["64-syscall null"]
    # Five usable batches: the fastest 5% of them is the fastest one, 100 (50 was disturbed).
    assert r["value"] == pytest.approx(100.0) and r["estimator"] == "undisturbed_ns"
    assert r["value"] == pytest.approx(stats.tail_mean([100, 101, 102, 103, 104]))
    assert r["ci_low"] <= r["value"] <= r["ci_high"]
    assert r["ratio"] == r["ratio_low"] == r["ratio_high"] == 1.0
    i = d["cells"]["64-int80 null"]
    assert i["value"] == pytest.approx(6000.0)
    assert i["ratio"] == pytest.approx(60.0)
    assert i["ratio_low"] < 60.0 < i["ratio_high"]
    # Outside interval_ops: the same figure, and no interval invented for it.
    g = d["cells"]["64-int80 getppid"]
    assert g["value"] == pytest.approx(6000.0) and g["ci_low"] is None and g["ratio_low"] is None
    assert d["facts"]["cpu"] == "family 6 model 106" and d["facts"]["mitigations"] == "default"


def test_analysed_cells_use_the_undisturbed_keys_when_present():
    c = {"floor_ns": 70.0, "undisturbed_ns": 72.0, "undisturbed_ci_low": 71.5,
         "undisturbed_ci_high": 72.4}
    assert fleet.from_analysed(c) == {"value": 72.0, "ci_low": 71.5, "ci_high": 72.4,
                                      "estimator": "undisturbed_ns"}
    assert fleet.from_analysed({"floor_ns": 70.0})["ci_low"] is None


@pytest.mark.parametrize("bad,needle", [(float("nan"), "not a measurement"),
                                        (1e308, "not a measurement"),
                                        ("12", "expected a list of numbers"),
                                        (True, "expected a list of numbers")])
def test_digest_refuses_values_that_are_not_measurements(bad, needle):
    d = doc_of({("64-syscall", "null"): [[(100, False), (101, False)]]})
    d["cells"][0]["rounds"][0]["samples_ns"][1] = bad
    with pytest.raises(DataError, match=needle):
        fleet.digest_doc(d, FP, {}, "h")


def machine(host, ref, int80, **facts):
    f = dict(fleet.facts(FP), **facts)
    cells = {"64-syscall null": {"value": ref, "ci_low": None, "ci_high": None,
                                 "estimator": "floor_ns", "variant": "64-syscall", "op": "null",
                                 "size": None, "shape": "ret"},
             "64-int80 null": {"value": int80, "ci_low": None, "ci_high": None,
                               "estimator": "floor_ns", "variant": "64-int80", "op": "null",
                               "size": None, "shape": "ret"}}
    fleet._ratios(cells, cells["64-syscall null"])
    return {"host": host, "facts": f, "reference": "64-syscall null", "estimator": "floor_ns",
            "cells": cells}


def test_groups_outliers_and_the_fact_that_explains():
    ms = [machine(f"icx{i}", 67, 4050 + 10 * i, cpu="family 6 model 106", hypervisor="kvm-a")
          for i in range(5)]
    ms[4]["cells"]["64-int80 null"]["value"] = 6000.0          # far from its group
    fleet._ratios(ms[4]["cells"], ms[4]["cells"]["64-syscall null"])
    ms += [machine(f"spr{i}", 100, 380 + 5 * i, cpu="family 6 model 143", hypervisor="kvm-b")
           for i in range(4)]
    v = fleet.view(ms, [])
    assert v["differ"] == ["cpu", "hypervisor"]           # vendor, kernel ... are shared
    assert [g["n"] for g in v["groups"]] == [5, 4]
    out = [o for o in v["outliers"] if o["column"] == "64-int80 null"]
    assert [o["host"] for o in out] == ["icx4"]
    assert out[0]["gap"] == pytest.approx(6000 / 4070 - 1)
    assert out[0]["gap_low"] < out[0]["gap"] < out[0]["gap_high"]
    assert "group median only" in out[0]["interval"]
    top = v["explain"][0]
    assert top["column"] == "64-int80 null" and top["fact"] == "cpu"
    assert top["inseparable_from"] == ["hypervisor"]
    assert top["eta2"] > 0.9
    s = fleet.sentence(top)
    assert "model 143" in s and "model 106" in s and "inseparable here from hypervisor" in s
    assert v["figure"] == "floor (no interval)"


def test_a_fleet_where_nothing_differs_has_one_group_and_no_explanation():
    ms = [machine(f"m{i}", 67, 4050) for i in range(3)]
    v = fleet.view(ms, [])
    assert v["differ"] == [] and len(v["groups"]) == 1 and v["explain"] == []


def test_the_atlas_reads_and_a_run_is_placed_among_it(monkeypatch):
    got, skipped = atlas.load()
    assert skipped == []
    machines = atlas.machines(got)
    assert {"intel-icelake-kvm", "amd-epyc-f25m1-kvm"} <= set(machines)
    icx = machines["intel-icelake-kvm"][0]
    assert icx["facts"]["cpu"] == "family 6 model 106"
    # Issue 17's Ice Lake floors: int 0x80 about 4040-4080 ns, 64-bit syscall about 67 ns.
    assert 3500 < icx["cells"]["32-int80 null"]["value"] < 4500
    assert 60 < icx["cells"]["64-syscall null"]["value"] < 75
    data = results.load(ROOT / "tests" / "fixtures" / "results-fixture")

    # The section reads the same atlas: it is handed a copy of the digests just read rather
    # than digesting the same files a second time (1.7 s).
    def load_again(root=atlas.ATLAS):
        assert Path(root) == Path(atlas.ATLAS)
        return copy.deepcopy(got), list(skipped)
    monkeypatch.setattr(atlas, "load", load_again)
    doc = Doc()
    patlas.section(doc, data)
    heads = [b[2] for b in doc.blocks if b[0] == "h"]
    assert heads == ["This machine among the machines measured before"]
    tables = [b for b in doc.blocks if b[0] == "table"]
    assert any("intel-icelake-kvm" in plain(h) for t in tables for h in t[1])
    text = plain(" ".join(b[1] for b in doc.blocks if b[0] == "p"))
    assert fleet.LABEL_UNDISTURBED in text and "range over its runs" in text
    cells = [r for t in tables for r in t[2] if r[0] == "64-int80 null"]
    assert cells and "[" in cells[0][1]          # this run's figure with its interval
