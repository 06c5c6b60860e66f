"""tw lesson --class, for real: the class page over the atlas's runs and 30 synthetic students
made from them (drivers.fleetbench) shows the distribution per mechanism and marks each
student on their own page, rendered in chromium at 1280x900 and at a phone's width.

Nothing is measured here, so this file runs beside the others, not in the serial group with
test_lesson.py's quick run.

Why it can break: the class page grouping by something other than the measured cause, a
student's own page that does not mark them (the dot or the 'you' column), a page that scrolls
sideways on a phone, a count of machines that loses the atlas's runs.  Skips: chromium
missing for a non-root user (said so, by test_browser.render)."""
import re
from pathlib import Path

from test_lesson import DESKTOP, PHONE, render, svg_of, tw


def test_the_class_page_shows_the_distribution_and_marks_each_student(tmp_path):
    from twtools.analyse import atlas
    from twtools.drivers import fleetbench
    students = tmp_path / "students"
    students.mkdir()
    fleetbench.make(30, students, 2)
    atlas_dirs = [r for _, r in atlas.runs()]
    out = tmp_path / "class"
    p = tw("lesson", "--class", students, *atlas_dirs, "--out", out)
    index = Path(p.stdout.strip().splitlines()[-1])
    assert index == out / "index.html"
    pages = sorted(out.glob("class-*.html"))
    assert len(pages) == 30 + len(atlas_dirs)
    facts, errors = render(index, DESKTOP, tmp_path / "class.png", tmp_path)
    assert errors == [] and f"{30 + len(atlas_dirs)} machines" in facts["body"]
    assert "Machines grouped by the measured cause, then by what differs" in facts["body"]
    # one student's own page: their dot is marked, their figures in the 'you' column
    mine = next(p for p in pages if "bench-00007" in p.name)
    facts, errors = render(mine, PHONE, tmp_path / "mine.png", tmp_path)
    assert errors == [] and facts["scrollWidth"] <= PHONE[0]
    html = mine.read_text()
    svg = svg_of(re.search(r'src="(data:image/svg\+xml;base64,[^"]+)"', html).group(1))
    assert "bench-00007 (you)" in svg and svg.count('fill="#c53030" stroke="#000"') >= 5
    assert "**you** bench-00007" in (mine.with_suffix(".md")).read_text()
