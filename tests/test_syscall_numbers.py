"""sysnr.syscall_nr: the Python tools and the C programs agree on every syscall number.

The tracers filter raw_syscalls by number, and the numbers differ per ABI
(write is 4 for i386, 1 for x86-64).  The Python side reads them from the
kernel's UAPI headers and timewrite/tw_sysnr.h instead of writing them down.
This breaks if the header parsing picks the wrong table, or if tw_sysnr.h's
TW_NR_invalid changes and the tools keep an old copy: then the counts and
the attribution's null baseline silently trace nothing."""
import json


from conftest import ROOT, need_root, need_tool, run
from twtools.machine import sysnr


def test_frozen_abi_facts():
    # These numbers are part of the kernel ABI and can never change.
    assert sysnr.syscall_nr("i386", "write") == 4
    assert sysnr.syscall_nr("x86_64", "write") == 1
    assert sysnr.syscall_nr("i386", "getppid") == 64
    assert sysnr.syscall_nr("x86_64", "getppid") == 110


def test_invalid_is_what_syscost_enters_with(build, tmp_path):
    """bpftrace sees syscost's null call with exactly the number the tools use."""
    need_root()
    need_tool("bpftrace")
    nr = sysnr.syscall_nr("x86_64", "invalid")
    prog = ("tracepoint:raw_syscalls:sys_enter /pid == cpid/ { @ids[args->id] = count(); }")
    p = run(["bpftrace", "-f", "json", "-e", prog, "-c",
             f"{build}/syscost-64-syscall --op null --batches 1 --calls 23 --warmup-ms 0 "
             "--calibrate-ms 1"], text=True, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    ids = {}
    for line in p.stdout.splitlines():
        if line.startswith("{"):
            d = json.loads(line)
            if d.get("type") == "map":
                ids = {int(k): v for k, v in d["data"]["@ids"].items()}
    assert ids.get(nr, 0) >= 23, ids
    assert nr not in sysnr.syscall_numbers("x86_64").values()
    assert nr == int(__import__("re").search(
        r"TW_NR_invalid\s+(\w+)", (ROOT / "timewrite" / "tw_sysnr.h").read_text()).group(1), 0)
