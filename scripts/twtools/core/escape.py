"""One way to the terminal and one way to Markdown for text that came from outside.

A string read from a file, a symbol table, a process or another host can hold anything: an
escape sequence that retitles or clears the user's terminal, a newline that starts a fake
line of output, Markdown that forges a heading or a verdict.  Every such string passes
through one of these before it is shown:

    terminal(s)   control characters (C0, DEL, C1) and lone surrogates shown visibly as
                  \\x1b, \\n, \\u009b ...; a backslash doubled so that "\\x1b" typed in a
                  name stays distinguishable from the real byte
    markdown(s)   terminal(s), then a newline shown as a space, and every Markdown
                  metacharacter (and < >, so that no raw HTML reaches a .md file) escaped
                  with a backslash
    path(p)       terminal(str(p)), for file names in output and in error lines

HTML needs none of these: the HTML exporter escapes with html.escape.
"""
import re

# C0 controls, DEL and C1 controls, plus lone surrogates (from os.fsdecode of bad bytes).
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]")
_NAMED = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}
# Every character CommonMark lets a backslash escape that can start or change markup here,
# and < > & for raw HTML and entities.
_MD_META = re.compile(r"([\\`*_{}\[\]()#+\-.!|>~<&])")


def _show(m):
    c = m.group(0)
    if c in _NAMED:
        return _NAMED[c]
    o = ord(c)
    return f"\\x{o:02x}" if o < 0x100 else f"\\u{o:04x}"


def terminal(s):
    """s with every control character shown visibly; None stays None."""
    if s is None:
        return None
    s = str(s)
    if "\\" in s:
        s = s.replace("\\", "\\\\")
    return _CONTROL.sub(_show, s)


def markdown(s):
    """s safe inside a Markdown paragraph or table cell: one line, no markup, no raw HTML."""
    if s is None:
        return None
    s = terminal(str(s).replace("\r\n", " ").replace("\n", " ").replace("\r", " "))
    return _MD_META.sub(r"\\\1", s)


def path(p):
    """A file name as it may be printed: terminal() of its text."""
    return terminal(p if isinstance(p, str) else str(p))
