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
import datetime
import hashlib
import lzma
import os
import re
from pathlib import Path

from ..analyse import atlas, fleet, results
from ..core import escape, files, ui
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


def write_row(readme, machine, fp, meta, run_name, when):
    """The README's table: the machine's row added, or this run noted on the row it has."""
    text = readme.read_text() if readme.exists() else "# The atlas\n\n| folder | machine | runs | source |\n|---|---|---|---|\n"
    lines = text.split("\n")
    note = (f"{_cell(run_name)}: {_cell(meta.get('mode') or 'default')}-mode "
            f"`{_cell(meta.get('command') or 'tw run')}`, added by `tw atlas add` on {when}")
    key = f"| `{machine}` |"
    for i, line in enumerate(lines):
        if line.startswith(key):
            cells = line.split(" | ")
            if len(cells) >= 4:
                cells[2] = cells[2] + "; + " + note
                lines[i] = " | ".join(cells)
                readme.write_text("\n".join(lines))
                return "noted"
    # a new row after the table's last row
    last = max((i for i, line in enumerate(lines) if line.startswith("| `")), default=None)
    if last is None:
        last = max(i for i, line in enumerate(lines) if line.startswith("|---"))
    row = f"| `{machine}` | {_cell(_describe(fp))} | 1 run: {note} | `tw atlas add` |"
    lines.insert(last + 1, row)
    readme.write_text("\n".join(lines))
    return "added"


def add(results_dir, name=None, root=None, today=None):
    """Add the run; returns (machine, run name, what happened)."""
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
    machine = name or _existing(root, _kind(fp)) or machine_name(fp)
    dest = root / machine / "runs" / run_name
    xz = lzma.compress(raw, preset=9 | lzma.PRESET_EXTREME)
    if dest.exists():
        old = files.read_regular(dest / "percall.json.xz", inside=dest)
        if old is not None and hashlib.sha256(lzma.decompress(old)).digest() == \
                hashlib.sha256(raw).digest():
            return machine, run_name, "already there: nothing changed"
        raise UserError(f"{dest}: another run of this name is in the atlas",
                        "rename the results directory, or remove that run first")
    tmp = dest.with_name(f".{run_name}.partial-{os.getpid()}")
    tmp.mkdir(parents=True)
    try:
        for f in ("meta.json", "fingerprint.json"):
            (tmp / f).write_bytes(files.read_regular(d / f, inside=d))
        (tmp / "percall.json.xz").write_bytes(xz)
        os.rename(tmp, dest)
    except BaseException:
        for p in tmp.glob("*"):
            p.unlink()
        tmp.rmdir()
        raise
    when = today or datetime.date.today().isoformat()
    what = write_row(root / README, machine, fp, meta or {}, run_name, when)
    return machine, run_name, f"added ({len(xz)} B compressed); README row {what}"


def main(args, name):
    machine, run_name, what = add(args.results, args.name,
                                  root=os.environ.get("TW_ATLAS") or None)
    print(f"{machine}/runs/{run_name}: {what}")
    return 0
