"""timewrite, syscost, wvbench, hostclock, legs and neighbour read numbers one way and report bad
usage one way.

All six link timewrite/tw_cli.c.  This breaks when a program goes back to its
own strtol (which skips leading blanks and takes '+', so syscost once accepted
--batches " 2" that timewrite refused as --sizes " 256"), when the parser starts
accepting blanks, signs, hex, "inf" or trailing text, when a range check goes,
when a usage error stops being exactly one line naming the binary and the
problem followed by the usage, or exits with anything but 2, and when a
program's usage text drifts from the synopsis docs/programs.md gives for it.  Every
built binary of the three programs is checked (32-bit ones too: there a long is
32 bits), so a variant that links something else shows up."""
import pytest

from conftest import BUILD, ROOT, run

PROGRAMS = ("timewrite", "syscost", "wvbench", "hostclock", "legs", "neighbour")


def documented_synopses():
    """{program: usage block} from docs/programs.md's fenced blocks that start 'usage: '."""
    out, block = {}, None
    for line in (ROOT / "docs" / "programs.md").read_text().splitlines():
        if line.startswith("```"):
            if block and block[0].startswith("usage: "):
                out[block[0].split()[1]] = "\n".join(block)
            block = [] if block is None else None
        elif block is not None:
            block.append(line)
    return out


def binaries():
    """Every built binary of the three programs, as (program, path)."""
    found = []
    for p in sorted(BUILD.glob("*-*")) + [BUILD / "hostclock", BUILD / "neighbour"]:
        prog = p.name.split("-", 1)[0]
        if prog in PROGRAMS and p.is_file():
            found.append(pytest.param(prog, p, id=p.name))
    return found


# An unknown option, placed where each program parses options.
UNKNOWN = {
    "timewrite": ["--no-such-option", "out"],
    "syscost": ["--no-such-option"],
    "wvbench": ["writev", "--no-such-option"],
    "hostclock": ["--no-such-option"],
    "legs": ["--no-such-option"],
    "neighbour": ["--no-such-option"],
}


def execute(path, args, **kw):
    try:
        return run([path, *args], text=True, **kw)
    except OSError as e:
        pytest.skip(f"{path.name} cannot run here: {e.strerror} (32-bit needs IA32 emulation)")


def test_readme_has_every_synopsis():
    assert set(documented_synopses()) == set(PROGRAMS)


@pytest.mark.parametrize("prog,path", binaries())
def test_help_starts_with_readme_synopsis(build, tmp_path, prog, path):
    p = execute(path, ["--help"], cwd=tmp_path)
    assert p.returncode == 0 and p.stderr == "", p.stderr
    assert p.stdout.startswith(documented_synopses()[prog] + "\n\n"), p.stdout
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("prog,path", binaries())
def test_usage_error_is_one_line_then_usage(build, tmp_path, prog, path):
    p = execute(path, UNKNOWN[prog], cwd=tmp_path)
    assert p.returncode == 2, (p.returncode, p.stderr)
    assert p.stdout == ""
    assert p.stderr == (f"{path.name}: unknown or ambiguous option: '--no-such-option'\n"
                        f"{documented_synopses()[prog]}\n")
    assert list(tmp_path.iterdir()) == []


# --- numbers ------------------------------------------------------------------

# Refused by every integer option: blanks anywhere, signs, other bases and
# notations, non-ASCII digits, trailing text, nothing at all.
BAD_INT = [" 2", "2 ", "\t2", "2\n", "+2", "- 2", "--2", "0x10", "0b1", "2x", "1e3",
           "2.0", "", "\u0663", "2\u00a0"]
# Refused by every fractional option.
BAD_REAL = [" 1", "1 ", "\t1", "+1", "inf", "-inf", "nan", "infinity", "0x1p0", "1e", "1e+",
            ".", "e5", "", "1,5", "1.5.", "1..5", "\u0661"]


def b(prog, bits):
    """The binary of `prog` for `bits` that needs no particular CPU."""
    name = {"timewrite": f"timewrite-{bits}-libc", "syscost": f"syscost-{bits}-libc",
            "wvbench": f"wvbench-{bits}"}[prog]
    return BUILD / name


# (program, option, how to run it with VALUE, min, max).  Each command exits 0
# at once when VALUE is accepted: --probe stops after the options, and the
# wvbench run is 256 one-byte writes.
INT_OPTS = [
    ("timewrite", "--reps", ["--probe", "--reps", "VALUE"], 1, 2**31 - 1),
    ("timewrite", "--sizes", ["--probe", "--sizes", "VALUE"], 1, 2**63 - 1),
    ("syscost", "--batches", ["--probe", "--batches", "VALUE"], 1, 10000),
    ("syscost", "--calls", ["--probe", "--calls", "VALUE"], 1, 100000000),
    ("syscost", "--cpu", ["--probe", "--cpu", "VALUE"], -1, 1023),
    ("syscost", "--seccomp-times", ["--probe", "--seccomp", "f", "--seccomp-times", "VALUE"],
     1, 64),
    ("syscost", "--errno", ["--probe", "--seccomp", "f", "--errno", "VALUE"], 1, 4095),
    ("wvbench", "--reps", ["writev", "--buffers", "1", "--size", "1", "--reps", "VALUE",
                           "--file", "FILE"], 1, 100000),
    ("wvbench", "--bytes", ["stdio", "--method", "write", "--reps", "1", "--bytes", "VALUE",
                            "--file", "FILE"], 1, 2**32),
]
REAL_OPTS = [
    ("syscost", "--batch-ms", ["--probe", "--batch-ms", "VALUE"], 0.001, 10000),
    ("syscost", "--warmup-ms", ["--probe", "--warmup-ms", "VALUE"], 0, 60000),
]


def ids(opts):
    return [f"{prog}{opt}" for prog, opt, *_ in opts]


def numeric(tmp_path, prog, bits, args, value):
    """Run with VALUE in place; returns the process."""
    argv = [value if a == "VALUE" else str(tmp_path / "o") if a == "FILE" else a for a in args]
    return execute(b(prog, bits), argv, cwd=tmp_path)


def quote(value):
    """What tw_quote prints for `value`: C escapes for everything but printable ASCII."""
    out = []
    for byte in value.encode():
        c = chr(byte)
        if c in "\n\t":
            out.append("\\n" if c == "\n" else "\\t")
        elif c in "'\\":
            out.append("\\" + c)
        elif byte < 0x20 or byte > 0x7E:
            out.append(f"\\x{byte:02x}")
        else:
            out.append(c)
    return "'" + "".join(out) + "'"


def refused(p, opt, value, why):
    """Exit 2, and one line naming the option, the value as typed and strtonum's reason."""
    assert p.returncode == 2, (opt, value, p.returncode, p.stderr)
    first = p.stderr.splitlines()[0]
    assert f"{opt}: {quote(value)} is {why} " in first, (value, p.stderr)
    assert p.stdout == ""


@pytest.mark.parametrize("bits", [64, 32])
@pytest.mark.parametrize("prog,opt,args,lo,hi", INT_OPTS, ids=ids(INT_OPTS))
def test_integers(build, tmp_path, bits, prog, opt, args, lo, hi):
    for value in BAD_INT:
        if opt == "--sizes" and ("-" in value or value == ""):
            continue        # a '-' there separates MIN from MAX; see the next test
        refused(numeric(tmp_path, prog, bits, args, value), opt, value, "invalid")
    refused(numeric(tmp_path, prog, bits, args, str(lo - 1)), opt, str(lo - 1), "too small")
    refused(numeric(tmp_path, prog, bits, args, str(hi + 1)), opt, str(hi + 1), "too large")
    refused(numeric(tmp_path, prog, bits, args, "9" * 30), opt, "9" * 30, "too large")
    if lo >= 0 and opt != "--sizes":
        # No sign where the range has no negative numbers, not even "-0".
        # (In a size list a '-' separates MIN from MAX; the next test.)
        for value in ("-1", "-0"):
            refused(numeric(tmp_path, prog, bits, args, value), opt, value, "invalid")
    for value in (str(lo), "2", "0002", str(min(hi, 4))):
        p = numeric(tmp_path, prog, bits, args, value)
        assert p.returncode == 0, (value, p.stderr)


@pytest.mark.parametrize("bits", [64, 32])
@pytest.mark.parametrize("prog,opt,args,lo,hi", REAL_OPTS, ids=ids(REAL_OPTS))
def test_fractions(build, tmp_path, bits, prog, opt, args, lo, hi):
    for value in BAD_REAL + ["-1"]:          # no range here takes a negative number
        refused(numeric(tmp_path, prog, bits, args, value), opt, value, "invalid")
    refused(numeric(tmp_path, prog, bits, args, "1e999"), opt, "1e999", "too large")
    refused(numeric(tmp_path, prog, bits, args, str(hi * 2)), opt, str(hi * 2), "too large")
    if lo > 0:
        refused(numeric(tmp_path, prog, bits, args, "0"), opt, "0", "too small")
    for value in ("0.5", ".5", "5.", "1e-1", "2E0", "1e+1", "007.5"):
        p = numeric(tmp_path, prog, bits, args, value)
        assert p.returncode == 0, (value, p.stderr)


@pytest.mark.parametrize("bits", [64, 32])
@pytest.mark.parametrize("sizes,why", [
    ("256, 1024", "' 1024' is invalid"), ("256 ,1024", "'256 ' is invalid"),
    ("1- 65536", "' 65536' is invalid"), ("+256", "'+256' is invalid"),
    ("-256", "'-256' is invalid"), ("256-", "'256-' is invalid"), ("- 2", "'- 2' is invalid"),
    ("1--4", "'-4' is invalid"), ("1-2-4", "'2-4' is invalid"), ("", "'' has an empty item"),
    ("256\n", "'256\\n' is invalid"),
    ("256,", "'256,' has an empty item"), (",256", "',256' has an empty item"),
    ("0-4", "'0' is too small"), ("4-2", "the range 4-2 runs backwards"),
])
def test_size_list_items_each_parsed_whole(build, tmp_path, bits, sizes, why):
    """--sizes keeps its list syntax, and each number in it obeys the same rules."""
    p = execute(b("timewrite", bits), ["--probe", "--sizes", sizes], cwd=tmp_path)
    assert p.returncode == 2, (sizes, p.stderr)
    assert p.stderr.splitlines()[0].startswith(f"timewrite-{bits}-libc: --sizes: {why}"), \
        p.stderr


def test_syscost_signed_option(build, tmp_path):
    """--cpu takes -1 (do not pin): the one range with a negative number in it."""
    args = ["--probe", "--cpu", "VALUE"]
    assert numeric(tmp_path, "syscost", 64, args, "-1").returncode == 0
    for value in (" -1", "+0", "-", "--1", "- 1"):
        refused(numeric(tmp_path, "syscost", 64, args, value), "--cpu", value, "invalid")
    refused(numeric(tmp_path, "syscost", 64, args, "-2"), "--cpu", "-2", "too small")
