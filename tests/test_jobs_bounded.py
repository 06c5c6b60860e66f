"""--jobs is bounded, and workers die with their parent: issue 25's fork bomb.

Why it can break: `tw scan --jobs 50000` forked thousands of workers that held 22 GB, and a
parent killed by a timeout left them running, because nothing tied a worker's life to its
parent's.  A --jobs parser that forgets the cap, or a pool made without core.proc.pool (and so
without PR_SET_PDEATHSIG), brings that back.  The kill test bounds itself: 4 workers, on a
tree (/usr) that keeps them busy for seconds, and it kills any survivor before failing.
"""
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TW = ROOT / "scripts" / "tw"
sys.path.insert(0, str(ROOT / "scripts"))
from twtools.core import proc  # noqa: E402


@pytest.mark.parametrize("cmd", [["scan", "/bin/true"], ["fleet", "."]])
@pytest.mark.parametrize("n", ["50000", "0", "-1", "many"])
def test_jobs_beyond_the_cap_is_one_line_and_exit_2(cmd, n):
    p = subprocess.run([sys.executable, TW, cmd[0], "--jobs", n] + cmd[1:], capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 2, p
    last = p.stderr.strip().splitlines()[-1]
    assert "--jobs" in last and "Traceback" not in p.stderr
    if n == "50000":
        assert f"1 to {proc.max_jobs()}" in last


def children(pid):
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                fields = (d / "stat").read_bytes().rsplit(b")", 1)[1].split()   # a comm is any bytes
            except OSError:
                continue
            if int(fields[1]) == pid:
                out.append(int(d.name))
    return out


def alive(pid):
    try:
        st = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return st != "Z"


def test_workers_die_when_the_parent_is_killed():
    """SIGKILL the scan's parent while 4 workers read /usr: none of them outlives it."""
    p = subprocess.Popen([sys.executable, TW, "scan", "--jobs", "4", "--json", "/usr"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        workers = []
        while time.monotonic() < deadline and len(workers) < 2 and p.poll() is None:
            time.sleep(0.1)
            workers = children(p.pid)
        if p.poll() is not None:
            pytest.fail("the scan of /usr ended before its workers could be seen")
        assert workers, "no worker appeared within 30 s"
    finally:
        os.kill(p.pid, signal.SIGKILL)
        p.wait()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(alive(w) for w in workers):
        time.sleep(0.1)
    left = [w for w in workers if alive(w)]
    for w in left:
        os.kill(w, signal.SIGKILL)
    assert not left, f"{len(left)} workers outlived their parent"
