"""A mechanism this machine cannot have is reported (exit 77, one line) and writes nothing;
one it must have works.

Whether sysenter or syscall works from 32-bit code depends on the CPU vendor, not on the
build: Intel raises #UD for a 32-bit syscall, AMD for a 32-bit sysenter.  The support oracle
(twtools.machine.oracle) says which variants this machine rules out, from its facts.  A
variant that crashed instead, exited with some other status, or created (and truncated) its
output file before finding out would corrupt a sweep or lose a user's file; a variant that
must work and exits 77 is a broken stub, which these tests must not excuse."""
import re
import subprocess

import pytest

from conftest import WRITE_VARIANTS, machine_facts
from twtools.machine import oracle, registry

MECH = {v["name"]: v["mechanism"] for v in registry.variants()}


def probe(build, variant, *args, **kw):
    try:
        return subprocess.run([build / f"timewrite-{variant}", "--probe", *args],
                              capture_output=True, text=True, timeout=60, **kw)
    except OSError as e:
        pytest.skip(f"cannot execute timewrite-{variant}: {e}")


def unsupported_line(variant, stderr):
    """The reason from '<prog>: <mechanism>: unsupported: <reason>', or fail."""
    lines = stderr.splitlines()
    assert len(lines) == 1, stderr
    m = re.fullmatch(rf"timewrite-{variant}: {MECH[variant]}: unsupported: (.+)", lines[0])
    assert m, lines[0]
    return m.group(1)


PREDICTED = oracle.predict(machine_facts())
CANNOT_HERE = [v for v in WRITE_VARIANTS if PREDICTED[v]["expect"] == oracle.CANNOT] or [
    pytest.param(None, marks=pytest.mark.skip(reason="the oracle rules out no mechanism on this machine"))]


@pytest.mark.parametrize("variant", WRITE_VARIANTS)
def test_probe_status(build, tmp_path, variant):
    """0 silently where the oracle says it must work; 77 with the standard line naming the
    mechanism and the reason where it cannot."""
    p = probe(build, variant, cwd=tmp_path)
    expect = PREDICTED[variant]["expect"]
    assert p.stdout == ""
    if expect == oracle.MUST:
        assert p.returncode == 0, (f"timewrite-{variant} must work here "
                                   f"({PREDICTED[variant]['why']}) but --probe exited "
                                   f"{p.returncode}: {p.stderr.strip()}")
        assert p.stderr == ""
    elif expect == oracle.CANNOT:
        assert p.returncode == 77, (p.returncode, p.stderr)
        why = unsupported_line(variant, p.stderr)
        assert MECH[variant] in why      # "a getppid() through <mechanism> died with ..."
    else:
        assert p.returncode in (0, 77), (p.returncode, p.stderr)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("variant", WRITE_VARIANTS)
def test_probe_does_not_touch_outfile(build, tmp_path, variant):
    out = tmp_path / "keep"
    out.write_text("precious")
    p = probe(build, variant, out)
    assert p.returncode in (0, 77), p.stderr
    assert out.read_text() == "precious"


@pytest.mark.parametrize("variant", CANNOT_HERE)
def test_unsupported_run_writes_nothing(build, tmp_path, variant):
    out = tmp_path / "out"
    keep = tmp_path / "keep"
    keep.write_text("precious")
    src = tmp_path / "in"
    src.write_bytes(b"x" * 5000)
    for target in (out, keep):
        with open(src, "rb") as f:
            r = subprocess.run([build / f"timewrite-{variant}", "--sizes", "256", target],
                               stdin=f, capture_output=True, text=True, timeout=60)
        assert r.returncode == 77, r.stderr
        assert r.stdout == ""
        unsupported_line(variant, r.stderr)
    assert not out.exists(), "an unsupported variant created its output file"
    assert keep.read_text() == "precious", "an unsupported variant truncated its output file"


@pytest.mark.parametrize("variant", CANNOT_HERE)
def test_ruled_out_by_the_cpu_means_ud(build, variant):
    """Where the oracle blames the CPU (#UD), the probe really executed the instruction and
    died with SIGILL, rather than failing for some other reason."""
    if "#UD" not in PREDICTED[variant]["why"]:
        pytest.skip(f"{variant} is ruled out by {PREDICTED[variant]['why']}, not by the CPU")
    p = probe(build, variant)
    assert p.returncode == 77
    assert "(ILL)" in unsupported_line(variant, p.stderr)
