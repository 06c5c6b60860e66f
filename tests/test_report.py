"""tw report: builds from recorded results directories, findings first, every section present,
rebuilds byte-identical, recomputes every figure from the raw samples, self-contained HTML,
missing stages reported instead of crashing.

Why it can break: a section that reads a field the analysis no longer produces, an order
that pushes the verdict below the first screen, a figure frozen at measuring time (then a fix
to the statistics would not reach this report), or a results directory from before the raw
samples were kept that no longer reports."""
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
from twtools.analyse import stats  # noqa: E402
from twtools.present import report  # noqa: E402

FIX = ROOT / "tests" / "fixtures"
# In the order a reader meets them: findings first, details after, provenance last.
SECTIONS = ["Verdict on the seed's hypothesis", "What each way into the kernel costs here",
            "Three things this machine showed", "Warnings", "How the verdict was reached",
            "Per-call cost, every cell", "The return after the call",
            "Why each way costs what it does here", "Attribution", "Machine",
            "The seed's sweep", "Fit T(size)", "TLPI sweep", "writev() vs write()",
            "stdio vs raw write()", "Per-call write latency", "Observer effect",
            "Tracer cross-checks", "The seed's published rows beside this machine", "Provenance"]


def copy_fixture(name, tmp):
    src = FIX / name
    if not (src / "meta.json").exists():
        pytest.fail(f"{src} is missing: run tests/fixtures/make_fixture.py")
    dst = tmp / name
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("report.*", "plots", "verdict.json"))
    return dst


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    d = copy_fixture("results-fixture", tmp_path_factory.mktemp("rep"))
    path = report.build_report(d)
    return d, path


def test_report_without_census_stage_adds_nothing(built):
    """A results directory without census.json (tw run --only without the stage): the report
    has no census section at all."""
    from twtools.analyse import results
    from twtools.present import census
    d, _ = built
    assert not (d / "census.json").exists() and results.load(d).get("census") is None
    heading = "The running system: who enters the old ways"
    assert heading in Path(census.__file__).read_text()     # the section's own title
    assert heading not in (d / "report.md").read_text()


def test_report_builds_with_all_sections_in_order(built):
    d, path = built
    assert path == d / "report.md"
    md = (d / "report.md").read_text()
    html = (d / "report.html").read_text()
    at = []
    for s in SECTIONS:
        m = re.search(rf"^#+ {re.escape(s)}", md, re.M)
        assert m, f"section {s!r} missing"
        assert s.replace("'", "&#x27;") in html or s in html, f"section {s!r} missing from report.html"
        at.append(m.start())
    assert at == sorted(at), "sections out of order"
    assert (d / "verdict.json").exists()
    assert sorted(p.suffix for p in (d / "plots").iterdir()).count(".svg") >= 6
    assert (d / "tables" / "percall.csv").exists()


def test_report_recomputes_from_raw_samples(tmp_path, monkeypatch):
    """Change the statistics, rebuild without measuring: the figures change; restore them:
    the report is what it was.  The directory holds raw rounds only (schema 2)."""
    import json
    import numpy as np
    d = tmp_path / "run"
    d.mkdir()
    shutil.copy(FIX / "results-fixture" / "meta.json", d / "meta.json")
    rng = np.random.default_rng(4)
    cells = []
    for v, base in (("64-syscall", 100.0), ("32-int80", 600.0), ("32-libc", 150.0)):
        bits, mech = v.split("-", 1)
        cells.append({"variant": v, "bits": int(bits), "abi": "x86_64" if bits == "64" else "i386",
                      "mechanism": mech, "op": "null", "size": None, "shape": "ret",
                      "supported": True, "status": "works", "reason": None,
                      "rounds": [{"round": r, "t_s": float(r),
                                  "samples_ns": list(base * np.exp(rng.normal(0, 0.05, 6)))}
                                 for r in range(12)]})
    (d / "percall.json").write_text(json.dumps({
        "schema": "timewrite-percall/2", "params": {"rounds": 12, "batches": 6, "batch_ms": 0.5},
        "reference": {"variant": "64-syscall", "op": "null", "shape": "ret"}, "cells": cells}))
    report.build_report(d, formats=("md",))
    before = (d / "report.md").read_text()
    monkeypatch.setattr(stats.median_ci, "__defaults__", (0.50,))
    report.build_report(d, formats=("md",))
    assert (d / "report.md").read_text() != before
    monkeypatch.undo()
    report.build_report(d, formats=("md",))
    assert (d / "report.md").read_text() == before


def test_old_results_directory_still_reports_and_says_what_is_stored(built):
    d, _ = built
    md = (d / "report.md").read_text()
    assert "analysis version" in md
    assert "Figures taken as stored" in md and "attribution" in md      # v1 kept only rows


def test_no_warning_asks_for_a_quieter_machine(built):
    """A warning says what to raise and by how much it helps (issue 26): the undisturbed
    figure already leaves the host's neighbours out, so a quieter machine is no advice."""
    d, _ = built
    md = (d / "report.md").read_text().lower()
    assert "quiet" not in md
    assert "raise the runs" in md and "1/sqrt(n)" in md


def test_the_tables_on_the_typical_figure_say_why(built):
    """writev, stdio, attribution and the observer table lead with the typical figure, and
    each says why the undisturbed one does not apply to it (issue 26, item 3)."""
    from twtools.present.report import FIGURE_WHY
    d, _ = built
    md = (d / "report.md").read_text()
    for section, why in FIGURE_WHY.items():
        assert why.split(".")[0] in md.replace("\\", ""), section


def test_the_causes_are_written_and_shown(built):
    """causes.json (timewrite-causes/1) beside the report, and its section in the page."""
    import json
    d, _ = built
    c = json.loads((d / "causes.json").read_text())
    assert c["schema"] == "timewrite-causes/1" and c["mechanisms"]
    md = (d / "report.md").read_text()
    assert "## Why each way costs what it does here" in md
    assert "price of one VM exit (cpuid)" in md


def test_rebuild_is_byte_identical(built):
    d, _ = built
    before = {p.name: p.read_bytes() for p in [d / "report.md", d / "report.html", d / "verdict.json"]}
    plots_before = {p.name: p.read_bytes() for p in (d / "plots").iterdir()}
    report.build_report(d)
    for name, b in before.items():
        assert (d / name).read_bytes() == b, f"{name} changed on rebuild"
    for name, b in plots_before.items():
        assert (d / "plots" / name).read_bytes() == b, f"plots/{name} changed on rebuild"


def test_html_is_self_contained(built):
    d, _ = built
    html = (d / "report.html").read_text()
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", html), "external resource in report.html"
    assert not re.search(r"https?://", html), "http(s):// reference in report.html"
    assert html.count("data:image/svg+xml;base64,") >= 6
    assert "<style>" in html


def test_unsupported_and_blind_are_said_not_zero(built):
    d, _ = built
    md = (d / "report.md").read_text()
    assert "unsupported: " in md           # 32-syscall on Intel, or whichever this machine lacks
    assert "unknown (" in md               # blind figures carry their reason


def test_missing_stages_are_reported(tmp_path):
    d = copy_fixture("results-inconclusive", tmp_path)
    report.build_report(d)
    md = (d / "report.md").read_text()
    assert "Not measured (stage observer failed: bpftrace: permission denied" in md
    assert "Not measured (stage latency failed: skipped: needs root" in md
    assert "**Verdict: INCONCLUSIVE.**" in md


def test_report_without_most_files(tmp_path):
    """Only meta.json: every section says why, nothing crashes."""
    d = tmp_path / "bare"
    d.mkdir()
    shutil.copy(FIX / "results-fixture" / "meta.json", d / "meta.json")
    report.build_report(d)
    md = (d / "report.md").read_text()
    assert md.count("Not measured (") >= 8
    assert "INCONCLUSIVE" in md


def test_cli_md_only(tmp_path):
    d = copy_fixture("results-fixture", tmp_path)
    p = subprocess.run([sys.executable, str(ROOT / "scripts" / "tw"), "report", str(d), "--format", "md"],
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    assert (d / "report.md").exists() and not (d / "report.html").exists()
