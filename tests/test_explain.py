"""tw explain: each entry path with its support here, live disassembly and measured cost.

What it checks: every path of the teaching list appears; support comes from each variant's
own --probe (so the reason a path fails is the program's reason); the stubs' disassembly shows
their entry instruction; the vDSO section shows the live __kernel_vsyscall; costs are read
from percall.json's op "null" cells (unsupported cells give their reason, a missing results
directory says "not measured", never a number); the docs live section is replaced between its
markers and nowhere else.

Why it can break: a renamed variant in variants/registry, stub objects moved in build/obj, a
percall.json schema change, or objdump output changes."""
import subprocess
import sys

import pytest

from conftest import ROOT, need_tool
from twtools.machine import probe
from twtools.present import explain


@pytest.fixture(scope="module")
def fp():
    need_tool("objdump")
    return explain.machine()


@pytest.fixture(scope="module")
def variants():
    return probe.check_all("timewrite")


def summary(m):
    return {"median": m, "ci_low": m - 1, "ci_high": m + 1, "min": m - 2, "max": m + 2,
            "cv": 0.01, "n": 7, "unstable": False}


FAKE_PERCALL = {"cells": [
    dict(summary(100.0), variant="64-syscall", op="null", supported=True),
    dict(summary(5000.0), variant="32-int80", op="null", supported=True),
    dict(summary(99999.0), variant="32-int80", op="write-devnull", supported=True),
    {"variant": "32-syscall", "op": "null", "supported": False, "reason": "SIGILL: Intel"},
]}


def by_id(paths):
    return {p["id"]: p for p in paths}


def test_every_path_listed(fp, variants):
    _, paths = explain.collect(fp, None, variants)
    assert [p["id"] for p in paths] == [p["id"] for p in explain.PATHS]
    for p in paths:
        assert p["kernel"]
        if p["variant"]:
            assert p["cost"] == explain.NOT_MEASURED


def test_support_comes_from_probe(fp, variants):
    _, paths = explain.collect(fp, None, variants)
    got = by_id(paths)
    for v in variants:
        for p in paths:
            if p["variant"] == v["name"]:
                assert p["supported"] == v["supported"] and p["why"] == v["reason"]
    assert got["fred"]["supported"] == fp["fred"]


def test_stub_disassembly_shows_entry_instruction(fp, variants):
    _, paths = explain.collect(fp, None, variants)
    got = by_id(paths)
    for pid, insn in (("int80-32", "int $0x80"), ("sysenter-32", "sysenter"),
                      ("syscall-32", "syscall"), ("syscall-64", "syscall"), ("int80-64", "int $0x80")):
        if not got[pid]["disasm"]:
            pytest.fail(f"{pid}: no disassembly: {got[pid]['notes']}")
        assert any(l.rstrip().endswith(insn) for l in got[pid]["disasm"]), got[pid]["disasm"]


def test_vdso_section_has_live_disassembly(fp, variants):
    if not fp["vdso32"].get("disasm"):
        pytest.skip(f"no live 32-bit vDSO: {fp['vdso32'].get('why')}")
    _, paths = explain.collect(fp, None, variants)
    v = by_id(paths)["vdso-32"]
    assert v["vdso_disasm"] == fp["vdso32"]["disasm"]
    assert any(fp["vdso32"]["instruction"] in n for n in v["notes"])


def test_costs_from_percall(fp, variants):
    pytest.importorskip("numpy")
    _, paths = explain.collect(fp, FAKE_PERCALL, variants)
    got = by_id(paths)
    assert got["syscall-64"]["cost"].startswith("100.0 ns [99.0, 101.0]")
    assert "5000.0 ns" in got["int80-32"]["cost"] and "50.0x the 64-bit syscall" in got["int80-32"]["cost"]
    assert "99999" not in got["int80-32"]["cost"]  # only op == null
    assert got["syscall-32"]["cost"] == "unsupported: SIGILL: Intel"
    assert "no op=null cell" in got["sysenter-32"]["cost"]


def test_render_markdown_and_update_doc(fp, variants, tmp_path):
    md = explain.render_markdown(fp, None, variants)
    assert md.startswith("Captured ") and "| entry path |" in md
    assert explain.NOT_MEASURED in md
    doc = tmp_path / "m.md"
    doc.write_text(f"# head\nkeep\n{explain.BEGIN}\nold\n{explain.END}\ntail stays\n")
    explain.update_doc(doc, md)
    text = doc.read_text()
    assert text.startswith("# head\nkeep\n") and text.endswith(f"{explain.END}\ntail stays\n")
    assert "old" not in text and md in text


def test_cli_explain_runs():
    p = subprocess.run([sys.executable, ROOT / "scripts" / "tw", "explain"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    for path in explain.PATHS:
        assert path["title"] in p.stdout
