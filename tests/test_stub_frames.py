"""Profilers and debuggers can walk from inside a kernel-entry stub back to main.

A sample taken during a system call has the user-mode program counter inside
tw_syscall3 (or tw_syscall3_jmp, or tw_loop3: the loop shapes of tw_syscall.h).  The C code is built without frame pointers, so perf
--call-graph dwarf, gdb and libunwind find the caller only through the call
frame information (CFI) in .eh_frame, which ld indexes in .eh_frame_hdr, and
they name the code by the ELF symbol's type and size.  NASM writes neither;
asm/include/tw.inc's TW_FUNC, TW_ENDFUNC, TW_PUSH/TW_POP and CFI_* macros write both.

This breaks when a stub loses TW_FUNC/TW_ENDFUNC (a function becomes a FUNC
of size 0 and gets no FDE), when a push or pop is not followed by its CFI or
the CFI gives a wrong offset (a debugger then reads the return address from
the wrong slot), when a stub that leaves by pop <reg>; jmp *<reg> does not say
that the return address is then in that register, when the hand-written .eh_frame is malformed (ld then drops
.eh_frame_hdr for the whole program, or readelf cannot decode it), or when
perf stops naming main above tw_syscall3.  The CFI is checked against the
code itself: a small model replays each stub's pushes, pops, calls and rets
and compares the stack depth with readelf's decoded table at every
instruction of every function."""
import re
import struct
import subprocess

import pytest

from conftest import BUILD, ROOT, WRITE_VARIANTS, need_supported, need_tool, run
from twtools.machine import registry

OBJECTS = sorted(BUILD.glob("obj/*/asm/*.o"))
PROGRAM_BINARIES = sorted(p for p in BUILD.glob("*-*")
                          if p.name.split("-", 1)[0] in ("timewrite", "syscost"))


def tool(*cmd):
    p = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, (cmd, p.stderr)
    return p.stdout


def symbol(path, name="tw_syscall3"):
    """(value, size, type, bind) of a defined symbol, from readelf --syms."""
    for line in tool("readelf", "--syms", "--wide", path).splitlines():
        f = line.split()
        if len(f) == 8 and f[7] == name and f[6] != "UND":
            return int(f[1], 16), int(f[2], 0), f[3], f[4]
    pytest.fail(f"{path}: no {name} in the symbol table")


def functions(path):
    """[(name, value, size, type, bind)] of the functions an object defines, by address."""
    out = []
    for line in tool("readelf", "--syms", "--wide", path).splitlines():
        f = line.split()
        if len(f) == 8 and f[3] == "FUNC" and f[6] != "UND":
            out.append((f[7], int(f[1], 16), int(f[2], 0), f[3], f[4]))
    return sorted(out, key=lambda x: x[1])


def section(path, name):
    """(address, file offset, size) of a section, from readelf -S."""
    for line in tool("readelf", "-S", "--wide", path).splitlines():
        m = re.match(rf"^\s*\[\s*\d+\]\s+{re.escape(name)}\s+\S+\s+([0-9a-f]+)\s+([0-9a-f]+)"
                     r"\s+([0-9a-f]+)", line)
        if m:
            return tuple(int(x, 16) for x in m.groups())
    return None


def fdes(path):
    """[(start, end, column names, rows)] from readelf --debug-dump=frames-interp.

    rows are (location, {column: rule}), the table readelf decodes from the
    CFA instructions; columns are "CFA", the registers and "ra".  An FDE with
    no instructions of its own (a stub that never moves its stack pointer)
    gets no table from readelf: its one row is its CIE's."""
    out = subprocess.run(["readelf", "--debug-dump=frames-interp", str(path)],
                         capture_output=True, text=True, timeout=120).stdout
    cies, result, cur, cols = {}, [], None, None
    for line in out.splitlines():
        # "r2 (rcx)": the return address is held in a register (pop <reg>; jmp *<reg>).
        line = re.sub(r"\br(\d+) \((\w+)\)", r"reg:\2", line)
        m = re.match(r"^([0-9a-f]+) [0-9a-f]+ [0-9a-f]+ (?:CIE|FDE cie=([0-9a-f]+) "
                     r"pc=([0-9a-f]+)\.\.([0-9a-f]+))", line)
        if m:
            if m.group(2) is None:
                cur = ("CIE", 0, [], [])
                cies[int(m.group(1), 16)] = cur
            else:
                cur = (int(m.group(3), 16), int(m.group(4), 16), [], [],
                       cies.get(int(m.group(2), 16)))
                result.append(cur)
            cols = None
            continue
        if cur is None:
            continue
        f = line.split()
        if f[:2] == ["LOC", "CFA"]:
            cols = f[1:]
            cur[2].extend(cols)
        elif cols and len(f) == len(cols) + 1 and re.fullmatch(r"[0-9a-f]+", f[0]):
            cur[3].append((int(f[0], 16), dict(zip(cols, f[1:]))))
        elif not line.strip():
            cur = None
    for i, (start, end, fcols, rows, cie) in enumerate(result):
        if not rows and cie and cie[3]:
            fcols, rows = cie[2], [(start, cie[3][-1][1])]
        result[i] = (start, end, fcols, rows)
    return result


def fde_for(path, start, size):
    found = [f for f in fdes(path) if f[0] == start and f[1] == start + size]
    assert len(found) == 1, (path, hex(start), size, [(hex(a), hex(b)) for a, b, *_ in fdes(path)])
    return found[0]


def disassemble(path):
    """(file format, [(address, length, instruction)]) of .text, AT&T syntax."""
    out = tool("objdump", "-d", "--no-show-raw-insn", "-j", ".text", path)
    fmt = re.search(r"file format (\S+)", out).group(1)
    insns = []
    for line in out.splitlines():
        m = re.match(r"^\s+([0-9a-f]+):\s+(.*?)\s*$", line)
        if m:
            insns.append([int(m.group(1), 16), 0, re.sub(r"\s+", " ", m.group(2))])
    for i in range(len(insns) - 1):
        insns[i][1] = insns[i + 1][0] - insns[i][0]
    return fmt, [tuple(i) for i in insns]


def ids(paths, depth=3):
    return ["/".join(p.parts[-depth:]) for p in paths]


# --- the objects NASM made ---------------------------------------------------------

def test_every_push_and_pop_goes_through_the_macros():
    """A push or pop written out by hand can miss its CFI rows, which test_cfi_matches_the_code
    would catch only for code a build assembles; TW_PUSH/TW_POP emit them with the
    instruction (tw.inc), so outside tw.inc itself no stub source has a bare push or pop."""
    sources = sorted((ROOT / "asm").glob("*/*.asm")) + sorted((ROOT / "asm" / "include").glob("*.inc"))
    bare = [f"{p.relative_to(ROOT)}:{n}: {line.strip()}"
            for p in sources if p.name != "tw.inc"
            for n, line in enumerate(p.read_text().splitlines(), 1)
            if re.match(r"^\s*(push|pop)\s", line.split(";", 1)[0])]
    assert len(sources) >= 9
    assert bare == [], "\n".join(bare)


def test_there_are_stub_objects(build):
    assert OBJECTS, f"no stub objects under {BUILD}/obj/*/asm: run make"


@pytest.mark.parametrize("obj", OBJECTS, ids=ids(OBJECTS))
def test_stub_functions_are_sized(build, obj):
    """Every function is FUNC, GLOBAL and sized; tw_syscall3 is one of them; together they
    are all of .text but for the nops that align one function after another."""
    need_tool("readelf")
    need_tool("objdump")
    funcs = functions(obj)
    assert "tw_syscall3" in [f[0] for f in funcs], funcs
    _, _, text_size = section(obj, ".text")
    end = 0
    for name, value, size, typ, bind in funcs:
        assert (typ, bind) == ("FUNC", "GLOBAL") and size > 0, (name, typ, bind, size)
        assert value >= end, f"{name} overlaps the function before it"
        end = value + size
    assert funcs[0][1] == 0 and end == text_size, (funcs, text_size)
    _, insns = disassemble(obj)
    outside = [(a, i) for a, _, i in insns
               if not any(v <= a < v + n for _, v, n, _, _ in funcs)]
    assert all(i == "nop" for _, i in outside), outside


@pytest.mark.parametrize("obj", OBJECTS, ids=ids(OBJECTS))
def test_stub_has_an_fde_covering_each_function(build, obj):
    need_tool("readelf")
    out = tool("readelf", "--debug-dump=frames", obj)
    assert "Contents of the .eh_frame section" in out, out
    for name, value, size, _, _ in functions(obj):
        assert re.search(rf"FDE cie=[0-9a-f]+ pc=0*{value:x}\.\.0*{value + size:x}\b", out), \
            (name, out)


def stack_pointer(fmt):
    return ("esp", 4) if fmt == "elf32-i386" else ("rsp", 8)


@pytest.mark.parametrize("obj", OBJECTS, ids=ids(OBJECTS))
def test_cfi_matches_the_code(build, obj):
    """At every instruction of every function the CFA is sp + pointer + what the function
    pushed, each register saved by a push is found where that push put it, and the return
    address is where the code last put it.

    The model: a push moves sp down one pointer and saves its register; a pop undoes
    both, except a pop with nothing pushed, which takes the return address itself into
    its register (the CFA is then sp, and the return address in that register); a call
    returns to the next instruction with sp unchanged; the code after a ret, or after the
    jmp through the register that holds the return address, starts a frame of its own (it
    is only reached by a jump taken before any push, or by a call, as the 32-bit stubs'
    frame for sysenter is).  Any other write to sp fails the test, since the model cannot
    follow it."""
    need_tool("readelf")
    need_tool("objdump")
    fmt, insns = disassemble(obj)
    sp, ptr = stack_pointer(fmt)
    for name, value, size, _, _ in functions(obj):
        start, end, cols, rows = fde_for(obj, value, size)
        assert cols[0] == "CFA" and cols[-1] == "ra", cols
        code = [x for x in insns if value <= x[0] < value + size]
        assert code and code[0][0] == start and code[-1][0] < end
        depth, saved, ra_in = 0, {}, None
        for addr, _, ins in code:
            row = [r for loc, r in rows if loc <= addr][-1]
            regs = set(cols[1:-1]) | set(saved)
            have = {k: row.get(k, "u") for k in ["CFA", "ra", *regs]}
            want = {"CFA": f"{sp}+{ptr + depth}",
                    "ra": f"reg:{ra_in}" if ra_in else f"c-{ptr}"}
            want.update((reg, f"c-{saved[reg]}" if reg in saved else "u") for reg in regs)
            assert have == want, (f"{obj.name}, {name} at {addr:#x} ({ins}): CFI says {have}, "
                                  f"the code {want}")
            op, _, args = ins.partition(" ")
            reg = args.lstrip("%")
            if op == "push":
                depth += ptr
                saved[reg] = ptr + depth
            elif op == "pop" and depth == 0 and ra_in is None:
                depth, ra_in = -ptr, reg          # the return address, into a register
            elif op == "pop":
                depth -= ptr
                saved.pop(reg, None)
            elif op == "ret" or (op == "jmp" and ra_in and args == f"*%{ra_in}"):
                depth, saved, ra_in = 0, {}, None
            elif re.search(rf",%{sp}$", ins) or (op in ("leave", "enter")):
                pytest.fail(f"{obj.name} at {addr:#x}: {ins} moves {sp} in a way the model "
                            "cannot follow; extend test_cfi_matches_the_code")


# --- the linked programs -----------------------------------------------------------

def eh_frame_hdr_starts(path):
    """Function start addresses in the binary search table of .eh_frame_hdr.

    That table is what libunwind and glibc use to find an FDE; ld leaves it
    out ("error in .eh_frame; no .eh_frame_hdr table will be created") when
    it cannot parse an object's .eh_frame."""
    hdr = section(path, ".eh_frame_hdr")
    assert hdr, f"{path.name}: no .eh_frame_hdr"
    addr, off, size = hdr
    with open(path, "rb") as f:
        f.seek(off)
        data = f.read(size)
    version, ptr_enc, count_enc, table_enc = data[:4]
    # DW_EH_PE_pcrel|sdata4, DW_EH_PE_udata4, DW_EH_PE_datarel|sdata4: what ld writes.
    assert (version, ptr_enc, count_enc, table_enc) == (1, 0x1B, 0x03, 0x3B), data[:4]
    (count,) = struct.unpack_from("<I", data, 8)
    return [addr + struct.unpack_from("<i", data, 12 + 8 * i)[0] for i in range(count)]


STUB_FUNCTIONS = ("tw_syscall3", "tw_syscall3_jmp", "tw_loop3", "tw_loop3_empty")


@pytest.mark.parametrize("binary", PROGRAM_BINARIES, ids=[p.name for p in PROGRAM_BINARIES])
def test_unwinders_find_the_stub(build, binary):
    """In every linked program tw_syscall3, and each loop-shape function the mechanism
    has, is a sized FUNC whose FDE .eh_frame_hdr indexes."""
    need_tool("readelf")
    starts = eh_frame_hdr_starts(binary)
    have = {f[0]: f for f in functions(binary)}
    assert "tw_syscall3" in have, sorted(have)
    for name in STUB_FUNCTIONS:
        if name not in have:
            continue
        _, value, size, typ, _ = have[name]
        assert typ == "FUNC" and size > 0, (name, typ, size)
        fde_for(binary, value, size)
        assert value in starts, f"{binary.name}: {name} not in .eh_frame_hdr"


# --- the tools themselves ----------------------------------------------------------

def perf_chains(report):
    """[[frame, ...]] of every call chain in a flat, caller-first perf report."""
    chains, cur = [], None
    for line in report.splitlines():
        if line.startswith("#") or not line.strip() or re.search(r"\[[.kgu]\] ", line):
            cur = None
            continue
        if re.fullmatch(r"\s+[\d.]+%", line):
            cur = []
            chains.append(cur)
        elif cur is not None:
            cur.append(line.strip())
    return chains


@pytest.mark.parametrize("variant", [v for v in WRITE_VARIANTS if v.startswith("64-")])
def test_perf_names_main_above_the_stub(build, tmp_path, variant):
    """perf record -g (DWARF unwinding, the cpu-clock software event: this may run
    where there is no PMU) of 65536 16-byte writes: every sampled call chain that
    passes through tw_syscall3 has main above it."""
    need_tool("perf")
    need_supported("timewrite", variant)
    src, data, out = tmp_path / "in", tmp_path / "perf.data", tmp_path / "out"
    src.write_bytes(bytes(range(256)) * 4096)
    with open(src, "rb") as stdin:
        p = run(["perf", "record", "-q", "-e", "cpu-clock", "--call-graph", "dwarf",
                 "-o", data, "--", build / f"timewrite-{variant}", "-b", "16", out],
                stdin=stdin, text=True)
    if p.returncode != 0 and not p.stdout.startswith("16\t"):
        pytest.skip(f"perf record refused: {p.stderr.strip()}")
    assert p.returncode == 0, p.stderr
    assert out.read_bytes() == src.read_bytes()
    report = run(["perf", "report", "-i", data, "--stdio", "--no-children", "--percent-limit",
                  "0", "--call-graph=flat,0,caller"], text=True)
    assert report.returncode == 0, report.stderr
    through = [c for c in perf_chains(report.stdout) if "tw_syscall3" in c]
    assert through, f"no sampled call chain passes through tw_syscall3:\n{report.stdout}"
    for chain in through:
        k = chain.index("tw_syscall3")
        assert "main" in chain[:k], f"main is not above tw_syscall3 in {chain}"


@pytest.mark.parametrize("variant", WRITE_VARIANTS)
def test_gdb_backtrace_from_the_system_call(build, tmp_path, variant):
    """gdb stopped at the system call tw_syscall3 makes (inside the vDSO for the
    vdso and sysenter variants) walks back to main with no unknown frame."""
    need_tool("gdb")
    need_supported("timewrite", variant)
    src = tmp_path / "in"
    src.write_bytes(b"x" * 10000)
    # The first tw_syscall3 call in the parent is the first timed write (the
    # probe's call is in a child gdb does not follow); the next system call
    # after that breakpoint is the one the stub makes.
    script = ["set pagination off", "set confirm off", "break tw_syscall3", "run",
              "delete", "catch syscall", "continue", "bt"]
    with open(src, "rb") as stdin:
        p = run(["gdb", "-q", "-nx", "-batch", *[a for c in script for a in ("-ex", c)],
                 "--args", build / f"timewrite-{variant}", "-b", "4096", tmp_path / "out"],
                stdin=stdin, text=True)
    if "ptrace: Operation not permitted" in p.stdout + p.stderr:
        pytest.skip(f"gdb cannot trace here: {p.stderr.strip()}")
    frames = re.findall(r"^#\d+\s+(?:0x[0-9a-f]+ in )?(\S+)", p.stdout, re.M)
    assert "tw_syscall3" in frames, p.stdout + p.stderr
    k = frames.index("tw_syscall3")
    assert "main" in frames[k:], p.stdout
    assert "??" not in frames[:frames.index("main")], p.stdout
    assert "Backtrace stopped" not in p.stdout, p.stdout


SHAPE_ENTRY = {"jmp": "tw_syscall3_jmp", "inline": "tw_loop3"}


@pytest.mark.parametrize("variant,shape", [
    (m.name, s) for m in registry.mechanisms() for s in m.shapes
    if s in SHAPE_ENTRY and m.seen_as == "syscall"])
def test_gdb_backtrace_from_each_loop_shape(build, tmp_path, variant, shape):
    """gdb stopped at the system call syscost --shape jmp|inline makes walks back to main
    through the shape's own function (tw_syscall3_jmp, tw_loop3) with no unknown frame."""
    need_tool("gdb")
    need_supported("syscost", variant)
    func = SHAPE_ENTRY[shape]
    # The first call of the shape's function in the parent is the first timed one (the
    # probe's call is in a child gdb does not follow); the next system call after that
    # breakpoint is the one it makes.
    script = ["set pagination off", "set confirm off", f"break {func}", "run",
              "delete", "catch syscall", "continue", "bt"]
    p = run(["gdb", "-q", "-nx", "-batch", *[a for c in script for a in ("-ex", c)],
             "--args", build / f"syscost-{variant}", "--op", "getppid", "--shape", shape,
             "--calls", "10", "--batches", "1", "--warmup-ms", "0", "--calibrate-ms", "1"],
            text=True, cwd=tmp_path)
    if "ptrace: Operation not permitted" in p.stdout + p.stderr:
        pytest.skip(f"gdb cannot trace here: {p.stderr.strip()}")
    frames = re.findall(r"^#\d+\s+(?:0x[0-9a-f]+ in )?(\S+)", p.stdout, re.M)
    assert func in frames, p.stdout + p.stderr
    k = frames.index(func)
    assert "main" in frames[k:], p.stdout
    assert "??" not in frames[:frames.index("main")], p.stdout
    assert "Backtrace stopped" not in p.stdout, p.stdout
