"""A running watch, its exec tracer attached, whose saves fail when the disk fills after it
started: the last line must not say "state saved", and the exit status is 4.

Why it can break: a failed save on a full disk was followed by "state saved" and exit 0
(issue 43, class 8), so the counts of the interval were lost while the watch said they were
kept.  A real tmpfs of 256 KB is filled under the running watch.  This one of the state's
tests attaches the watch's BPF programs, so it runs in the serial group (tests/conftest.py
SERIAL); the others are test_watch_store.py.  Skips: not root, no tmpfs mount, or the watch
unable to run here (need_watch).
"""
import queue
import signal
import subprocess
import sys
import threading
import time

from conftest import need_watch
from test_watch_store import TW, fill, small_disk  # noqa: F401  (small_disk: the fixture)


def test_a_watch_whose_saves_fail_on_a_full_disk_exits_4_saying_so(small_disk):  # noqa: F811
    """The real watch, its exec tracer attached: the disk fills after the start, its saves
    fail; the last line must not say "state saved", and the exit status is 4."""
    need_watch()
    p = subprocess.Popen([sys.executable, TW, "watch", "--state", small_disk, "--window", "0",
                          "--interval", "1"], stderr=subprocess.PIPE, text=True)
    lines = []
    for line in p.stderr:
        lines.append(line)
        if "counting every exec" in line:
            break
    fill(small_disk)
    # execs until an interval's save has failed (the watch saves an interval that saw one),
    # then SIGTERM: the last save fails too.  Events, not an --for long enough; 120 s is a
    # hang guard.
    said = queue.Queue()
    threading.Thread(target=lambda: [said.put(x) for x in p.stderr] + [said.put(None)],
                     daemon=True).start()
    end = time.monotonic() + 120
    while not any("saving the state failed" in x for x in lines):
        assert time.monotonic() < end and p.poll() is None, "".join(lines)
        subprocess.run(["true"])
        try:
            x = said.get(timeout=0.5)
        except queue.Empty:
            continue
        assert x is not None, "".join(lines)           # its stderr ended: the watch exited
        lines.append(x)
    p.send_signal(signal.SIGTERM)
    p.wait(timeout=120)
    rest = "".join(iter(lambda: said.get(timeout=60), None))      # to the end of its stderr
    err = "".join(lines) + rest
    assert p.returncode == 4, err
    assert "saving the state failed" in err and "Traceback" not in err, err
    last = err.strip().splitlines()[-1]
    assert "could NOT be saved" in last and "lost" in last, last
