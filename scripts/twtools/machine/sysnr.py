"""Syscall numbers of each ABI, from the kernel's UAPI headers."""
import functools
import re
from pathlib import Path

from ..core.paths import ROOT


UAPI_HEADERS = {"i386": "asm/unistd_32.h", "x86_64": "asm/unistd_64.h"}
# An installed copy (make deb) carries the two headers its programs were compiled against in
# include/, so that a host needs no linux-libc-dev; a checkout reads the system's.
INCLUDE_DIRS = (str(ROOT / "include"), "/usr/include/x86_64-linux-gnu", "/usr/include")


@functools.lru_cache(maxsize=None)
def syscall_numbers(abi):
    """{name: number} of one ABI's table, from the kernel's UAPI header (linux-libc-dev),
    the same file the C programs compile against, so no number is written down twice."""
    for d in INCLUDE_DIRS:
        path = Path(d) / UAPI_HEADERS[abi]
        if path.exists():
            return {m.group(1): int(m.group(2)) for m in
                    re.finditer(r"^#define __NR_(\w+)\s+(\d+)", path.read_text(), re.M)}
    raise FileNotFoundError(f"{UAPI_HEADERS[abi]} not found under {', '.join(INCLUDE_DIRS)}: "
                            "install linux-libc-dev (make deps)")


def syscall_nr(abi, name):
    """A syscall's number in an ABI ('i386' or 'x86_64'); 'invalid' is timewrite's
    TW_NR_invalid (timewrite/tw_sysnr.h), the number syscost's null op uses."""
    if name == "invalid":
        m = re.search(r"#define TW_NR_invalid\s+(\w+)", (ROOT / "timewrite" / "tw_sysnr.h").read_text())
        return int(m.group(1), 0)
    return syscall_numbers(abi)[name]




# The calls added after the UAPI headers this tree builds against (Debian 12's linux-libc-dev,
# Linux 6.1: numbers up to 450), with their numbers in arch/x86/entry/syscalls/syscall_64.tbl
# and syscall_32.tbl: since 5.1 a new call gets the same number on every architecture, so the
# newest call a kernel has ends both tables.  x86-64 alone has two in the old gap: uretprobe
# (335, Linux 6.11) and uprobe (336), which kill a caller outside a probe's trampoline.
NEWER_CALLS_X86_64 = {335: "uretprobe", 336: "uprobe"}
NEWER_CALLS = {451: "cachestat", 452: "fchmodat2", 453: "map_shadow_stack", 454: "futex_wake",
               455: "futex_wait", 456: "futex_requeue", 457: "statmount", 458: "listmount",
               459: "lsm_get_self_attr", 460: "lsm_set_self_attr", 461: "lsm_list_modules",
               462: "mseal", 463: "setxattrat", 464: "getxattrat", 465: "listxattrat",
               466: "removexattrat", 467: "open_tree_attr", 468: "file_getattr",
               469: "file_setattr", 470: "listns", 471: "rseq_slice_yield"}
KALLSYMS = "/proc/kallsyms"


def table_sizes(kallsyms=KALLSYMS):
    """The sizes of the running kernel's x86-64 and i386 call tables (NR_syscalls and
    IA32_NR_syscalls, the sizes of seccomp's native and compat cache bitmaps):
    {'x86_64': n, 'i386': n, 'newest': name, 'source': how it was found}, or the sizes None
    with 'source' saying why.  The kernel has each call's entry as a symbol, __x64_sys_NAME,
    in /proc/kallsyms (names are shown to every user): the table ends after the newest call
    whose symbol is there.  No table of kernel versions is kept: a backported call counts."""
    from ..core import files
    numbers = dict(syscall_numbers("x86_64"))
    numbers.update({name: nr for nr, name in NEWER_CALLS.items()})
    numbers.update({name: nr for nr, name in NEWER_CALLS_X86_64.items()})
    try:
        raw = files.read_regular(kallsyms, limit=64 << 20, what="symbol table")
    except (OSError, ValueError) as e:
        raw, why = None, str(e)
    else:
        why = f"{kallsyms} is not there"
    if not raw:
        return {"x86_64": None, "i386": None, "newest": None,
                "source": f"unknown: {why}"}
    have = set()
    for m in re.finditer(rb" [Tt] __x64_sys_(\w+)$", raw, re.M):
        have.add(m.group(1).decode("ascii", "replace"))
    top = max((numbers[n], n) for n in have if n in numbers) if have & set(numbers) else None
    if top is None:
        return {"x86_64": None, "i386": None, "newest": None,
                "source": f"unknown: {kallsyms} names no __x64_sys_ entry"}
    return {"x86_64": top[0] + 1, "i386": top[0] + 1, "newest": top[1],
            "source": f"{kallsyms}: the newest call with an entry is {top[1]} ({top[0]})"}
