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
    # --quick is 24 rounds (--long 800, too long for a test); an explicit --rounds wins.
    need_supported("syscost", "64-syscall")
    from twtools.cli import ab as cli_ab
    assert cli_ab.ROUNDS == {"quick": 24, "default": 200, "long": 800}
    other = tmp_path / "build-b"
    other.mkdir()
    shutil.copy(build / "syscost-64-syscall", other / "syscost-64-syscall")
    for args, n in ((["--quick"], 24), (["--long", "--rounds", "2"], 2)):
        out = tmp_path / f"ab{n}"
        p = run([sys.executable, TW, "ab", "--build-b", other, *args, "--ops", "null",
                 "--out", out, "--format", "json"], text=True, timeout=300)
        assert p.returncode == 0, p.stderr
        (cell,) = json.loads((out / "ab.json").read_text())["cells"]
        assert len(cell["a"]["rounds"]) == n == len(cell["b"]["rounds"])


def test_ab_two_builds_neither_this_one(build, tmp_path):
    # --build-a names A's build: both sides run from their own directories, with one TSC rate
    # measured once and one CPU for every run.
    need_supported("syscost", "64-syscall")
    sides = []
    for name in ("side-a", "side-b"):
        d = tmp_path / name
        d.mkdir()
        shutil.copy(build / "syscost-64-syscall", d / "syscost-64-syscall")
        sides.append(d)
    out = tmp_path / "ab"
    p = run([sys.executable, TW, "ab", "--build-a", sides[0], "--build-b", sides[1], "--rounds",
             "3", "--ops", "null", "--out", out, "--format", "json"], text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    doc = json.loads((out / "ab.json").read_text())
    assert doc["a"]["build"] == str(sides[0]) and doc["b"]["build"] == str(sides[1])
    assert isinstance(doc["cpu"], int) and (doc["tsc_hz"] is None or doc["tsc_hz"] > 1e8)
    (cell,) = doc["cells"]
    assert len(cell["a"]["rounds"]) == 3 == len(cell["b"]["rounds"])


def test_ab_build_a_needs_build_b(tmp_path):
    p = run([sys.executable, TW, "ab", "--build-a", tmp_path, "--speculation", "ssbd",
             "--out", tmp_path / "x"], text=True)
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr == "tw ab: --build-a compares two builds; give B's with --build-b as well\n"


def test_ab_refuses_without_a_b_side(tmp_path):
    p = run([sys.executable, TW, "ab", "--out", tmp_path / "x"], text=True)
    assert p.returncode == 2 and "no B to compare A with" in p.stderr
    assert not (tmp_path / "x").exists()


def test_selfcheck_prints_its_figures(build, tmp_path):
    out = tmp_path / "sc"
    p = run([sys.executable, TW, "bench", "--selfcheck", "--quick", "--variants",
             "64-syscall,64-libc,32-int80,32-vdso", "--ops", "null,getppid", "--out", out],
            text=True, timeout=600)
    # Whether two runs' intervals overlap is the host's noise, which no test asserts on: the
    # self-check exits 1 when they fall short (saying so), 0 when they hold, and prints and
    # writes its figures either way.
    assert p.returncode in (0, 1), p.stderr
    assert (p.returncode == 1) == ("the self-check fell short" in p.stderr), p.stderr
    f = json.loads((out / "selfcheck.json").read_text())
    assert (p.returncode == 1) == bool(f["short"])
    assert f["cells_compared"] >= 4 and len(f["runs"]) == 2
    for k in ("overlap_share", "overlap_share_ratio", "fast_within_target", "int80_ratio_change"):
        assert k in f
    assert (out / "run1" / "percall.json").exists() and (out / "run2" / "percall.json").exists()
    for word in ("overlap between the runs", "half-width", "perf bench", "empty loop", "wall time"):
        assert word in p.stdout
