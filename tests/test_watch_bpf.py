"""tw watch's BPF programs (watch/*.bpf.c) load, verify, attach and print here, through their
loader (build/watchbpf), and what they print is JSON whatever a program's name holds.

Why it can break: a field the kernel's BTF names differently (CO-RE cannot relocate it and
the verifier refuses the program: page_fault_user's class was renamed between kernels), a map
key's layout that the loader reads otherwise than the program writes it, a file name that is
not UTF-8 or holds quotes and control bytes (a line that is not JSON loses the whole map), a
full phase that takes the other phase's room.  Skips: those of need_watch (not root, no BTF,
no tracefs); build/watchbpf not built fails.
"""
import contextlib
import json
import os
import queue
import shutil
import signal
import subprocess
import threading
import time

import pytest

from conftest import ROOT, need_watch, run
from twtools.core import escape

BUILD = ROOT / "build"
LOADER = BUILD / "watchbpf"


def _lines(text):
    return [json.loads(ln) for ln in text.splitlines() if ln.strip()]


def _maps(records):
    out = {}
    for r in records:
        if r["type"] in ("map", "hist"):
            out.update(r["data"])
    return out


@contextlib.contextmanager
def _window(out):
    """The window loader, its own process marked, writing to out: attached on entry, stopped
    by SIGINT (which prints its maps) on exit, and exited 0."""
    p = subprocess.Popen([LOADER, "window", BUILD / "watch" / "window.bpf.o", "--own", "1",
                          "--out", out], stderr=subprocess.PIPE, text=True,
                         start_new_session=True)
    try:
        _wait_file(out, '"printf"')
        yield p
    finally:
        p.send_signal(signal.SIGINT)
        _, err = p.communicate(timeout=60)
    assert p.returncode == 0, err


def _wait_file(path, needle, timeout=120):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if path.exists() and needle in path.read_text():
            return
        time.sleep(0.05)
    raise AssertionError(f"{path} never held {needle!r}")


def test_the_loader_says_a_mistake_in_one_line(tmp_path):
    """Usage errors: no traceback, no libbpf log, one line and a non-zero status."""
    assert LOADER.exists(), "make builds build/watchbpf"
    r = run([LOADER], text=True)
    assert r.returncode == 2 and r.stderr.startswith("usage: watchbpf")
    r = run([LOADER, "--help"], text=True)
    assert r.returncode == 0 and "--interval" in r.stdout
    for argv, word in (([LOADER, "exec", "x.o", "--own", "1", "--interval", "0"], "--interval"),
                       ([LOADER, "exec", "x.o", "--own", "1", "--interval", "5", "--keys", "1e9"], "--keys"),
                       ([LOADER, "window", "x.o", "--own", "1"], "--out"),
                       ([LOADER, "window", "x.o", "--own", "1", "--bogus", "2"], "--bogus"),
                       ([LOADER, "exec", str(tmp_path / "none.o"), "--own", "1", "--interval", "5"],
                        "none.o")):
        r = run(argv, text=True)
        assert r.returncode == 1, (argv, r.stderr)
        assert len(r.stderr.strip().splitlines()) == 1 and word in r.stderr, (argv, r.stderr)


HOSTILE = b'tw-a"b\\c\nd\x1b[31m,e\xff\xc3(\\xfe'


def test_exec_counts_a_hostile_name_and_a_full_phase(tmp_path):
    """One interval: a program whose name holds a quote, a backslash, a newline, an escape, a
    comma, two bytes that are not UTF-8 and the four characters \\xfe comes out as one JSON key
    (the bad bytes as \\xff and \\xc3, every backslash doubled), counted twice with its first
    and last times; 40 distinct programs against a 16-key phase fill it, and the keyless count still has every exec."""
    need_watch()
    d = tmp_path / "bin"
    d.mkdir()
    true = shutil.which("true")
    hostile = os.path.join(os.fsencode(d), HOSTILE)
    os.link(true, hostile)
    many = []
    for i in range(40):
        p = d / f"tw-many-{i}"
        os.link(true, p)
        many.append(p)
    # --own 1: no exec here is a child of init, so none is left out as tw's own.
    p = subprocess.Popen([LOADER, "exec", BUILD / "watch" / "exec.bpf.o", "--own", "1",
                          "--interval", "3", "--keys", "16"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, start_new_session=True)
    seen = queue.Queue()
    try:
        assert "Counting" in p.stdout.readline()
        reader = threading.Thread(target=lambda: [seen.put(x) for x in p.stdout], daemon=True)
        reader.start()
        sh = tmp_path / "run.sh"
        sh.write_bytes(b"\n".join([b"'" + hostile + b"'"] * 2 + [os.fsencode(m) for m in many]) + b"\n")
        subprocess.run(["/bin/sh", str(sh)], check=True)
        # past one interval, the phase flipped: its records, up to the keyless count that holds
        # every exec run above (read as they come; 120 s is a hang guard)
        got, n = [], 0
        while n < 42:
            line = seen.get(timeout=120)
            got.append(line)
            r = json.loads(line) if line.strip() else {}
            n += sum(v for k, v in (r.get("data") or {}).items()
                     if r.get("type") == "map" and k.startswith("@n"))
    finally:
        p.send_signal(signal.SIGINT)
        p.wait(timeout=60)
    reader.join(timeout=60)
    err = p.stderr.read()
    assert p.returncode == 0, err
    while not seen.empty():
        got.append(seen.get())
    recs = _lines("".join(got))
    execs, n = {}, 0
    for r in recs:
        for name, val in (r["data"].items() if r["type"] == "map" else ()):
            if name.startswith("@exec"):
                execs.update(val)
            elif name.startswith("@n"):
                n += val
    # escape.name's text: the bad bytes as \xNN, a backslash doubled (the literal \xfe at the
    # end stays apart from a byte 0xfe)
    st = os.stat(true)                    # every name here is a hard link of true: its file
    want = f"{escape.name(hostile)},{st.st_dev},{st.st_ino},0"
    assert escape.name_bytes(want.rsplit(",", 3)[0]) == hostile
    assert execs.get(want) == 2, [k for k in execs if "tw-a" in k]
    ours = sum(v for k, v in execs.items() if "tw-many-" in k or "tw-a" in k)
    assert ours < 42 <= n, (ours, n)                 # the phase filled; n counted them all
    assert len(execs) <= 2 * 16
    paths = {}
    for r in recs:
        for name, val in (r["data"].items() if r["type"] == "map" else ()):
            if name.startswith("@path"):
                paths.update(val)
    # the file's own path, resolved in the kernel from the name it was first run by (a hard
    # link is the same file, its dentry the link's): absolute, escaped as the name is
    assert paths.get(f"{st.st_dev},{st.st_ino}") == escape.name(hostile), paths


def test_window_loads_attaches_and_counts_its_own_calls(tmp_path):
    """A window around a shell that writes to a file: every map is printed, the shell's write
    latency is in a histogram keyed by the file's kind (8, a regular file), and the loader's
    own process is marked own."""
    need_watch()
    out = tmp_path / "w.ndjson"
    with _window(out) as p:
        subprocess.run(["sh", "-c", f"echo hello > '{tmp_path / 'f.txt'}'"], check=True)
    maps = _maps(_lines(out.read_text()))
    assert {"@calls", "@exec", "@exit", "@fork", "@vsys", "@wlat", "@wsum"} <= set(maps)
    own = [k for k in maps["@calls"] if k.split(",")[0] == str(p.pid)]
    assert own and all(k.endswith(",1") for k in own), own
    files = {k: v for k, v in maps["@wlat"].items() if k.split(",")[3] == "8"}
    assert files and all(b["count"] > 0 and b["min"] <= b["max"] for v in files.values() for b in v)
    assert all(maps["@wsum"][k] > 0 for k in files)


@pytest.mark.parametrize("src", sorted(p.name for p in (ROOT / "watch").glob("*.bpf.c")))
def test_program_header(src):
    head = (ROOT / "watch" / src).read_text().split("*/", 1)[0]
    for word in ("tw watch", "Loaded", "Overhead" if src.startswith("exec") else "slow path"):
        assert word in head, f"{src}: header lacks {word}"


EXIT_LAST = """; a static 32-bit program with no library whose text ends with its exit call: the
; return address of that int 0x80 is the end of the text (mm->end_code)
section .text
global _start
_start:
    mov eax, 20         ; getpid (i386), from the middle of the text
    int 0x80
    mov eax, 1          ; exit (i386): the last instruction of the text
    xor ebx, ebx
    int 0x80
"""


def test_the_exit_call_at_the_end_of_a_static_text_is_from_the_text(tmp_path):
    """The last instruction of a static program is its exit's int 0x80; the address the
    kernel keeps for it (the one after) is mm->end_code, which `ip < end_code` put outside
    the text: the exit was labelled as from a library, compat_int80_library, in a program
    with no library."""
    need_watch()
    from conftest import assemble32
    assemble32(EXIT_LAST, tmp_path / "tw-exitlast")
    out = tmp_path / "w.ndjson"
    with _window(out):
        for _ in range(3):
            q = subprocess.run([tmp_path / "tw-exitlast"])
            if q.returncode != 0 and q.returncode < 0:
                pytest.skip("32-bit programs do not run here")
    maps = _maps(_lines(out.read_text()))
    mine = {k: v for k, v in maps["@calls"].items() if "tw-exitlast" in k}
    assert mine, sorted(maps["@calls"])[:5]
    assert not [k for k in mine if "other" in k.split(",")], mine
