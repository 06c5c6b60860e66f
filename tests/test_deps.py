"""scripts/deps.sh: as a non-root user it names the missing package and the exact command.

The README promises that `make test` and `make report` set everything up as
root and, for anyone else, print the apt-get command and stop.  This breaks if
a check stops detecting a missing tool, or if the script tries to install (or
silently continues) without root.  A missing tool is simulated by a PATH that
holds every system command except nasm."""
import os
import pwd
import shutil
import tempfile

from pathlib import Path

import pytest

from conftest import ROOT, run


@pytest.fixture
def path_without_nasm():
    # Not pytest's tmp_path: its parents are private to root, and the
    # unprivileged user must be able to run what is in this PATH.
    top = tempfile.mkdtemp(prefix="tw-deps-")
    os.chmod(top, 0o755)
    fake = Path(top) / "bin"
    fake.mkdir()
    for d in ("/usr/local/bin", "/usr/bin", "/bin", "/usr/sbin", "/sbin"):
        if not os.path.isdir(d):
            continue
        for name in os.listdir(d):
            if name != "nasm" and not (fake / name).exists():
                (fake / name).symlink_to(os.path.join(d, name))
    fake.chmod(0o755)
    yield str(fake)
    shutil.rmtree(top)


def test_non_root_prints_the_command_and_stops(path_without_nasm):
    if os.geteuid() != 0:
        pytest.skip("needs root to switch to an unprivileged user")
    nobody = pwd.getpwnam("nobody")
    p = run(["/bin/bash", ROOT / "scripts" / "deps.sh", "build"],
            env={"PATH": path_without_nasm, "HOME": "/tmp"}, text=True, cwd="/",
            user=nobody.pw_uid, group=nobody.pw_gid, extra_groups=[])
    assert p.returncode == 1, p.stderr
    assert "missing packages:" in p.stderr and "nasm" in p.stderr
    assert "apt-get install -y" in p.stderr and "nasm" in p.stderr.splitlines()[-1]


def test_nothing_missing_here_exits_zero():
    p = run(["/bin/bash", ROOT / "scripts" / "deps.sh"], text=True)
    assert p.returncode == 0, p.stderr
    assert p.stderr == ""
