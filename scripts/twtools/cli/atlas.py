"""tw atlas add RESULTS [--name NAME]: a results directory's run added to the atlas shipped in
the repository (data/machines/, analyse.atlas), in one command.

The run is read through the one way in, as `tw fleet` reads a host's (meta.json and
fingerprint.json validated, percall.json digested by analyse.fleet): a damaged or hostile
directory is refused in one line and nothing is written.  The machine's folder is the one
whose runs have the same CPU (vendor, family, model) and hypervisor, else a new one named from
the fingerprint (`amd-epyc-f25m1-kvm`), or NAME.  The run keeps its results directory's name;
meta.json and fingerprint.json are copied as they are and percall.json compressed (xz), and
the README's table gets the machine's row, or the run's note on the row it has.  The same run
added twice (the same raw rounds) is a no-op; another run under a name already there is
refused.
"""
import contextlib
import datetime
import fcntl
import hashlib
import lzma
import os
import re
import shutil
from pathlib import Path

import orjson

from ..analyse import atlas, fleet, results
from ..core import escape, files
from ..core.ui import DataError, UserError
from . import unpack

USAGE = "tw atlas add RESULTS [--name NAME]"
README = "README.md"
VENDORS = {"GenuineIntel": "intel", "AuthenticAMD": "amd"}
# Words of a CPU's model name kept in a folder name: the product line, not the marketing.
LINES = ("epyc", "xeon", "ryzen", "core", "threadripper", "opteron", "atom")


def add_arguments(p, name):
    p.usage = USAGE
    p.add_argument("action", choices=["add"], help="add: put a results directory's run in the "
                                                   "atlas")
    p.add_argument("results", metavar="RESULTS", help="a results directory made by tw run")
    p.add_argument("--name", metavar="NAME", type=_plain_name,
                   help="the machine's folder (default: the folder of the atlas machine with "
                        "this CPU and hypervisor, else one named from the fingerprint)")


def _plain_name(text):
    if not unpack.PLAIN.fullmatch(text):
        import argparse
        raise argparse.ArgumentTypeError(
            f"'{text}' is not a plain folder name (letters, digits, '.', '_', "
            "'-', not starting with '.' or '-', at most 100 characters)")
    return text


def _kind(fp):
    """(vendor, family, model, hypervisor) of a fingerprint: what makes two runs one machine."""
    cpu = (fp or {}).get("cpu") or {}
    return (cpu.get("vendor"), cpu.get("family"), cpu.get("model"),
            (fp or {}).get("virtualization") or "none")


def machine_name(fp):
    """A folder name from the fingerprint: vendor, product line, family and model, hypervisor
    ('amd-epyc-f25m1-kvm'; 'metal' for none)."""
    cpu = (fp or {}).get("cpu") or {}
    vendor = VENDORS.get(cpu.get("vendor"), "cpu")
    words = re.findall(r"[a-z]+", str(cpu.get("model_name") or "").lower())
    line = next((w for w in words if w in LINES), None)
    virt = str((fp or {}).get("virtualization") or "metal").lower()
    virt = "metal" if virt in ("none", "") else re.sub(r"[^a-z0-9]+", "-", virt).strip("-")
    fam, mod = cpu.get("family"), cpu.get("model")
    fm = f"f{fam}m{mod}" if isinstance(fam, int) and isinstance(mod, int) else "unknown"
    return "-".join(x for x in (vendor, line, fm, virt or "metal") if x)


def _existing(root, kind):
    """The atlas folder whose runs are this kind of machine, or None."""
    for m, run in atlas.runs(root):
        try:
            fp, _ = results.read_stage(run, "fingerprint")
        except DataError:
            continue
        if fp and _kind(fp) == kind:
            return m
    return None


def _describe(fp):
    cpu = fp.get("cpu") or {}
    k = fp.get("kernel") or {}
    return (f"{cpu.get('model_name') or 'unknown CPU'} (family {cpu.get('family')}, model "
            f"{cpu.get('model')}), {fp.get('virtualization') or 'bare metal'}, Linux "
            f"{k.get('release') if isinstance(k, dict) else k}, {fp.get('os') or 'unknown OS'}")


def _cell(text):
    """A table cell from outside text: one line, markup and bars escaped."""
    return escape.markdown(str(text))


def _code(text):
    """A code span from outside text, for a table cell: its text shown as it is (a backslash
    stays one backslash; Markdown's escapes do not apply inside a code span), control
    characters made visible, one line, the table's cell bar escaped as GFM asks, and a fence
    longer than any run of backticks inside, so that no backtick in the text ends the span."""
    t = escape.controls(str(text).replace("\r\n", " ").replace("\n", " ").replace("\r", " "))
    t = t.replace("|", "\\|")
    longest = max((len(r) for r in re.findall(r"`+", t)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if t.startswith("`") or t.endswith("`") or not t.strip() else ""
    return f"{fence}{pad}{t}{pad}{fence}"


HEADER = "| folder | machine | runs | source |"
NEW_README = f"# The atlas\n\n{HEADER}\n|---|---|---|---|\n"


def _row_key(machine):
    return f"| `{machine}` |"


def with_row(text, readme, machine, fp, meta, run_name, when):
    """(the README's new text with the machine's row added, or this run noted on the row it
    has; 'added' or 'noted').  DataError, before anything is written, when the README has
    no machines table."""
    lines = text.split("\n")
    note = (f"{_cell(run_name)}: {_cell(meta.get('mode') or 'default')}-mode "
            f"{_code(meta.get('command') or 'tw run')}, added by `tw atlas add` on {when}")
    key = _row_key(machine)
    for i, line in enumerate(lines):
        if line.startswith(key):
            cells = line.split(" | ")
            if len(cells) >= 4:
                cells[2] = cells[2] + "; + " + note
                lines[i] = " | ".join(cells)
                return "\n".join(lines), "noted"
    try:
        head = lines.index(HEADER)
    except ValueError:
        raise DataError(f"{readme}: has no machines table (the line '{HEADER}'); nothing was "
                        "added", "restore the table (git checkout data/machines/README.md)") from None
    last = head + 1
    while last + 1 < len(lines) and lines[last + 1].startswith("|"):
        last += 1
    row = f"| `{machine}` | {_cell(_describe(fp))} | 1 run: {note} | `tw atlas add` |"
    lines.insert(last + 1, row)
    return "\n".join(lines), "added"


def _read_readme(readme):
    raw = files.read_regular(readme, inside=readme.parent, limit=4 << 20, what="README")
    return NEW_README if raw is None else raw.decode(errors="replace")


def has_row(text, machine, run_name):
    """Whether the README shows run_name's machine: its row, and on a row tw atlas add wrote,
    the run's own note."""
    for line in text.split("\n"):
        if line.startswith(_row_key(machine)):
            return "tw atlas add" not in line or _cell(run_name) in line
    return False


@contextlib.contextmanager
def _locked(root):
    """The atlas's lock (flock on its folder itself: no lock file left behind): two adds at
    once take turns, so the README is never read by one while the other writes it."""
    root.mkdir(parents=True, exist_ok=True)
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def rounds_id(doc):
    """A run's identity: the sha256 of its parsed percall.json with sorted keys, so that the
    same rounds are one run however the file was formatted or compressed."""
    return hashlib.sha256(orjson.dumps(doc, option=orjson.OPT_SORT_KEYS)).digest()


def _same_rounds(root, ident):
    """(machine, run) of the atlas run whose raw rounds are these (rounds_id), or None: a run
    is one run whatever its folder, its name or the --name it was added under."""
    for m, run in atlas.runs(root):
        try:
            if rounds_id(atlas._percall_xz(run)) == ident:
                return m, run
        except DataError:
            continue
    return None


def add(results_dir, name=None, root=None, today=None):
    """Add the run; returns (machine, run name, what happened).  Under the atlas's lock: the
    same rounds anywhere in the atlas are 'already there' (and their missing README row is
    written); else the README's new text is made first (a README without its table refuses
    the add before anything is copied), the run copied into place by one rename, then the
    README replaced atomically (core.files)."""
    root = Path(root or atlas.ATLAS)
    d = results.require_results_dir(results_dir)
    meta, _ = results.read_stage(d, "meta")
    fp, _ = results.read_stage(d, "fingerprint")
    if not fp:
        raise DataError(f"{d}: has no fingerprint.json: the doctor stage did not run there",
                        "the atlas keeps a machine's facts with its rounds")
    raw = files.read_regular(d / "percall.json", inside=d, what="percall.json")
    if raw is None:
        raise DataError(f"{d}: has no percall.json: the bench stage did not run there",
                        "the atlas keeps the per-call matrix's raw rounds")
    doc, _ = results.read_stage(d, "percall")
    # the fleet's own digest: what `tw fleet --atlas` will compute from these rounds
    fleet.digest_doc(doc, fp, meta, d.name)
    run_name = d.resolve().name
    if not unpack.PLAIN.fullmatch(run_name):
        raise UserError(f"{d}: its name is not a plain folder name",
                        "copy it to a plain name (letters, digits, '.', '_', '-') first")
    when = today or datetime.date.today().isoformat()
    readme = root / README
    with _locked(root):
        same = _same_rounds(root, rounds_id(doc))
        if same is not None:
            m, run = same
            what = f"already there (the same raw rounds as {d.name}): nothing changed"
            text = _read_readme(readme)
            if not has_row(text, m, run.name):
                smeta, _ = results.read_stage(run, "meta")
                sfp, _ = results.read_stage(run, "fingerprint")
                text, _ = with_row(text, readme, m, sfp or {}, smeta or {}, run.name, when)
                files.write_text(readme, text)
                what = (f"already there (the same raw rounds as {d.name}); its README row was "
                        "missing, now written")
            return m, run.name, what
        machine = name or _existing(root, _kind(fp)) or machine_name(fp)
        dest = root / machine / "runs" / run_name
        if os.path.lexists(dest):
            raise UserError(f"{dest}: another run of this name is in the atlas",
                            "rename the results directory, or remove that run first")
        text, how = with_row(_read_readme(readme), readme, machine, fp, meta or {}, run_name,
                             when)
        xz = lzma.compress(raw, preset=9 | lzma.PRESET_EXTREME)
        tmp = dest.with_name(f".{run_name}.partial-{os.getpid()}")
        tmp.mkdir(parents=True)
        try:
            for f in ("meta.json", "fingerprint.json"):
                files.write_bytes(tmp / f, files.read_regular(d / f, inside=d))
            files.write_bytes(tmp / "percall.json.xz", xz)
            os.rename(tmp, dest)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        files.write_text(readme, text)
    return machine, run_name, f"added ({len(xz)} B compressed); README row {how}"


def main(args, name):
    machine, run_name, what = add(args.results, args.name,
                                  root=os.environ.get("TW_ATLAS") or None)
    print(f"{machine}/runs/{run_name}: {what}")
    return 0
