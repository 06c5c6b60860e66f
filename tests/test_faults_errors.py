"""Errors are messages: a user's mistake is one line with what to do and a documented exit
status, before any work; a real bug keeps its traceback.

Why it can break: an option checked only when it is used (a --cpu that pinning rejects
minutes later, a --dir that is a device, a --format looked up in a dict) ends in a traceback
after work was done, or in directories made where none were asked for; an exception class
that the top-level handler does not know becomes a traceback; a closed stdout (`| head`)
prints "BrokenPipeError" twice; exit statuses that drift from docs/commands.md make scripts that
test them wrong.
"""
import json
import os
import re
import shutil
import subprocess

import pytest

from conftest import ROOT
from faults_util import TW, one_line_error, tw
from twtools import cli
from twtools.core import ui


def argparse_error(p, *needles):
    """Exit 2 from argparse: its usage, then one `tw CMD: error: ...` line; no traceback."""
    assert p.returncode == 2, (p.returncode, p.stderr[-2000:])
    assert "Traceback" not in p.stderr, p.stderr
    last = p.stderr.strip().splitlines()[-1]
    assert re.match(r"tw [a-z-]+: error: ", last), p.stderr
    for n in needles:
        assert n in last, (n, last)
    assert "[1/" not in p.stderr and "bench:" not in p.stderr.replace(last, ""), \
        "work was done before the option was refused"
    return last


@pytest.mark.parametrize("args,needles", [
    (["bench", "--cpu", "999"], ["--cpu", "CPU 999 is not one this process may use"]),
    (["bench", "--dir", "/dev/full"], ["--dir", "/dev/full is not an existing directory"]),
    (["bench", "--dir", "/nonexistent-tw-test/x"], ["is not an existing directory"]),
    (["bench", "--variants", "foo"], ["unknown variant foo"]),
    (["bench", "--variants", "99-syscall"], ["unknown variant 99-syscall"]),
    (["run", "--only", "bench,nonsense"], ["unknown stage nonsense"]),
    (["compare", "DIR", "--format", "bogus"], ["unknown format bogus"]),
    (["compare", "DIR", "--out", "FILE"], ["--out", "exists and is not a directory"]),
    (["compare", "DIR", "--out", "NONEMPTY"], ["holds other files"]),
    (["sweep", "--only", "nope"], ["unknown sweep nope"]),
    (["bench", "--out", "NONEMPTY"], ["--out", "is not empty", "never merged"]),
    (["sweep", "--out", "NONEMPTY"], ["--out", "is not empty"]),
    (["ab", "--out", "NONEMPTY"], ["--out", "is not empty"]),
    (["trace", "--out", "FILE"], ["--out", "exists and is not a directory"]),
    (["report", "DIR", "--format", "pdf"], ["unknown format pdf"]),
])
def test_bad_option_values_are_refused_before_any_work(tmp_path, args, needles):
    (tmp_path / "file").write_text("x")
    (tmp_path / "nonempty").mkdir()
    (tmp_path / "nonempty" / "mine").write_text("x")
    subst = {"DIR": str(ROOT / "tests" / "fixtures" / "results-fixture"),
             "FILE": str(tmp_path / "file"), "NONEMPTY": str(tmp_path / "nonempty")}
    before = sorted(os.listdir(tmp_path))
    p = tw(*[subst.get(a, a) for a in args], TW_RESULTS=tmp_path / "results")
    argparse_error(p, *needles)
    assert not os.path.exists("/nonexistent-tw-test")
    assert sorted(os.listdir(tmp_path)) == before
    assert (tmp_path / "file").read_text() == "x"


def test_report_format_is_refused(tmp_path):
    """`tw report --format bogus`: exit 2, no traceback, nothing written (report.py owns the
    message)."""
    import shutil
    d = tmp_path / "r"
    shutil.copytree(ROOT / "tests" / "fixtures" / "results-fixture", d)
    before = sorted(os.listdir(d))
    p = tw("report", d, "--format", "bogus")
    assert p.returncode == 2 and "Traceback" not in p.stderr + p.stdout
    assert "bogus" in p.stderr + p.stdout
    assert sorted(os.listdir(d)) == before


def test_force_without_out(tmp_path):
    p = tw("run", "--force", TW_RESULTS=tmp_path)
    one_line_error(p, "--force needs --out DIR")
    assert p.returncode == 2
    assert os.listdir(tmp_path) == []


def test_closed_stdout_is_quiet():
    """`tw doctor | head -c0`: stdout's reader is gone before tw writes.  Exit 141 (128 +
    SIGPIPE, as a shell reports it), nothing on stderr."""
    p = subprocess.Popen(TW + ["doctor"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         cwd=ROOT)
    p.stdout.close()
    err = p.stderr.read().decode()
    assert p.wait(timeout=120) == ui.EXIT_PIPE, err
    assert err == "", err


def _closed(*fds):
    """A preexec_fn that closes fds in the child, as `>&-` and `2>&-` do."""
    def close():
        for fd in fds:
            os.close(fd)
    return close


@pytest.mark.parametrize("args", [["doctor"], ["classify", "/bin/true"]])
def test_closed_stdout_is_no_traceback(args):
    """`tw doctor >&-` and `tw classify /bin/true >&-` ended in an AttributeError traceback
    (Python sets sys.stdout to None for a closed fd 1).  Now: the command runs, says once on
    stderr that its output is discarded, and exits as it would have."""
    p = subprocess.run(TW + args, stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                       cwd=ROOT, timeout=300, preexec_fn=_closed(1))
    assert "Traceback" not in p.stderr, p.stderr
    assert p.returncode == 0, p.stderr
    assert "standard output is closed" in p.stderr


def test_closed_stderr_keeps_errors_off_stdout(tmp_path):
    """With stderr closed (`2>&-`), an error is not printed on stdout (print(file=None) would
    write there), and the exit status still says what happened."""
    p = subprocess.run(TW + ["report", str(tmp_path / "absent")], stdin=subprocess.DEVNULL,
                       stdout=subprocess.PIPE, text=True, cwd=ROOT, timeout=120,
                       preexec_fn=_closed(2))
    assert p.returncode == ui.EXIT_DATA
    assert p.stdout == ""


def test_closed_fd1_is_not_reused_for_a_file(tmp_path):
    """With fd 1 closed, the first file tw opens would get fd 1, and every print would land in
    it.  The results directory's files hold only what tw wrote there."""
    d = tmp_path / "res"
    shutil.copytree(ROOT / "tests" / "fixtures" / "results-fixture", d)
    p = subprocess.run(TW + ["report", str(d)], stdin=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, text=True, cwd=ROOT, timeout=600,
                       preexec_fn=_closed(1))
    assert p.returncode == 0, p.stderr[-2000:]
    assert "Traceback" not in p.stderr
    json.loads((d / "verdict.json").read_text())


def test_stderr_reader_that_leaves_is_no_traceback(tmp_path):
    """`tw report DIR 2>&1 | head -c0`: the reader of both streams is gone before tw writes
    its error line.  No second failure, and the exit status is the command's."""
    r, w = os.pipe()
    os.close(r)
    p = subprocess.run(TW + ["report", str(tmp_path / "absent")], stdin=subprocess.DEVNULL,
                       stdout=w, stderr=w, cwd=ROOT, timeout=120)
    os.close(w)
    assert p.returncode in (ui.EXIT_DATA, ui.EXIT_PIPE), p.returncode


def test_error_lines_show_control_characters(tmp_path):
    """A file name holding ESC ] 0; (retitle the terminal), ESC [2J (clear it) and a newline
    (a forged second line) is printed with them visible, in one line."""
    d = tmp_path / "res\x1b]0;pwned\x07\x1b[2J\ntw: all fine"
    d.mkdir()
    p = tw("report", d)
    assert "\x1b" not in p.stderr and "\x07" not in p.stderr, repr(p.stderr)
    line = one_line_error(p, "\\x1b]0;pwned\\x07\\x1b[2J\\ntw: all fine")
    assert p.returncode == ui.EXIT_DATA, line


def test_usage_errors_show_control_characters():
    """argparse quotes the bad value in its error line: escaped too."""
    p = tw("report", "DIR", "--format", "md\x1b]0;pwned\x07")
    assert p.returncode == 2 and "\x1b" not in p.stderr, repr(p.stderr)
    assert "md\\x1b]0;pwned\\x07" in p.stderr.splitlines()[-1]


def test_progress_lines_show_control_characters(capsys):
    ui.progress("wrote /tmp/x\x1b[2J\nforged")
    ui.warn("a\x1b]0;t\x07", "b\n")
    err = capsys.readouterr().err
    assert "\x1b" not in err and "\x07" not in err
    assert err.count("\n") == 2, err


def test_debug_keeps_the_traceback(tmp_path):
    p = tw("--debug", "report", tmp_path / "absent")
    assert p.returncode == ui.EXIT_DATA
    assert "Traceback" in p.stderr and "DataError" in p.stderr
    assert p.stderr.strip().splitlines()[-1].startswith("tw report: ")
    p = tw("report", tmp_path / "absent", TW_DEBUG="1")
    assert "Traceback" in p.stderr


def test_a_bug_keeps_its_traceback(capsys):
    """An exception no handler expects is a bug: traceback, exit 70, and a line saying so."""
    try:
        raise RuntimeError("boom")
    except RuntimeError as e:
        code = cli.failure("report", e)
    err = capsys.readouterr().err
    assert code == ui.EXIT_BUG == 70
    assert "Traceback" in err and "RuntimeError: boom" in err
    assert err.strip().splitlines()[-1].startswith("tw report: internal error")


@pytest.mark.parametrize("exc,code,needle", [
    (ui.UserError("bad", "do this"), 2, "tw x: bad; do this"),
    (ui.DataError("f.json: broken"), 3, "tw x: f.json: broken"),
    (OSError(28, "No space left on device", "/r/meta.json"), 4,
     "tw x: /r/meta.json: No space left on device (ENOSPC); the file system is full"),
    (OSError(30, "Read-only file system", "/r"), 4, "(EROFS); the file system is read-only"),
    (ui.Interrupted(15), 143, "tw x: interrupted by SIGTERM"),
    (KeyboardInterrupt(), 130, "tw x: interrupted by SIGINT"),
    (subprocess.TimeoutExpired(["bpftrace", "-e"], 300), 1,
     "tw x: bpftrace ran longer than 300 s"),
])
def test_each_expected_failure_is_one_line(capsys, exc, code, needle):
    assert cli.failure("x", exc) == code
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith("tw x: ") and needle.removeprefix("tw x: ") in err, err


def test_exit_statuses_are_documented():
    """`tw --help` and docs/commands.md's exit-status list say the same, from core.ui."""
    p = tw("--help")
    assert p.returncode == 0
    doc = (ROOT / "docs" / "commands.md").read_text()
    section = doc.split("## Exit status of tw", 1)[1].split("\n#", 1)[0]
    for code, what in ui.EXIT_STATUSES:
        assert re.search(rf"^\s*{code}\s+{re.escape(what[:30])}", p.stdout, re.M), (code, p.stdout)
        assert re.search(rf"^\| `{code}` \| ", section, re.M), f"docs/commands.md lacks exit status {code}"
