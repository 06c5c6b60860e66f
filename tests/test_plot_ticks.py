"""A log axis's tick labels are matplotlib's own, written in plain text.

Why it can break: the report's plots label their log axes with Unicode superscripts (2¹⁷,
10⁻¹, 3×10²) rewritten from what matplotlib's LogFormatterSciNotation gives in mathtext
($\\mathdefault{2^{17}}$), because parsing that mathtext was a fifth of the CPU a report's
plots cost.  A matplotlib that changes its mathtext, or a rewrite that drops a sign, a
coefficient or a label, would mislabel every log axis silently: these tests hold the plain
labels to matplotlib's own, label by label, and a drawn plot to having no mathtext left.
"""
import re

import matplotlib.pyplot as plt
import matplotlib.ticker as mt
import pytest

from twtools.present import plots


def _as_mathtext(plain):
    """A plain label written back in matplotlib's mathtext, as LogFormatterSciNotation
    writes it."""
    sup = str.maketrans("⁰¹²³⁴⁵⁶⁷⁸⁹⁻", "0123456789-")
    body = re.sub("[⁰¹²³⁴⁵⁶⁷⁸⁹⁻]+", lambda m: "^{" + m.group(0).translate(sup) + "}", plain)
    return r"$\mathdefault{" + body.replace("×", r"\times").replace("\N{MINUS SIGN}", "-") + "}$"


@pytest.mark.parametrize("base,lim", [(10, (0.03, 4e5)), (2, (200, 3e5)), (10, (20, 80)),
                                      (10, (1e-3, 2e-3)), (2, (1, 1.5))])
def test_every_label_is_matplotlibs_in_plain_text(base, lim):
    fig, ax = plt.subplots()
    ax.set_xscale("log", base=base)
    ax.set_xlim(*lim)
    fig.canvas.draw()
    theirs = (ax.xaxis.get_major_formatter(), ax.xaxis.get_minor_formatter())
    want = [[f(x) for x in loc()] for f, loc in
            ((theirs[0], ax.xaxis.get_majorticklocs), (theirs[1], ax.xaxis.get_minorticklocs))]
    plots._plain_log_ticks(fig)
    fig.canvas.draw()
    mine = (ax.xaxis.get_major_formatter(), ax.xaxis.get_minor_formatter())
    assert all(isinstance(f, plots.PlainLogFormatter) for f in mine)
    got = [[f(x) for x in loc()] for f, loc in
           ((mine[0], ax.xaxis.get_majorticklocs), (mine[1], ax.xaxis.get_minorticklocs))]
    plt.close(fig)
    assert any(s for row in want for s in row), "the axis has a label to compare"
    for w_row, g_row in zip(want, got):
        assert len(w_row) == len(g_row)
        for w, g in zip(w_row, g_row):
            assert "$" not in g and "mathdefault" not in g, g
            assert (_as_mathtext(g) if g and w.startswith("$") else g) == w, (g, w)


def test_a_label_of_a_negative_power_keeps_its_signs():
    f = plots.PlainLogFormatter(base=10, labelOnlyBase=False)
    assert f(1e-3) == "10⁻³" and f(0.03) == "3×10⁻²"
    assert mt.LogFormatterSciNotation(base=10)(-1e-3) == r"$\mathdefault{-10^{-3}}$"
    assert plots.PlainLogFormatter(base=10)(-1e-3) == "\N{MINUS SIGN}10⁻³"


def test_a_drawn_plot_has_no_mathtext_and_an_axis_formatter_of_its_own_stays():
    fig, (a, b) = plt.subplots(1, 2)
    a.set_yscale("log")
    a.plot([1, 2, 3], [1, 100, 10000])
    b.set_xscale("log")
    b.xaxis.set_major_formatter(mt.FuncFormatter(plots._compact))
    b.plot([10, 1e4], [0, 1])
    drawn = plots._draw(fig)
    svg = drawn["svg"].decode()
    assert "10⁴" in svg and "mathdefault" not in svg and "$" not in svg
    assert isinstance(b.xaxis.get_major_formatter(), mt.FuncFormatter)
    assert "10k" in svg                          # _compact's own label, kept
    assert drawn["png"].startswith(b"\x89PNG")
