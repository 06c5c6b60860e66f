"""`make deb`: the package's build (packaging/build-deb.sh) from the committed tree, twice.

Why it can break: a byte that depends on the build (a path, a time, an owner, the order of a
tar, a compiled .pyc) makes two builds differ; a file the package misses or a maintainer
script's mistake shows in lintian; the man page or completion drifting from the parsers; the
unit pointing anywhere but /usr/bin/tw.

HEAD is cloned twice, into folders of different path lengths, and each clone builds its
package (what is committed is what is tested; the checkout's own build/ is not touched).  Both
must be the same bytes.  lintian must say nothing but what docs/packaging.md argues.

The clean-root test (TW_DEB_TEST=1, off by default: a few minutes, root, Debian's mirror):
the package installed with apt into a Debian 12 minbase root made by debootstrap (cached as a
tarball in $TW_DEB_CACHE, by default /var/cache/timewrite-deb-test), with no compiler, git or
pip, then tw --version, tw watch with a static 32-bit program counted in /metrics, tw watch
--report, an upgrade with the state in place, remove (state kept) and purge (state gone).  It
runs in chroot (the host's kernel: BPF needs it) in a private mount namespace, with /proc, /sys
(its submounts: tracefs, bpf, BTF) and /dev mounted, so no mount outlives it.  Run it with

    TW_DEB_TEST=1 .venv/bin/python -m pytest -s tests/test_deb.py
"""
import gzip
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from conftest import ROOT, need_root, need_tool

SCRIPT = ROOT / "packaging" / "build-deb.sh"
VPY = ROOT / ".venv" / "bin" / "python"


def sh(cmd, **kw):
    kw.setdefault("capture_output", True)
    kw.setdefault("text", True)
    return subprocess.run([str(c) for c in cmd], **kw)


def build_in_clone(where):
    """Clone HEAD into `where` and build the package there; returns (deb path, seconds)."""
    head = sh(["git", "-C", ROOT, "rev-parse", "HEAD"]).stdout.strip()
    assert sh(["git", "clone", "-q", "--no-checkout", ROOT, where]).returncode == 0
    p = sh(["git", "-C", where, "checkout", "-q", "--detach", head])
    assert p.returncode == 0, p.stderr
    env = dict(os.environ, SOURCE_DATE_EPOCH=sh(["git", "-C", where, "log", "-1",
                                                 "--format=%ct"]).stdout.strip())
    env.pop("DEB_MAINTAINER", None)
    version = sh([VPY, "-m", "twtools.core.version"], cwd=where / "scripts").stdout.strip()
    t0 = time.monotonic()
    p = sh([where / "packaging" / "build-deb.sh", where / "build" / "deb", version, VPY],
           cwd=where, env=env, timeout=900)
    assert p.returncode == 0, p.stderr[-3000:]
    return Path(p.stdout.strip().splitlines()[-1]), time.monotonic() - t0


@pytest.fixture(scope="module")
def debs(tmp_path_factory):
    for tool in ("git", "dpkg-deb", "llvm-strip", "nasm", "clang"):
        need_tool(tool)
    if not Path("/usr/lib/python3/dist-packages/build_manpages/manpage.py").exists():
        pytest.skip("python3-argparse-manpage is not installed (make test installs it as root)")
    base = tmp_path_factory.mktemp("deb")
    a, sa = build_in_clone(base / "a" / "timewrite")
    b, sb = build_in_clone(base / "a-longer-folder" / "timewrite")
    print(f"\n[deb] two builds: {sa:.1f} s and {sb:.1f} s; {a.name}: {a.stat().st_size} bytes")
    return a, b


def test_two_builds_of_one_commit_are_the_same_bytes(debs):
    a, b = debs
    assert a.name == b.name
    assert not a.name.endswith(".dirty_amd64.deb"), "a clean clone's version says dirty"
    assert a.read_bytes() == b.read_bytes(), (
        f"{a} and {b} differ: diffoscope {a} {b} shows where")


def control(deb):
    return dict(re.findall(r"(?m)^([A-Za-z-]+): (.*)$",
                           sh(["dpkg-deb", "-f", deb]).stdout))


def test_package_holds_the_agent_and_its_unit(debs, tmp_path):
    deb = debs[0]
    c = control(deb)
    assert c["Package"] == "timewrite" and c["Architecture"] == "amd64"
    version = deb.name.split("_")[1]
    assert c["Version"] == version
    depends = {d.split()[0] for d in c["Depends"].split(", ")}
    assert {"python3", "python3-numpy", "python3-prometheus-client", "libbpf1"} <= depends
    # The agent's dependencies hold no compiler, no git, no pip; scipy and matplotlib are
    # only recommended (the other commands), so --no-install-recommends gives the agent alone.
    assert not depends & {"gcc", "clang", "make", "git", "python3-pip", "python3-scipy",
                          "python3-matplotlib"}
    assert sh(["dpkg-deb", "-x", deb, tmp_path]).returncode == 0
    lib = tmp_path / "usr" / "lib" / "timewrite"
    assert (lib / "VERSION").read_text().strip() == version
    assert os.readlink(tmp_path / "usr" / "bin" / "tw") == "../lib/timewrite/scripts/tw"
    assert (lib / "scripts" / "tw").read_text().startswith("#!/usr/bin/python3\n")
    for f in ("watchbpf", "watch/exec.bpf.o", "watch/window.bpf.o", "syscost-32-int80",
              "syscost-64-syscall"):
        assert (lib / "build" / f).is_file(), f
    assert not list(tmp_path.rglob("*.pyc")) and not list(tmp_path.rglob("__pycache__"))
    unit = (tmp_path / "lib" / "systemd" / "system" / "timewrite-watch.service").read_text()
    assert re.search(r"(?m)^ExecStart=/usr/bin/tw watch --state /var/lib/timewrite-watch "
                     r"\$TW_WATCH_OPTIONS$", unit)
    assert "EnvironmentFile=-/etc/default/timewrite-watch" in unit
    assert "/opt/timewrite" not in unit and "TW=" not in unit
    # The man page and the completion name every command, and `tw watch`'s options.
    man = gzip.decompress((tmp_path / "usr/share/man/man1/tw.1.gz").read_bytes()).decode()
    comp = (tmp_path / "usr/share/bash-completion/completions/tw").read_text()
    for word in ("watch", "fleet", "doctor", r"\-\-window\-period"):
        assert word in man, word
    assert re.search(r"(?m)^    watch\) opts='.*--window-period", comp)
    assert str(ROOT) not in man and "/tmp/" not in man


def test_lintian_says_only_what_docs_argue(debs):
    need_tool("lintian")
    p = sh(["lintian", "--tag-display-limit", "0", debs[0]], timeout=300)
    tags = sorted(set(re.findall(r"(?m)^[EW]: timewrite: (\S+)", p.stdout)))
    print(f"\n[deb] lintian: {p.stdout.strip()}")
    # docs/packaging.md, "What lintian says", argues each one left.
    assert tags == ["copyright-without-copyright-notice"], p.stdout
