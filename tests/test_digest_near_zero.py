"""A call that costs about nothing keeps its run's digest.

Why it can break: a batch's value is its time per call less the empty loop's, so the 64-bit
vDSO's time() (about 1 ns) can come out a little below zero: -0.14 ns in one default run on an
AMD EPYC guest (family 25 model 17).  The digest refused it as "not a measurement" (a cost is
never negative: a -100 ns machine is none, issue 25 class 7), `tw run` wrote no digest.json,
and a fleet lost the run: test_fleet_ansible failed once in CI that way.  A value may now go
below zero by the loop cost its batch subtracted, and no further.  That cost is the median of
its process's empty loops (syscost.c), not the batch's own: one empty loop of 1.5 ns beside
four of 9-10 ns (the host slowed the core) left a batch at -5.8 ns, below its own loop's
-1.5 ns and above the median's -9.2 ns, and the digest refused the run again (a full test run,
test_fleet_ansible, a 64-bit vDSO time() cell).  Whole cells do it too: a host that slowed the
core through the empty loops left a 64-bit vDSO time() cell at -2.6 ns, its run wrote that
digest.json, and the fleet refused to read it back ("not a measurement"), so a fleet of two
listed one (test_fleet_ansible, a full run).  Such a cell is a figure, negative within the
loop's cost; the views keep it and leave it out of what they fit on a log scale.  Nor is the
loop's cost always small: three loads on two cores slowed half a process's empty loops to
54-114 ns a pass, and a fleet lost a run whose batches lay at -23.4 ns.
"""
import json
import lzma
import shutil

import pytest

from conftest import ROOT
from twtools.analyse import fleet, rundigest
from twtools.core.ui import DataError

AA = ROOT / "tests" / "fixtures" / "machines" / "amd-epyc-zen4-kvm" / "aa-runs"


def _run(tmp_path, value, loop, loops=None, disturbed=None, samples=None):
    d = tmp_path / "run"
    d.mkdir()
    shutil.copy(AA / "fingerprint.json", d / "fingerprint.json")
    shutil.copy(AA / "r1-meta.json", d / "meta.json")
    doc = json.loads(lzma.decompress((AA / "r1-percall.json.xz").read_bytes()))
    # the recorded pair keeps no time() cell: the check is the same for any cell
    c = next(c for c in doc["cells"] if c["variant"] == "32-vdso" and c["op"] == "null")
    rd = c["rounds"][0]
    if samples:
        rd["samples_ns"] = list(samples)
    rd["samples_ns"][0] = value
    rd["loop_ns"] = loops or [loop] * len(rd["samples_ns"])
    rd.pop("disturbed", None)
    if disturbed:
        rd["disturbed"] = disturbed
    (d / "percall.json").write_text(json.dumps(doc))
    return d


def test_a_value_just_below_zero_is_a_measurement(tmp_path):
    dg = rundigest.compute(_run(tmp_path, -0.14, 0.6))
    assert any(name.startswith("32-vdso null") for name in dg["cells"]), list(dg["cells"])


# the last: an empty loop of a millisecond a pass is none, and is taken as MAX_LOOP_NS (1 µs)
@pytest.mark.parametrize("value,loop", [(-0.7, 0.6), (-100.0, 0.6), (-1000.5, 1e6)])
def test_below_the_loop_cost_it_is_not(tmp_path, value, loop):
    with pytest.raises(DataError, match="not a measurement"):
        rundigest.compute(_run(tmp_path, value, loop))


# The round that was refused (rounds[0] of a 64-bit vDSO time() cell; its second batch
# disturbed): each batch less the median of the five empty loops, 9.21 ns.
SLOWED = [9.88, 1.49, 1.54, 9.37, 9.21]
ROUND = [-6.15, 2.78, -5.81, -6.12, -6.09]


@pytest.mark.parametrize("first", [-5.81, -6.15])
def test_the_floor_is_the_median_loop_the_process_subtracted(tmp_path, first):
    d = _run(tmp_path, first, None, loops=SLOWED, samples=ROUND,
             disturbed=[False, True, False, False, False])
    dg = rundigest.compute(d)
    assert any(name.startswith("32-vdso null") for name in dg["cells"]), list(dg["cells"])


# The round that was refused next (rounds[5] of a 64-bit vDSO time() cell, three loads on two
# cores): four of its eight empty loops slowed to 54-114 ns a pass, their median 28.04 ns,
# and its undisturbed batches came out at -23.4 ns.
STOLEN = [75.52, 54.46, 114.49, 99.85, 1.62, 1.62, 1.35, 1.62]
STOLEN_ROUND = [-23.44, -23.42, -23.44, 26.05, -24.5, -23.44, 35.71, 27.45]


def test_a_loop_the_host_slowed_many_times_over_is_still_the_floor(tmp_path):
    d = _run(tmp_path, -23.44, None, loops=STOLEN, samples=STOLEN_ROUND,
             disturbed=[True, False, False, True, True, True, True, True])
    dg = rundigest.compute(d)
    assert any(name.startswith("32-vdso null") for name in dg["cells"]), list(dg["cells"])


def test_below_the_median_loop_it_is_not(tmp_path):
    # -9.3 ns: a batch time below zero, whichever batch's loop it sat beside (9.88 ns)
    with pytest.raises(DataError, match="not a measurement"):
        rundigest.compute(_run(tmp_path, -9.3, None, loops=SLOWED, samples=ROUND))


def _below_zero_cell(tmp_path, value):
    """A run whose 32-bit vDSO null cell comes out at `value` ns in every batch of every round
    (the empty loops at 9.2 ns), its digest.json written as `tw run` writes it."""
    d = _run(tmp_path, value, 9.2)
    doc = json.loads((d / "percall.json").read_text())
    c = next(c for c in doc["cells"] if c["variant"] == "32-vdso" and c["op"] == "null")
    for rd in c["rounds"]:
        rd["samples_ns"] = [value + 0.01 * (i % 3) for i in range(len(rd["samples_ns"]))]
        rd["loop_ns"] = [9.2] * len(rd["samples_ns"])
        rd.pop("disturbed", None)
    (d / "percall.json").write_text(json.dumps(doc))
    rundigest.write(d)
    return d


# numpy's "invalid value encountered in log" is the NaN a ratio below zero would put in the
# explanation of the spread; as an error, it fails the test where it happens.
@pytest.mark.filterwarnings("error::RuntimeWarning")
def test_a_cell_below_zero_is_read_back_and_viewed(tmp_path):
    d = _below_zero_cell(tmp_path, -2.6)
    dg = rundigest.digest(d, "beta")
    name = next(n for n in dg["cells"] if n.startswith("32-vdso null"))
    assert -2.7 < dg["cells"][name]["value"] < -2.5
    assert dg["cells"][name]["ratio"] < 0
    (tmp_path / "b").mkdir()
    other = rundigest.compute(_run(tmp_path / "b", 0.6, 0.6))
    other = dict(other, host="alpha", facts=dict(other["facts"], kernel="6.1.0"))
    v = fleet.view([dg, other], [])
    # strict JSON: no NaN from a log of a ratio below zero (the explanation is over kernels)
    json.dumps(v, allow_nan=False, default=str)
    assert {m["host"] for m in v["machines"]} == {"alpha", "beta"}
    beta = next(g for g in v["groups"] if g["hosts"] == ["beta"])
    assert beta["value"][name]["median"] < 0


def test_a_cell_below_the_loop_is_refused_in_the_digest(tmp_path):
    d = _below_zero_cell(tmp_path, -2.6)
    dg = json.loads((d / "digest.json").read_text())
    name = next(n for n in dg["cells"] if n.startswith("32-vdso null"))
    dg["cells"][name].update(value=-1000.5, ci_low=-1001.0, ci_high=-1000.0)
    (d / "digest.json").write_text(json.dumps(dg))
    with pytest.raises(DataError, match="value: '-1000.5' is not a measurement"):
        rundigest.digest(d, "beta")
