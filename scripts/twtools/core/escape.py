"""One way to the terminal and one way to Markdown for text that came from outside.

A string read from a file, a symbol table, a process or another host can hold anything: an
escape sequence that retitles or clears the user's terminal, a newline that starts a fake
line of output, Markdown that forges a heading or a verdict.  Every such string passes
through one of these before it is shown:

    terminal(s)   control characters (C0, DEL, C1), the bidirectional controls (U+202A-202E,
                  U+2066-2069, U+200E, U+200F, U+061C: "/opt/\\u202egnp.exe" would show as
                  "exe.png" reversed), the line and paragraph separators and lone surrogates
                  shown visibly as \\x1b, \\n, \\u202e ...; a backslash doubled so that
                  "\\x1b" typed in a name stays distinguishable from the real byte
    markdown(s)   terminal(s), then a newline shown as a space, and every Markdown
                  metacharacter that can make markup where it stands (and < > &, so that no
                  raw HTML or entity reaches a .md file) escaped with a backslash; those
                  that make markup only at the start of a line (# - + = > 1.) only there
    path(p)       terminal(str(p)), for file names in output and in error lines

A name the kernel or /proc gives (an executable's path, a command name) is bytes, not
always UTF-8.  name(b) is the one text kept for it, in the state and in every document: its
UTF-8 decoded, each byte that is not UTF-8 as the four characters \\xNN (as build/watchbpf
prints it), each backslash doubled, so that the text maps back to the bytes (name_bytes) and
the four characters \\xff typed in a name stay apart from the byte 0xff.  Such a text is
shown with shown_name(), which leaves its escapes alone (a doubled backslash, \\x80 to \\xff)
and doubles any other backslash: a text from another host that was never name()'s (a literal
"\\x1b" typed into a report) then shows as "\\\\x1b", never as the "\\x1b" a real ESC shows
as.  controls() shows control characters only, for text tw wrote itself.

HTML needs none of these: the HTML exporter escapes with html.escape.
"""
import os
import re

# C0 controls, DEL and C1 controls, the bidirectional controls (embeddings, overrides,
# isolates, marks: they reorder what a terminal shows after them), the line and paragraph
# separators, plus lone surrogates (from os.fsdecode of bad bytes).
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069"
                      "\ud800-\udfff]")
# A backslash in a name() text: a doubled one, or \xNN for a byte that is not UTF-8 (0x80 to
# 0xff: name() never writes another), kept; any other is doubled by shown_name().
_LONE_BACKSLASH = re.compile(r"\\(\\|x[89a-f][0-9a-f])|\\")
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


def shown_name(s):
    """A name() text as it is shown: every control character visibly, its escapes (a doubled
    backslash, \\xNN of a byte that is not UTF-8) kept as they are, and any other backslash
    doubled, so that what is shown maps back to one text: a real ESC shows as \\x1b, the four
    characters \\x1b (never name()'s: a report from another host may hold anything) as
    \\\\x1b.  None stays None."""
    if s is None:
        return None
    s = str(s)
    if "\\" in s:
        s = _LONE_BACKSLASH.sub(lambda m: m.group(0) if m.group(1) else "\\\\", s)
    return _CONTROL.sub(_show, s)


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


def name(raw):
    """A name from the kernel or /proc as text that keeps every byte: UTF-8, a byte that is
    not UTF-8 as \\xNN, a backslash doubled.  raw: bytes, or a str from os.fsdecode (its lone
    surrogates are the bytes it could not decode).  None stays None."""
    if raw is None:
        return None
    if isinstance(raw, str):
        raw = os.fsencode(raw)
    return raw.replace(b"\\", b"\\\\").decode("utf-8", "backslashreplace")


_NAME_ESC = re.compile(r"\\(\\|x[0-9a-f]{2})")


def name_bytes(text):
    """The bytes a name() text stands for."""
    out, at = bytearray(), 0
    for m in _NAME_ESC.finditer(text):
        out += text[at:m.start()].encode("utf-8", "surrogateescape")
        out += b"\\" if m.group(1) == "\\" else bytes([int(m.group(1)[1:], 16)])
        at = m.end()
    out += text[at:].encode("utf-8", "surrogateescape")
    return bytes(out)
