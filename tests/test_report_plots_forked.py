"""tw report draws its plots in forked children (present/plots.rendering), and the files must be
the very bytes it draws in one process.

Why it can break: a child that draws a copy of the figure rather than the figure (a pickled
figure laid one plot's tick labels out 3 px apart, so a rebuilt report was not byte-identical
to the one tw run wrote), a plot written before its child finished or never, a child that died
and left its plot out, the files written in another order or outside the results directory.
Skips: one CPU here (the children are one a CPU: with one, nothing is forked).
"""
import os
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT

FIX = ROOT / "tests" / "fixtures" / "results-fixture"
BUILD = ("import os, sys; sys.path.insert(0, sys.argv[1]);"
         "from twtools.present import report, plots;"
         "one = sys.argv[3] == 'one';"
         "one and os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]});"
         "report.build_report(sys.argv[2])")


def build(tmp, name, how):
    d = tmp / name
    shutil.copytree(FIX, d, ignore=shutil.ignore_patterns("report.*", "plots", "verdict.json"))
    p = subprocess.run([sys.executable, "-c", BUILD, str(ROOT / "scripts"), str(d), how],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    return d


def test_forked_plots_are_the_bytes_drawn_in_one_process(tmp_path):
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("one CPU here: the report draws its plots in its own process")
    forked, one = build(tmp_path, "dir-qzx-forked", "all"), build(tmp_path, "dir-qzx-one", "one")
    names = sorted(p.name for p in (one / "plots").iterdir())
    assert names and names == sorted(p.name for p in (forked / "plots").iterdir())
    assert {n.rsplit(".", 1)[1] for n in names} == {"svg", "png"}
    for n in names:
        assert (forked / "plots" / n).read_bytes() == (one / "plots" / n).read_bytes(), n
    # the page embeds the plots it finds on disk: the same too, but for the directory's name
    a = (forked / "report.html").read_text().replace("dir-qzx-forked", "X")
    assert a == (one / "report.html").read_text().replace("dir-qzx-one", "X")
