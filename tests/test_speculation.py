"""tw run --speculation: the mitigation really reaches the measured programs.

Comparing mitigation settings is only honest if the programs timed under a
setting actually ran with it.  This breaks if the prctl is not applied, is
applied to the wrong control, or is lost across fork/exec (then the children
read "thread vulnerable"/"conditional enabled" and the comparison is void).
Kernels that do not leave a mitigation to prctl answer ENXIO: skipped with that
reason."""
import json
import subprocess
import sys

import pytest

from conftest import ROOT
from twtools.machine import speculation

CHILD = [sys.executable, "-c",
         "import sys; sys.path.insert(0, sys.argv[1]);"
         "from twtools.machine import speculation; from twtools.core import proc; import json;"
         "s = speculation.apply(sys.argv[2]);"
         "print(json.dumps(proc.run(['cat', '/proc/self/status']).stdout))",
         str(ROOT / "scripts")]


@pytest.mark.parametrize("choice,key,word", [
    ("ssbd", "Speculation_Store_Bypass", "mitigated"),
    ("indirect-branch", "SpeculationIndirectBranch", "disabled"),
])
def test_children_inherit_the_setting(choice, key, word):
    base = speculation.status()
    if key not in base:
        pytest.skip(f"/proc/self/status has no {key} line on this kernel")
    p = subprocess.run(CHILD + [choice], capture_output=True, text=True, timeout=60)
    if p.returncode and "does not leave it to prctl" in p.stderr:
        pytest.skip(f"{choice} is not controllable by prctl here: {p.stderr.strip()[-200:]}")
    assert p.returncode == 0, p.stderr
    child_status = json.loads(p.stdout)
    line = next(l for l in child_status.splitlines() if l.startswith(key + ":"))
    assert word in line, line


def test_run_records_the_setting(tmp_path):
    out = tmp_path / "r"
    p = subprocess.run([sys.executable, str(ROOT / "scripts" / "tw"), "run", "--quick",
                        "--only", "variants", "--no-report", "--speculation", "ssbd",
                        "--out", str(out)], capture_output=True, text=True, timeout=120)
    if p.returncode == 2 and "prctl" in p.stderr:
        pytest.skip(p.stderr.strip())
    assert p.returncode == 0, p.stderr
    meta = json.loads((out / "meta.json").read_text())
    assert meta["setting"]["speculation"] == "ssbd"
    assert "mitigated" in meta["setting"]["status"]["Speculation_Store_Bypass"]
    assert "--speculation ssbd" in meta["command"]


def test_default_run_records_the_kernel_default(tmp_path):
    out = tmp_path / "r"
    p = subprocess.run([sys.executable, str(ROOT / "scripts" / "tw"), "run", "--quick",
                        "--only", "variants", "--no-report", "--out", str(out)],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    meta = json.loads((out / "meta.json").read_text())
    assert meta["setting"]["speculation"] is None
