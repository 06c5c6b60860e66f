"""Every call a program makes is counted exactly by the live tracers: threads, int 0x80, and a
census of several loops at once, with the maps' keys printing one entry each (issue 70).

On a Linux 6.18 build bpftrace printed the entries of a map keyed by a string chosen with ?: as
many entries under one printed key, and the readers kept one: tw diagnose counted 17,490 of a
4-thread program's 200,000 getppid calls and 7,552 of 100,000 int 0x80 calls; the census saw
no call from four int 0x80 loops.  Here the programs make known numbers of calls, and the
counts must be those numbers exactly: not a timing, a count.

Why it can break: a traces/*.bt key built from a string again (its entries then print alike:
Maps.collapsed is not empty), a reader that drops or merges entries, a map that fills, the
census's image keys (pid, start, gen) splitting one program's calls, diagnose's child-process
filter missing a thread.  Skips: not root or bpftrace missing (need_root, need_tool), 32-bit
programs or nasm unavailable here (need_supported, assemble32), no C compiler with pthreads.
"""
import json
import select
import subprocess
import time

import pytest

from conftest import ROOT, assemble32, need_root, need_supported, need_tool, run
from twtools.machine.tracers import bpftrace

TW = ROOT / "scripts" / "tw"

THREADS_C = r"""
#include <pthread.h>
#include <unistd.h>
#include <sys/syscall.h>
static void *work(void *a) { for (int i = 0; i < 50000; i++) syscall(SYS_getppid); return a; }
int main(void) {
    pthread_t t[4];
    for (int i = 0; i < 4; i++) pthread_create(&t[i], 0, work, 0);
    for (int i = 0; i < 4; i++) pthread_join(t[i], 0);
    return 0;
}
"""

# N int 0x80 getppid calls from the program's own text, then exit: N + 1 compat calls.
INT80_N = """section .text
global _start
_start:
    mov esi, {n}
.loop:
    mov eax, 64         ; getppid (i386)
    int 0x80
    dec esi
    jnz .loop
    mov eax, 1          ; exit (i386)
    xor ebx, ebx
    int 0x80
"""

# N int 0x80 getppid calls, a write of "done" to stdout, then pause (i386 29) until killed:
# N + 2 compat calls from its text, all made once "done" is read.
INT80_N_THEN_WAIT = """section .data
msg: db "done", 10
section .text
global _start
_start:
    mov esi, {n}
.loop:
    mov eax, 64
    int 0x80
    dec esi
    jnz .loop
    mov eax, 4          ; write(1, msg, 5)
    mov ebx, 1
    mov ecx, msg
    mov edx, 5
    int 0x80
    mov eax, 29         ; pause
    int 0x80
    jmp _start
"""


def diagnose(*cmd):
    need_root()
    need_tool("bpftrace")
    p = run([str(TW), "diagnose", "--json", "--tracer", "bpftrace", "--", *map(str, cmd)],
            text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-2000:]
    return json.loads(p.stdout)


def calls_of(d, abi, nr):
    return sum(s["syscalls"].get(name, 0) for g in d["paths"] if g["abi"] == abi
               for s in g["sites"] for name in s["syscalls"]
               if name == {("native", 110): "getppid", ("compat", 64): "getppid"}[(abi, nr)])


def test_four_threads_every_getppid_counted(tmp_path):
    need_tool("cc")
    src, exe = tmp_path / "threads.c", tmp_path / "threads"
    src.write_text(THREADS_C)
    p = run(["cc", "-O2", "-pthread", "-o", str(exe), str(src)], text=True)
    assert p.returncode == 0, p.stderr
    d = diagnose(exe)
    assert d["witness"]["agree"], d["witness"]
    assert d["witness"]["collapsed"] == {}, "diagnose.bt's keys printed alike"
    assert calls_of(d, "native", 110) == 200000
    lat = {(x["abi"], x["id"]): x["calls"] for x in d["latency"]}
    assert lat.get(("native", 110), 200000) == 200000


def test_int80_from_32bit_text_every_call_counted(tmp_path):
    need_supported("syscost", "32-int80")
    exe = assemble32(INT80_N.format(n=100000), tmp_path / "int80n")
    d = diagnose(exe)
    assert d["witness"]["agree"], d["witness"]
    assert d["witness"]["collapsed"] == {}
    g = next(g for g in d["paths"] if (g["abi"], g["origin"], g["entry"]) == ("compat", "text", "int80"))
    assert g["calls"] == 100001 and calls_of(d, "compat", 64) == 100000


@pytest.mark.parametrize("script", ["entrypath.bt", "writelat.bt", "body.bt", "syscount_abi.bt"])
def test_every_tool_prints_one_entry_per_key(script, tmp_path):
    """dd's 997 one-byte copies under each traces/*.bt tool that runs a command: every map's
    entries are as many as its distinct printed keys (no hidden bytes differ)."""
    need_root()
    need_tool("bpftrace")
    dd = next(p for p in ("/usr/bin/dd", "/bin/dd") if __import__("os").path.exists(p))
    p = run(["bpftrace", "-f", "json", str(ROOT / "traces" / script), "-c",
             f"{dd} if=/dev/zero of=/dev/null bs=1 count=997 status=none"], text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-1000:]
    maps = bpftrace.parse_json(p.stdout)
    assert maps.entries, f"{script} printed no map"
    assert maps.collapsed == {} and maps.conflicts == {}, (script, maps.collapsed)


def test_census_counts_four_int80_loops_exactly(tmp_path):
    """Four 32-bit programs each make 20,000 int 0x80 calls inside the census's window (they
    start once it watches, and say "done" after their last call, well before it ends): the
    census gives each exactly 20,002 int 0x80 calls, and its counts agree."""
    need_root()
    need_tool("bpftrace")
    need_supported("syscost", "32-int80")
    n = 20000
    exe = assemble32(INT80_N_THEN_WAIT.format(n=n), tmp_path / "loopn")
    census = subprocess.Popen([str(TW), "census", "--seconds", "8", "--json"], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    loops = []
    try:
        deadline = time.monotonic() + 300
        line = ""
        while "watching every process" not in line:
            assert census.poll() is None, census.stderr.read()[-2000:]
            assert time.monotonic() < deadline, "the census never started its window"
            line = census.stderr.readline()
        loops = [subprocess.Popen([str(exe)], stdout=subprocess.PIPE) for _ in range(4)]
        for lp in loops:
            ready, _, _ = select.select([lp.stdout], [], [], 60)
            assert ready and lp.stdout.readline() == b"done\n", "a loop did not finish its calls"
        assert census.poll() is None, "the census's window ended before the loops finished"
        out, err = census.communicate(timeout=300)
    finally:
        for lp in loops:
            lp.kill()
            lp.wait()
        if census.poll() is None:
            census.kill()
            census.wait()
    assert census.returncode == 0, err[-2000:]
    d = json.loads(out)
    assert d["witness"]["agree"], d["witness"]
    assert d["witness"]["collapsed"] == {}
    for lp in loops:
        # the pid's image after its execve (before it, the same pid ran Python's fork)
        img = [p for p in d["processes"] if p["pid"] == lp.pid and p.get("exe") == str(exe)]
        assert len(img) == 1, [(p["pid"], p.get("exe")) for p in d["processes"] if p["pid"] == lp.pid]
        assert img[0]["int80_calls"] == n + 2, (lp.pid, img[0]["int80_calls"])
    assert {lp.pid for lp in loops} <= {p["pid"] for p in d["readiness"]["int80"]}
