"""tw explain: each mechanism of the registry with its support here, what the kernel does with
it, live disassembly and measured cost with the post-return penalty.

What it checks: every registry row appears, titled and explained from its own stub's header
(the stub is the documentation); support comes from each variant's probe judged by the
oracle; the stubs' disassembly shows their entry instruction (taken from the registry's
entry column); the vDSO section shows the live __kernel_vsyscall; costs come from an analysed
results directory, results/latest by default, and the output says which run; an unsupported
cell gives its reason and a missing results directory says "not measured", never a number;
the docs live section is replaced between its markers and nowhere else.

Why it can break: a stub whose header loses its first line, a renamed variant, stub objects
moved in build/obj, a percall.json schema change, or objdump output changes."""
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT, judged, need_tool
from twtools.machine import registry
from twtools.present import explain

FIX = ROOT / "tests" / "fixtures"
INSN = {"int80": "int $0x80", "sysenter": "sysenter", "syscall": "syscall"}


@pytest.fixture(scope="module")
def fp():
    need_tool("objdump")
    return explain.machine()


@pytest.fixture(scope="module")
def entries(fp):
    return explain.collect(fp, None, judged("syscost"))[1]


def by_variant(entries):
    return {e["variant"]: e for e in entries}


def test_every_mechanism_listed_and_explained_from_its_stub(entries):
    assert [e["variant"] for e in entries] == registry.names()
    for e in entries:
        assert e["title"] and e["title"] != e["variant"], e
        assert e["needs"]
        assert e["cost"] == explain.NOT_MEASURED
        m = registry.get(e["variant"])
        _, paras = explain.header(explain.source_of(m))
        assert "Kernel side" in paras, f"{e['variant']}: its stub's header has no Kernel side"
        assert e["kernel"] == paras["Kernel side"]


def test_support_comes_from_probe_and_oracle(entries):
    rows = judged("syscost")
    for e in entries:
        assert e["works"] == rows[e["variant"]]["supported"]
        assert e["why"] == rows[e["variant"]]["reason"]


def test_stub_disassembly_shows_entry_instruction(entries):
    for e in entries:
        m = registry.get(e["variant"])
        if m.entry not in INSN:
            continue
        assert e["disasm"], f"{e['variant']}: no disassembly: {e['notes']}"
        assert any(line.rstrip().endswith(INSN[m.entry]) for line in e["disasm"]), e["disasm"]


def test_vdso_section_has_live_disassembly(fp, entries):
    if not fp["vdso32"].get("disasm"):
        pytest.skip(f"no live 32-bit vDSO: {fp['vdso32'].get('why')}")
    v = next(e for e in entries if registry.get(e["variant"]).entry == "vdso32-call")
    assert v["vdso_disasm"] == fp["vdso32"]["disasm"]
    assert any(fp["vdso32"]["form"] in n for n in v["notes"])


def test_costs_come_from_an_analysed_run_and_say_which(fp):
    data, label = explain.costs_from(FIX / "results-fixture")
    assert "results-fixture" in label and "measured" in label
    _, entries = explain.collect(fp, data, judged("syscost"))
    got = by_variant(entries)
    assert got["64-syscall"]["cost"].startswith("null: ") and " ns [" in got["64-syscall"]["cost"]
    assert "the 64-bit syscall, same rounds" in got["32-int80"]["cost"]
    assert got["32-syscall"]["cost"].startswith("unsupported: ")
    assert explain.costs_from(None)[1] == explain.NOT_MEASURED


def test_render_markdown_and_update_doc(fp, entries, tmp_path):
    md = explain.render_markdown(fp, entries, explain.NOT_MEASURED)
    assert md.startswith("Captured ") and "| entry path |" in md
    assert explain.NOT_MEASURED in md and "The return after the call" in md
    doc = tmp_path / "m.md"
    doc.write_text(f"# head\nkeep\n{explain.BEGIN}\nold\n{explain.END}\ntail stays\n")
    explain.update_doc(doc, md)
    text = doc.read_text()
    assert text.startswith("# head\nkeep\n") and text.endswith(f"{explain.END}\ntail stays\n")
    assert "\nold\n" not in text and md in text


def test_cli_uses_results_latest_by_default(tmp_path):
    """After make report, results/latest exists: explain shows that run's costs, named."""
    root = tmp_path / "clone"
    shutil.copytree(ROOT / "scripts", root / "scripts")
    for d in ("variants", "asm", "timewrite", "data"):
        shutil.copytree(ROOT / d, root / d)
    (root / "build").symlink_to(ROOT / "build")
    (root / "results").mkdir()
    shutil.copytree(FIX / "results-fixture", root / "results" / "some-run")
    (root / "results" / "latest").symlink_to("some-run")
    p = subprocess.run([sys.executable, root / "scripts" / "tw", "explain"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert "Costs from: some-run (measured " in p.stdout
    assert explain.NOT_MEASURED not in p.stdout
    for m in registry.mechanisms():
        assert f"[{m.name}]" in p.stdout
