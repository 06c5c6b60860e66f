"""tw census names the program that made each call, not the program a pid had at the start.

Two processes change program under one pid while `tw census` watches:
- a shell, in /proc at the window's start as /usr/bin/dash, makes some calls of its own and
  then execs a 32-bit int 0x80 program (the NASM loop of test_census);
- a 64-bit dd, in /proc at the start, reads a FIFO to its end and exits; its pid is then given
  to the 32-bit loop (as root, through /proc/sys/kernel/ns_last_pid).
Each must come out as two rows: the shell's (or dd's) calls under its own 64-bit executable,
and the loop's under the loop's path, 32-bit, by int 0x80.  Only the loop is something
booting with ia32_emulation=0 would stop.

Why it can break: census.bt keying its counts by pid alone (the calls after an execve then
belong to the executable /proc showed at the start); the exec tracepoint not starting a new
generation; the start time read from /proc in other units than census.bt's (every row then
looks like a reused pid); a fork's child not starting at generation 0.  Skips: not root,
bpftrace cannot trace every process here (its error quoted), nasm/ld missing, 32-bit
programs cannot run here (the oracle's fact), or another process took the freed pid in every
one of 50 tries (said so).
"""
import json
import os
import shutil
import subprocess

import pytest

from conftest import need_root, need_supported, need_tool, wait_exec
from test_census import census_watching, loop32

SHELL = ("read x < {fifo}; i=0; while [ $i -lt 300 ]; do echo x > /dev/null; i=$((i+1)); "
         "done; exec {loop}")
DD_BYTES = 20000


def take_pid(pid, argv):
    """argv started with the given pid, freed a moment ago: /proc/sys/kernel/ns_last_pid set
    to the pid before it, then a fork, again while another process took it first."""
    for _ in range(50):
        with open("/proc/sys/kernel/ns_last_pid", "w") as f:
            f.write(str(pid - 1))
        p = subprocess.Popen(argv, stdout=subprocess.DEVNULL)
        if p.pid == pid:
            return p
        p.kill()
        p.wait()
    pytest.skip(f"pid {pid} was taken by another process before the loop in 50 tries")


def rows_of(d, pid):
    return [p for p in d["processes"] if p["pid"] == pid]


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    need_root()
    need_tool("bpftrace")
    need_supported("syscost", "32-int80")
    tmp = tmp_path_factory.mktemp("images")
    loop = loop32(tmp)
    fifo_sh, fifo_dd = tmp / "go-shell", tmp / "go-dd"
    os.mkfifo(fifo_sh)
    os.mkfifo(fifo_dd)
    shell = subprocess.Popen(["/bin/sh", "-c", SHELL.format(fifo=fifo_sh, loop=loop)],
                             stdout=subprocess.DEVNULL)
    dd = subprocess.Popen(["dd", f"if={fifo_dd}", "of=/dev/null", "bs=1", "status=none"])
    reused = None
    try:
        # both in /proc as themselves (their exec done), blocked, before the census reads it
        wait_exec(shell.pid, "/bin/sh")
        wait_exec(dd.pid, shutil.which("dd"))
        c = census_watching(6)
        with open(fifo_sh, "w") as f:      # the shell's own calls, then its execve
            f.write("go\n")
        with open(fifo_dd, "wb") as f:     # dd's calls, then its exit
            f.write(b"x" * DD_BYTES)
        dd.wait(timeout=60)
        reused = take_pid(dd.pid, [str(loop)])
        out, err = c.communicate(timeout=600)
        assert c.returncode == 0, err[-3000:]
        d = json.loads(out)
        if d["why_not"]:
            pytest.skip(f"bpftrace cannot trace every process here: {d['why_not']}")
        yield {"d": d, "loop": str(loop), "shell": shell.pid, "dd": dd.pid}
    finally:
        for p in (shell, dd, reused):
            if p and p.poll() is None:
                p.kill()
                p.wait()


def test_the_shell_and_the_program_it_execd_are_two_rows(world):
    d, rows = world["d"], rows_of(world["d"], world["shell"])
    dash = os.path.realpath("/bin/sh")
    own = [r for r in rows if r["exe"] == dash]
    prog = [r for r in rows if r["exe"] == world["loop"]]
    assert own and prog, [(r["exe"], r["gen"], r["bits"], r["calls"]) for r in rows]
    assert own[0]["bits"] == 64 and own[0]["calls"] > 0 and own[0]["gen"] == 0
    assert prog[0]["bits"] == 32 and prog[0]["gen"] >= 1 and prog[0]["started"]
    assert any(g["entry"] == "int80" and g["calls"] for g in prog[0]["paths"])
    assert not any(g["abi"] == "compat" for g in own[0]["paths"])
    stop = {(p["pid"], p["exe"]) for p in d["readiness"]["stop"]}
    assert (world["shell"], world["loop"]) in stop and (world["shell"], dash) not in stop


def test_a_reused_pid_is_two_processes(world):
    rows = rows_of(world["d"], world["dd"])
    dd = [r for r in rows if r["exe"] == shutil.which("dd")
          or r["exe"] == os.path.realpath(shutil.which("dd"))]
    prog = [r for r in rows if r["exe"] == world["loop"]]
    assert dd and prog, [(r["exe"], r["start"], r["gen"], r["bits"]) for r in rows]
    assert dd[0]["bits"] == 64 and dd[0]["exited"] and dd[0]["seen_at_start"]
    assert dd[0]["calls"] >= DD_BYTES            # one read per byte, and as many writes
    assert prog[0]["bits"] == 32 and prog[0]["start"] != dd[0]["start"]
    assert all(r["bits"] == 32 for r in rows if r["exe"] == world["loop"])
    assert not any(r["bits"] == 32 for r in dd)
