"""The package's unit under systemd as PID 1: a Debian 12 root with systemd, booted in
systemd-nspawn on this machine's kernel, the .deb installed with apt and the watch run by
systemctl.

Why it can break: a unit directive systemd 252 rejects or ignores at run time (`verify` checks
the file, not the service it makes), an ExecStart or EnvironmentFile the package's paths break,
a hardening line that stops the watch loading its BPF programs or reading /proc, postinst's
try-restart that restarts a stopped watch or restarts a running one twice, a state an upgrade
or a stop does not keep, MemoryMax= not reaching the cgroup, the watch's lines not reaching the
journal, apt's default Recommends pulling a compiler onto the host.

Off by default (TW_SYSTEMD_TEST=1): root, Debian's mirror, systemd-nspawn (systemd-container)
and debootstrap, and a few minutes.  Run it with

    TW_SYSTEMD_TEST=1 ./tw-make test PYTEST_ARGS='-s -k deb_systemd'

The root (debootstrap --variant=minbase with systemd, systemd-sysv and dbus) is built once and
cached as a tarball in $TW_SYSTEMD_CACHE (default /var/cache/timewrite-systemd-test); each run
unpacks it afresh.  The container shares the host's network (the test scrapes the watch on a
loopback port) and kernel (the watch's BPF programs load into it): it gets the capabilities
loading and tracing need, and /sys/fs/bpf and tracefs bound in.  Linux audit stays off on the
host: systemd-journald-audit.socket is masked in the root (journald would otherwise turn the
host kernel's audit on, and every later process on the machine would pay for it on every
system call), the container gets no audit capability, and the test checks the kernel's audit
flag (AUDIT_GET over netlink) before and after.  The container is powered off from inside, or
killed; nothing it mounted outlives it.
"""
import json
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import time
from pathlib import Path

import pytest

from conftest import need_root, need_tool, need_watch
from test_deb import unpack_root

pytestmark = pytest.mark.skipif(
    os.environ.get("TW_SYSTEMD_TEST") != "1",
    reason="the systemd test is off by default: root, Debian's mirror, systemd-nspawn and a "
           "few minutes; run it with TW_SYSTEMD_TEST=1 ./tw-make test "
           "PYTEST_ARGS='-s -k deb_systemd'")

SUITE = "bookworm"
MIRROR = "http://deb.debian.org/debian"
CACHE = Path(os.environ.get("TW_SYSTEMD_CACHE", "/var/cache/timewrite-systemd-test"))
TARBALL = CACHE / f"{SUITE}-systemd.tar"
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
UNIT = "timewrite-watch.service"
# Every capability (nspawn also lets the syscalls they allow through its own seccomp filter:
# with a list of the BPF ones, the watch's loader met EPERM, CAP_SYS_RESOURCE not given), but
# no audit capability at all: nothing in the container may touch the host kernel's audit.
CAPS = "all"
NO_CAPS = "CAP_AUDIT_CONTROL,CAP_AUDIT_READ,CAP_AUDIT_WRITE"
COMPILERS = re.compile(r"^(gcc|g\+\+|cpp|clang|llvm|c\+\+|gfortran)(-\d+)?$|^(gcc|g\+\+|cpp)-\d+-")
# systemd-analyze security of the unit after the last tightening (docs/packaging.md): its
# exposure must not grow back.
MAX_EXPOSURE = 4.9


def sh(cmd, **kw):
    kw.setdefault("capture_output", True)
    kw.setdefault("text", True)
    kw.setdefault("timeout", 900)
    return subprocess.run([str(c) for c in cmd], **kw)


def audit_enabled():
    """The host kernel's audit flag (0 off, 1 on, 2 locked), asked with AUDIT_GET over
    netlink; None when the kernel has no audit."""
    try:
        s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 9)      # NETLINK_AUDIT
    except OSError:
        return None
    with s:
        s.bind((0, 0))
        s.sendto(struct.pack("=IHHII", 16, 1000, 1, 1, 0), (0, 0))   # AUDIT_GET, NLM_F_REQUEST
        s.settimeout(10)
        while True:
            data = s.recv(8192)
            _, kind = struct.unpack_from("=IH", data)
            if kind == 1000:                                           # struct audit_status
                return struct.unpack_from("=II", data, 16)[1]
            if kind == 2 and struct.unpack_from("=i", data, 16)[0]:   # NLMSG_ERROR
                raise OSError(-struct.unpack_from("=i", data, 16)[0], "AUDIT_GET refused")


def make_tarball():
    CACHE.mkdir(parents=True, exist_ok=True)
    mk = CACHE / "mkroot"
    shutil.rmtree(mk, ignore_errors=True)
    p = sh(["debootstrap", "--variant=minbase", "--include=systemd,systemd-sysv,dbus",
            SUITE, mk, MIRROR], timeout=1800)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-2000:]
    part = TARBALL.with_suffix(".part")
    assert sh(["tar", "--numeric-owner", "-cf", part, "-C", mk, "."]).returncode == 0
    part.rename(TARBALL)
    shutil.rmtree(mk)


class Container:
    """A booted systemd-nspawn container of a root; run() a shell command inside it."""

    def __init__(self, root, log):
        self.root, self.log = root, log
        self.proc = self.leader = None

    def boot(self):
        # nspawn keeps its per-machine state in /run/systemd/nspawn: a tmpfs of its own there,
        # gone with the test (a host without systemd as PID 1 may not have /run/systemd).
        self.run_dir = Path("/run/systemd/nspawn")
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.mounted = sh(["mount", "-t", "tmpfs", "tw-nspawn", self.run_dir]).returncode == 0
        argv = ["systemd-nspawn", "-D", self.root, "-b", "--register=no", "--keep-unit",
                "--console=passive", f"--capability={CAPS}", f"--drop-capability={NO_CAPS}",
                "--system-call-filter=bpf perf_event_open",
                "--bind=/sys/fs/bpf", "--bind=/sys/kernel/tracing",
                f"--machine=tw-{os.getpid()}"]
        self.proc = subprocess.Popen([str(a) for a in argv], stdin=subprocess.DEVNULL,
                                     stdout=open(self.log, "w"), stderr=subprocess.STDOUT)
        end = time.monotonic() + 120                 # a hang guard
        while self.leader is None:
            assert self.proc.poll() is None, f"nspawn exited: {self.log.read_text()[-3000:]}"
            assert time.monotonic() < end, f"no init in the container: {self.log.read_text()}"
            kids = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children").read_text().split()
            if kids and Path(f"/proc/{kids[0]}/comm").read_text().strip() == "systemd":
                self.leader = int(kids[0])
            time.sleep(0.1)
        state = ""
        while time.monotonic() < end:
            state = self.run("systemctl is-system-running", ok=False).stdout.strip()
            if state in ("running", "degraded"):
                return state
            time.sleep(0.5)
        raise AssertionError(f"the container's systemd did not finish booting: {state}")

    def run(self, script, ok=True, timeout=900):
        p = sh(["nsenter", "-t", self.leader, "-m", "-u", "-i", "-p", "-C", "-r", "-w",
                "env", "-i", f"PATH={PATH}", "HOME=/root", "LANG=C.UTF-8",
                "DEBIAN_FRONTEND=noninteractive", "SYSTEMD_PAGER=", "SYSTEMD_COLORS=0",
                "sh", "-c", script], timeout=timeout)
        if ok:
            assert p.returncode == 0, f"{script}: exit {p.returncode}\n{p.stdout[-3000:]}\n" \
                                      f"{p.stderr[-3000:]}"
        return p

    def poweroff(self):
        if self.proc is None:
            return
        if self.proc.poll() is None and self.leader:
            self.run("systemctl poweroff --no-block", ok=False, timeout=60)
            try:
                self.proc.wait(timeout=120)
            except subprocess.TimeoutExpired:
                pass
        if self.proc.poll() is None:                 # nspawn ignores SIGTERM
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=60)
        if self.mounted:
            sh(["umount", self.run_dir])


def metrics_count(port, prog):
    """The watch's exec count of prog on /metrics, 0 when it is not there yet."""
    import urllib.request
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as r:
        for line in r.read().decode().splitlines():
            if line.startswith("timewrite_exec_total") and f'program="{prog}"' in line:
                return float(line.split()[-1])
    return 0.0


def until(fn, what, guard_s=180):
    """fn()'s first true value; guard_s is a hang guard only."""
    end = time.monotonic() + guard_s
    while True:
        try:
            v = fn()
        except OSError:
            v = None
        if v:
            return v
        assert time.monotonic() < end, f"still not so after {guard_s} s: {what}"
        time.sleep(0.5)


def test_the_unit_under_systemd_enables_restarts_once_on_upgrade_saves_and_is_capped(
        tmp_path):
    from test_deb import build_in_clone, control, older
    from test_fleet_ansible import free_port
    from test_watch_live import short32
    need_root()
    need_watch()                 # this kernel runs the watch's programs (BTF, tracefs)
    for tool in ("systemd-nspawn", "debootstrap", "nsenter", "dpkg-deb", "llvm-strip", "nasm",
                 "clang"):
        need_tool(tool)
    audit_before = audit_enabled()
    print(f"\n[systemd] the host kernel's audit flag before: {audit_before}")
    times, t0 = {}, time.monotonic()

    def lap(name):
        nonlocal t0
        times[name] = time.monotonic() - t0
        t0 = time.monotonic()

    new, _ = build_in_clone(tmp_path / "clone" / "timewrite")
    old, old_v = older(new, tmp_path)
    new_v = control(new)["Version"]
    lap("build the package")
    if not TARBALL.exists():
        make_tarball()
        lap("debootstrap (cached from now on)")
    root = unpack_root(TARBALL, tmp_path / "root")
    # journald's audit socket would switch the host kernel's audit on: masked
    (root / "etc/systemd/system/systemd-journald-audit.socket").symlink_to("/dev/null")
    (root / "etc/hostname").write_text("tw-systemd-test\n")
    for f in (new, old):
        shutil.copy(f, root / "var/tmp" / f.name)
    prog = short32(tmp_path)
    shutil.copy(prog, root / "var/tmp" / "tw-short32")
    shutil.copy(prog, root / "var/tmp" / "tw-short32-stop")
    lap("unpack the root")
    c = Container(root, tmp_path / "nspawn.log")
    try:
        print(f"[systemd] booted: {c.boot()}; "
              + c.run("systemctl --version | head -1").stdout.strip())
        lap("boot")
        c.run("apt-get update -q")
        # What apt's defaults (Recommends too) would bring: no compiler.
        sim = c.run(f"apt-get install -s -q /var/tmp/{new.name}").stdout
        pulled = sorted(set(re.findall(r"(?m)^Inst (\S+)", sim)))
        print(f"[systemd] apt-get install with Recommends would install {len(pulled)} "
              f"packages: {' '.join(pulled)}")
        assert "timewrite" in pulled
        assert not [p for p in pulled if COMPILERS.search(p)], pulled
        out = c.run(f"apt-get install -y -q --no-install-recommends /var/tmp/{old.name}").stdout
        said = [x for x in out.splitlines() if x.startswith("timewrite: ")]
        print("[systemd] postinst: " + "\n[systemd] postinst: ".join(said))
        assert any("Recommends" in x for x in said), out[-3000:]
        lap("apt-get update, install")

        port = free_port()
        # a 2-s window at the start: syscost and the tracer run under the unit's hardening
        opts = f"--listen 127.0.0.1:{port} --interval 1 --window 2 --window-period 3600"
        c.run(f"echo 'TW_WATCH_OPTIONS=\"{opts}\"' >/etc/default/timewrite-watch")
        # installed, not enabled, not started
        assert c.run(f"systemctl is-enabled {UNIT}", ok=False).stdout.strip() == "disabled"
        assert c.run(f"systemctl is-active {UNIT}", ok=False).stdout.strip() == "inactive"
        c.run("systemctl enable --now timewrite-watch")
        assert c.run(f"systemctl is-enabled {UNIT}").stdout.strip() == "enabled"
        until(lambda: "counting every exec" in c.run(f"journalctl -u {UNIT} -o cat").stdout,
              "the watch's first line in the journal")
        c.run("/var/tmp/tw-short32")
        n1 = until(lambda: metrics_count(port, "/var/tmp/tw-short32"),
                   "the 32-bit program counted on /metrics")
        print(f"[systemd] /metrics: timewrite_exec_total of /var/tmp/tw-short32: {n1:g}")
        journal = c.run(f"journalctl -u {UNIT} -o cat").stdout
        print("[systemd] the journal: " + " | ".join(journal.strip().splitlines()[:6]))
        assert re.search(r"(?m)^.*watch: counting every exec; state in /var/lib/timewrite-watch",
                         journal), journal
        window = until(lambda: re.search(r"(?m)^.*watch: window 1: .*$", c.run(
            f"journalctl -u {UNIT} -o cat").stdout), "the first window's line in the journal")
        print(f"[systemd] {window.group(0)}")
        show = dict(ln.split("=", 1) for ln in c.run(
            f"systemctl show {UNIT} -p MemoryMax,MainPID,InvocationID,ControlGroup,"
            f"NRestarts,ActiveState").stdout.splitlines() if "=" in ln)
        status = c.run(f"grep -E '^(Cap(Eff|Bnd)|NoNewPrivs|Seccomp):' "
                       f"/proc/{show['MainPID']}/status").stdout.split("\n")
        print(f"[systemd] the watch's process: "
              f"{'; '.join(x.replace(chr(9), ' ') for x in status if x)}")
        assert show["MemoryMax"] == str(200 * 1024 * 1024), show
        # The kernel's limit on the watch's cgroup, where a memory controller reaches the
        # container: cgroup v2's memory.max, or v1's memory.limit_in_bytes.
        limit = c.run(f"""set -- $(sed -n 's/^0:://p' /proc/{show['MainPID']}/cgroup)
            if grep -qw memory /sys/fs/cgroup/cgroup.controllers 2>/dev/null; then
                cat "/sys/fs/cgroup$1/memory.max"
            else
                m=$(sed -n 's/^[0-9]*:memory://p' /proc/{show['MainPID']}/cgroup)
                cat "/sys/fs/cgroup/memory$m/memory.limit_in_bytes" 2>/dev/null
            fi""", ok=False).stdout.strip()
        if limit and limit != "9223372036854771712":
            print(f"[systemd] MemoryMax={show['MemoryMax']}, in force: the cgroup's limit {limit}")
            assert limit == show["MemoryMax"], (show, limit)
        else:
            # a fact of the host, said: its cgroup v1 memory hierarchy is not delegated to the
            # container, so no limit can be set there (systemctl show: MemoryCurrent not set)
            cur = c.run(f"systemctl show {UNIT} -p MemoryCurrent").stdout.strip()
            print(f"[systemd] MemoryMax={show['MemoryMax']} set on the unit, but no memory "
                  f"controller reaches this container ({cur}; /proc/PID/cgroup: "
                  + c.run(f"grep memory /proc/{show['MainPID']}/cgroup", ok=False).stdout.strip()
                  + "): the kernel cannot enforce it here")
        lap("enable --now, a 32-bit program counted")

        # The upgrade: postinst's try-restart restarts the running watch once; the state stays.
        cursor = c.run("journalctl -n 0 --show-cursor -o cat").stdout.split("cursor: ")[-1].strip()
        c.run(f"apt-get install -y -q --no-install-recommends /var/tmp/{new.name}")
        assert c.run("tw --version").stdout.strip() == f"tw {new_v}" != f"tw {old_v}"
        after = dict(ln.split("=", 1) for ln in c.run(
            f"systemctl show {UNIT} -p MainPID,InvocationID,ActiveState,NRestarts"
        ).stdout.splitlines() if "=" in ln)
        since = c.run(f"journalctl -u {UNIT} --after-cursor='{cursor}' -o cat").stdout
        starts = [x for x in since.splitlines() if x.startswith("Started ")]
        stops = [x for x in since.splitlines() if x.startswith("Stopped ")]
        print(f"[systemd] the upgrade: {len(stops)} stop, {len(starts)} start; InvocationID "
              f"{show['InvocationID'][:8]} -> {after['InvocationID'][:8]}; "
              f"NRestarts {after['NRestarts']}")
        assert after["ActiveState"] == "active" and after["InvocationID"] != show["InvocationID"]
        assert len(starts) == 1 and len(stops) == 1, since
        # the new watch read the old one's count and goes on from it
        until(lambda: metrics_count(port, "/var/tmp/tw-short32") >= n1, "the count kept")
        c.run("/var/tmp/tw-short32")
        n2 = until(lambda: (lambda n: n if n >= n1 + 1 else None)(
            metrics_count(port, "/var/tmp/tw-short32")), "the second run counted on top")
        print(f"[systemd] after the upgrade: {n2:g} execs of /var/tmp/tw-short32 (before: {n1:g})")
        lap("upgrade: try-restart once, state kept")

        # `systemctl stop` saves: with an hour between saves, a program run just before the
        # stop reaches the state only by the stop's own save.
        c.run(f"echo 'TW_WATCH_OPTIONS=\"--listen 127.0.0.1:{port} --interval 3600 --window 0\"'"
              " >/etc/default/timewrite-watch && systemctl restart timewrite-watch")
        cursor = c.run("journalctl -n 0 --show-cursor -o cat").stdout.split("cursor: ")[-1].strip()
        until(lambda: "counting every exec" in c.run(
            f"journalctl -u {UNIT} --after-cursor='{cursor}' -o cat").stdout, "the restart")
        c.run("/var/tmp/tw-short32-stop")
        c.run("systemctl stop timewrite-watch")
        end = dict(ln.split("=", 1) for ln in c.run(
            f"systemctl show {UNIT} -p ActiveState,Result,ExecMainStatus").stdout.splitlines()
            if "=" in ln)
        rep = json.loads(c.run("tw watch --report --state /var/lib/timewrite-watch --json "
                               "--since 1d").stdout)
        text = json.dumps(rep)
        print(f"[systemd] after systemctl stop: {end}; /var/tmp/tw-short32-stop in the saved state: "
              f"{'/var/tmp/tw-short32-stop' in text}")
        assert end["ActiveState"] == "inactive" and end["Result"] == "success" and \
            end["ExecMainStatus"] == "0", end
        assert "/var/tmp/tw-short32-stop" in text, text[:3000]
        lap("stop saves")

        sec = c.run(f"systemd-analyze security {UNIT} --no-pager", ok=False)
        m = re.search(r"Overall exposure level for \S+: ([\d.]+) (\S+)", sec.stdout)
        print(f"[systemd] systemd-analyze security: {m.group(0) if m else sec.stdout[-500:]}")
        bad = [x.strip() for x in sec.stdout.splitlines() if x.lstrip().startswith("✗")]
        print(f"[systemd] still exposed ({len(bad)}): " + "; ".join(
            re.sub(r"\s{2,}", " ", x)[:70] for x in bad))
        assert m and float(m.group(1)) <= MAX_EXPOSURE, sec.stdout[-3000:]
        lap("systemd-analyze security")
    finally:
        c.poweroff()
        print("[systemd] wall times: " + "; ".join(f"{k} {v:.0f} s" for k, v in times.items()))
        audit_after = audit_enabled()
        print(f"[systemd] the host kernel's audit flag after: {audit_after}")
        with open("/proc/self/mountinfo") as f:
            left = [ln.split()[4] for ln in f if ln.split()[4].startswith(str(root))]
        if not left:
            shutil.rmtree(root, ignore_errors=True)
    assert audit_after == audit_before, "the container changed the host kernel's audit flag"
    assert not left, f"still mounted: {left}"
