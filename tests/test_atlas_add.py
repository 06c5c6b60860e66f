"""tw atlas add RESULTS [--name NAME]: a run into the atlas in one command, or one line why not.

Why it can break: the machine named from anything but its fingerprint (two runs of one CPU in
two folders); percall.json copied without being read through the fleet's one way in (a hostile
directory then ships in the repository); the README's table left behind, or given a row that
breaks it; the same run added twice making a second copy.  Each case runs `scripts/tw atlas
add` for real into a temporary atlas (TW_ATLAS), made from the shipped atlas's own runs, and
`tw fleet --atlas` reads the result.
"""
import json
import lzma
import os
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT

ATLAS = ROOT / "data" / "machines"
AMD = ATLAS / "amd-epyc-f25m1-kvm" / "runs" / "vm-20261125T012530Z-17226"


def tw(*args, atlas, timeout=300):
    env = dict(os.environ, TW_ATLAS=str(atlas))
    return subprocess.run([sys.executable, str(ROOT / "scripts" / "tw"), *map(str, args)],
                          capture_output=True, text=True, env=env, timeout=timeout)


def results_dir(tmp_path, src=AMD, name="vm-20261201T000000Z-1", new=True):
    """A results directory as tw run leaves one, made from an atlas run."""
    d = tmp_path / name
    d.mkdir()
    for f in ("meta.json", "fingerprint.json"):
        shutil.copy(src / f, d / f)
    text = lzma.decompress((src / "percall.json.xz").read_bytes()).decode()
    if new:
        # a new run of that machine: one more batch in its first cell's first round (the
        # same rounds under another name are the same run, test_the_same_rounds_are_one_run)
        text = text.replace('"samples_ns": [', '"samples_ns": [100.5, ', 1)
    (d / "percall.json").write_text(text)
    return d


@pytest.fixture
def atlas(tmp_path):
    a = tmp_path / "atlas"
    shutil.copytree(ATLAS, a)
    return a


def test_a_run_of_a_known_machine_joins_its_folder_and_its_row(atlas, tmp_path):
    d = results_dir(tmp_path)
    r = tw("atlas", "add", d, atlas=atlas)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("amd-epyc-f25m1-kvm/runs/vm-20261201T000000Z-1: added")
    run = atlas / "amd-epyc-f25m1-kvm" / "runs" / d.name
    assert sorted(p.name for p in run.iterdir()) == ["fingerprint.json", "meta.json",
                                                     "percall.json.xz"]
    assert lzma.decompress((run / "percall.json.xz").read_bytes()) == \
        (d / "percall.json").read_bytes()
    row = [ln for ln in (atlas / "README.md").read_text().splitlines()
           if ln.startswith("| `amd-epyc-f25m1-kvm` |")]
    assert len(row) == 1 and d.name in row[0] and "tw atlas add" in row[0]
    # the same run again: nothing changes
    again = tw("atlas", "add", d, atlas=atlas)
    assert again.returncode == 0 and "already there (the same raw rounds" in again.stdout
    assert "nothing changed" in again.stdout
    assert (atlas / "README.md").read_text().count(d.name) == 1
    # and tw fleet --atlas compares it with the rest
    f = tw("fleet", "--atlas", "--json", "--out", tmp_path / "view", atlas=atlas)
    assert f.returncode == 0, f.stderr
    hosts = json.dumps(json.loads(f.stdout)["machines"])
    assert d.name in hosts


def test_a_new_kind_of_machine_gets_a_folder_named_from_its_fingerprint(atlas, tmp_path):
    d = results_dir(tmp_path)
    fp = json.loads((d / "fingerprint.json").read_text())
    fp["cpu"].update(vendor="GenuineIntel", family=6, model=143,
                     model_name="Intel(R) Xeon(R) Platinum 8481C")
    (d / "fingerprint.json").write_text(json.dumps(fp))
    r = tw("atlas", "add", d, atlas=atlas)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("intel-xeon-f6m143-kvm/runs/")
    rows = [ln for ln in (atlas / "README.md").read_text().splitlines()
            if ln.startswith("| `intel-xeon-f6m143-kvm` |")]
    assert len(rows) == 1 and "Xeon" in rows[0] and rows[0].count(" | ") == 3


def test_a_name_can_be_given_and_must_be_plain(atlas, tmp_path):
    d = results_dir(tmp_path)
    bad = tw("atlas", "add", d, "--name", "../etc", atlas=atlas)
    assert bad.returncode == 2 and "not a plain folder name" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) <= 2 and "Traceback" not in bad.stderr
    ok = tw("atlas", "add", d, "--name", "my-lab-box", atlas=atlas)
    assert ok.returncode == 0 and (atlas / "my-lab-box" / "runs" / d.name).is_dir()


@pytest.mark.parametrize("harm", ["no-percall", "nan-samples", "not-results", "link", "twin"])
def test_a_damaged_or_hostile_directory_is_refused_in_one_line(atlas, tmp_path, harm):
    d = results_dir(tmp_path)
    if harm == "no-percall":
        (d / "percall.json").unlink()
    elif harm == "nan-samples":
        text = (d / "percall.json").read_text()
        (d / "percall.json").write_text(text.replace('"samples_ns": [', '"samples_ns": [NaN, ', 1))
    elif harm == "not-results":
        (d / "meta.json").write_text('{"host": "x"}')
    elif harm == "link":
        (d / "percall.json").unlink()
        (d / "percall.json").symlink_to("/etc/passwd")
    elif harm == "twin":
        # another run under a name already in the atlas
        (tmp_path / "twin").mkdir()
        d = results_dir(tmp_path / "twin", name=AMD.name)
    before = sorted(str(p.relative_to(atlas)) for p in atlas.rglob("*"))
    readme = (atlas / "README.md").read_text()
    r = tw("atlas", "add", d, atlas=atlas)
    assert r.returncode in (2, 3), (r.returncode, r.stderr)
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) <= 2, r.stderr
    assert sorted(str(p.relative_to(atlas)) for p in atlas.rglob("*")) == before
    assert (atlas / "README.md").read_text() == readme


# ---- issue 34, class 7 ------------------------------------------------------------------------

def _runs(atlas):
    return sorted(p.relative_to(atlas) for p in atlas.glob("*/runs/*"))


def test_the_same_rounds_are_one_run_whatever_the_name_or_folder(atlas, tmp_path):
    """The same raw rounds under another results directory name, another --name, or
    reformatted in another folder were added again: one run counted as three machines."""
    before = _runs(atlas)
    tries = [results_dir(tmp_path, name="vm-20261202T000000Z-7", new=False)]
    (tmp_path / "elsewhere").mkdir()
    other = results_dir(tmp_path / "elsewhere", name="copy-of-a-run", new=False)
    doc = json.loads((other / "percall.json").read_text())
    (other / "percall.json").write_text(json.dumps(doc, indent=4))
    tries.append(other)
    for d in tries:
        for extra in ([], ["--name", "another-box"]):
            r = tw("atlas", "add", d, *extra, atlas=atlas)
            assert r.returncode == 0, r.stderr
            assert r.stdout.startswith(f"amd-epyc-f25m1-kvm/runs/{AMD.name}: already there"), \
                r.stdout
    assert _runs(atlas) == before


def test_a_readme_without_its_table_refuses_before_copying(atlas, tmp_path):
    readme = atlas / "README.md"
    readme.write_text("# The atlas\n\nThe table was lost in a merge.\n")
    before = _runs(atlas)
    d = results_dir(tmp_path)
    r = tw("atlas", "add", d, atlas=atlas)
    assert r.returncode == 3 and "has no machines table" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert _runs(atlas) == before and readme.read_text().endswith("merge.\n")


def test_already_there_writes_a_missing_row(atlas, tmp_path):
    """A run copied in (an earlier add that failed before its README row) is repaired by the
    next add, not declared 'already there' with no row ever written."""
    d = results_dir(tmp_path)
    fp = json.loads((d / "fingerprint.json").read_text())
    fp["cpu"].update(vendor="GenuineIntel", family=6, model=143, model_name="Intel Xeon 8481C")
    (d / "fingerprint.json").write_text(json.dumps(fp))
    run = atlas / "intel-xeon-f6m143-kvm" / "runs" / d.name
    run.mkdir(parents=True)
    for f in ("meta.json", "fingerprint.json"):
        shutil.copy(d / f, run / f)
    (run / "percall.json.xz").write_bytes(lzma.compress((d / "percall.json").read_bytes()))
    r = tw("atlas", "add", d, atlas=atlas)
    assert r.returncode == 0 and "README row was missing, now written" in r.stdout, r.stdout
    rows = [ln for ln in (atlas / "README.md").read_text().splitlines()
            if ln.startswith("| `intel-xeon-f6m143-kvm` |")]
    assert len(rows) == 1 and d.name in rows[0]
    again = tw("atlas", "add", d, atlas=atlas)
    assert "nothing changed" in again.stdout
    assert (atlas / "README.md").read_text().count("| `intel-xeon-f6m143-kvm` |") == 1


def test_adds_take_turns_under_the_atlas_lock(atlas, tmp_path):
    """Two adds at once tore the README (read by one while the other wrote it): an add
    waits for the lock another holds, and two at once both leave their row."""
    import fcntl
    import time
    d1 = results_dir(tmp_path)
    (tmp_path / "b").mkdir()
    d2 = results_dir(tmp_path / "b", name="vm-20261203T000000Z-2")
    t2 = (d2 / "percall.json").read_text().replace('"samples_ns": [', '"samples_ns": [99.5, ', 1)
    (d2 / "percall.json").write_text(t2)
    readme = (atlas / "README.md").read_text()
    fd = os.open(atlas, os.O_RDONLY | os.O_DIRECTORY)
    fcntl.flock(fd, fcntl.LOCK_EX)
    env = dict(os.environ, TW_ATLAS=str(atlas))
    procs = [subprocess.Popen([sys.executable, str(ROOT / "scripts" / "tw"), "atlas", "add",
                               str(d)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for d in (d1, d2)]
    try:
        # Both wait for the lock: the kernel lists each as a waiter ("->") on the atlas
        # folder's inode in /proc/locks.  Seeing them there proves it, where waiting 20 s
        # only suggested it.
        ino = f":{os.stat(atlas).st_ino} "
        pids = {str(p.pid) for p in procs}
        deadline = time.monotonic() + 120

        def waiters():
            return {ln.split()[5] for ln in open("/proc/locks")
                    if " -> " in ln and ino in ln and ln.split()[5] in pids}
        while waiters() != pids and all(p.poll() is None for p in procs) and \
                time.monotonic() < deadline:
            time.sleep(0.05)
        assert waiters() == pids, [open("/proc/locks").read()] + [p.communicate() for p in procs
                                                                  if p.poll() is not None]
        # nothing copied meanwhile: the README as it was
        assert all(p.poll() is None for p in procs), [p.communicate() for p in procs]
        assert (atlas / "README.md").read_text() == readme
    finally:
        os.close(fd)
    outs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    row = next(ln for ln in (atlas / "README.md").read_text().splitlines()
               if ln.startswith("| `amd-epyc-f25m1-kvm` |"))
    assert d1.name in row and d2.name in row


def test_code_spans_show_their_text_as_it_is(atlas, tmp_path):
    """The command went into a code span escaped for Markdown outside one: backslashes
    showed doubled, and a backtick in it flipped the spans."""
    d = results_dir(tmp_path)
    cmd = "tw run --out `pwd`/r \\x | tee log"
    meta = json.loads((d / "meta.json").read_text())
    meta["command"] = cmd
    (d / "meta.json").write_text(json.dumps(meta))
    r = tw("atlas", "add", d, atlas=atlas)
    assert r.returncode == 0, r.stderr
    row = next(ln for ln in (atlas / "README.md").read_text().splitlines()
               if ln.startswith("| `amd-epyc-f25m1-kvm` |"))
    assert "``tw run --out `pwd`/r \\x \\| tee log``" in row, row
    assert "\\\\x" not in row and "\\`" not in row


def test_a_refused_name_is_escaped_once(atlas, tmp_path):
    """Class 10: the name went through escape.terminal, then repr, then the error handler's
    escape: a newline showed as 'a\\\\\\\\nb'.  It shows as 'a\\\\nb', once."""
    d = results_dir(tmp_path)
    r = tw("atlas", "add", d, "--name", "a\nb\x1b", atlas=atlas)
    assert r.returncode == 2
    assert "'a\\nb\\x1b' is not a plain folder name" in r.stderr, r.stderr
    assert "\\\\n" not in r.stderr and "\x1b" not in r.stderr
