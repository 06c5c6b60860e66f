"""scripts/deps.sh: as a non-root user it prints one complete apt-get command and stops.

The README promises that `./tw-make test` and `./tw-make report` set everything up
as root and, for anyone else, print the one command root must run and stop.  This
breaks if a check stops detecting a missing tool, if it accepts a python3 whose venv
has no pip (Debian's python3 without python3-venv), or if the script tries to install
(or silently continues) without root.

A missing tool is a PATH that holds every system command except that one.  A python3
without python3-venv is a real interpreter whose standard library lacks ensurepip, as
Debian's does until python3-venv is installed.  deps.sh is copied to a world-readable
temporary directory first, so the unprivileged user can run it wherever the checkout
is (a checkout under /root or in a `mktemp -d` directory is private to root)."""
import os
import pwd
import shutil
import tempfile
from pathlib import Path

import pytest

from conftest import ROOT, run

SYSTEM_DIRS = ("/usr/local/bin", "/usr/bin", "/bin", "/usr/sbin", "/sbin")


def need_root_for_nobody():
    if os.geteuid() != 0:
        pytest.skip("needs root to switch to the unprivileged user nobody")


@pytest.fixture
def public_dir():
    """A world-readable directory holding a copy of deps.sh (not pytest's tmp_path:
    its parents are private to root)."""
    top = Path(tempfile.mkdtemp(prefix="tw-deps-"))
    top.chmod(0o755)
    (top / "scripts").mkdir(mode=0o755)
    shutil.copy(ROOT / "scripts" / "deps.sh", top / "scripts" / "deps.sh")
    (top / "scripts" / "deps.sh").chmod(0o755)
    yield top
    shutil.rmtree(top)


def path_without(top, *names):
    """A bin directory with every system command except NAMES."""
    fake = top / ("bin-without-" + "-".join(names))
    fake.mkdir(mode=0o755)
    for d in SYSTEM_DIRS:
        if not os.path.isdir(d):
            continue
        for name in os.listdir(d):
            if name not in names and not (fake / name).is_symlink():
                (fake / name).symlink_to(os.path.join(d, name))
    return str(fake)


def deps_as_nobody(top, phase, path):
    nobody = pwd.getpwnam("nobody")
    return run(["/bin/bash", top / "scripts" / "deps.sh", phase],
               env={"PATH": path, "HOME": "/tmp"}, text=True, cwd="/",
               user=nobody.pw_uid, group=nobody.pw_gid, extra_groups=[])


def printed_command(stderr):
    """The last line, which must be the whole command for root; its package list."""
    last = stderr.strip().splitlines()[-1]
    head = "apt-get update && apt-get install -y "
    assert last.startswith(head), f"last line is not the command to run: {last!r}\n{stderr}"
    pkgs = last[len(head):].split(" && ")[0].split()
    return last, pkgs


def test_non_root_prints_one_command_and_stops(public_dir):
    need_root_for_nobody()
    p = deps_as_nobody(public_dir, "build", path_without(public_dir, "nasm", "make"))
    assert p.returncode == 1, p.stderr
    _, pkgs = printed_command(p.stderr)
    assert pkgs == ["make", "nasm"], p.stderr
    assert "missing for 'build': make nasm" in p.stderr


def python_without_ensurepip(top):
    """A real CPython whose standard library lacks ensurepip: Debian's python3 before
    python3-venv is installed.  Its binary is a copy of the system's, next to a lib/
    of links to every standard-library entry except ensurepip."""
    real = Path(os.path.realpath("/usr/bin/python3"))
    if not real.exists():
        pytest.skip("/usr/bin/python3 does not exist: no system python to derive one without ensurepip from")
    ver = run([real, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"], text=True).stdout.strip()
    stdlib = Path(f"/usr/lib/python{ver}")
    if not (stdlib / "os.py").exists():
        pytest.skip(f"{real}'s standard library is not in {stdlib}")
    prefix = top / "py"
    (prefix / "bin").mkdir(parents=True)
    lib = prefix / "lib" / f"python{ver}"
    lib.mkdir(parents=True)
    shutil.copy(real, prefix / "bin" / "python3")
    for entry in stdlib.iterdir():
        if entry.name != "ensurepip":
            (lib / entry.name).symlink_to(entry)
    for d in [top, prefix, prefix / "bin", prefix / "lib", lib]:
        d.chmod(0o755)
    py = prefix / "bin" / "python3"
    probe = run([py, "-c", "import sys, importlib.util as u; "
                 "print(sys.prefix, u.find_spec('ensurepip') is None)"], text=True)
    if probe.stdout.split() != [str(prefix), "True"]:
        pytest.skip(f"a copy of {real} does not take its prefix from its own location "
                    f"({probe.stdout.strip() or probe.stderr.strip()}): cannot build one without ensurepip")
    return py


def test_python3_without_venv_asks_for_python3_venv(public_dir):
    """`python3 -m venv --without-pip` works on such a python; a venv with pip does not."""
    need_root_for_nobody()
    py = python_without_ensurepip(public_dir)
    assert run([py, "-m", "venv", "--without-pip", public_dir / "v1"]).returncode == 0
    # Its own bin first, not a symlink to it: a venv's home is the directory python3 was
    # found in, as with Debian's /usr/bin/python3.
    p = deps_as_nobody(public_dir, "report", f"{py.parent}:{path_without(public_dir, 'python3')}")
    assert p.returncode == 1, p.stderr
    _, pkgs = printed_command(p.stderr)
    assert "python3-venv" in pkgs, p.stderr
    assert "python3" not in pkgs, "python3 runs here; only its venv lacks pip"


def test_non_root_report_needs_make_but_not_test_only_packages(public_dir):
    need_root_for_nobody()
    path = path_without(public_dir, "make", "chromium", "go")
    p = deps_as_nobody(public_dir, "report", path)
    assert p.returncode == 1, p.stderr
    last, pkgs = printed_command(p.stderr)
    assert "make" in pkgs and "chromium" not in pkgs and "golang-go" not in pkgs, p.stderr
    p = deps_as_nobody(public_dir, "test", path)
    assert p.returncode == 1, p.stderr
    last, pkgs = printed_command(p.stderr)
    assert {"make", "chromium", "golang-go"} <= set(pkgs), p.stderr


@pytest.mark.parametrize("phase", ["build", "report", "test"])
def test_nothing_missing_here_exits_zero(phase):
    if phase == "test" and os.geteuid() != 0 and not shutil.which("chromium"):
        pytest.skip("not root and chromium is not installed: `./tw-make test` as root installs it")
    p = run(["/bin/bash", ROOT / "scripts" / "deps.sh", phase], text=True)
    assert p.returncode == 0, p.stderr
    assert p.stderr == "", p.stderr


def test_tw_make_is_posix_sh():
    """./tw-make must start where only /bin/sh exists (dash on Debian): no bash-isms."""
    sh = ROOT / "tw-make"
    assert os.access(sh, os.X_OK), "tw-make is not executable"
    assert sh.read_text().splitlines()[0] == "#!/bin/sh"
    dash = shutil.which("dash") or shutil.which("posh")
    if dash is None:
        pytest.skip("no dash or posh here to check tw-make with a strict POSIX shell")
    assert run([dash, "-n", sh]).returncode == 0
    p = run([dash, sh, "list-variants"], text=True, env={**os.environ, "MAKEFLAGS": ""})
    assert p.returncode == 0, p.stderr
    assert "64-libc" in p.stdout.split()


# --- root: a partly broken package index ---------------------------------------------
#
# apt-get itself cannot run here with a broken index: it would change this machine's
# sources and install packages.  So these tests put a stand-in apt-get first on PATH,
# whose `update` fails the way a lapsed third-party key makes it fail, and whose `install`
# makes the missing command appear (or fails).  What is tested is deps.sh's own logic:
# what it runs after a failed update, and what it prints.
UPDATE_ERROR = ("E: The repository 'https://example.invalid/debian stable InRelease' is no "
                "longer signed.\x1b[2J")


def fake_apt_get(top, update_ok, install_ok):
    """bin/apt-get that logs its calls to top/apt-calls, and a PATH with it first and
    without nasm, which the install then provides (by a link to the real one)."""
    fake = top / "fakebin"
    fake.mkdir(mode=0o755)
    real_nasm = shutil.which("nasm")
    (top / "update-error").write_text(UPDATE_ERROR + "\n")
    update = "exit 0" if update_ok else f"cat {top}/update-error >&2; exit 100"
    install = (f"ln -sf {real_nasm} {fake}/nasm; exit 0" if install_ok else
               'echo "E: Unable to locate package nasm" >&2; exit 100')
    script = f"""#!/bin/sh
echo "$*" >>{top}/apt-calls
case " $* " in
*" update "*)
	echo "Hit:1 http://deb.debian.org/debian bookworm InRelease"
	{update}
	;;
*" install "*)
	{install}
	;;
esac
exit 0
"""
    (fake / "apt-get").write_text(script)
    (fake / "apt-get").chmod(0o755)
    return f"{fake}:{path_without(top, 'nasm')}"


def deps_as_root(top, path):
    if os.geteuid() != 0:
        pytest.skip("needs root: deps.sh installs only as root")
    if shutil.which("nasm") is None:
        pytest.skip("nasm is not installed: the stand-in apt-get provides it by linking the real one")
    return run(["/bin/bash", top / "scripts" / "deps.sh", "build"],
               env={"PATH": path, "HOME": "/tmp"}, text=True, cwd="/")


def test_failed_update_still_installs_and_stays_quiet(public_dir):
    """Issue 18: deps.sh stopped at "apt-get update failed" though the install would work."""
    p = deps_as_root(public_dir, fake_apt_get(public_dir, update_ok=False, install_ok=True))
    assert p.returncode == 0, p.stderr
    calls = (public_dir / "apt-calls").read_text().splitlines()
    assert [c.split()[-1] for c in calls] == ["update", "nasm"], calls
    assert "install -y nasm" in calls[1]
    assert "longer signed" not in p.stderr and "failed" not in p.stderr, p.stderr
    # The update's output is still in the full log, for whoever wants it.
    assert "longer signed" in (public_dir / "build" / "setup.log").read_text()


def test_failed_update_is_shown_when_the_install_fails(public_dir):
    p = deps_as_root(public_dir, fake_apt_get(public_dir, update_ok=False, install_ok=False))
    assert p.returncode == 1, p.stderr
    assert "apt-get update had failed before that" in p.stderr, p.stderr
    assert "E: The repository 'https://example.invalid/debian stable InRelease'" in p.stderr
    assert "\x1b" not in p.stderr, "the repository's control characters reached the terminal"
    assert p.stderr.strip().splitlines()[-1].startswith("timewrite: 'apt-get install -y nasm' failed")


def test_install_failure_after_a_good_update_names_only_the_install(public_dir):
    p = deps_as_root(public_dir, fake_apt_get(public_dir, update_ok=True, install_ok=False))
    assert p.returncode == 1, p.stderr
    assert "update had failed" not in p.stderr, p.stderr
    assert "timewrite: 'apt-get install -y nasm' failed" in p.stderr
