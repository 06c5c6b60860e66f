"""The fleet playbook (fleet/site.yml), run for real: ansible-playbook against two inventory
hosts that are this machine, reached over ssh on 127.0.0.1, and a third on a closed loopback
port.

The test starts its own sshd on a free loopback port with a throwaway host key and user key
(in a temporary folder), and stops it.  Nothing is sent anywhere but 127.0.0.1: the
playbook clones this checkout from its own path.  The runs are quick, and only the per-call
matrix (`tw run --quick --only doctor,variants,bench`), set up with `FLEET_SETUP=build` and
this test's own Python, so that the suite stays short; the census (2 s) and a scan of the
checkout's build folder run too, and are collected beside the results.

Checked: both results directories arrive whole (every file byte-identical to the host's), the
two runs on one machine never overlapped (the lock made the second wait), a run while the lock
is held and tw_lock_wait is 0 is refused with its reason, the closed port is listed as
unreachable with its reason while the others complete, and `tw fleet` lists both machines and
names the unreachable one.
"""
import fcntl
import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import pytest

from conftest import in_run_cgroup

ROOT = Path(__file__).resolve().parents[1]
SSHD = "/usr/sbin/sshd"
PLAYBOOK = ROOT / "fleet" / "site.yml"
ANSIBLE = Path(sys.executable).parent / "ansible-playbook"
STAGES = "--quick --only doctor,variants,bench --no-report"

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="not root: the playbook's set-up uses become "
                       "and the test's sshd logs in as root"),
    pytest.mark.skipif(not os.path.exists(SSHD), reason=f"{SSHD} is absent: Debian's "
                       "openssh-server is not installed (scripts/deps.sh test installs it)"),
    pytest.mark.skipif(not ANSIBLE.exists(), reason=f"{ANSIBLE} is absent: ansible-core is not "
                       "in this venv (requirements.txt pins it)"),
]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, proc, timeout=20):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise RuntimeError(f"sshd exited with {proc.returncode}: {proc.stderr.read()}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise RuntimeError("sshd did not listen in time")


@pytest.fixture(scope="module")
def sshd(tmp_path_factory):
    d = tmp_path_factory.mktemp("sshd")
    for name in ("host", "user"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(d / name)],
                       check=True)
    shutil.copy(d / "user.pub", d / "authorized_keys")
    port = free_port()
    (d / "sshd_config").write_text(
        f"Port {port}\nListenAddress 127.0.0.1\nHostKey {d / 'host'}\n"
        f"AuthorizedKeysFile {d / 'authorized_keys'}\nPermitRootLogin prohibit-password\n"
        "PasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\n"
        f"StrictModes no\nPidFile {d / 'sshd.pid'}\n"
        "Subsystem sftp internal-sftp\nLogLevel ERROR\n")
    os.makedirs("/run/sshd", exist_ok=True)     # sshd's privilege-separation directory
    # the hosts' runs measure (tw's bench): in the serial group's cgroup, not the idle one
    proc = subprocess.Popen([SSHD, "-D", "-e", "-f", str(d / "sshd_config")],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            preexec_fn=in_run_cgroup("serial"))
    try:
        wait_port(port, proc)
        yield {"port": port, "key": d / "user", "dir": d}
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def ssh_vars(sshd):
    """The inventory's variables that reach this machine's sshd as root and name this
    checkout's HEAD (fleet/watch.yml's test shares them)."""
    common = ("-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null "
              "-o ConnectTimeout=5 -o BatchMode=yes")
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], check=True,
                          capture_output=True, text=True).stdout.strip()
    return {"ansible_user": "root", "ansible_ssh_private_key_file": str(sshd["key"]),
            "ansible_ssh_common_args": common, "ansible_python_interpreter": "/usr/bin/python3",
            "tw_repo": str(ROOT), "tw_version": head}


def inventory(path, sshd, hosts, closed_port, work, extra=None):
    inv = {"all": {"hosts": {}, "vars": {
        **ssh_vars(sshd),
        "tw_dest": str(work / "dest" / "{{ tw_safe_name }}"),
        "tw_setup": "build", "tw_python": sys.executable, "tw_run_args": STAGES,
        "tw_lock": str(work / "fleet.lock"), "tw_collect": str(work / "collected"),
        # the whole-machine tasks too: a short census, and a scan of the checkout's own
        # build folder (small, and the stubs in it enter the kernel every way)
        "tw_census": True, "tw_census_seconds": 2, "tw_scan": True,
        "tw_scan_path": str(ROOT / "build"),
        **(extra or {})}}}
    for h in hosts:
        inv["all"]["hosts"][h] = {"ansible_host": "127.0.0.1",
                                  "ansible_port": closed_port if h == "gamma" else sshd["port"]}
    path.write_text(json.dumps(inv))     # JSON is YAML: ansible reads it as an inventory
    return path


def playbook(inv, work, timeout=1500, book=PLAYBOOK):
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "fleet" / "ansible.cfg"),
               ANSIBLE_HOST_KEY_CHECKING="False", ANSIBLE_LOCAL_TEMP=str(work / "ansible-local"),
               ANSIBLE_REMOTE_TEMP=str(work / "ansible-remote"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_RETRY_FILES_ENABLED="False")
    env.pop("ANSIBLE_STDOUT_CALLBACK", None)
    return subprocess.run([str(ANSIBLE), "-i", str(inv), str(book)], env=env, cwd=work,
                          capture_output=True, text=True, timeout=timeout)


def tree(d):
    return {str(p.relative_to(d)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(d.rglob("*")) if p.is_file()}


def when(s):
    return datetime.fromisoformat(s).timestamp()


@pytest.fixture
def closed_port():
    """A loopback port bound and never listened on, held for the test: a connection there is
    refused.  (Bound and released, it was once taken by another test's listener meanwhile,
    and ssh to it failed with a broken pipe, not a refusal.)"""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        yield s.getsockname()[1]


def test_two_hosts_collected_a_closed_port_failed_and_the_lock_held(sshd, tmp_path, closed_port):
    work = tmp_path
    closed = closed_port
    inv = inventory(work / "inventory.json", sshd, ["alpha", "beta", "gamma"], closed, work)
    r = playbook(inv, work)
    out = r.stdout + r.stderr
    # gamma failed, so the last play fails: after alpha and beta were collected.
    assert r.returncode != 0, out
    assert "1 host(s) failed or were unreachable: gamma" in out, out
    coll = work / "collected"
    runs = {}
    for h in ("alpha", "beta"):
        got = [p for p in (coll / h).iterdir() if p.is_dir()]
        assert len(got) == 1, (h, list((coll / h).iterdir()), out)
        runs[h] = got[0]
        # Whole: every file of the host's results directory, byte for byte.
        host_side = work / "dest" / h / "results" / got[0].name
        assert tree(got[0]) == tree(host_side), h
        # (a run that cannot digest its rounds says why on its stderr, in the play's output)
        assert {"meta.json", "fingerprint.json", "percall.json", "digest.json", "census.json",
                "scan.json"} <= set(tree(got[0])), out[-4000:]
        # what ran, not `make report`; the census is the stage file tw report prices
        meta = json.loads((got[0] / "meta.json").read_text())
        assert meta["command"] == "scripts/tw run --quick --only doctor,variants,bench --no-report"
        census = json.loads((got[0] / "census.json").read_text())
        assert census["schema"] == "timewrite-census/3" and census["snapshot"], census.get("why_not")
        scan = [json.loads(line) for line in (got[0] / "scan.json").read_text().splitlines()
                if line.strip()]            # tw scan --json: one record per line
        assert scan[0]["record"] == "header" and any(
            r.get("record") == "file" and r.get("needs_ia32") for r in scan), scan[:2]
        assert not list((work / "dest" / h / "results").glob("*.tar.gz")), "archive left behind"
    assert not list((coll / ".incoming").glob("*")), "fetched archive left behind"
    status = json.loads((coll / "gamma" / "status.json").read_text())
    assert status["state"] == "unreachable", status
    # where it was tried, then Ansible's reason, whose words depend on when ssh gave up
    # ("Connection refused", or "Broken pipe" when ssh exited before Ansible wrote to it)
    where, _, words = status["why"].partition(": ")
    assert where == f"127.0.0.1:{closed}" and words.strip(), status
    # The lock: one machine, two runs, never overlapping.
    metas = {h: json.loads((runs[h] / "meta.json").read_text()) for h in runs}
    (a, ma), (b, mb) = sorted(metas.items(), key=lambda kv: kv[1]["created_utc"])
    assert when(mb["created_utc"]) >= when(ma["finished_utc"]), (ma, mb)

    # tw fleet lists both machines, and gamma with its reason.
    f = subprocess.run([sys.executable, str(ROOT / "scripts" / "tw"), "fleet", str(coll),
                        "--out", str(work / "view"), "--json"],
                       capture_output=True, text=True, timeout=300)
    assert f.returncode == 3, f.stderr       # a refused host: exit 3, the rest compared
    view = json.loads(f.stdout)
    assert sorted(m["host"] for m in view["machines"]) == ["alpha", "beta"]
    assert [r["host"] for r in view["refused"]] == ["gamma"]
    assert "unreachable" in view["refused"][0]["why"]
    assert "tw fleet: gamma: unreachable" in f.stderr
    page = (work / "view" / "fleet.html").read_text()
    assert "alpha" in page and "beta" in page and "<details>" in page

    # A second run while the lock is held, told not to wait, is refused with its reason.
    inv2 = inventory(work / "inventory2.json", sshd, ["alpha"], closed, work,
                     {"tw_lock_wait": 0, "tw_collect": str(work / "collected2")})
    with open(work / "fleet.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        r2 = playbook(inv2, work, timeout=600)
    assert r2.returncode != 0
    st2 = json.loads((work / "collected2" / "alpha" / "status.json").read_text())
    assert st2["state"] == "failed"
    assert "another timewrite run holds" in st2["why"] and "refused at once" in st2["why"], st2
