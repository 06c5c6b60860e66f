"""A figure that is unknown says why, and the why may have come from a file: on a page it is
outside text, shown and never markup.

Why it can break: core.fmt writes "unknown (why)" with the why as it came, and the report and
the cost model's section take the figure in as the page's own text; a stage file whose reason
reads "**x** [y](javascript:...)" then made a live link and bold text in report.html.  The
page's figures come from present.document.fmt, which marks the why; a terminal line escapes
its whole text (core.escape.terminal) and takes core.fmt's unmarked text.
"""
from conftest import ROOT  # noqa: F401  (puts scripts/ on the path)
from twtools.core import fmt as core_fmt
from twtools.present import document
from twtools.present.document import EXPORTERS, Doc

EVIL = "bpf\x1b]0;owned\x07\n**bold** [x](javascript:alert(1)) <script>"


def render(text, tmp_path):
    d = Doc()
    d.p("the cell: " + text)
    d.table(["cell", "figure"], [["64-syscall", text]])
    return EXPORTERS["md"].render(d, tmp_path), EXPORTERS["html"].render(d, tmp_path)


def test_an_unknown_figures_why_is_data_on_the_page(tmp_path):
    for s in ({"median": None, "why": EVIL}, {"value": None, "why": EVIL}):
        md, html = render(document.fmt(s), tmp_path)
        assert "\\*\\*bold\\*\\*" in md and "\\[x\\](javascript:" in md
        assert "<strong>" not in html and 'href="javascript' not in html
        assert "<script>" not in html and "&lt;script&gt;" in html
        assert "\x1b" not in md + html and "\x07" not in md + html


def test_the_terminal_form_is_unmarked():
    text = core_fmt.fmt({"median": None, "why": "no cpuid cell"})
    assert text == "unknown (no cpuid cell)"
    assert document.plain(document.fmt({"median": None, "why": "no cpuid cell"})) == text


def test_a_measured_figure_is_the_same_either_way():
    s = {"median": 994.2, "ci_low": 987.0, "ci_high": 1001.4}
    assert document.fmt(s) == core_fmt.fmt(s) == "994.2 ns [987.0, 1001.4]"
