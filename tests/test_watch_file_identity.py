"""tw watch identifies a program by its file, for real: the exec tracer attached, 32-bit
programs started by the names an operator cannot find them by.

  - two different files, both started as `./a.out` from two folders, are two programs, each
    named by its absolute path;
  - one file started as `./prog`, as `../c/prog`, through a symbolic link and through a hard
    link is one program (the identity is the file, its device and inode: a hard link is the
    same file), named by the path the kernel first resolved for it, `c/prog`;
  - a file deleted before its exec (run through /proc/self/fd) is named by its device and
    inode, with a note saying it was deleted and what its path was; so is a file whose path
    is longer than the kernel's walk takes (1023 bytes) or deeper (48 components), each
    with its note;
  - `tw watch --report` (text and JSON) gives the name each was started by, the file's
    device and inode, and the note.

Why it can break: a key by the name execve was given (the watch counted `./a.out` once for two
files and `./prog` and `../c/prog` as two), the kernel's dentry and mount walk (a CO-RE field
the running kernel names otherwise, a mount crossed wrongly: a path without its mount point's
part), the device number's encoding between the kernel and stat(2), the deleted check.
Skips: those of need_watch (not root, no BTF, no tracefs); 32-bit programs cannot run here.
"""
import json
import os
import shutil
import subprocess
import sys

from conftest import ROOT, need_supported, need_watch
from test_watch_live import free_port, get, start_watch, stop, wait_for

SRC = ROOT / "build" / "syscost-32-int80"     # any 32-bit file; run without arguments it exits


def report(state, *extra):
    p = subprocess.run([sys.executable, ROOT / "scripts" / "tw", "watch", "--report", "--since",
                        "1d", "--state", state, *extra], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    return p.stdout


def test_programs_are_their_files(tmp_path):
    need_watch()
    need_supported("syscost", "32-int80")
    a, b, c, d = (tmp_path / x for x in "abcd")
    for x in (a, b, c, d):
        x.mkdir()
    for x in (a / "a.out", b / "a.out", c / "prog", d / "gone"):
        shutil.copy(SRC, x)                      # four files: four inodes
    (c / "link").symlink_to(c / "prog")
    long = tmp_path.joinpath(*["L" * 250] * 5)           # over 1023 bytes
    deep = tmp_path.joinpath(*["D"] * 50)                # over 48 components
    for x in (long, deep):
        x.mkdir(parents=True)
        shutil.copy(SRC, x / "p")
    os.link(c / "prog", c / "hard")
    state = tmp_path / "state"
    state.mkdir()
    port = free_port()
    w = start_watch(state, port, "--window", "0", "--interval", "1")
    try:
        quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
        for folder, name in ((a, "./a.out"), (b, "./a.out"), (c, "./prog"), (a, "../c/prog"),
                             (c, "./link"), (c, "./hard")):
            subprocess.run([name], cwd=folder, **quiet)
        for x in (long, deep):
            subprocess.run(["./p"], cwd=x, **quiet)
        # deleted before its exec: opened, unlinked, run through its descriptor
        fd = os.open(d / "gone", os.O_RDONLY)
        st = os.fstat(fd)
        os.unlink(d / "gone")
        subprocess.run([f"/proc/self/fd/{fd}"], pass_fds=(fd,), **quiet)
        os.close(fd)

        def counted():
            text = get(f"http://127.0.0.1:{port}/metrics")
            return str(c / "prog") in text and "inode" in text and str(b / "a.out") in text
        wait_for(counted, 60, "the programs counted")
    finally:
        assert stop(w) == 0
    doc = json.loads(report(state, "--json"))
    progs = {s["program"]: s for s in doc["stop"]}
    for x in (a / "a.out", b / "a.out"):
        p = progs[str(x)]
        assert p["execs"] == 1 and p["started_as"] == "./a.out", p
        assert (p["dev"], p["ino"]) == (os.stat(x).st_dev, os.stat(x).st_ino), p
    p = progs[str(c / "prog")]
    assert p["execs"] == 4, p                    # ./prog, ../c/prog, the link, the hard link
    assert (p["dev"], p["ino"]) == (os.stat(c / "prog").st_dev, os.stat(c / "prog").st_ino)
    assert not [k for k in progs if k.endswith(("/link", "/hard", "./a.out", "./prog"))], progs
    gone = f"[file dev {os.major(st.st_dev)}:{os.minor(st.st_dev)} inode {st.st_ino}]"
    p = progs[gone]
    assert p["execs"] == 1 and p["started_as"] == f"/proc/self/fd/{fd}", p
    assert p["note"] == f"deleted before its exec (it was {d / 'gone'})", p
    for x, note in ((long, "longer than the kernel's walk takes"),
                    (deep, "more components than the kernel's walk takes")):
        st = os.stat(x / "p")
        p = progs[f"[file dev {os.major(st.st_dev)}:{os.minor(st.st_dev)} inode {st.st_ino}]"]
        assert note in p["note"] and p["started_as"] == "./p", p
    text = report(state)
    assert f"  {a / 'a.out'}  (32-bit)\n    started as ./a.out\n    file: device " in text, text
    assert f"  {gone}  (32-bit)\n" in text and f"note: deleted before its exec (it was {d / 'gone'})" in text
