"""tw ab and tw bench --selfcheck on real, short runs: the structure of what they measure and
print.  Their decisions and figures are noise on a shared machine and are never asserted
here; tests/test_compare.py checks the decision rule on runs with a known difference.

Why it can break: A and B no longer alternating within a round (then drift decides), a side
run with the wrong binary or options, rounds paired across different indices, or the
self-check comparing a cell with another cell of the second run."""
import json
import shutil
import sys


from conftest import ROOT, need_supported, run

TW = ROOT / "scripts" / "tw"


def test_ab_alternates_and_decides(build, tmp_path):
    need_supported("syscost", "64-syscall")
    other = tmp_path / "build-b"
    other.mkdir()
    shutil.copy(build / "syscost-64-syscall", other / "syscost-64-syscall")
    out = tmp_path / "ab"
    p = run([sys.executable, TW, "ab", "--build-b", other, "--rounds", "3", "--ops", "null",
             "--out", out, "--format", "json"], text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    (row,) = json.loads(p.stdout)
    assert row["variant"] == "64-syscall" and row["decision"] in (
        "slower", "faster", "no difference detected")
    doc = json.loads((out / "ab.json").read_text())
    (cell,) = doc["cells"]
    assert [r["round"] for r in cell["a"]["rounds"]] == [0, 1, 2] == [r["round"] for r in cell["b"]["rounds"]]
    assert doc["b"]["build"] == str(other)
    # alternation: within each round both sides ran, so their time stamps interleave
    ta = [r["t_s"] for r in cell["a"]["rounds"]]
    tb = [r["t_s"] for r in cell["b"]["rounds"]]
    for i in range(2):
        assert max(ta[i], tb[i]) < min(ta[i + 1], tb[i + 1])


def test_ab_modes_set_the_rounds_and_rounds_overrides_them(build, tmp_path):
    # --quick is 8 rounds (--long 96, too long for a test); an explicit --rounds wins.
    need_supported("syscost", "64-syscall")
    from twtools.cli import ab as cli_ab
    assert cli_ab.ROUNDS == {"quick": 8, "default": 24, "long": 96}
    other = tmp_path / "build-b"
    other.mkdir()
    shutil.copy(build / "syscost-64-syscall", other / "syscost-64-syscall")
    for args, n in ((["--quick"], 8), (["--long", "--rounds", "2"], 2)):
        out = tmp_path / f"ab{n}"
        p = run([sys.executable, TW, "ab", "--build-b", other, *args, "--ops", "null",
                 "--out", out, "--format", "json"], text=True, timeout=300)
        assert p.returncode == 0, p.stderr
        (cell,) = json.loads((out / "ab.json").read_text())["cells"]
        assert len(cell["a"]["rounds"]) == n == len(cell["b"]["rounds"])


def test_ab_refuses_without_a_b_side(tmp_path):
    p = run([sys.executable, TW, "ab", "--out", tmp_path / "x"], text=True)
    assert p.returncode == 2 and "one of the arguments" in p.stderr


def test_selfcheck_prints_its_figures(build, tmp_path):
    out = tmp_path / "sc"
    p = run([sys.executable, TW, "bench", "--selfcheck", "--quick", "--variants",
             "64-syscall,64-libc,32-int80,32-vdso", "--ops", "null,getppid", "--out", out],
            text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    f = json.loads((out / "selfcheck.json").read_text())
    assert f["cells_compared"] >= 4 and len(f["runs"]) == 2
    for k in ("overlap_share", "overlap_share_ratio", "fast_within_target", "int80_ratio_change"):
        assert k in f
    assert (out / "run1" / "percall.json").exists() and (out / "run2" / "percall.json").exists()
    for word in ("overlap between the runs", "half-width", "perf bench", "empty loop", "wall time"):
        assert word in p.stdout
