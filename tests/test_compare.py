"""tw compare: ratios with bootstrap CIs and Mann-Whitney p-values; the seed as theirs."""
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
from twtools.core import paths  # noqa: E402
from twtools.present import compare  # noqa: E402

FIX = ROOT / "tests" / "fixtures"


@pytest.fixture(scope="module")
def two(tmp_path_factory):
    out = tmp_path_factory.mktemp("cmp")
    dirs = [FIX / "results-fixture", FIX / "results-inconclusive"]
    path = compare.build_compare(dirs, out, seed_reference=False)
    return out, path


def test_compare_has_ratios_and_pvalues(two):
    out, path = two
    md = path.read_text()
    assert "Mann–Whitney" in md
    assert "ratio [95% CI]" in md
    # at least one real ratio and p-value line (a stable variant present in both sets)
    import re
    assert re.search(r"\| 1\.0\d\d \[\d\.\d{3}, \d\.\d{3}\] \| [\d.]+ \| [\d.e-]+ \| (yes|no) \|", md)
    assert (out / "compare.html").exists()
    assert "https://" not in (out / "compare.html").read_text()


def test_bootstrap_ratio_and_test():
    a = [100.0 + i % 5 for i in range(30)]
    b = [200.0 + i % 5 for i in range(30)]
    r = compare.bootstrap_ratio(a, b)
    assert r["ci_low"] <= r["median"] <= r["ci_high"] and 1.9 < r["median"] < 2.1
    u, p = compare.mann_whitney(a, b)
    assert p < 1e-6
    assert compare.bootstrap_ratio(a, b) == r  # fixed seed: deterministic
    assert compare.mann_whitney([1.0], b) is None


def test_compare_with_seed_reference(tmp_path):
    if not (paths.REFERENCE / "seed_timewrite_runs.csv").exists():
        pytest.skip(f"seed reference absent at {paths.REFERENCE}")
    path = compare.build_compare([FIX / "results-fixture"], tmp_path, seed_reference=True)
    md = path.read_text()
    assert "seed report (theirs)" in md
    assert "no test possible" in md
    assert "server-linux-2.6-ext4 (seed, theirs)" in md


def test_compare_is_deterministic(tmp_path):
    a = compare.build_compare([FIX / "results-fixture", FIX / "results-inconclusive"], tmp_path / "a")
    b = compare.build_compare([FIX / "results-fixture", FIX / "results-inconclusive"], tmp_path / "b")
    assert a.read_text().replace(str(tmp_path / "a"), "X") == b.read_text().replace(str(tmp_path / "b"), "X")


def _copy_as_host(src, dst, host):
    import json
    import shutil
    shutil.copytree(src, dst)
    meta = json.loads((dst / "meta.json").read_text())
    meta["host"] = host
    (dst / "meta.json").write_text(json.dumps(meta))
    fp = json.loads((dst / "fingerprint.json").read_text())
    fp["host"] = host
    (dst / "fingerprint.json").write_text(json.dumps(fp))
    return dst


def test_same_machine_sets_warn_about_drift(tmp_path):
    """Two runs of one machine at different times differ by drift too (seen: 146 vs 95 ns)."""
    a = _copy_as_host(FIX / "results-fixture", tmp_path / "a", "box1")
    b = _copy_as_host(FIX / "results-fixture", tmp_path / "b", "box1")
    md = compare.build_compare([a, b], tmp_path / "out", seed_reference=False).read_text()
    assert "same machine (box1)" in md and "A B A B" in md
    c = _copy_as_host(FIX / "results-fixture", tmp_path / "c", "box2")
    md = compare.build_compare([a, c], tmp_path / "out2", seed_reference=False).read_text()
    assert "same machine" not in md
