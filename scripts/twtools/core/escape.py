"""One way to the terminal and one way to Markdown for text that came from outside.

A string read from a file, a symbol table, a process or another host can hold anything: an
escape sequence that retitles or clears the user's terminal, a newline that starts a fake
line of output, Markdown that forges a heading or a verdict.  Every such string passes
through one of these before it is shown:

    terminal(s)   control characters (C0, DEL, C1) and lone surrogates shown visibly as
                  \\x1b, \\n, \\u009b ...; a backslash doubled so that "\\x1b" typed in a
                  name stays distinguishable from the real byte
    markdown(s)   terminal(s), then a newline shown as a space, and every Markdown
                  metacharacter that can make markup where it stands (and < > &, so that no
                  raw HTML or entity reaches a .md file) escaped with a backslash; those
                  that make markup only at the start of a line (# - + = > 1.) only there
    path(p)       terminal(str(p)), for file names in output and in error lines

HTML needs none of these: the HTML exporter escapes with html.escape.
"""
import re

# C0 controls, DEL and C1 controls, plus lone surrogates (from os.fsdecode of bad bytes).
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]")
_NAMED = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}
# Characters that make markup wherever they stand: code spans, emphasis, links and images
# (a ']' then '(' ), tables' cell bars, GFM strikethrough, raw HTML and entities.  Escaped
# everywhere, with a backslash (CommonMark lets every ASCII punctuation be escaped).
_MD_ANYWHERE = re.compile(r"([\\`*_\[\]|~<>&])")
# Characters that make markup only at the start of a line: an ATX heading (#), a list item
# (- + *, or digits then . or )), a block quote (>), a setext underline or thematic break
# (= -).  markdown() makes one line of its text, so the start of the text is the only start
# of a line it can create; only there are these escaped, so that "6.18.44-fc" stays legible.
_MD_LINE_START = re.compile(r"^(\s*)([#+\-=>]|\d{1,9}(?=[.)](?:\s|$)))")


def _show(m):
    c = m.group(0)
    if c in _NAMED:
        return _NAMED[c]
    o = ord(c)
    return f"\\x{o:02x}" if o < 0x100 else f"\\u{o:04x}"


def controls(s):
    """s with every control character shown visibly, and nothing else changed (no backslash
    doubled): for text tw wrote itself that may carry a value it did not check."""
    return None if s is None else _CONTROL.sub(_show, str(s))


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
    s = _MD_ANYWHERE.sub(r"\\\1", s)
    m = _MD_LINE_START.match(s)
    if m:
        lead, mark = m.group(1), m.group(2)
        # digits before '.' or ')': escape the punctuation that follows them
        if mark[0].isdigit():
            at = m.end()
            s = s[:at] + "\\" + s[at:]
        else:
            s = lead + "\\" + s[len(lead):]
    return s


def path(p):
    """A file name as it may be printed: terminal() of its text."""
    return terminal(p if isinstance(p, str) else str(p))
