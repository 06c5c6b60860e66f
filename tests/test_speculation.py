"""tw run --speculation: the mitigation really reaches the measured programs.

Comparing mitigation settings is only honest if the programs timed under a
setting actually ran with it.  This breaks if the prctl is not applied, is
applied to the wrong control, or is lost across fork/exec (then the children
read "thread vulnerable"/"conditional enabled" and the comparison is void).
Each live test first asks PR_GET_SPECULATION_CTRL, and skips only when the kernel
says it does not leave that mitigation to prctl (an AMD guest's indirect-branch
control reads "always enabled" and PR_SET then answers EPERM): the skip quotes it.
Where the kernel does leave it to prctl, any failure is a failure."""
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
    ok, why = speculation.controllable(choice)
    if not ok:
        pytest.skip(why)
    p = subprocess.run(CHILD + [choice], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    child_status = json.loads(p.stdout)
    line = next(l for l in child_status.splitlines() if l.startswith(key + ":"))
    assert word in line, line


def tw_run_speculation(out, choice):
    return subprocess.run([sys.executable, str(ROOT / "scripts" / "tw"), "run", "--quick",
                           "--only", "variants", "--no-report", "--speculation", choice,
                           "--out", str(out)], capture_output=True, text=True, timeout=120)


def test_run_records_the_setting(tmp_path):
    ok, why = speculation.controllable("ssbd")
    if not ok:
        pytest.skip(why)
    out = tmp_path / "r"
    p = tw_run_speculation(out, "ssbd")
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


@pytest.mark.parametrize("choice", ["ssbd", "indirect-branch"])
def test_run_refuses_a_setting_the_kernel_keeps(tmp_path, choice):
    """Where the kernel keeps a mitigation to itself, tw run says so in one line and measures
    nothing: a fact of the machine, never a traceback and never a run under a false label."""
    ok, why = speculation.controllable(choice)
    if ok:
        pytest.skip(f"{choice} is left to prctl here, so there is no refusal to see")
    out = tmp_path / "r"
    p = tw_run_speculation(out, choice)
    assert p.returncode == 2, p.stderr
    assert p.stderr.strip().splitlines()[-1] == f"tw run: --speculation {why}"
    assert "Traceback" not in p.stderr and not out.exists()


class FakeLibc:
    """prctl as a kernel would answer it: PR_GET gives `state`; PR_SET records the call."""
    def __init__(self, state):
        self.state, self.set = state, []

    def prctl(self, op, ctrl, arg, *_):
        if op == speculation.PR_GET_SPECULATION_CTRL:
            return self.state
        self.set.append((ctrl, arg))
        return 0


@pytest.mark.parametrize("state,controllable,words", [
    # spectre_v2_user=off (the AMD guest's indirect branch): PR_SET would answer EPERM
    (speculation.PR_SPEC_ENABLE, False, "always enabled"),
    (speculation.PR_SPEC_NOT_AFFECTED, False, "not affected"),
    (speculation.PR_SPEC_DISABLE, False, "always disabled"),
    (speculation.PR_SPEC_FORCE_DISABLE | speculation.PR_SPEC_DISABLE, False, "force-disabled"),
    (speculation.PR_SPEC_PRCTL | speculation.PR_SPEC_ENABLE, True, None),
])
def test_the_kernels_answer_decides(monkeypatch, state, controllable, words):
    fake = FakeLibc(state)
    monkeypatch.setattr(speculation, "_libc", lambda: fake)
    ok, why = speculation.controllable("indirect-branch")
    assert ok is controllable
    if controllable:
        assert speculation.apply("indirect-branch")["speculation"] == "indirect-branch"
        assert fake.set == [(speculation.PR_SPEC_INDIRECT_BRANCH, speculation.PR_SPEC_DISABLE)]
    else:
        assert words in why and why.startswith("indirect-branch: ")
        with pytest.raises(speculation.NotControllable):
            speculation.apply("all")
        assert fake.set == []   # nothing is switched when any asked control is refused
