"""One exporter interface for every table (hyperfine's Exporter, in small).

A Table is a name, column headers and rows of cells.  An Exporter turns a table into text in
one format: json (a list of objects keyed by the headers), csv, md (a Markdown table) or text
(fixed-width columns for a terminal).  Every command that prints a table and every CSV a
report writes goes through here, so a figure reads the same in each.
"""
import csv
import io
import json
from dataclasses import dataclass, field

from ..core import escape, files
from .document import plain as _plain


@dataclass
class Table:
    name: str
    headers: list
    rows: list = field(default_factory=list)
    caption: str = ""

    def cells(self):
        """Rows as strings: None becomes an em dash, numbers keep their text form; the
        marks of outside text (present.document.outside) are dropped, since every cell of
        a table is escaped whole by its exporter."""
        return [["—" if c is None else _plain(str(c)) for c in r] for r in self.rows]


class Exporter:
    suffix = ""

    def render(self, table):
        raise NotImplementedError


class JsonExporter(Exporter):
    suffix = "json"

    def render(self, table):
        return json.dumps([dict(zip(table.headers, [_plain(c) if isinstance(c, str) else c
                                                    for c in r])) for r in table.rows],
                          indent=1, default=str) + "\n"


class CsvExporter(Exporter):
    suffix = "csv"

    def render(self, table):
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(table.headers)
        # A cell's control characters shown visibly (core.escape.controls): a CSV is read
        # with cat and less too, and a reason that came from outside may hold an escape
        # sequence (a legs.json's why).
        w.writerows([["" if c is None else escape.controls(_plain(c)) if isinstance(c, str)
                      else c for c in r] for r in table.rows])
        return buf.getvalue()


class MarkdownExporter(Exporter):
    suffix = "md"

    def render(self, table):
        # A cell is a value, never markup: every one is escaped (core.escape.markdown).
        esc = [[escape.markdown(c) for c in r] for r in table.cells()]
        return ("| " + " | ".join(table.headers) + " |\n|" + "---|" * len(table.headers) + "\n"
                + "".join("| " + " | ".join(r) + " |\n" for r in esc))


class TextExporter(Exporter):
    suffix = "txt"

    def render(self, table):
        # Cells hold what files and programs said: shown with their control characters
        # visible (core.escape.terminal), so that a row is one line and sets no title.
        rows = [list(map(str, table.headers))] + [[escape.terminal(c) for c in r]
                                                  for r in table.cells()]
        widths = [max(len(r[i]) for r in rows) for i in range(len(table.headers))]
        lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
        lines.insert(1, "  ".join("-" * w for w in widths))
        return (table.caption + "\n" if table.caption else "") + "\n".join(lines) + "\n"


EXPORTERS = {e.suffix if e.suffix != "txt" else "text": e for e in
             (JsonExporter(), CsvExporter(), MarkdownExporter(), TextExporter())}


def render(table, fmt="text"):
    return EXPORTERS[fmt].render(table)


def write(table, out_dir, fmt="csv"):
    """Write the table as <out_dir>/<name>.<suffix>, atomically; returns the path."""
    ex = EXPORTERS[fmt]
    path = out_dir / f"{table.name}.{ex.suffix}"
    files.write_text(path, ex.render(table))
    return path
