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
test_fleet_ansible, a 64-bit vDSO time() cell).
"""
import json
import lzma
import shutil

import pytest

from conftest import ROOT
from twtools.analyse import rundigest
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


@pytest.mark.parametrize("value,loop", [(-0.7, 0.6), (-100.0, 0.6), (-100.0, 1e6)])
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


def test_below_the_median_loop_it_is_not(tmp_path):
    # -9.3 ns: a batch time below zero, whichever batch's loop it sat beside (9.88 ns)
    with pytest.raises(DataError, match="not a measurement"):
        rundigest.compute(_run(tmp_path, -9.3, None, loops=SLOWED, samples=ROUND))
