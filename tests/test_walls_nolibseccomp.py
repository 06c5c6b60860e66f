"""Without libseccomp, what needs it says so before anything runs, and what does not need it
works: never an internal error after the run.

libseccomp2 compiles profiles, as the runtimes compile them; the timewrite package depends on
it, but a checkout may lack it.  This breaks if tw ab --wall tracer:raw_syscalls (which needs
no profile) fails after every round because it looked a number up in libseccomp, if the
analysis of a wall (the rows' why, tw report's walls section) loads libseccomp, if the lesson
fails where it could say unknown, or if tw ab or tw explain with a profile fails other than
with one line and exit 2 naming the missing library.  The library is made missing for real,
for one command: in a mount namespace of its own, the file libseccomp.so.2 resolves to is
covered by /dev/null, so loading it fails as on a machine without it."""
import ctypes.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT, need_root, need_tool

TW = [sys.executable, str(ROOT / "scripts" / "tw")]


def _library():
    name = ctypes.util.find_library("seccomp")
    for d in ("/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/lib64"):
        p = Path(d) / (name or "libseccomp.so.2")
        if p.exists():
            return Path(os.path.realpath(p))
    pytest.fail("libseccomp.so.2 is not where the loader looks: make test installs libseccomp2")


def without_libseccomp(cmd, timeout=600):
    """cmd run with libseccomp.so.2 covered by /dev/null in a mount namespace of its own."""
    need_root()
    need_tool("unshare")
    lib = _library()
    script = 'mount --bind /dev/null "$1" && shift && exec "$@"'
    return subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", script,
                           "sh", str(lib)] + [str(c) for c in cmd], capture_output=True,
                          text=True, timeout=timeout, cwd=ROOT,
                          env=dict(os.environ, PYTHONPATH=str(ROOT / "scripts")))


def test_the_namespace_really_hides_it():
    p = without_libseccomp([sys.executable, "-c", "from twtools.machine import seccomp\n"
                            "try:\n    seccomp.lib()\nexcept seccomp.NoLibseccomp as e:\n"
                            "    print('missing:', e)\n"])
    assert p.returncode == 0 and "missing: libseccomp is not installed" in p.stdout, p.stderr


def test_a_profile_needs_it_and_says_so_before_anything_is_made(tmp_path):
    out = tmp_path / "ab"
    p = without_libseccomp(TW + ["ab", "--wall", "seccomp:docker", "--variants", "64-syscall",
                                 "--ops", "getppid", "--out", str(out)])
    assert p.returncode == 2, p.stderr
    assert "libseccomp is not installed" in p.stderr and "libseccomp2" in p.stderr
    assert "internal error" not in p.stderr and not out.exists()
    p = without_libseccomp(TW + ["explain", "--wall", "seccomp:container"])
    assert p.returncode == 2 and "libseccomp is not installed" in p.stderr, p.stderr


def test_what_needs_no_profile_works_and_its_analysis_needs_no_library(build, tmp_path):
    out = tmp_path / "ab"
    p = without_libseccomp(TW + ["ab", "--wall", "seccomp:allow", "--variants",
                                 "64-syscall,32-int80", "--ops", "null,getppid", "--rounds",
                                 "2", "--copies", "2", "--format", "json", "--out", str(out)])
    assert p.returncode == 0, p.stderr
    rows = json.loads(p.stdout)
    assert all(r["why"] and "answer: allow" in r["why"] for r in rows), rows
    # the whole analysis of what was measured, again without the library
    code = ("import json, sys\n"
            "from twtools.analyse import compare, walls\n"
            "doc = json.load(open(sys.argv[1]))\n"
            "rows = walls.explain_rows(compare.ab(doc), doc)\n"
            "print(json.dumps([r['why'] for r in rows]))\n"
            "print(walls.hole_lines('x', walls.arch_hole([[(6, 0, 0, 0x7fff0000)]]))[0])\n")
    p = without_libseccomp([sys.executable, "-c", code, out / "ab.json"])
    assert p.returncode == 0, p.stderr
    assert "no filter runs" in p.stdout or "filter instruction" in p.stdout
    p = without_libseccomp(TW + ["explain", "--wall", "seccomp:numbers-only"])
    assert p.returncode == 0 and "can still be made by their i386 number" in p.stdout, p.stderr


def test_the_tracer_wall_needs_no_library(build, tmp_path):
    need_tool("bpftool")
    p = without_libseccomp(TW + ["ab", "--wall", "tracer:raw_syscalls", "--variants",
                                 "64-syscall", "--ops", "getppid", "--rounds", "2",
                                 "--copies", "2", "--out", str(tmp_path / "ab")])
    assert p.returncode == 0, p.stderr
    assert "internal error" not in p.stderr


def test_the_lesson_says_unknown_without_it():
    code = ("from twtools.present import document, lesson\n"
            "doc = document.Doc()\n"
            "lesson.walls_chapter(doc, {'data': {}}, 9)\n"
            "print(document.MarkdownExporter().render(doc, None))\n")
    p = without_libseccomp([sys.executable, "-c", code])
    assert p.returncode == 0, p.stderr
    assert "unknown here: libseccomp is not installed" in p.stdout
    assert "can still be made by their i386 number" in p.stdout     # the hole needs none
