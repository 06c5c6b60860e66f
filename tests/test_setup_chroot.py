"""The README's two commands on a bare Debian 12: minbase with only git and ca-certificates.

Off by default: it needs root (chroot, mounts, a second user) and several minutes (root's
set-up installs about 400 Debian packages and the venv from PyPI).  Run it with

    TW_SETUP_TEST=1 ./tw-make test PYTEST_ARGS='-s -k setup_chroot'

(`./tw-make test` then also installs mmdebstrap).  The minbase root file system
(`mmdebstrap --variant=minbase --include=git,ca-certificates bookworm`, from Debian's
packages) is built once and cached as a tarball in $TW_SETUP_CACHE, by default
/var/cache/timewrite-setup-test; delete the tarball to rebuild it.  Each run unpacks it
afresh under pytest's temporary directory and deletes it afterwards.

The repository's HEAD is cloned (what is committed is what is tested) to /root/timewrite,
private to root as a root user's clone is, and to /home/tw/timewrite for the unprivileged
user tw.  Every command runs in new mount and PID namespaces (unshare), so no mount and
no process outlives it.  /sys is bound without its submounts: tracefs is not mounted at
/sys/kernel/tracing there, as on a machine that boots without it.  The host's resolver,
local CA certificates and /etc/pip.conf are copied in: they belong to this network, and
every machine on it has them.

Phases, each timed (printed with -s, and junit properties):
  1. tw, before root's install: `./tw-make test` and `./tw-make report` each print one
     complete apt-get command (make and python3-venv in it), install nothing, and stop.
  2. root: `./tw-make report REPORT_ARGS=--quick` installs what measuring needs, mounts
     tracefs and measures; `./tw-make test` then adds only the test-only packages, builds
     and runs a subset of the tests that exercises what set-up installed.
  3. tw, after root's install: `./tw-make test` with a quick subset works unprompted.
"""
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from conftest import ROOT

pytestmark = pytest.mark.skipif(
    os.environ.get("TW_SETUP_TEST") != "1",
    reason="the set-up test is off by default: it needs root and about 7 minutes (a Debian "
           "minbase chroot that installs ~400 Debian packages); run it with TW_SETUP_TEST=1 "
           "./tw-make test PYTEST_ARGS='-s -k setup_chroot'")

SUITE = "bookworm"
SOURCES = [f"deb http://deb.debian.org/debian {SUITE} main",
           f"deb http://deb.debian.org/debian {SUITE}-updates main",
           f"deb http://deb.debian.org/debian-security {SUITE}-security main"]
CACHE = Path(os.environ.get("TW_SETUP_CACHE", "/var/cache/timewrite-setup-test"))
TARBALL = CACHE / f"{SUITE}-minbase-git.tar"
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
USER = "tw"
ROOT_TESTS = "test_deps or test_browser or test_traces_dryrun"   # set-up's checks, chromium, tracefs
USER_TESTS = "test_browser or test_stub_instructions"
COMMAND = "apt-get update && apt-get install -y "
TRACEFS = "mount -t tracefs nodev /sys/kernel/tracing"

# Every command in the chroot runs in its own mount and PID namespaces.
ENTER = r"""set -e
R=$1; shift
mount -t proc proc "$R/proc"
mount --bind /sys "$R/sys"
mount --rbind /dev "$R/dev"
exec chroot "$@"
"""


def sh(cmd, **kw):
    kw.setdefault("capture_output", True)
    kw.setdefault("text", True)
    return subprocess.run([str(c) for c in cmd], **kw)


class Chroot:
    def __init__(self, root, record):
        self.root = root
        self.times = {}
        self.record = record   # junit <properties> of the test suite

    def run(self, script, user=None, timeout=1800):
        home = f"/home/{user}" if user else "/root"
        spec = [f"--userspec={user}:{user}"] if user else []
        cmd = ["unshare", "--mount", "--propagation", "private", "--pid", "--fork", "--kill-child",
               "sh", "-c", ENTER, "sh", self.root, *spec, self.root,
               "env", "-i", f"PATH={PATH}", f"HOME={home}", "LANG=C.UTF-8", f"USER={user or 'root'}",
               "sh", "-c", f"cd {home}/timewrite && {script}"]
        t0 = time.monotonic()
        p = sh(cmd, timeout=timeout)
        return p, time.monotonic() - t0

    def timed(self, name, seconds, p):
        """Keep and print a phase's wall time, its set-up lines and its last line."""
        self.times[name] = seconds
        self.record(f"seconds: {name}", round(seconds, 1))
        said = [x for x in p.stderr.splitlines() if x.startswith("timewrite: ") or x.startswith(COMMAND)]
        last = (p.stdout.strip().splitlines() or [""])[-1]
        print(f"\n[setup-chroot] {name}: {seconds:.0f} s, exit {p.returncode}\n  "
              + "\n  ".join(said + [f"last line of stdout: {last}"]), flush=True)


def network_config(c):
    """This network's resolver, local CAs and pip configuration, as every machine on it has
    them (here PyPI is reached through a TLS proxy whose CA is a local one)."""
    for f in ("/etc/resolv.conf", "/etc/pip.conf"):
        if os.path.exists(f):
            dst = c.root / f.lstrip("/")
            if dst.is_symlink() or dst.exists():
                dst.unlink()
            shutil.copy(f, dst)
    local = Path("/usr/local/share/ca-certificates")
    if local.is_dir() and any(local.iterdir()):
        shutil.copytree(local, c.root / local.relative_to("/"), dirs_exist_ok=True)
        p = sh(["chroot", c.root, "update-ca-certificates"])
        assert p.returncode == 0, p.stderr


def mounts_under(path):
    with open("/proc/self/mountinfo") as f:
        return [line.split()[4] for line in f if line.split()[4].startswith(str(path))]


@pytest.fixture(scope="module")
def chroot(tmp_path_factory, record_testsuite_property):
    if os.geteuid() != 0:
        pytest.skip("needs root: it builds a root file system, mounts /proc, /sys, /dev and chroots")
    for tool in ("mmdebstrap", "unshare", "chroot", "git"):
        if shutil.which(tool) is None:
            pytest.fail(f"{tool} is not installed; as root, `TW_SETUP_TEST=1 ./tw-make test` installs it")
    head = sh(["git", "-C", ROOT, "rev-parse", "HEAD"]).stdout.strip()
    dirty = sh(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"]).stdout.strip()
    print(f"\n[setup-chroot] testing commit {head[:12]}"
          + (" (uncommitted changes in the checkout are not tested)" if dirty else ""))
    c = Chroot(tmp_path_factory.mktemp("setup-chroot") / "root", record_testsuite_property)
    t0 = time.monotonic()
    if not TARBALL.exists():
        CACHE.mkdir(parents=True, exist_ok=True)
        part = TARBALL.with_suffix(".part.tar")
        p = sh(["mmdebstrap", "--variant=minbase", "--include=git,ca-certificates", SUITE, part, *SOURCES],
               timeout=1800)
        assert p.returncode == 0, f"mmdebstrap failed: {p.stderr[-3000:]}"
        part.rename(TARBALL)
        c.times["build the minbase tarball (cached from now on)"] = time.monotonic() - t0
        c.record("seconds: build the minbase tarball", round(time.monotonic() - t0, 1))
    c.root.mkdir()
    assert sh(["tar", "-xf", TARBALL, "-C", c.root]).returncode == 0
    network_config(c)
    c.packages = sh(["chroot", c.root, "dpkg-query", "-W", "-f", ".\n"]).stdout.count(".")
    p = sh(["chroot", c.root, "useradd", "--create-home", "--shell", "/bin/sh", USER])
    assert p.returncode == 0, p.stderr
    for home, owner in ((c.root / "root", None), (c.root / "home" / USER, USER)):
        dst = home / "timewrite"
        assert sh(["git", "clone", "-q", "--no-checkout", ROOT, dst]).returncode == 0
        p = sh(["git", "-C", dst, "checkout", "-q", "--detach", head])
        assert p.returncode == 0, p.stderr
        if owner:
            uid, gid = (int(x) for x in next(line.split(":")[2:4] for line in
                                             (c.root / "etc" / "passwd").read_text().splitlines()
                                             if line.startswith(owner + ":")))
            for d, _, files in os.walk(dst):
                for x in [d] + [os.path.join(d, f) for f in files]:
                    os.lchown(x, uid, gid)
    assert (c.root / "root").stat().st_mode & 0o077 == 0, "/root in the chroot is not private"
    c.times["unpack and clone"] = time.monotonic() - t0 - sum(c.times.values())
    c.record("seconds: unpack and clone", round(c.times["unpack and clone"], 1))
    yield c
    print("\n[setup-chroot] wall times: " + "; ".join(f"{k} {v:.0f} s" for k, v in c.times.items()))
    left = mounts_under(c.root)
    if left:
        print(f"[setup-chroot] not deleting {c.root}: still mounted there: {left}")
    else:
        shutil.rmtree(c.root)


def printed_packages(stderr):
    last = stderr.strip().splitlines()[-1] if stderr.strip() else ""
    assert last.startswith(COMMAND), f"the last line is not one apt-get command: {last!r}\n{stderr}"
    return last, last[len(COMMAND):].split(" && ")[0].split()


def installed_packages(stderr, n):
    """The package lists of the 'installing N Debian packages: …' lines."""
    lists = re.findall(r"^timewrite: installing (\d+) Debian packages: (.*) …$", stderr, re.M)
    assert len(lists) == n, f"expected {n} install line(s):\n{stderr[-3000:]}"
    for count, pkgs in lists:
        assert int(count) == len(pkgs.split())
    return [pkgs.split() for _, pkgs in lists]


NEEDED = {"make", "gcc", "gcc-multilib", "nasm", "python3", "python3-venv", "strace", "bpftrace",
          "linux-perf", "procps"}
# lintian, llvm (llvm-strip) and python3-argparse-manpage: tests/test_deb.py builds the package.
TEST_ONLY = {"chromium", "golang-go", "openssh-server", "lintian", "llvm", "python3-argparse-manpage"}


@pytest.fixture(scope="module")
def phases(chroot):
    out = {}
    for target in ("test", "report"):
        p, s = chroot.run(f"./tw-make {target}", user=USER)
        chroot.timed(f"{USER} before root's install: ./tw-make {target}", s, p)
        out[f"before {target}"] = p
    out["make before"] = chroot.run("command -v make || echo no-make-yet", user=USER)[0]
    p, s = chroot.run("./tw-make report REPORT_ARGS=--quick")
    chroot.timed("root: ./tw-make report REPORT_ARGS=--quick (set-up, build, venv, measure)", s, p)
    out["root report"] = p
    p, s = chroot.run(f"./tw-make test PYTEST_ARGS='-p no:cacheprovider -k \"{ROOT_TESTS}\"'")
    chroot.timed("root: ./tw-make test (test-only packages, venv, subset of tests)", s, p)
    out["root test"] = p
    n = sh(["chroot", chroot.root, "dpkg-query", "-W", "-f", ".\n"]).stdout.count(".")
    print(f"\n[setup-chroot] root's two set-up runs installed {n - chroot.packages} Debian packages "
          f"(with dependencies) onto minbase's {chroot.packages}")
    p, s = chroot.run(f"./tw-make test PYTEST_ARGS='-p no:cacheprovider -k \"{USER_TESTS}\"'", user=USER)
    chroot.timed(f"{USER} after root's install: ./tw-make test (build, venv, subset of tests)", s, p)
    out["after"] = p
    return out


def test_non_root_before_install_prints_one_complete_command(phases):
    for target in ("test", "report"):
        p = phases[f"before {target}"]
        assert p.returncode == 1, f"./tw-make {target} did not stop with exit 1:\n{p.stdout}\n{p.stderr}"
        assert p.stdout == "", f"./tw-make {target} went on without root:\n{p.stdout}"
        last, pkgs = printed_packages(p.stderr)
        assert last.endswith(" && " + TRACEFS), last
        assert NEEDED <= set(pkgs), f"missing from the command: {NEEDED - set(pkgs)}"
        assert (TEST_ONLY <= set(pkgs)) == (target == "test"), pkgs
        assert len(p.stderr.strip().splitlines()) == 3, p.stderr
    assert phases["make before"].stdout.strip() == "no-make-yet", "something was installed without root"


def test_root_set_up_installs_quietly_and_works(phases):
    rep, tst = phases["root report"], phases["root test"]
    assert rep.returncode == 0, f"./tw-make report failed:\n{rep.stdout[-3000:]}\n{rep.stderr[-3000:]}"
    assert tst.returncode == 0, f"./tw-make test failed:\n{tst.stdout[-5000:]}\n{tst.stderr[-3000:]}"
    # What root installed is what the unprivileged user was told to install.
    _, told_report = printed_packages(phases["before report"].stderr)
    _, told_test = printed_packages(phases["before test"].stderr)
    [for_report] = installed_packages(rep.stderr, 1)
    [for_test] = installed_packages(tst.stderr, 1)
    assert for_report == told_report
    assert set(for_test) == set(told_test) - set(told_report) == TEST_ONLY
    assert "timewrite: mounted tracefs at /sys/kernel/tracing" in rep.stderr
    both = rep.stdout + rep.stderr + tst.stdout + tst.stderr
    for noise in ("Unpacking ", "Setting up ", "Selecting previously unselected", "Collecting ",
                  "Downloading "):
        assert noise not in both, f"install output leaked: {noise!r}"
    setup_lines = [x for x in rep.stderr.splitlines() if x.startswith("timewrite: ")]
    assert len(setup_lines) <= 5, setup_lines
    assert "report.md" in rep.stdout + rep.stderr, rep.stderr[-2000:]
    # Everything the subset needs is installed now, so nothing in it may skip.
    summary = tst.stdout.strip().splitlines()[-1]
    assert re.search(r"\d+ passed", summary), summary
    assert not re.search(r"failed|error|skipped", summary), summary


def test_non_root_after_install_just_works(phases):
    p = phases["after"]
    assert p.returncode == 0, f"{p.stdout[-5000:]}\n{p.stderr[-3000:]}"
    assert "apt-get install" not in p.stderr, p.stderr
    summary = p.stdout.strip().splitlines()[-1]
    assert re.search(r"\d+ passed", summary) and "failed" not in summary, summary
