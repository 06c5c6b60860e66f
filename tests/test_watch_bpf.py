"""tw watch's BPF programs (watch/*.bpf.c) load, verify, attach and print here, through their
loader (build/watchbpf), and what they print is JSON whatever a program's name holds.

Why it can break: a field the kernel's BTF names differently (CO-RE cannot relocate it and
the verifier refuses the program: page_fault_user's class was renamed between kernels), a map
key's layout that the loader reads otherwise than the program writes it, a file name that is
not UTF-8 or holds quotes and control bytes (a line that is not JSON loses the whole map), a
full phase that takes the other phase's room, a key that holds a name again (one file behind
many links filling the map), one budget for both bitnesses (64-bit programs crowding a 32-bit
one out), drops counted without their bitness.  Skips: those of need_watch (not root, no BTF,
no tracefs), 32-bit programs cannot run here (the oracle's fact); build/watchbpf not built
fails.
"""
import contextlib
import json
import os
import shutil
import signal
import subprocess
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


@contextlib.contextmanager
def _exec_loader(*keys):
    """The exec tracer's loader, counting every exec (--own 1: no exec here is a child of
    init), its phase flipped only at the stop; yields a list that holds its output records
    once stopped by SIGINT (which prints both phases)."""
    p = subprocess.Popen([LOADER, "exec", BUILD / "watch" / "exec.bpf.o", "--own", "1",
                          "--interval", "3600", *keys], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, start_new_session=True)
    recs = []
    try:
        assert "Counting" in p.stdout.readline()
        yield recs
    finally:
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=60)
    assert p.returncode == 0, err
    recs.extend(_lines(out))


def _phases(recs):
    """Both phases' maps merged: {"@exec": {...}, "@started": ..., "@path": ..., "@why": ...,
    "@n": {"64": n, "32": n}}."""
    out = {"@n": {"64": 0, "32": 0}}
    for r in recs:
        for name, val in (r["data"].items() if r["type"] == "map" else ()):
            if name[:-1] == "@n":
                for b in ("64", "32"):
                    out["@n"][b] += val[b]
            else:
                out.setdefault(name[:-1], {}).update(val)
    return out


def _key(path, is32=None):
    """A file's key as the loader prints it: dev,inode,generation (,bitness)."""
    from twtools.machine import process
    st = os.stat(path)
    k = f"{st.st_dev},{st.st_ino},{process.generation(path)}"
    return k if is32 is None else f"{k},{1 if is32 else 0}"


def _sh(tmp_path, lines):
    sh = tmp_path / f"run-{time.monotonic_ns()}.sh"
    sh.write_bytes(b"\n".join(os.fsencode(x) if isinstance(x, (str, os.PathLike)) else x
                              for x in lines) + b"\n")
    subprocess.run(["/bin/sh", str(sh)], check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)


def test_exec_keys_files_and_keeps_a_hostile_name_as_a_value(tmp_path):
    """One file whose name holds a quote, a backslash, a newline, an escape, a comma, two bytes
    that are not UTF-8 and the four characters \\xfe, run twice, comes out as one key (its
    device, inode, generation and bitness), its name as started and its path as JSON values
    (the bad bytes as \\xff and \\xc3, every backslash doubled); one 64-bit file behind 40
    symbolic links, each run once, is one key counted 40 times (keyed by the name as started,
    it took 40 keys: a symlink farm of 4096 filled the map); a 32-bit program is keyed 32-bit
    and counted by bitness."""
    need_watch()
    from conftest import need_supported
    need_supported("syscost", "32-int80")
    d = tmp_path / "bin"
    d.mkdir()
    hostile = os.path.join(os.fsencode(d), HOSTILE)
    shutil.copy(shutil.which("true"), hostile)          # a file of its own
    target = d / "tw-target"
    shutil.copy(shutil.which("true"), target)
    links = [d / f"tw-link-{i}" for i in range(40)]
    for ln in links:
        ln.symlink_to(target)
    p32 = d / "tw-p32"
    shutil.copy(BUILD / "syscost-32-int80", p32)
    true = os.path.realpath(shutil.which("true"))
    with _exec_loader() as recs:
        _sh(tmp_path, [b"'" + hostile + b"'"] * 2 + links + [p32] * 3 + [true])
    m = _phases(recs)
    # the generation the kernel read is the one machine.process reads (i_generation, or the
    # change time where a file system sets none, as this image's own files have)
    assert _key(true, False) in m["@exec"], [k for k in m["@exec"] if k.startswith(
        f"{os.stat(true).st_dev},{os.stat(true).st_ino},")]
    k = _key(hostile, False)
    assert m["@exec"].get(k) == 2, [x for x in m["@exec"] if x.startswith(k.split(",")[0])][:5]
    assert m["@started"][k] == escape.name(hostile)
    assert escape.name_bytes(m["@started"][k]) == hostile
    assert m["@path"][k[:-2]] == escape.name(hostile) and m["@why"][k[:-2]] == 0
    t = _key(target, False)
    assert m["@exec"][t] == 40 and m["@started"][t] == str(links[-1])
    assert m["@path"][t[:-2]] == str(target)           # the file's own path, not a link's
    assert not [x for x in m["@started"].values() if "tw-link-" in x and x != str(links[-1])]
    q = _key(p32, True)
    assert m["@exec"][q] == 3 and m["@n"]["32"] >= 3


def test_a_full_64bit_budget_leaves_32bit_room_and_drops_are_counted_by_bitness(tmp_path):
    """16 keys a phase for 64-bit files, 64 for 32-bit ones: 40 distinct 64-bit files fill
    the first, a 32-bit program run after them still has its key and its 3 execs, and 100
    distinct 32-bit files past their own budget are counted in the 32-bit exec total, not the
    64-bit one (a full map's drops were counted as 64-bit: the report then said "nothing would
    stop")."""
    need_watch()
    from conftest import need_supported
    need_supported("syscost", "32-int80")
    d = tmp_path / "bin"
    d.mkdir()
    many64 = [d / f"tw-64-{i}" for i in range(40)]
    for x in many64:
        shutil.copy(shutil.which("true"), x)
    src32 = BUILD / "syscost-32-int80"
    p32 = d / "tw-p32"
    shutil.copy(src32, p32)
    many32 = [d / f"tw-32-{i}" for i in range(100)]
    for x in many32:
        shutil.copy(src32, x)
    with _exec_loader("--keys", "16", "--keys32", "64") as recs:
        _sh(tmp_path, many64 + [p32] * 3 + many32)
    m = _phases(recs)
    bits = {b: [v for x, v in m["@exec"].items() if x.endswith(f",{1 if b == '32' else 0}")]
            for b in ("64", "32")}
    assert len(bits["64"]) <= 2 * 16 and len(bits["32"]) <= 2 * 64
    assert m["@exec"][_key(p32, True)] == 3              # its own budget: never crowded out
    assert m["@n"]["64"] - sum(bits["64"]) >= 40 - 16     # the 64-bit drops, counted 64-bit
    ours32 = sum(m["@exec"].get(_key(x, True), 0) for x in many32)
    assert ours32 <= 64 and m["@n"]["32"] - sum(bits["32"]) >= 100 - ours32 > 0


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
