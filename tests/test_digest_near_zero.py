"""A call that costs about nothing keeps its run's digest.

Why it can break: a batch's value is its time per call less the empty loop's, so the 64-bit
vDSO's time() (about 1 ns) can come out a little below zero: -0.14 ns in one default run on an
AMD EPYC guest (family 25 model 17).  The digest refused it as "not a measurement" (a cost is
never negative: a -100 ns machine is none, issue 25 class 7), `tw run` wrote no digest.json,
and a fleet lost the run: test_fleet_ansible failed once in CI that way.  A value may now go
below zero by the loop cost its batch subtracted, and no further.
"""
import json
import lzma
import shutil

import pytest

from conftest import ROOT
from twtools.analyse import rundigest
from twtools.core.ui import DataError

AA = ROOT / "tests" / "fixtures" / "machines" / "amd-epyc-zen4-kvm" / "aa-runs"


def _run(tmp_path, value, loop):
    d = tmp_path / "run"
    d.mkdir()
    shutil.copy(AA / "fingerprint.json", d / "fingerprint.json")
    shutil.copy(AA / "r1-meta.json", d / "meta.json")
    doc = json.loads(lzma.decompress((AA / "r1-percall.json.xz").read_bytes()))
    # the recorded pair keeps no time() cell: the check is the same for any cell
    c = next(c for c in doc["cells"] if c["variant"] == "32-vdso" and c["op"] == "null")
    rd = c["rounds"][0]
    rd["samples_ns"][0] = value
    rd["loop_ns"] = [loop] * len(rd["samples_ns"])
    rd.pop("disturbed", None)
    (d / "percall.json").write_text(json.dumps(doc))
    return d


def test_a_value_just_below_zero_is_a_measurement(tmp_path):
    dg = rundigest.compute(_run(tmp_path, -0.14, 0.6))
    assert any(name.startswith("32-vdso null") for name in dg["cells"]), list(dg["cells"])


@pytest.mark.parametrize("value,loop", [(-0.7, 0.6), (-100.0, 0.6), (-100.0, 1e6)])
def test_below_the_loop_cost_it_is_not(tmp_path, value, loop):
    with pytest.raises(DataError, match="not a measurement"):
        rundigest.compute(_run(tmp_path, value, loop))
