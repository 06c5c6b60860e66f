"""Shared fixtures: paths, the build matrix, and skips that always say why.

A test that needs root, a tool, or a mechanism this CPU lacks skips with the
reason; it never passes vacuously.  In CI (root, every package installed) the
only expected skips are mechanisms the CPU does not have."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

from twtools.core import paths  # noqa: E402
from twtools.machine import probe, registry  # noqa: E402

BUILD = paths.BUILD


def pytest_configure(config):
    config.addinivalue_line("markers", "root: needs root (tracing)")


@pytest.fixture(scope="session")
def build():
    """The build directory, after checking `make` has been run."""
    if not (BUILD / "timewrite").exists():
        pytest.fail("build/timewrite is missing: run `make` (make test does it)")
    return BUILD


@pytest.fixture(scope="session")
def matrix():
    return probe.check_all("timewrite")


def need_root():
    if os.geteuid() != 0:
        pytest.skip("needs root (tracing with bpftrace/perf tracepoints)")


def need_tool(name):
    if shutil.which(name) is None:
        pytest.skip(f"{name} is not installed (make test installs it as root)")


def need_supported(program, variant):
    """Skip, with the variant's own reason, when its mechanism does not work here."""
    ok, why = probe.check(program, variant)
    if not ok:
        pytest.skip(f"{program}-{variant} unsupported here: {why}")


def run(cmd, **kw):
    kw.setdefault("capture_output", True)
    kw.setdefault("timeout", 300)
    return subprocess.run([str(c) for c in cmd], **kw)


VARIANTS = [v["name"] for v in registry.variants()]
