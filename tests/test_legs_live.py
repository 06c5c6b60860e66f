"""tw run's legs stage on this machine, for real: bpftrace on raw_syscalls and build/legs-*.

Why it can break: the tracer's filter no longer matches the program's calls (a renamed
program, another null number), so no kernel stamp is kept; bpftrace's map output changes form
and the join by order finds nothing; the warm-up is not skipped, so every call is joined with
an earlier one's stamps (legs go negative and the stage refuses them); the user stamps stop
coming from the vDSO; a mechanism that cannot work here is measured anyway, or one that must
work is dropped.  Only signs and structure are asserted, never a time.
"""
import pytest

from conftest import ROOT, need_root, need_supported, need_tool  # noqa: F401

from twtools.analyse import legs as a_legs, results, schema
from twtools.core import files
from twtools.measure import legs as m_legs

# The mechanisms the issue names; 32-sysenter only where the CPU takes it (not on AMD).
VARIANTS = ["64-syscall", "64-int80", "32-int80", "32-vdso", "32-sysenter"]


@pytest.fixture(scope="module")
def stage(build, tmp_path_factory):
    need_root()
    need_tool("bpftrace")
    out = tmp_path_factory.mktemp("legs")
    raw = m_legs.stage(out, mode="quick", variants=VARIANTS)
    return out, raw


@pytest.mark.root
@pytest.mark.parametrize("variant", VARIANTS)
def test_the_stage_gives_every_working_mechanism_three_legs(stage, variant):
    need_supported("syscost", variant)
    out, raw = stage
    on_disk = files.read_json(out / "legs.json")
    schema.check(schema.LEGS, on_disk)
    assert raw["why"] is None
    v = a_legs.analyse(on_disk)["variants"][variant]
    assert "why" not in v, v.get("why")
    for leg in a_legs.LEGS:
        x = v["legs"][leg]
        assert x["value"] > 0 and x["ci_low"] <= x["value"] <= x["ci_high"], (leg, x)
    # every call was joined: as many per process as it made
    rec = on_disk["variants"][variant]["traced"][0]
    assert rec["kernel_calls"] == rec["warmup"] + rec["calls"] * rec["batches"]
    assert v["tracer_ns"]["value"] is not None


@pytest.mark.root
def test_a_mechanism_that_cannot_work_here_is_recorded_with_its_reason(stage):
    out, raw = stage
    for name, v in raw["variants"].items():
        if v["status"] == "unsupported":
            assert v["why"] and not v["traced"] and not v["untraced"]
            assert a_legs.analyse(raw)["variants"][name] == {"why": v["why"]}


@pytest.mark.root
def test_int80_legs_are_held_against_their_baselines(stage):
    need_supported("syscost", "64-int80")
    need_supported("syscost", "32-int80")
    out, raw = stage
    d = a_legs.analyse(files.read_json(out / "legs.json"))["differences"]
    assert d["64-int80"]["baseline"] == "64-syscall"
    assert d["32-int80"]["baseline"] in ("32-vdso", "32-sysenter", "32-syscall")
    for k in a_legs.LEGS:
        assert d["64-int80"][k]["ci_low"] <= d["64-int80"][k]["value"] <= d["64-int80"][k]["ci_high"]


def test_the_stage_is_a_tw_run_stage_and_its_file_is_read():
    from twtools.cli import run
    assert "legs" in [s[0] for s in run.STAGES]
    assert "legs" in results.STEMS and results.STAGE_OF["legs"] == "legs"
    assert (ROOT / "traces" / m_legs.SCRIPT).exists()


@pytest.mark.root
def test_tw_legs_prints_the_legs_and_their_differences(build, tmp_path):
    need_root()
    need_tool("bpftrace")
    need_supported("syscost", "64-int80")
    import json
    import subprocess
    import sys
    p = subprocess.run([sys.executable, str(ROOT / "scripts" / "tw"), "legs", "--quick",
                        "--variants", "64-syscall,64-int80", "--out", str(tmp_path / "o"),
                        "--format", "json"], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    rows = json.loads(p.stdout)
    figs = {(r["variant"], r["figure"]) for r in rows}
    assert {("64-int80", "in"), ("64-int80", "in - 64-syscall"), ("64-syscall", "tracer_ns")} <= figs
    assert (tmp_path / "o" / "legs.json").exists()


@pytest.mark.root
def test_tw_legs_shape_jmp_is_what_the_programs_ran(build, tmp_path):
    need_root()
    need_tool("bpftrace")
    import subprocess
    import sys
    p = subprocess.run([sys.executable, str(ROOT / "scripts" / "tw"), "legs", "--quick",
                        "--shape", "jmp", "--variants", "64-syscall,64-libc", "--out",
                        str(tmp_path / "o")], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    raw = files.read_json(tmp_path / "o" / "legs.json")
    assert raw["shape"] == "jmp"
    assert {r["shape"] for r in raw["variants"]["64-syscall"]["traced"]} == {"jmp"}
    # glibc's wrappers return by ret: no jmp form to stamp
    assert raw["variants"]["64-libc"]["status"] == "unsupported"
    assert "no jmp shape" in raw["variants"]["64-libc"]["why"]


def test_tw_legs_without_a_system_call_mechanism_says_why(tmp_path):
    import subprocess
    import sys
    p = subprocess.run([sys.executable, str(ROOT / "scripts" / "tw"), "legs", "--quick",
                        "--variants", "64-vdso", "--out", str(tmp_path / "o")],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 1
    assert "tw legs: not measured:" in p.stderr and "--variants" in p.stderr and len(p.stderr.strip().splitlines()) <= 3
