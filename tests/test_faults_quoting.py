"""Names that a shell would read as code: results and temporary directories whose names hold
spaces, quotes, `$(...)`, backquotes, `;` and a leading dash run nothing, blind nothing, and
every command tw prints for pasting gives back exactly its words.

Why it can break: a path put into `sh -c` or into bpftrace's one-word -c command without
shlex.quote runs whatever a `$(...)` in TMPDIR says (seen: observer.py), and a space in it
splits the word, so the bpftrace session finds no program and every bpftrace row is blind
("unknown") without an error; a path that starts with '-' is read as an option by stat or a
tracer; a rebuild line joined with spaces runs the `$(...)` of a directory name when pasted.

The run is real (root, bpftrace): the test run's one `tw run --quick` (conftest.quick_run) has
its results directory and its TMPDIR named so; its tracers and attribution stages start bpftrace
sessions whose driver script, output and inputs all live under the hostile TMPDIR, and every
other stage, the report included, writes under those names too.  Every `$(...)`
would touch a file named PWNED*; none may exist anywhere afterwards.
"""
import json
import os
import shlex
import subprocess
from pathlib import Path

import pytest

from conftest import HOSTILE, ROOT, need_root, need_tool
from faults_util import snapshot, tw
from twtools.core import ui
from twtools.machine.tracers import base


def canaries(*tops):
    """Every PWNED* file under tops.  os.walk, not Path.rglob: /tmp is shared with the
    rest of the suite, and a directory another test removes between listing and reading
    (seen: Ansible's payload directories) must not fail this test."""
    return [Path(d, n) for top in tops for d, dirs, files in os.walk(top)
            for n in dirs + files if n.startswith("PWNED")]


WORDS = ["scripts/tw", "report", HOSTILE, "", "a b", "it's", '"', "$HOME", "*", "~", "\n", "é",
         "--out", "-rf"]


def test_command_line_round_trips_through_a_shell(tmp_path):
    """ui.command_line(argv), pasted into /bin/sh, gives back argv exactly, runs nothing."""
    line = ui.command_line(WORDS)
    assert shlex.split(line) == WORDS
    p = subprocess.run(["/bin/sh", "-c", "printf '%s\\0' " + line], capture_output=True,
                       cwd=tmp_path)
    assert p.stdout.decode().split("\0")[:-1] == WORDS
    assert canaries(tmp_path) == []
    assert ui.path_word("-x") == "./-x" and ui.path_word("/a/-x") == "/a/-x"


def test_bpftrace_command_word_is_plain(tmp_path):
    """bpftrace -c splits its string at spaces and keeps quotes literally, so the string must
    be plain words: a command with any other word runs from a script whose plain name is
    given, in the scratch directory.  Run here the way bpftrace runs it."""
    scratch = tmp_path / ("-s " + HOSTILE)
    scratch.mkdir()
    out = scratch / "argv"
    argv = ["/bin/sh", "-c", 'printf "%s\\0" "$@" > "$0"', str(out), HOSTILE, "a b"]
    word, in_scratch = base.command_word(argv, scratch, "run-1.sh")
    assert in_scratch and all(base.PLAIN.match(w) for w in word.split(" ")), word
    subprocess.run(word.split(" "), cwd=scratch, check=True)
    assert out.read_bytes().split(b"\0")[:-1] == [HOSTILE.encode(), b"a b"]
    assert canaries(tmp_path) == []
    plain = ["/usr/bin/true", "--op", "null"]
    assert base.command_word(plain, scratch, "x.sh") == ("/usr/bin/true --op null", False)
    from twtools.machine.tracers import bpftrace
    wrapped = bpftrace.TRACER.wrap_command(["bpftrace", "-o", "/dev/null", str(scratch / "p.bt"),
                                            "-c"], argv)
    assert wrapped[:-1] == ["bpftrace", "-o", "/dev/null", str(scratch / "p.bt"), "-c"]
    assert all(base.PLAIN.match(w) for w in wrapped[-1].split(" "))


@pytest.fixture(scope="module")
def hostile_run(quick_run):
    """(the run's working directory, its TMPDIR, its results directory, the process)."""
    need_root()
    need_tool("bpftrace")
    out, p = quick_run
    return out.parent, out.parent / ("-t " + HOSTILE), out, p


def test_hostile_names_run_nothing(hostile_run):
    sandbox, tmp, out, p = hostile_run
    assert p.returncode == 0, p.stderr[-3000:]
    assert canaries(sandbox, ROOT, "/tmp", Path.home()) == []
    assert list(tmp.iterdir()) == [], "temporary files left"
    m = json.loads((out / "meta.json").read_text())
    assert m["state"] == "complete"


def test_hostile_names_blind_nothing(hostile_run):
    """Every supported variant's bpftrace rows hold counts: the sessions found their
    programs through the quoted driver."""
    sandbox, tmp, out, p = hostile_run
    tr = json.loads((out / "tracers.json").read_text())
    from twtools.machine import registry
    from twtools.machine.tracers import bpftrace
    ok = [c for c in tr["counts"] if c["supported"]
          and bpftrace.TRACER.blind(registry.get(c["variant"]), True) is None]
    assert ok
    for c in ok:
        assert c["by_tracer"].get("bpftrace") == c["expected"], c
    att = json.loads((out / "attribution.json").read_text())
    assert att["why"] is None, att["why"]
    bodies = {b["variant"] for b in att["bodies"] if b["samples_ns"]}
    # the variants the attribution traces: supported, with every operation, seen by bpftrace
    from twtools.machine import registry
    from twtools.machine.tracers import bpftrace
    from twtools.measure import attribution
    traced = {v["name"] for v in att["variants"] if v["supported"]
              and all(op in registry.get(v["name"]).ops for op, _ in attribution.OPS)
              and bpftrace.TRACER.blind(registry.get(v["name"]), True) is None}
    assert traced and bodies == traced
    wv = json.loads((out / "writev.json").read_text())
    assert wv["fstype"], "stat read the dash-led path as an option"


def test_compare_rebuild_line_is_safe(hostile_run, tmp_path):
    """tw compare's rebuild line, pasted, is exactly the command that made it."""
    sandbox, tmp, out, p = hostile_run
    cmp_out = tmp_path / ("-c " + HOSTILE)
    argv = ["compare", "./" + HOSTILE, "--out", str(cmp_out)]
    p = tw(*argv, cwd=sandbox)
    assert p.returncode == 0, p.stderr[-2000:]
    md = (cmp_out / "compare.md").read_text()
    line = md.split("```\n", 1)[1].split("\n```", 1)[0]
    assert shlex.split(line) == ["scripts/tw", "compare", "./" + HOSTILE, "--out", str(cmp_out)]
    before = snapshot(sandbox)
    q = subprocess.run(["/bin/sh", "-c", "printf '%s\\0' " + line], capture_output=True,
                       cwd=sandbox)
    assert q.returncode == 0
    assert canaries(sandbox, tmp_path) == []
    assert snapshot(sandbox) == before
