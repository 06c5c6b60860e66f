"""Damaged and hostile results directories, built as data here: reading is validation, and
writing stays inside the directory.

Why it can break: a reader that trusts a stage file turns a truncated file into a traceback
that does not name it, a NaN into "Verdict: REFUTED ... costs nan ns", a string where a number
belongs into a crash deep in numpy, a variant named "foo" into int("fo"); a report that writes
with open() follows a symbolic link planted in the directory (report.md -> ~/.bashrc, plots ->
/etc) and writes outside it; `tw report` on any directory at all overwrites its report.md; a
stage file that is a FIFO blocks the reader forever.  Each case checks: a non-zero exit with
one line naming the file and what is wrong, no traceback, nothing written anywhere (the
directory and a decoy outside it are compared before and after).

The first tests run `tw report` / `tw compare` as a user would; the last one feeds many
mutations of a real stage file straight to the loader, which is where every reader's checks
live, and requires each to be either read or refused with DataError, never a crash.
"""
import zlib
import json
import os
import random
import re
import shutil
import tempfile
import warnings

from pathlib import Path

import pytest

from conftest import ROOT
from faults_util import one_line_error, random_replacements, snapshot, tw
from twtools.analyse import results, schema, verdict
from twtools.core import files
from twtools.core.ui import DataError
from twtools.present import tables

FIX = ROOT / "tests" / "fixtures" / "results-fixture"
Infinity_ = -0.0123456789     # a placeholder the text edit replaces


@pytest.fixture
def world(tmp_path):
    """A copy of a real results directory, and a decoy directory outside it that nothing
    may touch."""
    d = tmp_path / "res"
    shutil.copytree(FIX, d)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "precious").write_text("not tw's\n")
    return d, outside


def edit(path, fn, text=None):
    """Change a stage file in place: fn(obj) edits the parsed document; text(s) then edits
    its JSON text (for what json.dumps cannot write, such as 1e999)."""
    obj = json.loads(path.read_text())
    fn(obj)
    out = json.dumps(obj)
    path.write_text(text(out) if text else out)


def refused(d, outside, needles, cmd="report", code=3):
    """tw report (or compare) on d fails with one line holding every needle, writes
    nothing in d or outside."""
    before, out_before = snapshot(d), snapshot(outside)
    args = ["report", d] if cmd == "report" else ["compare", d, "--out", d.parent / "cmp"]
    p = tw(*args)
    line = one_line_error(p, *needles)
    assert p.returncode == code, (p.returncode, line)
    assert snapshot(d) == before, "the directory was written"
    assert snapshot(outside) == out_before, "something outside was written"
    return line


# ---- damaged files: one line naming the file and what is wrong ---------------------------

DAMAGE = {
    "truncated": ("percall.json", lambda p: p.write_bytes(p.read_bytes()[:len(p.read_bytes()) // 2]),
                  ["percall.json: not valid JSON", "truncated"]),
    "empty": ("sweep_seed.json", lambda p: p.write_bytes(b""), ["sweep_seed.json: empty"]),
    "not-utf8": ("stdio.json", lambda p: p.write_bytes(b"\xff\xfe{}"), ["stdio.json: not UTF-8"]),
    "nan": ("percall.json", lambda p: p.write_text(p.read_text().replace("[", "[NaN, ", 1)),
            ["percall.json: NaN is not a number JSON allows"]),
    "infinity-literal": ("observer.json",
                         lambda p: edit(p, lambda o: o["rows"][0].update(samples=[Infinity_]),
                                        lambda t: t.replace("-0.0123456789", "Infinity")),
                         ["observer.json: Infinity is not a number JSON allows"]),
    "overflowing-float": ("observer.json",
                          lambda p: edit(p, lambda o: o["rows"][0].update(samples=[1.0, Infinity_]),
                                         lambda t: t.replace("-0.0123456789", "1e999")),
                          ["observer.json: rows[0].samples[1]: inf is not a finite number"]),
    "string-sample": ("percall.json", lambda p: edit(p, lambda o: o["cells"][0].update(
        samples=["abc"])), ["percall.json: cells[0].samples[0]: expected a number"]),
    "wrong-container": ("writev.json", lambda p: edit(p, lambda o: o.update(rows={"a": 1})),
                        ["writev.json: rows: expected a list, found an object"]),
    "bool-median": ("attribution.json", lambda p: edit(p, lambda o: o["rows"][0].update(
        total_ns={"median": True, "ci_low": 1, "ci_high": 2})),
        ["attribution.json: rows[0].total_ns"]),
    "bad-variant": ("percall.json", lambda p: edit(p, lambda o: o["cells"][0].update(
        variant="foo")), ["percall.json: cells[0].variant: expected a variant name"]),
    "missing-key": ("latency.json", lambda p: edit(p, lambda o: o["runs"][0].pop("mode")),
                    ["latency.json: runs[0].mode: is missing"]),
    "ragged-samples": ("sweep_tlpi.json", lambda p: edit(p, lambda o: o["runs"][0]["rows"][0]
                       ["samples"]["real_s"].pop()),
                       ["sweep_tlpi.json: runs[0].rows[0]: samples: sample lists of different lengths"]),
    "other-stage-schema": ("percall.json", lambda p: edit(p, lambda o: o.update(
        schema="timewrite-sweep/2")), ["percall.json: schema: 'timewrite-sweep/2' is not a "
                                       "timewrite-percall file"]),
    "newer-schema": ("tracers.json", lambda p: edit(p, lambda o: o.update(
        schema="timewrite-tracers/99")), ["tracers.json: schema", "newer than this checkout",
                                          "git pull"]),
    "meta-without-schema": ("meta.json", lambda p: edit(p, lambda o: o.pop("schema")),
                            ["meta.json: not a results directory's meta.json"]),
    "huge-int": ("percall.json", lambda p: edit(p, lambda o: o.update(tsc_hz=10 ** 400)),
                 ["percall.json: tsc_hz: an integer too large"]),
    # finite, but no time a stage holds: 1e300 crashed the fits and the report, 1.7e308 the
    # plots (their squares are infinite); schema.MAGNITUDE says why 1e15 is the bound
    "1e300-real-time": ("sweep_seed.json", lambda p: edit(p, lambda o: o["runs"][0]["rows"][0]
                        ["samples"]["real_s"].__setitem__(0, 1e300)),
                        ["sweep_seed.json: runs[0].rows[0].samples.real_s[0]: 1e+300 is larger "
                         "than any time"]),
    "max-float-sample": ("percall.json", lambda p: edit(p, lambda o: o["cells"][0]["samples"]
                         .__setitem__(0, 1.7e308)),
                         ["percall.json: cells[0].samples[0]: 1.7e+308 is larger than any"]),
}


@pytest.mark.parametrize("case", sorted(DAMAGE))
def test_damaged_file_is_one_line(world, case):
    d, outside = world
    name, damage, needles = DAMAGE[case]
    damage(d / name)
    refused(d, outside, [str(d / name)] + needles)


def test_damaged_file_in_compare(world):
    d, outside = world
    DAMAGE["nan"][1](d / "percall.json")
    refused(d, outside, [str(d / "percall.json"), "NaN"], cmd="compare")
    assert not (d.parent / "cmp").exists()


# ---- hostile directories: nothing read or written outside ---------------------------------

def test_not_a_results_directory(tmp_path):
    """`tw report` on a directory that tw did not make refuses it, and writes no report.md."""
    d = tmp_path / "docs"
    d.mkdir()
    (d / "notes.txt").write_text("mine\n")
    line = refused(d, tmp_path / "docs", ["not a results directory", "no meta.json"])
    assert not (d / "report.md").exists(), line
    f = tmp_path / "file"
    f.write_text("x")
    one_line_error(tw("report", f), "is not a directory")
    one_line_error(tw("report", tmp_path / "absent"), "no such directory")


@pytest.mark.parametrize("link", ["report.md", "report.html", "verdict.json", "plots", "tables"])
def test_symlink_out_is_refused(world, link):
    """A symbolic link planted where the report writes (a file or a directory) is refused,
    not followed: the decoy outside stays untouched."""
    d, outside = world
    target = outside / ("precious" if link.endswith((".md", ".html", ".json")) else "")
    (d / link).symlink_to(target)
    line = refused(d, outside, [str(d / link), "refusing to write through it"])
    assert "symbolic link" in line


def test_symlinked_stage_file_out_is_refused(world, tmp_path):
    """A stage file that is a symbolic link out of the directory is not read (it could be any
    file of the reader's); one inside the directory is."""
    d, outside = world
    (outside / "percall.json").write_text((d / "percall.json").read_text())
    (d / "percall.json").unlink()
    (d / "percall.json").symlink_to(outside / "percall.json")
    refused(d, outside, [str(d / "percall.json"), "symbolic link", "outside"])
    (d / "percall.json").unlink()
    (d / "keep").mkdir()
    shutil.copy(FIX / "percall.json", d / "keep" / "percall.json")
    (d / "percall.json").symlink_to("keep/percall.json")
    assert results.load(d)["percall"]["cells"]


def test_fifo_stage_file_is_refused_not_waited_on(world):
    d, outside = world
    (d / "stdio.json").unlink()
    os.mkfifo(d / "stdio.json")
    refused(d, outside, [str(d / "stdio.json"), "is a FIFO, not a regular file"])


@pytest.mark.parametrize("name,kind", [("report.md", "dir"), ("verdict.json", "dir"),
                                       ("plots", "file"), ("tables", "file")])
def test_misplaced_directory_is_refused_before_anything_is_written(world, name, kind):
    """report.md as a directory (or plots/ as a file): refused before the first write.
    Before, verdict.json and the plots were rewritten and only then the report refused, though
    its own comment said it refuses before writing anything."""
    d, outside = world
    if kind == "dir":
        (d / name).mkdir()
    else:
        (d / name).write_text("not a directory\n")
    refused(d, outside, [str(d / name), "refusing to write anything"])


# ---- values that the analysis cannot carry -----------------------------------------------

def diagnose_json(origin="text", abi="compat", lo=0x8048000, hi=0x8049000):
    """A minimal diagnose.json (the field-example stage's file): one site, one map."""
    return {"schema": "timewrite-diagnose/1", "program": "x",
            "raw": {"tracer": "bpftrace", "cmd": ["x"], "status": 0, "wall_s": 0.01,
                    "process": {"pid": 1, "bits": 32, "maps": [{"lo": lo, "hi": hi,
                                                               "path": "[vsyscall]"}]},
                    "rows": {"sites": [{"pid": 1, "abi": abi, "origin": origin, "insn": "int80",
                                        "id": 4, "ip": 0x8048010, "calls": 1}],
                             "latency": [], "write_linear": []}}}


@pytest.mark.parametrize("field,value,needle", [
    ("origin", "x", "origin: expected one of text, vdso, other, found 'x'"),
    ("abi", "vm", "abi: expected one of compat, native, found 'vm'"),
])
def test_unknown_enum_values_are_refused(world, field, value, needle):
    """A site whose origin is "x" was a KeyError in report and compare (ORIGIN_TEXT[x])."""
    d, _ = world
    (d / "diagnose.json").write_text(json.dumps(diagnose_json(**{field: value})))
    with pytest.raises(DataError) as e:
        results.read(d)
    assert "diagnose.json: raw.rows.sites[0]." + needle in e.value.line()


def test_addresses_may_be_64_bit(world):
    """The [vsyscall] page of every 64-bit process is at 0xffffffffff600000, above 2**63: a
    real diagnose.json holds it, and must be read (the old integer bound refused it)."""
    d, _ = world
    (d / "diagnose.json").write_text(json.dumps(diagnose_json(lo=0xffffffffff600000,
                                                              hi=0xffffffffff601000)))
    assert results.read(d)["diagnose"]["raw"]["process"]["maps"][0]["hi"] == 0xffffffffff601000
    doc = diagnose_json()
    doc["raw"]["wall_s"] = 0xffffffffff600000          # not an address: a time
    (d / "diagnose.json").write_text(json.dumps(doc))
    with pytest.raises(DataError, match="raw.wall_s: .* is larger than any time"):
        results.read(d)


# ---- tw diagnose --results DIR: the same reader --------------------------------------------

PERCALL_DAMAGE = {
    "link-to-dev-zero": (lambda p: p.symlink_to("/dev/zero"), ["symbolic link to /dev/zero",
                                                                "outside"]),
    "fifo": (lambda p: os.mkfifo(p), ["is a FIFO, not a regular file"]),
    "truncated": (lambda p: p.write_text(FIX.joinpath("percall.json").read_text()[:5000]),
                  ["not valid JSON", "truncated"]),
    "wrong-type": (lambda p: p.write_text(json.dumps({"cells": {"a": 1}})),
                   ["cells: expected a list, found an object"]),
    "max-float": (lambda p: p.write_text(FIX.joinpath("percall.json").read_text().replace(
        "[", "[1.7e308, ", 1)), ["1.7e+308 is larger than any time"]),
}


@pytest.mark.parametrize("case", sorted(PERCALL_DAMAGE))
def test_diagnose_results_reads_percall_through_validation(tmp_path, case):
    """`tw diagnose --results DIR` read percall.json with no validation: truncated JSON, wrong
    types and a FIFO failed (or hung), a link to /dev/zero was followed out of DIR, and
    1.7e308 samples printed `cost inf ms [nan, nan]`.  Now: exit 3, one line naming the file,
    before the program runs (so the canary it would create never appears)."""
    d = tmp_path / "res"
    d.mkdir()
    damage, needles = PERCALL_DAMAGE[case]
    damage(d / "percall.json")
    canary = tmp_path / "ran"
    p = tw("diagnose", "--no-overhead", "--tracer", "strace", "--results", d, "--",
           "/bin/touch", canary, timeout=120)
    one_line_error(p, str(d / "percall.json"), *needles)
    assert p.returncode == 3, p.stderr
    assert not canary.exists(), "the program ran before its costs were known to be readable"


# ---- Markdown: what came from outside cannot make markup -----------------------------------

PAYLOAD = "vm\n\n> **Verdict: SUPPORTED.** <script>alert(1)</script> | `x` # [a](b) \x1b]0;t\x07"
# Strings the schema constrains to a vocabulary or a form (they cannot hold the payload).
FIXED = {"schema", "entry", "instruction", "origin", "insn", "abi", "state", "op", "shape",
         "mode", "status", "tracer", "speculation", "method", "syscall", "clock"}


def _hostile_strings(o, key=None):
    if isinstance(o, dict):
        return {k: _hostile_strings(v, k) for k, v in o.items()}
    if isinstance(o, list):
        return [_hostile_strings(v, key) for v in o]
    if isinstance(o, str) and key not in FIXED and not schema.VARIANT_RE.match(o):
        return PAYLOAD
    return o


def forged(md):
    """Lines of a Markdown page, outside its code blocks, where the payload made markup: a
    quote or a verdict, raw HTML, a control character."""
    text = re.sub(r"(?ms)^(`{3,})\n.*?\n\1$", "", md)
    return [line for line in text.splitlines()
            if line.startswith("> **Verdict: SUPPORTED") or re.search(r"(?<!\\)<script", line)
            or re.search(r"(?<!\\)\*\*Verdict: SUPPORTED", line) or "\x1b" in line]


@pytest.fixture(scope="module")
def hostile_strings_dir(tmp_path_factory):
    """The recorded results directory with every free-text string of every stage file (the
    host, meta.json's note and errors, the fingerprint, reasons, whys, notes) replaced by
    Markdown, HTML and terminal escapes that forge a verdict."""
    d = tmp_path_factory.mktemp("inject") / "res"
    shutil.copytree(FIX, d)
    for f in d.glob("*.json"):
        f.write_text(json.dumps(_hostile_strings(json.loads(f.read_text()))))
    return d


def test_report_md_cannot_be_injected(hostile_strings_dir):
    d = hostile_strings_dir
    p = tw("report", d)
    assert p.returncode == 0, p.stderr[-2000:]
    md = (d / "report.md").read_text()
    verdicts = [line for line in md.splitlines() if line.startswith("> **Verdict: ")]
    assert len(verdicts) == 1, verdicts
    assert not forged(md), forged(md)[:5]
    assert "Verdict: SUPPORTED.\\*\\*" in md, "the payload is shown, escaped"
    assert "<script>" not in (d / "report.html").read_text()


def test_compare_md_cannot_be_injected(hostile_strings_dir, tmp_path):
    other = tmp_path / "clean"
    shutil.copytree(FIX, other)
    out = tmp_path / "cmp"
    p = tw("compare", hostile_strings_dir, other, "--out", out)
    assert p.returncode == 0, p.stderr[-2000:]
    md = (out / "compare.md").read_text()
    assert not forged(md), forged(md)[:5]
    assert "<script>" not in (out / "compare.html").read_text()


def test_writes_are_confined(tmp_path):
    """core.files.confined: the writer itself, for every way out (.., an absolute path, a
    symlinked directory, a symlinked file)."""
    root = tmp_path / "root"
    root.mkdir()
    out = tmp_path / "out"
    out.mkdir()
    (root / "sub").symlink_to(out)
    (root / "f.md").symlink_to(out / "f.md")
    with files.confined(root):
        files.write_text(root / "ok" / "a.txt", "fine")
        for bad in (root / ".." / "out" / "x", out / "x", root / "sub" / "x", root / "f.md"):
            with pytest.raises(DataError):
                files.write_text(bad, "no")
    assert (root / "ok" / "a.txt").read_text() == "fine"
    assert list(out.iterdir()) == []


@pytest.mark.parametrize("across", [False, True], ids=["same-fs", "other-fs"])
def test_adopted_files_are_confined(tmp_path, across):
    """core.files.adopt (fleet.csv, which DuckDB writes elsewhere first) puts a file in place
    as write_bytes does: never through a link, never outside the root; renamed on one file
    system and copied across two (/dev/shm is a tmpfs here when it exists)."""
    if across and not os.path.isdir("/dev/shm"):
        pytest.skip("/dev/shm is absent: no second file system to copy across from")
    src_dir = Path(tempfile.mkdtemp(dir="/dev/shm" if across else tmp_path))
    root = tmp_path / "root"
    root.mkdir()
    out = tmp_path / "out"
    out.mkdir()
    (root / "f.csv").symlink_to(out / "f.csv")

    def made(name):
        p = src_dir / name
        p.write_bytes(b"a,b\n" * 1000)
        return p
    try:
        with files.confined(root):
            src = made("ok.csv")
            files.adopt(root / "ok.csv", src)
            for bad in (root / "f.csv", out / "x.csv", root / ".." / "out" / "y.csv"):
                with pytest.raises(DataError):
                    files.adopt(bad, made("bad.csv"))
        assert (root / "ok.csv").read_bytes() == b"a,b\n" * 1000 and not src.exists()
        assert list(out.iterdir()) == []
        assert not [n for n in os.listdir(root) if n.endswith(".tmp")]
    finally:
        shutil.rmtree(src_dir, ignore_errors=True)


def test_legacy_files_are_read_and_said_so(world):
    """A stage file without a schema field is the legacy form: read, and listed."""
    d, _ = world
    data = results.load(d)
    assert "percall.json" in data["analysis"]["legacy"]
    edit(d / "percall.json", lambda o: o.update(schema="timewrite-percall/2"))
    assert "percall.json" not in results.load(d)["analysis"]["legacy"]


# ---- every mutation is read or refused, never a crash ------------------------------------

MUTANTS = 25       # per stage file, a fixed seed each (200 each, and other seeds, ran clean offline)
REPLACEMENTS = [None, "x", -1, 0, 1e300, True, [], {}, [None], ["x"], {"median": 1}]


def _mutants(stem, count, seed):
    """count documents, each the fixture's stem file with one value replaced."""
    doc = json.loads((FIX / f"{stem}.json").read_text())
    return random_replacements(doc, random.Random(seed), REPLACEMENTS, count)


# Every stage file the fixture holds (diagnose.json, written by the field-example stage, is
# not in the recorded fixture).
@pytest.mark.parametrize("stem", [s for s in results.STEMS
                                  if s != "meta" and (FIX / f"{s}.json").exists()])
def test_mutations_are_read_or_refused(tmp_path, stem):
    """A fixed-seed sample of one-value mutations per stage file: load, the verdict and every
    table either work or stop at DataError naming the file.  A crash anywhere else means a
    field some reader uses is not checked on load."""
    d = tmp_path / "res"
    shutil.copytree(FIX, d)
    crashes = []
    for path, doc in _mutants(stem, MUTANTS, seed=zlib.crc32(stem.encode())):
        (d / f"{stem}.json").write_text(json.dumps(doc))
        try:
            with warnings.catch_warnings():
                # 1e300 is a finite number, so it is read; numpy overflows on its square, and
                # the analysis turns the inf into "unknown" (what the test checks is no crash)
                warnings.simplefilter("ignore", RuntimeWarning)
                data = results.load(d)
                verdict.decide(data, None)
                tables.all_tables(data)
        except DataError as e:
            assert f"{stem}.json" in str(e)
        except Exception as e:  # noqa: BLE001 - what the test is looking for
            crashes.append(f"{'.'.join(map(str, path))}: {type(e).__name__}: {e}")
    assert not crashes, "\n".join(crashes[:10])


# ---- the other doors: a system root, a recording, a documentation page -----------------------

MACHINE = ROOT / "tests" / "fixtures" / "machines" / "amd-epyc-zen4-kvm"


@pytest.fixture
def sysroot(tmp_path):
    d = tmp_path / "root"
    shutil.copytree(MACHINE, d, symlinks=True)
    return d


def test_sysroot_fifo_is_refused_not_waited_on(sysroot):
    """`tw doctor --sysroot` hung on a FIFO cpuinfo: now one line naming it, exit 3."""
    (sysroot / "proc" / "cpuinfo").unlink()
    os.mkfifo(sysroot / "proc" / "cpuinfo")
    p = tw("doctor", "--sysroot", sysroot, timeout=120)
    one_line_error(p, str(sysroot / "proc" / "cpuinfo"), "is a FIFO, not a regular file")
    assert p.returncode == 3


def test_sysroot_gzip_bomb_is_capped(sysroot):
    """A config.gz that expands to 64 MiB (a real one is ~300 KiB; a 2 MB bomb expands to
    gigabytes and exhausted memory): refused at 16 MiB decompressed, exit 3."""
    import gzip
    (sysroot / "proc" / "config.gz").write_bytes(gzip.compress(b"\0" * (64 << 20)))
    p = tw("doctor", "--sysroot", sysroot, timeout=120)
    one_line_error(p, str(sysroot / "proc" / "config.gz"), "decompresses to more than 16 MiB")
    assert p.returncode == 3
    (sysroot / "proc" / "config.gz").write_bytes(gzip.compress(
        (MACHINE / "boot" / "config-6.18.44-fc-v595").read_bytes()))
    assert tw("doctor", "--sysroot", sysroot, timeout=120).returncode == 0


def test_sysroot_text_cannot_reach_the_terminal_raw(sysroot):
    """A recording whose CPU model name retitles and clears the terminal is shown escaped."""
    cpuinfo = sysroot / "proc" / "cpuinfo"
    cpuinfo.write_text(re.sub(r"(?m)^model name\s*:.*$", "model name\t: \x1b]0;pwned\x07\x1b[2J",
                              cpuinfo.read_text()))
    p = tw("doctor", "--sysroot", sysroot, timeout=120)
    assert p.returncode == 0, p.stderr
    assert "\x1b" not in p.stdout and "\x07" not in p.stdout
    assert "\\x1b]0;pwned\\x07\\x1b[2J" in p.stdout


@pytest.mark.parametrize("planted", ["proc", "boot", "sys"])
def test_record_is_confined(tmp_path, planted):
    """`tw doctor --record DIR` with DIR/proc a symbolic link wrote 7 files outside DIR (and
    DIR/boot -> /boot would overwrite /boot/config-*): refused, nothing written outside."""
    d, outside = tmp_path / "rec", tmp_path / "outside"
    d.mkdir()
    outside.mkdir()
    (outside / "precious").write_text("not tw's\n")
    (d / planted).symlink_to(outside)
    before = snapshot(outside)
    p = tw("doctor", "--record", d, timeout=300)
    one_line_error(p, str(d / planted), "refusing to write through it")
    assert p.returncode == 3
    assert snapshot(outside) == before


def test_record_writes_a_replayable_root(tmp_path):
    d = tmp_path / "rec"
    p = tw("doctor", "--record", d, timeout=300)
    assert p.returncode == 0, p.stderr
    assert (d / "proc" / "cpuinfo").is_file()
    assert tw("doctor", "--sysroot", d, "--json", timeout=120).returncode == 0


def test_update_doc_without_markers_is_one_line(tmp_path):
    """tw explain --update-doc of a file without the markers was a traceback; now one line
    naming the file, exit 2, and the file as it was."""
    doc = tmp_path / "page.md"
    doc.write_text("# a page\nno markers\n")
    p = tw("explain", "--update-doc", doc, timeout=300)
    one_line_error(p, str(doc), "has no <!-- live:begin --> ... <!-- live:end --> section")
    assert p.returncode == 2
    assert doc.read_text() == "# a page\nno markers\n"


def test_update_doc_does_not_write_through_a_link(tmp_path):
    """The page is replaced whole (core.files), never written through a link: a page that is
    a symbolic link to another file is refused, and that file is left as it was."""
    from twtools.present import explain
    target = tmp_path / "elsewhere.md"
    target.write_text(f"x\n{explain.BEGIN}\nold\n{explain.END}\n")
    page = tmp_path / "page.md"
    page.symlink_to(target)
    with pytest.raises(DataError, match="symbolic link"):
        explain.update_doc(page, "new\n")
    assert target.read_text() == f"x\n{explain.BEGIN}\nold\n{explain.END}\n"

