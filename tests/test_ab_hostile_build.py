"""tw ab --build-a DIR with another build whose syscost is not to be trusted (issue 34, class 9).

Why it can break: tw ab runs the syscost of a build directory the user names, and read its
output whole and as it came: a syscost that printed a string or NaN for a figure ended in exit
70, one that printed 2 GB was read whole (MemoryError at 1.3 GB), and one that was a directory
read "Permission denied".  Each is now that cell, unusable, in one line, and the other side
still runs, named as the user's program (not the temporary copy it ran from).  The programs
here are small shell scripts standing in for a hostile build.
"""
import json
import shutil
import sys

import pytest

from conftest import ROOT
from faults_util import tw

SCRIPTS = {
    "string": 'echo \'{"samples_ns": ["fast", 1.0], "cpu": 0}\'',
    "nan": 'echo \'{"samples_ns": [NaN, 1.0], "cpu": 0}\'',
    "types": 'echo \'{"samples_ns": [1.0, 2.0], "disturbed": "no", "cpu": "zero"}\'',
    "huge-figure": 'echo \'{"samples_ns": [1e308, 1.0]}\'',
    "not-an-object": "echo '{}' ; echo '[1, 2]' >/dev/null; echo '{\"x\": 1}'",
    # 2 GiB of one line: bounded, the program stopped, never read whole
    "2GB": 'printf \'{"samples_ns": [\'; head -c 2147483648 /dev/zero | tr "\\\\0" 1; echo "]}"',
}
NEEDLE = {"string": "samples_ns[0] is fast", "nan": "NaN is not a number",
          "types": "disturbed is not one true or false", "huge-figure": "samples_ns[0] is 1e+308",
          "not-an-object": "samples_ns is not a list", "2GB": "printed more than 64 MiB",
          "directory": "is a directory, not a syscost program"}


def _builds(tmp_path, build, kind):
    good = tmp_path / "good"
    good.mkdir()
    shutil.copy(build / "syscost-64-syscall", good)
    bad = tmp_path / "bad"
    bad.mkdir()
    prog = bad / "syscost-64-syscall"
    if kind == "directory":
        prog.mkdir()
    else:
        prog.write_text("#!/bin/sh\n" + SCRIPTS[kind] + "\n")
        prog.chmod(0o755)
    return good, bad


@pytest.mark.parametrize("kind", list(NEEDLE))
def test_an_unusable_build_is_that_cell_in_one_line(build, tmp_path, kind):
    good, bad = _builds(tmp_path, build, kind)
    p = tw("ab", "--build-a", bad, "--build-b", good, "--variants", "64-syscall", "--ops",
           "null", "--rounds", "3", "--out", tmp_path / "ab", "--format", "json",
           cwd=tmp_path, timeout=300)
    assert p.returncode == 1, p.stderr[-3000:]
    assert "Traceback" not in p.stderr and "internal error" not in p.stderr
    warned = [ln for ln in p.stderr.splitlines() if "warning: ab:" in ln]
    assert len(warned) == 1 and NEEDLE[kind] in warned[0], p.stderr[-3000:]
    # named as the user's program, not as the copy it ran from (gone when the line is read)
    assert str(bad / "syscost-64-syscall") in warned[0], warned[0]
    assert "tw-copies-" not in p.stderr
    doc = json.loads((tmp_path / "ab" / "ab.json").read_text())
    cell = doc["cells"][0]
    assert NEEDLE[kind] in cell["a"]["reason"] and cell["a"]["rounds"] == []
    assert len(cell["b"]["rounds"]) == 3          # the other side still ran
    assert sys.executable and ROOT
