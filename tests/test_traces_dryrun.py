"""Every traces/*.bt compiles, verifies and attaches here.

bpftrace 0.17 has no --dry-run; where the installed bpftrace has it, it is
used, else each tool is attached around `/bin/true` (-c), which proves the
same plus that END runs and prints."""
import subprocess

import pytest

from conftest import ROOT, need_root, need_tool

TOOLS = sorted(p.name for p in (ROOT / "traces").glob("*.bt"))


def _has_dry_run():
    h = subprocess.run(["bpftrace", "--help"], capture_output=True, text=True)
    return "--dry-run" in (h.stdout + h.stderr)


def test_the_five_tools_exist():
    assert {"writelat.bt", "syscount_abi.bt", "entrypath.bt", "body.bt", "diagnose.bt"} <= set(TOOLS)


@pytest.mark.root
@pytest.mark.parametrize("tool", TOOLS)
def test_bt_compiles_and_attaches(tool):
    need_root()
    need_tool("bpftrace")
    path = ROOT / "traces" / tool
    cmd = ["bpftrace", "--dry-run", str(path)] if _has_dry_run() else \
        ["bpftrace", str(path), "-c", "/bin/true"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    err = "\n".join(l for l in p.stderr.splitlines() if "RLIMIT_MEMLOCK" not in l)
    assert p.returncode == 0, err
    assert "ERROR" not in err and "WARNING" not in err, err
    assert "Attaching" in p.stdout + p.stderr


@pytest.mark.parametrize("tool", TOOLS)
def test_bt_header(tool):
    text = (ROOT / "traces" / tool).read_text()
    head = text.split("*/", 1)[0]
    for word in ("USAGE:", "Example", "Overhead"):
        assert word in head, f"{tool}: header lacks {word}"
    assert "PLACEHOLDER" not in head, f"{tool}: header still has a placeholder"
