"""The document model every page is built in, and one exporter per format.

A page (report, comparison) is built once as a list of blocks, then rendered by each
exporter: Markdown and a self-contained HTML page (CSS inline, plots embedded as data URIs,
no network).  Tables go through the same exporters, so a table reads the same everywhere.

Text that came from outside (a host name, a label, a fingerprint's fields, a stage's error,
a reason read from a stage file) is wrapped with outside() where the page takes it in.  The
page's own text may hold `code` spans and **bold**; outside text may hold nothing that
renders: the Markdown exporter escapes it with core.escape.markdown (one line, every
metacharacter escaped, no raw HTML), the HTML exporter with html.escape and no inline
markup, a code block shows its control characters (core.escape.terminal).  So a meta.json
whose host is "vm\n\n> **Verdict: SUPPORTED.**" shows that text, and forges no verdict.

Outside is a str whose value carries two private-use characters around the text, so that
the mark survives what pages do with text (f-strings, joins, str() of a table cell); the
exporters remove the marks.  Marks inside the outside text itself are dropped first, so a
file cannot close its own span.
"""
import argparse
import base64
import html
import re
from pathlib import Path

from ..core import escape, files
from ..core import fmt as core_fmt

OPEN, CLOSE = "\ue000", "\ue001"
_SPAN = re.compile(f"{OPEN}(.*?){CLOSE}", re.S)
_MARKS = re.compile(f"[{OPEN}{CLOSE}]")


class Outside(str):
    """Text that came from outside the program, marked (see the module docstring)."""

    def __new__(cls, text):
        return super().__new__(cls, OPEN + _MARKS.sub("", str(text)) + CLOSE)


def outside(x):
    """x marked as outside text; None and "" stay as they are (a table shows a dash, and
    `outside(why) or "unknown"` keeps working)."""
    if x is None or x == "" or isinstance(x, Outside):
        return x
    return Outside(x)


def fmt(s, unit="ns", digits=None):
    """A figure for a page (core.fmt.fmt), its 'unknown (why)' why marked as outside text."""
    return core_fmt.fmt(s, unit, digits, mark=outside)


def plain(text):
    """text without the marks: for what is not a page (a plot's legend, a file name)."""
    return None if text is None else _MARKS.sub("", str(text))


def _parts(text):
    """[(is_outside, piece)] of a text with marked spans; stray marks are dropped."""
    out, at = [], 0
    for m in _SPAN.finditer(text):
        if m.start() > at:
            out.append((False, _MARKS.sub("", text[at:m.start()])))
        out.append((True, m.group(1)))
        at = m.end()
    if at < len(text):
        out.append((False, _MARKS.sub("", text[at:])))
    return out


_NEWLINE = re.compile(r"\r\n|\r|\n")
# What opens a block at the start of a line: a quote, a heading, a list item, a rule.
_BLOCK_START = re.compile(r"([ \t]*)([#+\-=>*]|\d{1,9}(?=[.)](?:\s|$)))")


def _line_start(line):
    """line unable to open a block: its first mark escaped (after the digits of 1.)."""
    m = _BLOCK_START.match(line)
    if not m:
        return line
    at = m.end() if m.group(2)[0].isdigit() else m.start(2)
    return line[:at] + "\\" + line[at:]


def _own(piece, cell):
    """The page's own text in a block: its `code` and **bold** kept, but nothing that could
    make a block or raw HTML, in case a value read from a file reached it unmarked: '<' is
    escaped, control characters are shown (core.escape.controls), and a line the text
    starts after a newline cannot open a quote, heading or list (a paragraph's own line
    breaks stay, for its raw text); in a table cell a newline is a space and '|' escaped."""
    lines = [escape.controls(line).replace("<", "\\<") for line in _NEWLINE.split(piece)]
    if cell:
        return " ".join(lines).replace("|", "\\|")
    return "\n".join(lines[:1] + [_line_start(line) for line in lines[1:]])


def _md(text, cell=False):
    """Markdown of a text: the page's own pieces through _own, outside pieces through
    escape.markdown."""
    return "".join(escape.markdown(piece) if ext else _own(piece, cell)
                   for ext, piece in _parts(str(text)))


def _code_md(text):
    """A fenced code block whose fence no line of it can close, outside pieces shown with
    their control characters visible."""
    body = "".join(escape.terminal(p) if ext else p for ext, p in _parts(str(text)))
    longest = max((len(m) for m in re.findall(r"`+", body)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}\n{body}\n{fence}"


class Doc:
    """Blocks: ('h', level, text) ('p', text) ('table', headers, rows) ('plot', name, caption)
    ('svg', name, caption) ('details', summary, text) ('warn', text) ('code', text)
    ('verdict', kind, text).  Text may hold `code` spans and
    **bold**; exporters render them."""

    def __init__(self):
        self.blocks = []
        self.warnings = []

    def h(self, level, text):
        self.blocks.append(("h", level, text))

    def p(self, text):
        self.blocks.append(("p", text))

    def table(self, headers, rows):
        self.blocks.append(("table", list(headers), [[_cell(x) for x in r] for r in rows]))

    def plot(self, name, caption):
        if name:
            self.blocks.append(("plot", name, caption))

    def warn(self, text, inline=False):
        """Collected for the Warnings section; shown in place too when inline."""
        if inline:
            self.blocks.append(("warn", text))
        self.warnings.append(text)

    def code(self, text):
        self.blocks.append(("code", text))

    def figure(self, name, caption):
        """An SVG drawn by the page itself (plots/<name>.svg), with no PNG beside it."""
        self.blocks.append(("svg", name, caption))

    def details(self, summary, text):
        """An answer a reader opens when asked for: hidden on the page, quoted in Markdown."""
        self.blocks.append(("details", summary, text))


def _cell(x):
    if x is None:
        return "—"
    return str(x)


class MarkdownExporter:
    suffix = "md"

    def render(self, doc, results_dir):
        out = []
        for b in doc.blocks:
            k = b[0]
            if k == "h":
                out.append("#" * b[1] + " " + _md(b[2]))
            elif k == "p":
                out.append(_md(b[1]))
            elif k == "warn":
                out.append("> **Warning:** " + _md(b[1]))
            elif k == "verdict":
                out.append(f"> **Verdict: {plain(b[1]).upper()}.** " + _md(b[2]))
            elif k == "code":
                out.append(_code_md(b[1]))
            elif k == "plot":
                cap = _md(b[2])
                out.append(f"![{cap}](plots/{plain(b[1])}.svg)\n\n*{cap}* "
                           f"([png](plots/{plain(b[1])}.png))")
            elif k == "svg":
                cap = _md(b[2])
                out.append(f"![{cap}](plots/{plain(b[1])}.svg)\n\n*{cap}*")
            elif k == "details":
                out.append(f"> **{_md(b[1])}** " + _md(b[2]))
            elif k == "table":
                hdr, rows = b[1], b[2]
                esc = [[_md(c, cell=True) for c in r] for r in rows]
                out.append("| " + " | ".join(_md(h, cell=True) for h in hdr) + " |\n|"
                           + "---|" * len(hdr) + "\n"
                           + "\n".join("| " + " | ".join(r) + " |" for r in esc))
        return "\n\n".join(out) + "\n"


CSS = """
body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;max-width:1100px;margin:2em auto;
 padding:0 1em;color:#222;line-height:1.45}
h1{border-bottom:2px solid #333}h2{border-bottom:1px solid #aaa;margin-top:2em}
.tbl{overflow-x:auto;max-width:100%}
table{border-collapse:collapse;margin:1em 0;font-size:.85em}
th,td{border:1px solid #ccc;padding:.25em .5em;text-align:left;vertical-align:top}
th{background:#f0f0f0}tr:nth-child(even) td{background:#fafafa}
code{background:#f3f3f3;padding:0 .2em;border-radius:3px}
pre{background:#f3f3f3;padding:.6em;overflow-x:auto}
.warn{border-left:4px solid #d80;background:#fff6e6;padding:.4em .8em;margin:.6em 0}
.verdict{border:2px solid #555;padding:.8em 1em;margin:1em 0;font-size:1.05em}
.verdict.supported{border-color:#c33;background:#fff0f0}
.verdict.refuted{border-color:#373;background:#effaef}
.verdict.inconclusive{border-color:#888;background:#f4f4f4}
figure{margin:1em 0}figure img{max-width:100%;border:1px solid #eee}
figcaption{font-size:.85em;color:#555}
"""


def _inline_html(text):
    """HTML of a text: the page's own pieces with their `code` and **bold**, outside
    pieces escaped and nothing more.  An outside piece's control characters are shown, as
    on the terminal and in the Markdown: a browser would hide an escape sequence that a
    reader should see."""
    out = []
    for ext, piece in _parts(str(text)):
        t = html.escape(escape.terminal(piece) if ext else piece, quote=False)
        if not ext:
            t = re.sub(r"`([^`]+)`", r"<code>\1</code>", t)
            t = re.sub(r"\*\*([^*]+)\*\*", r"<strong>\1</strong>", t)
        out.append(t)
    return "".join(out)


class HtmlExporter:
    """Self-contained: CSS inline, plots embedded as base64 SVG data URIs, no network."""
    suffix = "html"

    def render(self, doc, results_dir):
        title = plain(next((b[2] for b in doc.blocks if b[0] == "h"), "timewrite report"))
        # width=device-width: a phone lays the page out at its own width, not at 980 px
        out = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
               '<meta name="viewport" content="width=device-width, initial-scale=1">',
               f"<title>{html.escape(title)}</title>", f"<style>{CSS}</style></head><body>"]
        for b in doc.blocks:
            k = b[0]
            if k == "h":
                anchor = re.sub(r"[^a-z0-9]+", "-", plain(b[2]).lower()).strip("-")
                out.append(f'<h{b[1]} id="{anchor}">{_inline_html(b[2])}</h{b[1]}>')
            elif k == "p":
                out.append(f"<p>{_inline_html(b[1])}</p>")
            elif k == "warn":
                out.append(f'<div class="warn"><strong>Warning:</strong> {_inline_html(b[1])}</div>')
            elif k == "verdict":
                out.append(f'<div class="verdict {html.escape(plain(b[1]))}"><strong>Verdict: '
                           f'{html.escape(plain(b[1]).upper())}.</strong> {_inline_html(b[2])}</div>')
            elif k == "code":
                out.append(f"<pre>{html.escape(plain(b[1]))}</pre>")
            elif k == "details":
                out.append(f"<details><summary>{_inline_html(b[1])}</summary>"
                           f"<p>{_inline_html(b[2])}</p></details>")
            elif k in ("plot", "svg"):
                svg = (Path(results_dir) / "plots" / f"{plain(b[1])}.svg").read_bytes()
                data = base64.b64encode(svg).decode()
                out.append(f'<figure><img alt="{html.escape(plain(b[2]))}" src="data:image/svg+xml;base64,{data}">'
                           f"<figcaption>{_inline_html(b[2])}</figcaption></figure>")
            elif k == "table":
                rows = "".join("<tr>" + "".join(f"<td>{_inline_html(c)}</td>" for c in r) + "</tr>"
                               for r in b[2])
                # A wide table scrolls in its own box, so the page itself never scrolls
                # sideways and the verdict above keeps the window's width.
                out.append('<div class="tbl"><table><thead><tr>'
                           + "".join(f"<th>{_inline_html(h)}</th>" for h in b[1])
                           + f"</tr></thead><tbody>{rows}</tbody></table></div>")
        out.append("</body></html>")
        return "\n".join(out) + "\n"


EXPORTERS = {"md": MarkdownExporter(), "html": HtmlExporter()}



def export(doc, out, stem, formats):
    """Write doc as <out>/<stem>.<suffix> in each format; the first path is returned.

    Through core.files: each file whole or not at all (a full disk cannot leave half a
    report), never through a symbolic link, and, when the caller confined writes
    (files.confined), only inside that directory."""
    written = []
    for f in formats:
        ex = EXPORTERS[f]
        p = Path(out) / f"{stem}.{ex.suffix}"
        files.write_text(p, ex.render(doc, out))
        written.append(p)
    return written[0]


def formats(text):
    """--format: a comma list of the exporters' names, checked by argparse before any work."""
    items = [x.strip() for x in text.split(",") if x.strip()]
    bad = [x for x in items if x not in EXPORTERS]
    if not items or bad:
        raise argparse.ArgumentTypeError(f"unknown format {bad[0] if bad else repr(text)}; "
                                         f"choose from {', '.join(EXPORTERS)}")
    return items
