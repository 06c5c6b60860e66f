"""A running watch, its exec tracer attached, whose saves fail when the disk fills after it
started: the last line must not say "state saved", and the exit status is 4.

Why it can break: a failed save on a full disk was followed by "state saved" and exit 0
(issue 43, class 8), so the counts of the interval were lost while the watch said they were
kept.  A real tmpfs of 256 KB is filled under the running watch.  This one of the state's
tests attaches the watch's BPF programs, so it runs in the serial group (tests/conftest.py
SERIAL); the others are test_watch_store.py.  Skips: not root, no tmpfs mount, or the watch
unable to run here (need_watch).
"""
import subprocess
import sys
import time

from conftest import need_watch
from test_watch_store import TW, fill, small_disk  # noqa: F401  (small_disk: the fixture)


def test_a_watch_whose_saves_fail_on_a_full_disk_exits_4_saying_so(small_disk):  # noqa: F811
    """The real watch, its exec tracer attached: the disk fills after the start, its saves
    fail; the last line must not say "state saved", and the exit status is 4."""
    need_watch()
    p = subprocess.Popen([sys.executable, TW, "watch", "--state", small_disk, "--window", "0",
                          "--interval", "1", "--for", "8"], stderr=subprocess.PIPE, text=True)
    lines = []
    for line in p.stderr:
        lines.append(line)
        if "counting every exec" in line:
            break
    fill(small_disk)
    for _ in range(5):
        subprocess.run(["true"])
        time.sleep(0.5)
    rest = p.stderr.read()
    p.wait(timeout=60)
    err = "".join(lines) + rest
    assert p.returncode == 4, err
    assert "saving the state failed" in err and "Traceback" not in err, err
    last = err.strip().splitlines()[-1]
    assert "could NOT be saved" in last and "lost" in last, last
