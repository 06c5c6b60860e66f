"""A mechanism the CPU lacks is reported (exit 77, one line) and writes nothing.

Whether sysenter or syscall works from 32-bit code depends on the CPU vendor,
not on the build: Intel raises #UD for a 32-bit syscall, AMD for a 32-bit
sysenter.  The scripts probe every variant with --probe and skip the 77s; a
variant that crashed instead, exited with some other status, or created (and
truncated) its output file before finding out would corrupt a sweep or lose a
user's file.  The vendor test makes sure the probe really tries the instruction:
on an Intel CPU 32-syscall must be unsupported, on an AMD CPU 32-sysenter."""
import re
import subprocess

import pytest

from conftest import VARIANTS
from twtools.machine import registry

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


def cpu_vendor():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("vendor_id"):
                return line.split(":", 1)[1].strip()
    return None


@pytest.mark.parametrize("variant", VARIANTS)
def test_probe_status(build, tmp_path, variant):
    """0 silently, or 77 with the standard line naming mechanism and reason."""
    p = probe(build, variant, cwd=tmp_path)
    assert p.returncode in (0, 77), (p.returncode, p.stderr)
    assert p.stdout == ""
    if p.returncode == 0:
        assert p.stderr == ""
    else:
        why = unsupported_line(variant, p.stderr)
        assert MECH[variant] in why      # "a getppid() through <mechanism> died with ..."
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("variant", VARIANTS)
def test_probe_does_not_touch_outfile(build, tmp_path, variant):
    out = tmp_path / "keep"
    out.write_text("precious")
    p = probe(build, variant, out)
    assert p.returncode in (0, 77), p.stderr
    assert out.read_text() == "precious"


@pytest.mark.parametrize("variant", VARIANTS)
def test_unsupported_run_writes_nothing(build, tmp_path, variant):
    p = probe(build, variant)
    if p.returncode == 0:
        pytest.skip(f"timewrite-{variant} is supported here; nothing to refuse")
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


def test_vendor_decides_32bit_fast_entry(build):
    vendor = cpu_vendor()
    lacking = {"GenuineIntel": "32-syscall", "AuthenticAMD": "32-sysenter"}.get(vendor)
    if lacking is None:
        pytest.skip(f"CPU vendor {vendor!r}: neither Intel nor AMD, no expectation")
    if lacking not in VARIANTS:
        pytest.skip(f"{lacking} is not in variants/matrix")
    p = probe(build, lacking)
    assert p.returncode == 77, f"{vendor}: timewrite-{lacking} --probe exited {p.returncode}"
    why = unsupported_line(lacking, p.stderr)
    assert "(ILL)" in why, why      # SIGILL: the CPU raised #UD
