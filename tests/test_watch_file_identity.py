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
    device and inode, and the note;
  - a file as it is now: a 64-bit file deleted and its inode number given to a 32-bit one (ext4
    does, at once, on a fresh file system) is another program, named by its own path, before
    and after a restart (it was named after the deleted file: the kernel's path map and the
    state's files were keyed by device and inode alone);
  - a program run from a memfd (memfd_create + fexecve, as container runtimes do) is named
    `[memfd:NAME dev M:m inode N]`, two memfds two programs (every one was "/").

Why it can break: a key by the name execve was given (the watch counted `./a.out` once for two
files and `./prog` and `../c/prog` as two), the kernel's dentry and mount walk (a CO-RE field
the running kernel names otherwise, a mount crossed wrongly: a path without its mount point's
part), the device number's encoding between the kernel and stat(2), the deleted check, the
generation read in the kernel (or its change-time stand-in) and by ioctl disagreeing, a walk
that takes an anonymous file's dentry for a mount's root.
Skips: those of need_watch (not root, no BTF, no tracefs); 32-bit programs cannot run here;
no mkfs.ext4 (the reused inode needs a file system of its own).
"""
import json
import os
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT, need_supported, need_tool, need_watch
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


def _named(port, *needles):
    def ok():
        text = get(f"http://127.0.0.1:{port}/metrics")
        return all(n in text for n in needles)
    return ok


@pytest.fixture
def ext4(tmp_path):
    """A fresh 8 MB ext4 file system, loop-mounted: its freed inode numbers are given again at
    once (the lowest free one of its one group)."""
    need_tool("mkfs.ext4")
    img, mnt = tmp_path / "fs.img", tmp_path / "fs"
    mnt.mkdir()
    with open(img, "wb") as f:
        f.truncate(8 << 20)
    subprocess.run(["mkfs.ext4", "-q", "-F", img], check=True, capture_output=True)
    subprocess.run(["mount", "-o", "loop", img, mnt], check=True, capture_output=True)
    try:
        yield mnt
    finally:
        subprocess.run(["umount", mnt], capture_output=True)
        if os.path.ismount(mnt):
            subprocess.run(["umount", "-l", mnt], capture_output=True)


def test_a_reused_inode_is_another_program(tmp_path, ext4):
    need_watch()
    need_supported("syscost", "32-int80")
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    tool, evil = ext4 / "usr-tool", ext4 / "evil32"
    shutil.copy(shutil.which("true"), tool)
    dev, ino = os.stat(tool).st_dev, os.stat(tool).st_ino
    state = tmp_path / "state"
    state.mkdir()

    def mine():
        """The programs of the report on this file system, or named by this inode."""
        return [p for p in _stop_list(state) if p["program"].startswith(str(ext4))
                or (p.get("dev"), p.get("ino")) == (dev, ino)]
    port = free_port()
    w = start_watch(state, port, "--window", "0", "--interval", "1")
    try:
        subprocess.run(["./usr-tool"], cwd=ext4, **quiet)
        wait_for(_named(port, str(tool)), 60, "usr-tool counted")
        os.unlink(tool)
        shutil.copy(SRC, evil)
        assert os.stat(evil).st_ino == ino, "ext4 gave the new file another inode number"
        subprocess.run(["./evil32"], cwd=ext4, **quiet)
        wait_for(_named(port, f'bits="32",program="{evil}"'), 60, "evil32 counted")
    finally:
        assert stop(w) == 0
    # a restart: the saved names are the files', the state's files keyed by generation too
    w = start_watch(state, port, "--window", "0", "--interval", "1")
    try:
        subprocess.run(["./evil32"], cwd=ext4, **quiet)
        wait_for(lambda: [p["execs"] for p in mine()] == [2], 60, "evil32 counted again")
    finally:
        assert stop(w) == 0
    # (the machine is shared: other people's 32-bit programs are in the report too)
    assert [(p["program"], p["why"], p["execs"], p["ino"], p["started_as"]) for p in mine()] \
        == [(str(evil), "32-bit", 2, ino, "./evil32")]


def _stop_list(state):
    return json.loads(report(state, "--json"))["stop"]


MEMFD = r"""
import os, sys
src = open(sys.argv[1], "rb").read()
for name in sys.argv[2:]:
    fd = os.memfd_create(name, 0)
    os.write(fd, src)
    st = os.fstat(fd)
    print(st.st_dev, st.st_ino, flush=True)
    pid = os.fork()
    if pid == 0:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1)
        os.dup2(null, 2)
        os.execve(fd, ["tw-memfd"], {})          # fexecve
    os.waitpid(pid, 0)
"""


def test_a_program_run_from_a_memfd_is_named_by_its_memfd(tmp_path):
    need_watch()
    need_supported("syscost", "32-int80")
    state = tmp_path / "state"
    state.mkdir()
    port = free_port()
    w = start_watch(state, port, "--window", "0", "--interval", "1")
    try:
        # two memfds of one name, one of another: three files, three programs
        p = subprocess.run([sys.executable, "-c", MEMFD, SRC, "tw-mem", "tw-mem", "tw-other"],
                           capture_output=True, text=True, timeout=60, check=True)
        files = [tuple(int(x) for x in ln.split()) for ln in p.stdout.split("\n") if ln]
        want = {f"[memfd:{n} dev {os.major(d)}:{os.minor(d)} inode {i}]"
                for n, (d, i) in zip(("tw-mem", "tw-mem", "tw-other"), files)}
        assert len(want) == 3
        wait_for(_named(port, *want), 60, "the memfd programs counted")
    finally:
        assert stop(w) == 0
    doc = json.loads(report(state, "--json"))
    progs = {s["program"]: s for s in doc["stop"]}
    assert want <= set(progs) and "/" not in progs, sorted(progs)
    for n in want:
        assert progs[n]["execs"] == 1 and progs[n]["why"] == "32-bit", progs[n]
        assert progs[n]["note"].startswith("an anonymous file (memfd_create"), progs[n]
