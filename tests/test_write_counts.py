"""timewrite's write() count agrees with strace and with the kernel, through every ABI.

The workload is 23*256+17 bytes written in 256-byte chunks: 23 full chunks and
a 17-byte tail, 24 write() calls (a prime-ish count no off-by-one can hit by
accident).  timewrite counts its own calls; strace counts what it sees through
ptrace; bpftrace counts raw_syscalls:sys_enter in the kernel with the ABI's own
write number (4 in the i386 table, 1 in the x86-64 one) and the TS_COMPAT flag.
This breaks when timewrite miscounts (a retried or short write not counted, the
tail dropped), when a stub enters by another ABI than its matrix row says (64-bit
int 0x80 is a compat call with i386 numbers; a 64-bit syscall is not), when the
writes go through libc instead of the stub, or when the untimed warm-up that
--reps adds is not exactly one extra pass."""
import json
import os
import re
import subprocess

import pytest

from conftest import WRITE_VARIANTS, need_root, need_supported, need_tool
from twtools.machine import registry

N = 23 * 256 + 17
CALLS = 24
ABI = {v["name"]: v for v in registry.variants()}
WRITE_NR = {"i386": 4, "x86_64": 1}      # write in arch/x86/entry/syscalls/syscall_{32,64}.tbl


@pytest.fixture
def workload(tmp_path):
    src = tmp_path / "in"
    src.write_bytes(bytes((i * 37 + 11) & 0xFF for i in range(N)))
    return src, tmp_path / "out"


def own_count(stdout):
    rows = [r.split("\t") for r in stdout.splitlines()]
    assert len(rows) == 1 and rows[0][0] == "256", stdout
    return int(rows[0][4])


@pytest.mark.parametrize("variant", WRITE_VARIANTS)
def test_own_count(build, workload, variant):
    need_supported("timewrite", variant)
    src, out = workload
    with open(src, "rb") as f:
        p = subprocess.run([build / f"timewrite-{variant}", "--sizes", "256", out],
                           stdin=f, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert own_count(p.stdout) == CALLS
    assert out.read_bytes() == src.read_bytes()


def strace_writes(build, variant, src, out, extra=()):
    """(timewrite's stdout, {fd: writes}) from `strace -f -y -e trace=write`."""
    log = out.with_name("strace.log")
    with open(src, "rb") as f:
        p = subprocess.run(["strace", "-f", "-qq", "-y", "-e", "trace=write", "-o", log,
                            build / f"timewrite-{variant}", "--sizes", "256", *extra, out],
                           stdin=f, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    real = os.path.realpath(out)
    fds = {}
    for line in log.read_text().splitlines():
        m = re.match(r"\d+\s+write\((\d+)<([^>]*)>,", line)
        if m and m.group(2) == real:
            fds[int(m.group(1))] = fds.get(int(m.group(1)), 0) + 1
    return p.stdout, fds


@pytest.mark.parametrize("variant", WRITE_VARIANTS)
def test_strace_count(build, workload, variant):
    need_tool("strace")
    need_supported("timewrite", variant)
    src, out = workload
    stdout, fds = strace_writes(build, variant, src, out)
    assert own_count(stdout) == CALLS
    assert fds == {3: CALLS}, "writes to the output file, by descriptor"


@pytest.mark.parametrize("variant", WRITE_VARIANTS)
def test_strace_count_with_warmup(build, workload, variant):
    """--reps 2 is one untimed warm-up pass plus two timed ones: 3 * 24 writes."""
    need_tool("strace")
    need_supported("timewrite", variant)
    src, out = workload
    stdout, fds = strace_writes(build, variant, src, out, ["--reps", "2"])
    assert stdout.split("\t")[4] == str(CALLS)
    assert fds == {3: 3 * CALLS}


def strace_tables(text):
    """{'64': {syscall: calls}, '32': {...}} from `strace -c` output."""
    tables, cur = {"64": {}, "32": {}}, "64"
    for line in text.splitlines():
        if "32 bit mode" in line:
            cur = "32"
        f = line.split()
        if len(f) >= 5 and f[-1] != "total" and f[3].isdigit():
            tables[cur][f[-1]] = int(f[3])
    return tables


@pytest.mark.parametrize("variant", WRITE_VARIANTS)
def test_strace_summary_table_matches_abi(build, workload, variant):
    """strace -c files a call under the ABI it entered by: the output writes go in
    the "32 bit mode" table for i386-ABI variants (64-bit int 0x80 included), the
    row printed to stdout by libc in the table of the program's own bitness."""
    need_tool("strace")
    need_supported("timewrite", variant)
    src, out = workload
    _, fds = strace_writes(build, variant, src, out)
    log = out.with_name("strace-c.log")
    with open(src, "rb") as f:
        p = subprocess.run(["strace", "-f", "-c", "-w", "-e", "trace=write", "-o", log,
                            build / f"timewrite-{variant}", "--sizes", "256", out],
                           stdin=f, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                           text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    t = strace_tables(log.read_text())
    v = ABI[variant]
    stdout_writes = 1       # the one row, flushed once by stdio
    want = {"64": 0, "32": 0}
    want["32" if v["abi"] == "i386" else "64"] += sum(fds.values())
    want[str(v["bits"])] += stdout_writes
    got = {k: t[k].get("write", 0) for k in t}
    assert got == want, log.read_text()


BT = r"""
tracepoint:raw_syscalls:sys_enter /pid == cpid && args->id == %(nr)d/ {
	@all[args->args[0]] = count();
	if (args->args[0] == %(fd)d) {
		@out[(curtask->thread_info.status & 2) ? 1 : 0] = count();
	}
}
"""


@pytest.mark.root
@pytest.mark.parametrize("variant", WRITE_VARIANTS)
def test_kernel_count_and_abi(build, workload, variant):
    """bpftrace counts 24 entries with the ABI's write number on the output fd, all
    compat (TS_COMPAT) for i386-ABI variants and none for x86-64 ones."""
    need_root()
    need_tool("bpftrace")
    need_supported("timewrite", variant)
    src, out = workload
    v = ABI[variant]
    fd = 3       # the first descriptor after stdin/stdout/stderr; test_strace_count checks it
    script = BT % {"nr": WRITE_NR[v["abi"]], "fd": fd}
    with open(src, "rb") as f:
        p = subprocess.run(["bpftrace", "-f", "json", "-e", script,
                            "-c", f"{build}/timewrite-{variant} --sizes 256 {out}"],
                           stdin=f, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    maps = {}
    for line in p.stdout.splitlines():
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        if isinstance(msg, dict) and msg.get("type") == "map":
            maps.update(msg["data"])
    assert out.read_bytes() == src.read_bytes()
    compat = "1" if v["abi"] == "i386" else "0"
    assert maps.get("@out") == {compat: CALLS}, (maps, p.stderr)
