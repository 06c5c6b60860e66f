"""Helpers of the fault-injection tests (tests/test_faults_*.py): running tw as a user would,
watching its process tree by PID, and small file systems to fill.

Kept apart from conftest.py so that the fault tests read top to bottom: each test file says
what it breaks and why that can break; the mechanics live here."""
import contextlib
import copy
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from conftest import ROOT

TW = [sys.executable, str(ROOT / "scripts" / "tw")]
# Stages cheap enough to interrupt at random: every kind of child (syscost, wvbench,
# timewrite under perf/strace, bpftrace sessions with their driver shell), no seed sweep
# (51 s of O_SYNC writes here).
CHEAP = "doctor,variants,bench,writev,stdio,tracers,attribution,observer"


def env(**extra):
    """The environment of a tw run in a test: the caller's, plus extra (None removes)."""
    e = dict(os.environ)
    for k, v in extra.items():
        if v is None:
            e.pop(k, None)
        else:
            e[k] = str(v)
    return e


def tw(*args, timeout=600, cwd=None, **extra):
    """Run scripts/tw with args; extra are environment variables.  Returns the process."""
    return subprocess.run(TW + [str(a) for a in args], capture_output=True, text=True,
                          timeout=timeout, cwd=cwd or ROOT, env=env(**extra))


def one_line_error(p, *needles):
    """The run failed with exactly one line on stderr after its progress lines: no
    traceback, the last line names the command and contains every needle.  Returns it."""
    assert p.returncode != 0, p.stderr[-2000:]
    assert "Traceback" not in p.stderr, p.stderr[-3000:]
    lines = [ln for ln in p.stderr.splitlines()
             if ln.strip() and not ln.startswith("tw: ") and not ln.startswith("usage:")]
    assert len(lines) == 1, p.stderr[-3000:]
    assert lines[0].startswith("tw "), lines
    for n in needles:
        assert n in lines[0], (n, lines[0])
    return lines[0]


# ---- processes, by PID ----------------------------------------------------------------------

def _stat(pid):
    """(ppid, pgid, state, starttime) from /proc/PID/stat, or None when gone."""
    try:
        # bytes: the command in parentheses is whatever the process named itself, UTF-8 or not
        text = Path(f"/proc/{pid}/stat").read_bytes().decode("utf-8", "backslashreplace")
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    rest = text[text.rindex(")") + 2:].split()
    return int(rest[1]), int(rest[2]), rest[0], int(rest[19])


def descendants(root):
    """{pid: (pgid, starttime, comm, parent's comm)} of every live process below root (root
    excluded)."""
    kids = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            st = _stat(int(d))
            if st:
                kids.setdefault(st[0], []).append(int(d))
    out, todo, comms = {}, [root], {root: "tw"}
    while todo:
        parent = todo.pop()
        for c in kids.get(parent, []):
            st = _stat(c)
            if st and st[2] != "Z":
                try:
                    comm = Path(f"/proc/{c}/comm").read_bytes().decode("utf-8", "backslashreplace").strip()
                except OSError:
                    comm = "?"
                comms[c] = comm
                out[c] = (st[1], st[3], comm, comms.get(parent, "?"))
                todo.append(c)
    return out


def still_alive(procs):
    """The processes of a descendants() snapshot that still run (same pid and start time,
    not a zombie): the orphans."""
    left = {}
    for pid, (pgid, start, comm, _) in procs.items():
        st = _stat(pid)
        if st and st[3] == start and st[2] != "Z":
            left[pid] = comm
    return left


def wait_gone(procs, seconds=5):
    """still_alive() after giving the kernel and init a moment to reap."""
    deadline = time.monotonic() + seconds
    while True:
        left = still_alive(procs)
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.05)


# ---- results directories ---------------------------------------------------------------------

def meta(d):
    return json.loads((Path(d) / "meta.json").read_text())


def complete_run(results_root, **extra):
    """A cheap complete run under results_root (TW_RESULTS): the run results/latest must keep
    pointing at while later runs fail.  Returns its directory's name."""
    p = tw("run", "--quick", "--only", "doctor,variants", "--no-report",
           TW_RESULTS=results_root, **extra)
    assert p.returncode == 0, p.stderr[-2000:]
    link = Path(results_root) / "latest"
    assert link.is_symlink()
    assert meta(link)["state"] == "complete"
    return os.readlink(link)


def run_dirs(results_root):
    return sorted(p for p in Path(results_root).iterdir()
                  if p.is_dir() and not p.is_symlink() and p.name != "tmp")


def snapshot(top):
    """{relative path: (kind, size, mtime_ns)} of everything under top, symlinks unfollowed:
    to show that nothing outside a results directory was written."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(top):
        for n in dirnames + filenames:
            p = Path(dirpath) / n
            st = os.lstat(p)
            out[str(p.relative_to(top))] = (st.st_mode >> 12, st.st_size, st.st_mtime_ns)
    return out


# ---- small file systems ----------------------------------------------------------------------

@contextlib.contextmanager
def small_fs(path, size_kib, readonly=False):
    """A file system of size_kib KiB mounted at path: tmpfs, or a loop-mounted ext4 where
    tmpfs cannot be mounted.  Mounting needs root: without it the test is skipped, saying so."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small file system to fill needs root (make test runs as root)")
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    opts = f"size={size_kib}k,mode=0755"
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", opts, "tmpfs", str(path)],
                       capture_output=True, text=True)
    image = None
    if r.returncode != 0:
        image = path.with_name(path.name + ".img")
        with open(image, "wb") as f:
            f.truncate(max(size_kib, 1024) * 1024)
        subprocess.run(["mkfs.ext4", "-q", "-F", str(image)], check=True, capture_output=True)
        subprocess.run(["mount", "-o", "loop", str(image), str(path)], check=True,
                       capture_output=True)
    try:
        if readonly:
            subprocess.run(["mount", "-o", "remount,ro", str(path)], check=True,
                           capture_output=True)
        yield path
    finally:
        subprocess.run(["umount", str(path)], capture_output=True)
        if os.path.ismount(path):
            subprocess.run(["umount", "-l", str(path)], capture_output=True)
        if image is not None:
            image.unlink()


def remount(path, how):
    subprocess.run(["mount", "-o", f"remount,{how}", str(path)], check=True, capture_output=True)


def fill(path, leave=0):
    """Fill the file system holding path, leaving `leave` bytes free (one filler file)."""
    filler = Path(path) / ".filler"
    free = os.statvfs(path).f_bavail * os.statvfs(path).f_frsize
    with open(filler, "wb") as f:
        f.truncate(0)
        chunk = b"\0" * 4096
        n = max(0, free - leave)
        try:
            while n > 0:
                n -= f.write(chunk[:min(4096, n)])
            f.flush()
            os.fsync(f.fileno())
        except OSError:
            pass
    return filler


def unreachable_by_others(path):
    """The first directory on the way to path (path included) that other users may not
    enter (no o+x), as (directory, mode), or None when every one lets them through."""
    path = Path(path).absolute()
    for d in [*reversed(path.parents), path]:
        mode = stat.S_IMODE(d.stat().st_mode)
        if d.is_dir() and not mode & 0o001:
            return d, mode
    return None


@contextlib.contextmanager
def checkout_for_others():
    """A checkout another user can reach: ROOT itself when they can enter every directory
    on the way to it, else a copy of it by hard links in a world-reachable temporary
    directory.  A clone in root's home or in a `mktemp -d` directory is mode 0700, and
    nobody cannot even start scripts/tw there.  The copy leaves out .git and results/;
    hard links make it cost no data, and keep every file's owner and mode.  Where no copy
    can be made (the temporary directory is on another file system), the test skips,
    quoting the mode that keeps the user out."""
    blocked = unreachable_by_others(ROOT / "scripts" / "tw")
    if blocked is None:
        yield ROOT
        return
    d, mode = blocked
    top = Path(tempfile.mkdtemp(prefix="tw-checkout-"))
    try:
        top.chmod(0o755)
        if unreachable_by_others(top) is not None:
            pytest.skip(f"{d} is mode {mode:04o}, so other users cannot reach this checkout, "
                        f"and {tempfile.gettempdir()} cannot hold a copy they can reach")
        try:
            shutil.copytree(ROOT, top / "timewrite", symlinks=True, copy_function=os.link,
                            ignore=shutil.ignore_patterns(".git", "results"))
        except (OSError, shutil.Error) as e:
            pytest.skip(f"{d} is mode {mode:04o}, so other users cannot reach this checkout, "
                        f"and no copy by hard links could be made in {top} ({e})")
        for sub in [top / "timewrite", *(top / "timewrite").rglob("*")]:
            if sub.is_dir() and not sub.is_symlink():
                sub.chmod(stat.S_IMODE(sub.stat().st_mode) | 0o055)
        yield top / "timewrite"
    finally:
        shutil.rmtree(top, ignore_errors=True)


def trimmed(doc, n=3):
    """A JSON document with only the first n items of every list: every field is still there,
    and each of the many tries over its fields is fast."""
    if isinstance(doc, dict):
        return {k: trimmed(v, n) for k, v in doc.items()}
    if isinstance(doc, list):
        return [trimmed(v, n) for v in doc[:n]]
    return doc


def every_path(o, here=()):
    """Every (path, value) in a JSON document, the root first, every item of every list."""
    yield here, o
    if isinstance(o, dict):
        for k, v in o.items():
            yield from every_path(v, here + (k,))
    elif isinstance(o, list):
        for i, v in enumerate(o):
            yield from every_path(v, here + (i,))


def random_replacements(doc, rng, values, count, shared=False):
    """count (path, document) pairs: each a deep copy of doc with the value at one path drawn
    by rng replaced by a copy of one of values.  shared: only the containers on the path are
    copied and the rest is doc's own, for a reader that changes nothing (a deep copy of a
    percall.json each time is most of the cost); an analysis may annotate what it reads."""
    where = [p for p, _ in every_path(doc) if p]
    for _ in range(count):
        path = rng.choice(where)
        new = copy.copy(doc) if shared else copy.deepcopy(doc)
        parent = new
        for k in path[:-1]:
            if shared:
                parent[k] = copy.copy(parent[k])
            parent = parent[k]
        parent[path[-1]] = copy.deepcopy(rng.choice(values))
        yield path, new


def hostile_crashes(doc, values, check, name):
    """Every leaf path of doc, each value of values put there, and check(document) run on it:
    the lines of those that crashed, by anything but a DataError naming the file `name`."""
    import warnings
    from twtools.core.ui import DataError
    crashes = []
    for path in [p for p in json_paths(doc) if p]:
        for bad in values:
            try:
                with warnings.catch_warnings():
                    # 1e300 is finite, so it is read; numpy overflows on its square and the
                    # analysis turns the inf into "unknown" (the test looks for crashes)
                    warnings.simplefilter("ignore", RuntimeWarning)
                    check(replaced(doc, path, bad))
            except DataError as e:
                assert name in str(e)
            except Exception as e:     # noqa: BLE001 - what the tests look for
                crashes.append(f"{'.'.join(map(str, path))} = {bad!r}: {type(e).__name__}: {e}")
    return crashes


def json_paths(doc, only=None, path=()):
    """Every path into a JSON document (dict keys; the first two items of each list), inner
    nodes after their children and the root () last; only those to a value of type `only`
    when given."""
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from json_paths(v, only, path + (k,))
    elif isinstance(doc, list):
        for i, v in enumerate(doc[:2]):
            yield from json_paths(v, only, path + (i,))
    if only is None or isinstance(doc, only):
        yield path


def replaced(doc, path, value):
    """A deep copy of a JSON document with the value at `path` replaced."""
    out = json.loads(json.dumps(doc))
    parent = out
    for k in path[:-1]:
        parent = parent[k]
    parent[path[-1]] = value
    return out
