"""Paths, the build matrix, running programs, JSON files and progress messages."""
import functools
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / "build"
TRACES = ROOT / "traces"
MATRIX = ROOT / "variants" / "matrix"
REFERENCE = ROOT.parent / "shared" / "reference"  # the seed's published numbers, if present

EXIT_UNSUPPORTED = 77


def variants():
    """The rows of variants/matrix as dicts: name ('64-libc'), bits, abi, mechanism."""
    rows = []
    for line in MATRIX.read_text().splitlines():
        line = line.split("#", 1)[0].split()
        if not line:
            continue
        bits, abi, mech = line[:3]
        rows.append({"name": f"{bits}-{mech}", "bits": int(bits), "abi": abi, "mechanism": mech})
    return rows


def binary(program, variant):
    """build/<program>-<variant>, e.g. binary('timewrite', '32-int80')."""
    return BUILD / f"{program}-{variant}"


def probe(program, variant):
    """(supported, reason) for one variant, by running its --probe.

    A binary that is missing, or that the kernel cannot execute (no IA32
    emulation for 32-bit programs), is unsupported with that reason."""
    path = binary(program, variant)
    if not path.exists():
        return False, f"{path.name} is not built (run make)"
    try:
        p = subprocess.run([str(path), "--probe"], capture_output=True, text=True, timeout=30)
    except OSError as e:
        return False, f"cannot execute {path.name}: {e.strerror} (32-bit programs need IA32 emulation)"
    if p.returncode == 0:
        return True, None
    why = p.stderr.strip().splitlines()
    why = why[-1] if why else f"exit status {p.returncode}"
    # "prog: mech: unsupported: reason" -> "reason"
    return False, why.split("unsupported: ", 1)[-1]


def probe_all(program="timewrite"):
    """Every matrix row with 'supported' and 'reason' filled in."""
    out = []
    for v in variants():
        ok, why = probe(program, v["name"])
        out.append(dict(v, supported=ok, reason=why))
    return out


def add_mode_arguments(parser, quick_help, long_help):
    """--quick / --long (default: mode 'default'), the same three modes in every command."""
    g = parser.add_mutually_exclusive_group()
    g.add_argument("--quick", dest="mode", action="store_const", const="quick", help=quick_help)
    g.add_argument("--long", dest="mode", action="store_const", const="long", help=long_help)
    parser.set_defaults(mode="default")


UAPI_HEADERS = {"i386": "asm/unistd_32.h", "x86_64": "asm/unistd_64.h"}
INCLUDE_DIRS = ("/usr/include/x86_64-linux-gnu", "/usr/include")


@functools.lru_cache(maxsize=None)
def syscall_numbers(abi):
    """{name: number} of one ABI's table, from the kernel's UAPI header (linux-libc-dev),
    the same file the C programs compile against, so no number is written down twice."""
    for d in INCLUDE_DIRS:
        path = Path(d) / UAPI_HEADERS[abi]
        if path.exists():
            return {m.group(1): int(m.group(2)) for m in
                    re.finditer(r"^#define __NR_(\w+)\s+(\d+)", path.read_text(), re.M)}
    raise FileNotFoundError(f"{UAPI_HEADERS[abi]} not found under {', '.join(INCLUDE_DIRS)}: "
                            "install linux-libc-dev (make deps)")


def syscall_nr(abi, name):
    """A syscall's number in an ABI ('i386' or 'x86_64'); 'invalid' is timewrite's
    TW_NR_invalid (timewrite/tw_sysnr.h), the number syscost's null op uses."""
    if name == "invalid":
        m = re.search(r"#define TW_NR_invalid\s+(\w+)", (ROOT / "timewrite" / "tw_sysnr.h").read_text())
        return int(m.group(1), 0)
    return syscall_numbers(abi)[name]


def is_root():
    return os.geteuid() == 0


def which(cmd):
    return shutil.which(cmd)


def run(cmd, timeout=600, check=False, **kw):
    """subprocess.run with text output captured and a timeout; cmd items become str."""
    kw.setdefault("capture_output", True)
    kw.setdefault("text", True)
    return subprocess.run([str(c) for c in cmd], timeout=timeout, check=check, **kw)


def write_json(path, obj):
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(obj, indent=1, sort_keys=False, default=_jsonable) + "\n")
    tmp.replace(path)


def read_json(path, default=None):
    path = Path(path)
    if not path.exists():
        return default
    return json.loads(path.read_text())


def _jsonable(o):
    if hasattr(o, "tolist"):
        return o.tolist()
    if isinstance(o, Path):
        return str(o)
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def progress(msg):
    """One progress line on stderr, so stdout stays machine-readable."""
    print(f"tw: {msg}", file=sys.stderr, flush=True)


def warn(msg, todo):
    """A warning that says what happened and what to do next."""
    print(f"tw: warning: {msg}; {todo}", file=sys.stderr, flush=True)


def blind(why):
    """The value of a figure an instrument could not see: never 0."""
    return {"value": None, "why": why}
