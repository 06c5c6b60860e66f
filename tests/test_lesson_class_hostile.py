"""tw lesson --class with a careless or hostile class (issue 34, class 8).

Why it can break: two students whose folders share a name shared one page (both rows pointed
to it, both were marked "you"); each student's page held every student's dot and row, so the
output grew with the square of the class (400 students made 264 MB); and --out inside a
student's results directory was accepted, to be read as a bogus student by the next page.
"""
import os
import shutil
import sys

from conftest import ROOT
from faults_util import one_line_error, tw

RUNS = sorted(p for p in (ROOT / "data" / "machines").glob("*/runs/*") if p.is_dir())


def test_two_students_of_one_name_get_a_page_each(tmp_path):
    for group, run in (("a", RUNS[0]), ("b", RUNS[1])):
        shutil.copytree(run, tmp_path / group / "alice" / "run")
    out = tmp_path / "class"
    p = tw("lesson", "--class", tmp_path / "a", tmp_path / "b", "--out", out, cwd=tmp_path,
           timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    pages = sorted(out.glob("class-*.md"))
    assert len(pages) == 2
    for page in pages:
        md = page.read_text()
        assert md.count("**you**") == 1, md
    index = (out / "index.md").read_text()
    links = [page.with_suffix(".html").name for page in pages]
    assert all(index.count(name.replace("_", "\\_")) == 1 for name in links), (links, index)


def _students(n):
    """n students made from the atlas's digests (each a real digest, relabelled)."""
    from twtools.analyse import atlas
    from twtools.cli.lesson import page_name
    digests, _ = atlas.load()
    out = []
    for i in range(n):
        label = f"student-{i:04d}"
        d = dict(digests[i % len(digests)], host=label)
        d["facts"] = dict(d["facts"], kernel=f"6.{i % 40}.0")
        out.append({"label": label, "digest": d, "page": page_name(label)})
    return out


def _sizes(out):
    pages = [p for p in out.rglob("*") if p.is_file()]
    own = [p.stat().st_size for p in pages if p.name.startswith("class-") and p.suffix == ".html"]
    return sum(p.stat().st_size for p in pages), max(own)


def test_the_output_grows_in_proportion_to_the_class(tmp_path):
    """100 and 300 students: three times the students, about three times the bytes, and a
    student's page the same size (it was 393 KB at 100 and grew with the class)."""
    from twtools.cli.lesson import write_class
    got = {}
    for n in (100, 300):
        out = tmp_path / str(n)
        out.mkdir()
        write_class(_students(n), [], out)
        got[n] = _sizes(out)
    total = got[300][0] / got[100][0]
    assert 2.5 < total < 3.5, got
    assert got[300][1] < 1.2 * got[100][1], got


def test_out_inside_a_student_is_refused(tmp_path):
    student = tmp_path / "alice" / "run"
    shutil.copytree(RUNS[0], student)
    before = sorted(os.listdir(student))
    p = tw("lesson", "--class", tmp_path / "alice", "--out", student / "class", cwd=tmp_path,
           timeout=300)
    one_line_error(p, "is inside the input results directory")
    assert p.returncode == 2 and sorted(os.listdir(student)) == before
    p = tw("lesson", "--class", tmp_path, "--out", tmp_path / "pages", cwd=tmp_path,
           timeout=300)
    one_line_error(p, "is inside the input")
    assert not (tmp_path / "pages").exists()
    assert sys.executable
