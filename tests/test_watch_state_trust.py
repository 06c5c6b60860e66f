"""tw watch trusts its state folder only when no other user can change it, and a reader who
may not read it is told so.

As sshd's StrictModes: a state folder or file that another user owns, or that group or others
may write (the folder, a folder above it that is not sticky, watch.sqlite, its journal, the
lock), is refused in one line, at the start and by --report, and nothing in it is read or
written, unless --allow-unsafe-state says that user is trusted.  A user who may not read the
state (the package's folder is mode 0750) is told "permission denied", not that there is no
state.

Why it can break: a check that looks at the file but not the folder (another user renames the
folder's files), nor at the journal (a hot journal planted by another user is replayed by the
next opening, rewriting the history), one that follows a link to judge its target, a refusal
that still opened the file first, an existence test (os.path.lexists) that takes "permission
denied" for "no such file".  Files, owners and modes are real; a second user is `nobody`.
Skips: not root (only root can give a file to another user or run as one).
"""
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from conftest import ROOT, need_root
from faults_util import checkout_for_others
from test_watch_store import cli_watch_args, digest, state_with
from twtools.core import ui
from twtools.service import watch as service_watch
from twtools.store import watchdb

TW = ROOT / "scripts" / "tw"
NOBODY = 65534


def report(state, *extra, user=None, tw=TW):
    # the checkout's own environment (a copy's, for another user: the original's may be out of
    # that user's reach)
    py = Path(tw).parents[1] / ".venv" / "bin" / "python"
    py = py if py.exists() else sys.executable
    cmd = [py, tw, "watch", "--report", "--since", "1d", "--state", state, *extra]
    if user is not None:
        cmd = ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups", *cmd]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, HOME="/nonexistent"))


@pytest.fixture
def state(tmp_path):
    """A real state in a folder only root may write, under the test's own folder."""
    need_root()
    d = tmp_path / "state"
    d.mkdir(mode=0o750)
    state_with(d)
    return d


def refused_both_ways(d, needle):
    """Refused by --report (exit 3, one line, naming what and the flag) and at the start
    (nothing read or written: the file's bytes, and no lock made); accepted with the flag."""
    db = watchdb.path_in(d)
    before = digest(db)
    p = report(d)
    assert p.returncode == 3, (p.returncode, p.stderr)
    assert p.stderr.count("\n") == 1 and "Traceback" not in p.stderr, p.stderr
    assert needle in p.stderr and "--allow-unsafe-state" in p.stderr, p.stderr
    w = service_watch.Watch(cli_watch_args(d))
    with pytest.raises(ui.DataError, match="another user could change"):
        w.open_state()
    assert not hasattr(w, "_state_lock") and not (d / watchdb.LOCK).exists()
    assert digest(db) == before
    p = report(d, "--allow-unsafe-state")
    assert p.returncode == 0, p.stderr
    assert "/opt/a32" in p.stdout


def test_a_state_folder_another_user_owns_is_refused(state):
    os.chown(state, NOBODY, NOBODY)
    refused_both_ways(state, f"owned by uid {NOBODY} (nobody)")


def test_a_state_folder_others_may_write_is_refused(state):
    os.chmod(state, 0o777)
    refused_both_ways(state, "may be written by its group or by others (mode 0777)")


def test_a_state_file_another_user_owns_or_may_write_is_refused(state):
    db = watchdb.path_in(state)
    os.chown(db, NOBODY, NOBODY)
    refused_both_ways(state, f"owned by uid {NOBODY}")
    os.chown(db, 0, 0)
    os.chmod(db, 0o666)
    refused_both_ways(state, "(mode 0666)")


def test_a_journal_planted_by_another_user_is_never_replayed(state):
    """A hot journal beside the state is rolled back by the next opening that may write: one
    another user planted would rewrite the history.  Refused before anything opens the file."""
    journal = state / (watchdb.FILE + "-journal")
    journal.write_bytes(b"\xd9\xd5\x05\xf9\x20\xa1\x63\xd7" + b"\0" * 504)
    os.chown(journal, NOBODY, NOBODY)
    p = report(state)
    assert p.returncode == 3 and f"owned by uid {NOBODY}" in p.stderr, p.stderr
    assert journal.exists()


def test_a_folder_above_the_state_others_may_write_is_refused_unless_sticky(tmp_path):
    need_root()
    above = tmp_path / "above"
    d = above / "state"
    d.mkdir(parents=True, mode=0o750)
    state_with(d)
    os.chmod(above, 0o777)
    p = report(d)
    assert p.returncode == 3 and "a folder above the state" in p.stderr, p.stderr
    os.chmod(above, 0o1777)          # as /tmp: no one can rename what they do not own there
    p = report(d)
    assert p.returncode == 0, p.stderr


@pytest.fixture
def reachable():
    """A folder every user may search, as /var/lib is (the test's own tmp_path is root's
    alone), removed after."""
    need_root()
    base = tempfile.mkdtemp(prefix="tw-trust-", dir="/var/tmp")
    os.chmod(base, 0o755)
    try:
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_a_reader_who_may_not_read_the_state_is_told_so(reachable):
    """The package's state folder is root's, mode 0750: another user's report said it "holds
    no watch state; start the watch first"."""
    d = os.path.join(reachable, "state")
    os.mkdir(d, 0o750)
    state_with(d)
    # A clone under a mode-0700 directory (root's home, `mktemp -d`) is out of nobody's
    # reach: faults_util gives a copy it can reach, or skips saying why.
    with checkout_for_others() as checkout:
        tw = checkout / "scripts" / "tw"
        p = report(d, user=NOBODY, tw=tw)
        assert p.returncode == 4, (p.returncode, p.stderr)
        assert p.stderr.count("\n") == 1 and "Traceback" not in p.stderr, p.stderr
        assert "permission denied" in p.stderr and "mode 0750, owner root:root" in p.stderr, \
            p.stderr
        assert "holds no watch state" not in p.stderr
        # the folder open to all, the file root's alone (0640): the same
        os.chmod(d, 0o755)
        p = report(d, user=NOBODY, tw=tw)
        assert p.returncode == 4 and "permission denied" in p.stderr, p.stderr
        # and a folder that truly holds none is still said so
        empty = os.path.join(reachable, "empty")
        os.mkdir(empty, 0o755)
        p = report(empty, user=NOBODY, tw=tw)
        assert p.returncode == 2 and "holds no watch state" in p.stderr, p.stderr
