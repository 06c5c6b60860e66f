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
    # tw ab --wall's profiles and the lesson's compile with libseccomp: a Depends (issue 72:
    # only recommended, tw ab --wall tracer:... failed after every round without it)
    assert "libseccomp2" in depends
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


# --- the package in a clean Debian 12 root (TW_DEB_TEST=1) ----------------------------------

SUITE = "bookworm"
MIRROR = "http://deb.debian.org/debian"
CACHE = Path(os.environ.get("TW_DEB_CACHE", "/var/cache/timewrite-deb-test"))
TARBALL = CACHE / f"{SUITE}-minbase.tar"
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# Mounted in a private mount namespace, so they go with the command: the host's kernel is
# the one BPF loads into; /sys with its submounts (tracefs, bpffs, BTF).
ENTER = r"""set -e
R=$1; shift
mount -t proc proc "$R/proc"
mount --rbind /sys "$R/sys"
mount --rbind /dev "$R/dev"
exec chroot "$R" env -i PATH=%s HOME=/root LANG=C.UTF-8 DEBIAN_FRONTEND=noninteractive sh -c "$1"
""" % PATH
NOT_ON_A_HOST = ("gcc", "cc", "clang", "git", "pip", "pip3", "make")


def unpack_root(tarball, root):
    """A clean Debian root from the minbase tarball at root, with the host's resolver and
    the suite's sources; root."""
    root.mkdir()
    assert sh(["tar", "-xf", tarball, "-C", root]).returncode == 0
    shutil.copy("/etc/resolv.conf", root / "etc" / "resolv.conf")
    (root / "etc/apt/sources.list").write_text(
        f"deb {MIRROR} {SUITE} main\ndeb {MIRROR} {SUITE}-updates main\n"
        f"deb http://deb.debian.org/debian-security {SUITE}-security main\n")
    return root


def in_root(root, script, timeout=900):
    return sh(["unshare", "--mount", "--propagation", "private", "sh", "-c", ENTER, "sh",
               root, script], timeout=timeout)


def older(deb, where):
    """The same package as an older version (<version>~old), to upgrade from."""
    tree = where / "old-tree"
    assert sh(["dpkg-deb", "-R", deb, tree]).returncode == 0
    v = control(deb)["Version"]
    ctl = tree / "DEBIAN" / "control"
    ctl.write_text(ctl.read_text().replace(f"Version: {v}\n", f"Version: {v}~old\n"))
    (tree / "usr/lib/timewrite/VERSION").write_text(f"{v}~old\n")
    out = where / f"timewrite_{v}~old_amd64.deb"
    p = sh(["dpkg-deb", "--root-owner-group", "--build", tree, out])
    assert p.returncode == 0, p.stderr
    return out, f"{v}~old"


@pytest.mark.skipif(os.environ.get("TW_DEB_TEST") != "1",
                    reason="the clean-root test is off by default: root, Debian's mirror and a "
                           "few minutes; run it with TW_DEB_TEST=1")
def test_clean_debian_root_installs_watches_upgrades_removes_purges(debs, tmp_path):
    from conftest import need_watch
    from test_fleet_ansible import free_port
    from test_watch_live import get, short32, wait_for
    need_root()
    need_watch()            # this kernel runs the watch's programs (BTF, tracefs)
    for tool in ("debootstrap", "unshare", "chroot"):
        need_tool(tool)
    times = {}
    t0 = time.monotonic()
    if not TARBALL.exists():
        CACHE.mkdir(parents=True, exist_ok=True)
        mk = CACHE / "mkroot"
        shutil.rmtree(mk, ignore_errors=True)
        p = sh(["debootstrap", "--variant=minbase", SUITE, mk, MIRROR], timeout=1800)
        assert p.returncode == 0, p.stdout[-3000:]
        part = TARBALL.with_suffix(".part")
        assert sh(["tar", "--numeric-owner", "-cf", part, "-C", mk, "."]).returncode == 0
        part.rename(TARBALL)
        shutil.rmtree(mk)
        times["debootstrap (cached from now on)"] = time.monotonic() - t0
    root = unpack_root(TARBALL, tmp_path / "root")
    new = debs[0]
    old, old_v = older(new, tmp_path)
    new_v = control(new)["Version"]
    for f in (new, old, short32(tmp_path)):
        shutil.copy(f, root / "tmp" / f.name)
    prog = "/tmp/tw-short32"
    times["unpack"] = time.monotonic() - t0 - sum(times.values())
    try:
        def step(name, script, ok=True, timeout=900):
            s = time.monotonic()
            p = in_root(root, script, timeout)
            times[name] = time.monotonic() - s
            if ok:
                assert p.returncode == 0, f"{name}: {p.stdout[-2000:]}\n{p.stderr[-3000:]}"
            return p

        before = set(step("list", "dpkg-query -W -f '${Package}\\n'").stdout.split())
        step("apt-get update", "apt-get update -q")
        step("install the older package with apt",
             f"apt-get install -y -q --no-install-recommends /tmp/{old.name}")
        after = set(step("list", "dpkg-query -W -f '${Package}\\n'").stdout.split())
        pulled = sorted(after - before)
        size = step("size", "dpkg-query -W -f '${Installed-Size}' timewrite").stdout
        print(f"\n[deb-root] apt pulled in {len(pulled)} packages: {' '.join(pulled)}"
              f"\n[deb-root] timewrite's Installed-Size: {size} KiB")
        assert "timewrite" in pulled
        assert not [p for p in pulled if re.match(r"(gcc|cpp|clang|llvm|git|python3-pip|"
                                                  r"make|binutils|libc6-dev)(-|$)", p)], pulled
        there = step("no compiler", " ; ".join(f"command -v {c}" for c in NOT_ON_A_HOST) + "; true")
        assert there.stdout.strip() == "", f"on the clean root: {there.stdout}"
        assert step("tw --version", "tw --version").stdout.strip() == f"tw {old_v}"
        # A command whose module Debian does not package says so in one line, no traceback.
        p = step("tw fleet", "tw fleet /tmp", ok=False)
        assert p.returncode != 0 and len(p.stderr.strip().splitlines()) == 1, p.stderr
        assert "orjson is not in Debian 12" in p.stderr, p.stderr

        def count(metrics):
            lines = [x for x in metrics.splitlines()
                     if prog in x and x.startswith("timewrite_exec_total")]
            return float(lines[0].split()[-1]) if lines else 0.0

        def watch(name, seconds, at_least):
            port = free_port()
            # The watch runs in the background in the root; the program runs once it counts.
            script = (f"tw watch --for {seconds} --interval 1 --listen 127.0.0.1:{port} "
                      f">/tmp/watch.out 2>&1 & pid=$!; "
                      f"i=0; until grep -q 'counting every exec' /tmp/watch.out; do "
                      f"i=$((i+1)); [ $i -lt 120 ] || exit 9; sleep 0.5; done; "
                      f"{prog}; wait $pid; rc=$?; cat /tmp/watch.out; exit $rc")
            s = time.monotonic()
            proc = subprocess.Popen(["unshare", "--mount", "--propagation", "private", "sh",
                                     "-c", ENTER, "sh", str(root), script],
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            try:
                text = wait_for(lambda: (lambda m: m if count(m) >= at_least else None)(
                    get(f"http://127.0.0.1:{port}/metrics")), 90,
                    f"{prog} counted {at_least:g} times in /metrics")
                out, err = proc.communicate(timeout=seconds + 120)
            finally:
                if proc.poll() is None:
                    proc.kill()
                    print("[deb-root] the watch's output:", *proc.communicate(), sep="\n")
            times[name] = time.monotonic() - s
            assert proc.returncode == 0, out[-3000:] + err[-2000:]
            return text, out

        metrics, out = watch("tw watch --for 30, the older package", 30, 1)
        line = next(x for x in metrics.splitlines() if prog in x
                    and x.startswith("timewrite_exec_total"))
        print(f"[deb-root] /metrics: {line}")
        assert re.search(r"watch: window 1: \d+ programs", out), out   # its analysis (numpy) ran
        rep = step("tw watch --report", "tw watch --report")
        assert prog in rep.stdout, rep.stdout
        # The upgrade, with the state in place: the newer package reads it.
        step("upgrade to the newer package", f"apt-get install -y -q --no-install-recommends "
                                             f"/tmp/{new.name}")
        assert step("tw --version", "tw --version").stdout.strip() == f"tw {new_v}"
        # The newer watch reads the older one's state (the count it saved) and goes on: the
        # program's second run is counted on top of the first.
        metrics2, _ = watch("tw watch --for 10, after the upgrade", 10, count(metrics) + 1)
        print(f"[deb-root] /metrics after the upgrade: {count(metrics2):g} execs of {prog}")
        step("remove", "apt-get remove -y -q timewrite")
        left = step("after remove", "ls /var/lib/timewrite-watch; ls /usr/lib/timewrite 2>&1; "
                                    "command -v tw || true", ok=False).stdout
        assert "watch.sqlite" in left and "No such file" in left, left
        step("purge", "apt-get purge -y -q timewrite")
        gone = step("after purge", "test ! -e /var/lib/timewrite-watch && echo gone").stdout
        assert gone.strip() == "gone"
    finally:
        print("[deb-root] wall times: " + "; ".join(f"{k} {v:.0f} s" for k, v in times.items()))
        with open("/proc/self/mountinfo") as f:
            mounted = [ln.split()[4] for ln in f if ln.split()[4].startswith(str(root))]
        if not mounted:
            shutil.rmtree(root, ignore_errors=True)


# --- the fleet role with tw_setup: package, on two clean Debian 12 roots (TW_DEB_TEST=1) ------

HOST_TARBALL = CACHE / f"{SUITE}-minbase-sshd.tar"
# What Ansible needs on a host, and nothing of timewrite's: sshd, python3 and python3-apt (the
# apt module's).  policy-rc.d keeps openssh-server's scripts from starting a system sshd.
HOST_PACKAGES = "openssh-server python3 python3-apt"
SSHD_CONFIG = ("Port {port}\nListenAddress 127.0.0.1\nHostKey /etc/ssh/ssh_host_ed25519_key\n"
               "AuthorizedKeysFile /root/.ssh/authorized_keys\nPermitRootLogin prohibit-password\n"
               "PasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\n"
               "StrictModes no\nPidFile none\nSubsystem sftp internal-sftp\nLogLevel ERROR\n")


def host_tarball(tmp):
    """The minbase root with what Ansible needs on a host (cached beside the minbase one)."""
    if HOST_TARBALL.exists():
        return HOST_TARBALL
    r = tmp / "mk-host"
    r.mkdir()
    assert sh(["tar", "-xf", TARBALL, "-C", r]).returncode == 0
    shutil.copy("/etc/resolv.conf", r / "etc" / "resolv.conf")
    (r / "usr/sbin/policy-rc.d").write_text("#!/bin/sh\nexit 101\n")
    (r / "usr/sbin/policy-rc.d").chmod(0o755)
    p = in_root(r, f"apt-get update -q && apt-get install -y -q --no-install-recommends "
                   f"{HOST_PACKAGES} && ssh-keygen -A && mkdir -p /run/sshd /root/.ssh")
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    (r / "usr/sbin/policy-rc.d").unlink()
    part = HOST_TARBALL.with_suffix(".part")
    assert sh(["tar", "--numeric-owner", "-cf", part, "-C", r, "."]).returncode == 0
    part.rename(HOST_TARBALL)
    shutil.rmtree(r)
    return HOST_TARBALL


@pytest.mark.skipif(os.environ.get("TW_DEB_TEST") != "1",
                    reason="the package's fleet test is off by default: root, Debian's mirror "
                           "and a few minutes; run it with TW_DEB_TEST=1")
def test_fleet_role_installs_the_package_on_two_clean_hosts(debs, tmp_path):
    """fleet/watch.yml with tw_setup: package (given the .deb) on two hosts that are two clean
    Debian 12 roots, each with its own sshd on a loopback port, chrooted: apt installs the
    package from the mirror, the watch runs (as a process: no systemd in a chroot), a 32-bit
    program is counted by both, the report action collects, `tw fleet --readiness` reads it,
    the stop action stops both; no compiler, git or pip on either host."""
    from conftest import need_watch
    from test_fleet_ansible import ANSIBLE, free_port, wait_port
    from test_watch_fleet import PLAYBOOK
    from test_watch_live import get, short32, wait_for
    need_root()
    need_watch()
    if not TARBALL.exists():
        pytest.skip(f"{TARBALL} is not there yet: the clean-root test above makes it")
    if not ANSIBLE.exists():
        pytest.skip(f"{ANSIBLE} is absent: ansible-core is not in this venv")
    t0 = time.monotonic()
    tarball = host_tarball(tmp_path)
    built = time.monotonic() - t0
    key = tmp_path / "user"
    assert sh(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", key]).returncode == 0
    hosts, sshds = {}, []
    prog = short32(tmp_path)
    try:
        for h in ("alpha", "beta"):
            r = unpack_root(tarball, tmp_path / h)
            (r / "root/.ssh/authorized_keys").write_text(key.with_suffix(".pub").read_text())
            port = free_port()
            (r / "etc/ssh/tw_sshd_config").write_text(SSHD_CONFIG.format(port=port))
            proc = subprocess.Popen(
                ["unshare", "--mount", "--propagation", "private", "sh", "-c", ENTER, "sh", str(r),
                 "mkdir -p /run/sshd && exec /usr/sbin/sshd -D -e -f /etc/ssh/tw_sshd_config"],
                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            sshds.append(proc)
            wait_port(port, proc)
            hosts[h] = {"root": r, "ssh": port, "listen": free_port()}
        common = ("-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null "
                  "-o ConnectTimeout=5 -o BatchMode=yes")

        def play(action):
            inv = {"all": {"hosts": {h: {"ansible_host": "127.0.0.1", "ansible_port": v["ssh"],
                                         "tw_watch_listen": f"127.0.0.1:{v['listen']}"}
                                     for h, v in hosts.items()},
                           "vars": {"ansible_user": "root", "ansible_ssh_private_key_file": str(key),
                                    "ansible_ssh_common_args": common,
                                    "ansible_python_interpreter": "/usr/bin/python3",
                                    "tw_setup": "package", "tw_deb": str(debs[0]),
                                    "tw_watch_service": "process", "tw_watch_action": action,
                                    "tw_watch_args": "--window 0 --interval 1",
                                    "tw_watch_since": "1d",
                                    "tw_collect": str(tmp_path / "collected")}}}
            path = tmp_path / f"{action}.json"
            path.write_text(__import__("json").dumps(inv))
            env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "fleet" / "ansible.cfg"),
                       ANSIBLE_HOST_KEY_CHECKING="False", ANSIBLE_NOCOLOR="1",
                       ANSIBLE_LOCAL_TEMP=str(tmp_path / "ansible-local"),
                       ANSIBLE_RETRY_FILES_ENABLED="False")
            env.pop("ANSIBLE_STDOUT_CALLBACK", None)
            s = time.monotonic()
            p = sh([ANSIBLE, "-i", path, PLAYBOOK], env=env, cwd=tmp_path, timeout=1200)
            print(f"\n[deb-fleet] {action}: {time.monotonic() - s:.0f} s, exit {p.returncode}")
            assert p.returncode == 0, p.stdout[-4000:] + p.stderr[-2000:]

        started = False
        try:
            play("start")
            started = True
            for h, v in hosts.items():
                there = in_root(v["root"], " ; ".join(f"command -v {c}" for c in NOT_ON_A_HOST)
                                + "; dpkg-query -W -f '${Version}' timewrite")
                assert there.stdout.strip() == control(debs[0])["Version"], (h, there.stdout)
            assert subprocess.run([str(prog)]).returncode == 0
            for h, v in hosts.items():
                wait_for(lambda: str(prog) in get(f"http://127.0.0.1:{v['listen']}/metrics"), 30,
                         f"{h} counting {prog}")
            time.sleep(2)
            play("report")
        finally:
            if started:
                play("stop")
        p = sh([VPY, ROOT / "scripts" / "tw", "fleet", "--readiness", tmp_path / "collected"])
        assert p.returncode == 0, p.stderr
        print(f"[deb-fleet] tw fleet --readiness:\n{p.stdout}")
        assert "0 ready, 2 not ready" in p.stdout and str(prog) in p.stdout, p.stdout
        for h in hosts:
            assert h in p.stdout
    finally:
        for proc in sshds:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
        print(f"[deb-fleet] host root {'built' if built > 5 else 'from the cache'} in "
              f"{built:.0f} s; all {time.monotonic() - t0:.0f} s")
        with open("/proc/self/mountinfo") as f:
            mounted = [ln.split()[4] for ln in f if ln.split()[4].startswith(str(tmp_path))]
        if not mounted:
            for v in hosts.values():
                shutil.rmtree(v["root"], ignore_errors=True)
