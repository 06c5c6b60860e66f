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


