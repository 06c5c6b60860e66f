"""The one ELF reader (machine/elf.py) and everything built on it, against hostile bytes.

What it checks: each hostile case issue 19 lists (a section-name table at 0x7fffffff, a huge
section size, a string table without its NUL, a symbol table running off the end, 65535
section headers past the end, a truncated file), made from real files, gives `tw classify`
and `tw scan` one line and exit 3, never a traceback; /dev/zero and a FIFO are refused without
being read; a run path leading to a FIFO or a damaged libc.so.6 is one line, exit 3; a symbol
name holding terminal escapes is printed escaped; classify works without objdump on PATH (it
never hands the path to another program); and thousands of seeded mutations of real ELF
files (this project's programs and /bin/true) parse, scan and classify to an answer or an
ElfError, never another exception, a hang or a NaN.

Why it can break: a new field read from the bytes without a bounds check; a reader that
opens the path again; a printer that forgets core.escape."""
import json
import os
import random
import signal

import pytest

import elfcases
from conftest import BUILD, ROOT, need_tool, run
from twtools.machine import classify, elf, scan

TW = ROOT / "scripts" / "tw"
SEEDS = ["timewrite-32-int80", "timewrite-64-syscall", "timewrite-32-vdso", "syscost-64-vsyscall"]
CASES = 3000


def tw(*args, **kw):
    kw.setdefault("timeout", 120)
    return run([str(TW), *map(str, args)], text=True, **kw)


def one_line(p, prog):
    assert "Traceback" not in p.stderr, p.stderr
    lines = [l for l in p.stderr.splitlines() if l.startswith(prog)]
    assert len(lines) == 1, p.stderr
    return lines[0]


@pytest.fixture(scope="module")
def seeds(build):
    out = {n: (BUILD / n).read_bytes() for n in SEEDS}
    out["true"] = open("/bin/true", "rb").read()
    return out


@pytest.mark.parametrize("case", sorted(elfcases.HOSTILE))
def test_each_hostile_case_is_one_line_exit_3(tmp_path, seeds, case):
    bad = tmp_path / "bad"
    bad.write_bytes(elfcases.HOSTILE[case](seeds["timewrite-64-syscall"]))
    with pytest.raises(elf.ElfError):
        e = elf.load(bad)
        e.symbols          # the symbol tables are read when first asked for
    p = tw("classify", "--no-libc", bad)
    assert p.returncode == 3, (p.returncode, p.stdout, p.stderr)
    assert "damaged ELF file" in one_line(p, "tw classify")
    p = tw("scan", "--json", "--jobs", "1", bad)
    assert p.returncode == 1, p.stderr
    recs = scan.read_stream(p.stdout.splitlines())
    probs = [r for r in recs if r["record"] == "problem"]
    assert len(probs) == 1 and probs[0]["kind"] == "damaged ELF", probs


def test_dev_zero_and_a_fifo_are_refused_unread(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for path, what in (("/dev/zero", "is a device"), (fifo, "is a FIFO")):
        p = tw("classify", path, timeout=20)
        assert p.returncode == 3 and what in one_line(p, "tw classify"), p.stderr


def _program_with_runpath(tmp_path, libdir):
    need_tool("gcc")
    src = tmp_path / "hello.c"
    src.write_text("#include <unistd.h>\nint main(void) { return write(1, \"\", 0); }\n")
    exe = tmp_path / "hello"
    p = run(["gcc", "-o", exe, src, f"-Wl,-rpath,{libdir}", "-Wl,--enable-new-dtags"], text=True)
    assert p.returncode == 0, p.stderr
    return exe


def test_run_path_to_a_fifo_or_a_damaged_libc(tmp_path):
    libdir = tmp_path / "lib"
    libdir.mkdir()
    exe = _program_with_runpath(tmp_path, libdir)
    os.mkfifo(libdir / "libc.so.6")
    p = tw("classify", exe, timeout=30)
    assert p.returncode == 3 and "is a FIFO" in one_line(p, "tw classify"), p.stderr
    os.unlink(libdir / "libc.so.6")
    real = classify.find_library("libc.so.6", elf.load(exe))
    (libdir / "libc.so.6").write_bytes(elfcases.shstrtab_far(open(real, "rb").read()))
    p = tw("classify", exe, timeout=60)
    assert p.returncode == 3 and "damaged ELF file" in one_line(p, "tw classify"), p.stderr


def test_symbol_names_reach_the_terminal_escaped(tmp_path):
    need_tool("nasm")
    need_tool("ld")
    (tmp_path / "e.asm").write_text(
        "bits 64\nglobal _start\nglobal EVILNAMEEVILNAMEX:function\nsection .text\n"
        "_start: call EVILNAMEEVILNAMEX\nEVILNAMEEVILNAMEX: int 0x80\n ret\n")
    assert run(["nasm", "-f", "elf64", "-o", tmp_path / "e.o", tmp_path / "e.asm"]).returncode == 0
    assert run(["ld", "-o", tmp_path / "e", tmp_path / "e.o"]).returncode == 0
    data = (tmp_path / "e").read_bytes()
    evil = b"\x1b]0;pwned\x07\x1b[2J"            # retitle, then clear the terminal
    assert len(evil) < len(b"EVILNAMEEVILNAMEX")
    name = tmp_path / "e\x1b[31m\nname"
    name.write_bytes(data.replace(b"EVILNAMEEVILNAMEX", evil.ljust(17, b"Y")))
    for args in (["classify", "--no-libc", name], ["scan", "--jobs", "1", tmp_path]):
        p = tw(*args)
        assert "\x1b" not in p.stdout + p.stderr, (args, p.stdout)
        assert "\\x1b]0;pwned\\x07" in p.stdout or args[0] == "scan", p.stdout
        assert "e\\x1b[31m\\nname" in p.stdout, p.stdout


def test_classify_never_runs_objdump(tmp_path, build):
    """The file is decoded from the bytes read, by capstone: an objdump first on PATH that
    records being run is never run (so a file swapped after the read can no longer give a
    mixed answer)."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    marker = tmp_path / "objdump-ran"
    (bindir / "objdump").write_text(f"#!/bin/sh\necho \"$@\" >> {marker}\nexit 99\n")
    (bindir / "objdump").chmod(0o755)
    env = dict(os.environ, PATH=f"{bindir}:{os.environ['PATH']}")
    p = tw("classify", "--json", BUILD / "timewrite-64-int80", env=env)
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)[0]
    assert doc["by_kind"]["int80"]["sites"] == 3 and doc["libc"]["write"]["entry"] == "syscall"
    assert not marker.exists(), marker.read_text()


class Hang(Exception):
    pass


def _alarm(signum, frame):
    raise Hang()


INTERESTING = [0, 1, 2, 0x7F, 0xFF, 0xFFFF, 0x7FFFFFFF, 0xFFFFFFFF, 1 << 63, (1 << 64) - 1]


def mutate(rng, data):
    """One seeded mutation of real ELF bytes: a header field, a section or segment header
    field set to an interesting value, a few bytes flipped in the headers or anywhere, or a
    truncation."""
    b = bytearray(data)
    how = rng.randrange(6)
    if how == 0:
        field = rng.choice(list(elfcases.EHF[64 if data[4] == 2 else 32]))
        return elfcases.set_header(data, field, rng.choice(INTERESTING + [len(data), len(data) - 1]))
    if how == 1:
        secs = elfcases.sections(data)
        i = rng.randrange(len(secs))
        field = rng.choice(["type", "offset", "size", "link"])
        v = rng.choice(INTERESTING + [len(data), len(data) - rng.randrange(1, 64), 2, 3, 11])
        return elfcases.set_section(data, i, field, v)
    if how == 2:            # the file, program and section headers
        bits, shoff, shentsize, shnum, _, phoff, phentsize, phnum = elfcases._hdr(data)
        spans = [(0, 64), (phoff, phoff + phentsize * phnum), (shoff, shoff + shentsize * shnum)]
        lo, hi = rng.choice(spans)
        for _ in range(rng.randint(1, 8)):
            b[rng.randrange(lo, hi)] = rng.randrange(256)
        return bytes(b)
    if how == 3:
        for _ in range(rng.randint(1, 32)):
            b[rng.randrange(len(b))] = rng.randrange(256)
        return bytes(b)
    if how == 4:
        return data[:rng.randrange(len(data))]
    name = rng.choice(sorted(elfcases.HOSTILE))
    return elfcases.HOSTILE[name](data)


def exercise(data, full):
    """Everything that reads an ELF file, on data; ElfError is an answer, anything else is
    a bug."""
    try:
        e = elf.Elf(data, "case")
        e.symbols, e.code_regions, e.data_symbols
        e.function_at(e.entry)
        r = scan.scan_elf(e)
        json.dumps(r, allow_nan=False)
        if full and e.machine in (elf.EM_386, elf.EM_X86_64):
            classify.summarise_sites(classify.sites_of(e))
    except elf.ElfError as err:
        assert "\n" not in str(err)


def test_fuzz_seeded_mutations(seeds):
    """CASES mutations with a fixed seed: the same cases on every run, so a failure names its
    case number and reproduces."""
    rng = random.Random(20261123)
    names = sorted(seeds)
    old = signal.signal(signal.SIGALRM, _alarm)
    kinds = {"answer": 0, "ElfError": 0}
    try:
        for case in range(CASES):
            name = names[case % len(names)]
            data = mutate(rng, seeds[name])
            signal.alarm(10)
            try:
                exercise(data, full=case % 50 == 0)
            except Hang:
                pytest.fail(f"case {case} (of {name}) ran over 10 s: a hang")
            except Exception as err:     # noqa: BLE001 - any other exception is the bug
                raise AssertionError(f"case {case} (of {name}): {type(err).__name__}: {err}") from err
            finally:
                signal.alarm(0)
            try:
                elf.Elf(data, "case").symbols
                kinds["answer"] += 1
            except elf.ElfError:
                kinds["ElfError"] += 1
    finally:
        signal.signal(signal.SIGALRM, old)
    # Both outcomes occur: the mutations reach the checks and also leave files that parse.
    assert kinds["answer"] > CASES // 20 and kinds["ElfError"] > CASES // 20, kinds
