"""The document model every page is built in, and one exporter per format.

A page (report, comparison) is built once as a list of blocks, then rendered by each
exporter: Markdown and a self-contained HTML page (CSS inline, plots embedded as data URIs,
no network).  Tables go through the same exporters, so a table reads the same everywhere.
"""
import argparse
import base64
import html
import re
from pathlib import Path

from ..core import files


class Doc:
    """Blocks: ('h', level, text) ('p', text) ('table', headers, rows) ('plot', name, caption)
    ('warn', text) ('code', text) ('verdict', kind, text).  Text may hold `code` spans and
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
                out.append("#" * b[1] + " " + b[2])
            elif k == "p":
                out.append(b[1])
            elif k == "warn":
                out.append("> **Warning:** " + b[1])
            elif k == "verdict":
                out.append(f"> **Verdict: {b[1].upper()}.** " + b[2])
            elif k == "code":
                out.append("```\n" + b[1] + "\n```")
            elif k == "plot":
                out.append(f"![{b[2]}](plots/{b[1]}.svg)\n\n*{b[2]}* ([png](plots/{b[1]}.png))")
            elif k == "table":
                hdr, rows = b[1], b[2]
                esc = [[c.replace("|", "\\|").replace("\n", " ") for c in r] for r in rows]
                out.append("| " + " | ".join(hdr) + " |\n|" + "---|" * len(hdr) + "\n"
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
    t = html.escape(text, quote=False)
    t = re.sub(r"`([^`]+)`", r"<code>\1</code>", t)
    t = re.sub(r"\*\*([^*]+)\*\*", r"<strong>\1</strong>", t)
    return t


class HtmlExporter:
    """Self-contained: CSS inline, plots embedded as base64 SVG data URIs, no network."""
    suffix = "html"

    def render(self, doc, results_dir):
        title = next((b[2] for b in doc.blocks if b[0] == "h"), "timewrite report")
        out = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
               f"<title>{html.escape(title)}</title>", f"<style>{CSS}</style></head><body>"]
        for b in doc.blocks:
            k = b[0]
            if k == "h":
                anchor = re.sub(r"[^a-z0-9]+", "-", b[2].lower()).strip("-")
                out.append(f'<h{b[1]} id="{anchor}">{_inline_html(b[2])}</h{b[1]}>')
            elif k == "p":
                out.append(f"<p>{_inline_html(b[1])}</p>")
            elif k == "warn":
                out.append(f'<div class="warn"><strong>Warning:</strong> {_inline_html(b[1])}</div>')
            elif k == "verdict":
                out.append(f'<div class="verdict {html.escape(b[1])}"><strong>Verdict: '
                           f'{html.escape(b[1].upper())}.</strong> {_inline_html(b[2])}</div>')
            elif k == "code":
                out.append(f"<pre>{html.escape(b[1])}</pre>")
            elif k == "plot":
                svg = (Path(results_dir) / "plots" / f"{b[1]}.svg").read_bytes()
                data = base64.b64encode(svg).decode()
                out.append(f'<figure><img alt="{html.escape(b[2])}" src="data:image/svg+xml;base64,{data}">'
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
