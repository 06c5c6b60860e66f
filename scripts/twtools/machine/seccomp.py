"""seccomp on this machine: the names and numbers of filters, libseccomp through ctypes, what a
process runs behind.

Profiles are read by machine.seccompprofile (as Docker's and podman's engines read them) and
compiled by machine.seccompruntime (as runc, crun or libseccomp alone lay them out), with
Debian's libseccomp2 through ctypes on libseccomp.so.2 (lib() here).  The same bytes are what
`syscost --seccomp FILE` loads into the measured child and what machine.seccompsim runs in
user space, so what is measured and what is explained are one program.

Nothing that analyses needs libseccomp: the number of a measured call comes from the kernel's
UAPI headers (machine.sysnr, cell_call), and a run records it (analyse.walls reads it).

The names are the kernel's and libseccomp's: SCMP_ACT_* actions, SCMP_ARCH_* architectures
(each the AUDIT_ARCH_* value seccomp_data.arch carries), SCMP_CMP_* comparisons.
"""
import ctypes
import ctypes.util
import os
import platform
import re
import struct

from . import sysnr
from .seccompsim import AUDIT_ARCH_I386, AUDIT_ARCH_X86_64

# struct seccomp_data.arch values (include/uapi/linux/audit.h): what the kernel's
# syscall_get_arch() says for a call.  int 0x80 from 64-bit code is I386: the kernel takes
# it as a compat call (TS_COMPAT), numbers from the i386 table.
AUDIT_ARCH_X32 = 0x4000003E       # libseccomp's SCMP_ARCH_X32 token (x86-64 table, bit 30)
ARCH_NAMES = {AUDIT_ARCH_X86_64: "x86_64", AUDIT_ARCH_I386: "i386", AUDIT_ARCH_X32: "x32"}
ARCH_VALUES = {v: k for k, v in ARCH_NAMES.items()}
# Which table a syscost build's numbers come from (variants/registry's abi column).
ABI_ARCH = {"x86_64": AUDIT_ARCH_X86_64, "i386": AUDIT_ARCH_I386}

# What a syscost cell's op calls, by name (null is an invalid number: no name, no table), and
# the arguments syscost passes (syscost.c's prepare): getppid none, write its target's
# descriptor (the first free one, 3 or a few above), the buffer and the size.
OP_CALL = {"null": None, "getppid": "getppid", "write-devnull": "write", "write-file": "write",
           "write-sync": "write", "gettimeofday": "gettimeofday",
           "clock_gettime": "clock_gettime", "time": "time"}
NULL_NR = 0x7FFF      # timewrite/tw_sysnr.h's TW_NR_invalid, in both tables
WRITE_FD = 3

# Return values (include/uapi/linux/seccomp.h): the action in the high 16 bits.
RET_KILL_PROCESS = 0x80000000
RET_KILL_THREAD = 0x00000000
RET_TRAP = 0x00030000
RET_ERRNO = 0x00050000
RET_USER_NOTIF = 0x7FC00000
RET_TRACE = 0x7FF00000
RET_LOG = 0x7FFC0000
RET_ALLOW = 0x7FFF0000
RET_ACTION_FULL = 0xFFFF0000
RET_DATA = 0x0000FFFF


def pack(insn):
    """One instruction (code, jt, jf, k) as struct sock_filter's 8 bytes."""
    return struct.pack("<HBBI", *insn)


# One instruction, BPF_RET|BPF_K SECCOMP_RET_ALLOW: the price of being filtered at all.
ALLOW_ALL = pack((0x06, 0, 0, RET_ALLOW))
# A filter written the way that leaves the architecture hole: getppid (110) and mount (165)
# denied by their x86-64 numbers, the architecture never loaded.  int 0x80 from 64-bit code
# makes getppid as i386's 64 and mount as 21, which it lets through (and it refuses i386's
# 110 and 165, iopl and getresuid, which it never meant to).  For teaching and tests only:
# libseccomp never writes such a filter.
NUMBERS_ONLY = b"".join(pack(i) for i in (
    (0x20, 0, 0, 0), (0x15, 0, 1, 110), (0x06, 0, 0, RET_ERRNO | 1),
    (0x15, 0, 1, 165), (0x06, 0, 0, RET_ERRNO | 1), (0x06, 0, 0, RET_ALLOW)))

# libseccomp's comparison operators (enum scmp_compare) by the OCI profile's words.
CMP = {"SCMP_CMP_NE": 1, "SCMP_CMP_LT": 2, "SCMP_CMP_LE": 3, "SCMP_CMP_EQ": 4,
       "SCMP_CMP_GE": 5, "SCMP_CMP_GT": 6, "SCMP_CMP_MASKED_EQ": 7}


class NoLibseccomp(OSError):
    """libseccomp.so.2 is not on this machine."""


NO_LIBSECCOMP = ("libseccomp is not installed (Debian's libseccomp2): tw compiles seccomp "
                 "profiles with it, as container runtimes do")


def action_name(ret):
    """A filter's return value in words: 'allow', 'errno 1 (EPERM)', 'kill the process'."""
    act, data = ret & RET_ACTION_FULL, ret & RET_DATA
    if act == RET_ERRNO:
        return f"errno {data} ({os.strerror(data) if data else 'no error'})"
    return {RET_ALLOW: "allow", RET_KILL_PROCESS: "kill the process",
            RET_KILL_THREAD: "kill the thread", RET_TRAP: "SIGSYS (trap)",
            RET_TRACE: "ask a ptrace tracer", RET_LOG: "allow and log",
            RET_USER_NOTIF: "ask a user-space supervisor"}.get(act, f"action {act:#x}")


# ---- libseccomp, through ctypes -------------------------------------------------------

class ArgCmp(ctypes.Structure):
    """struct scmp_arg_cmp."""
    _fields_ = [("arg", ctypes.c_uint), ("op", ctypes.c_int),
                ("datum_a", ctypes.c_uint64), ("datum_b", ctypes.c_uint64)]


_LIB = None


def lib():
    """libseccomp.so.2 with the signatures used here; NoLibseccomp when absent."""
    global _LIB
    if _LIB is not None:
        return _LIB
    name = ctypes.util.find_library("seccomp") or "libseccomp.so.2"
    try:
        L = ctypes.CDLL(name, use_errno=True)
    except OSError:
        raise NoLibseccomp(NO_LIBSECCOMP) from None
    L.seccomp_init.restype = ctypes.c_void_p
    L.seccomp_init.argtypes = [ctypes.c_uint32]
    L.seccomp_release.argtypes = [ctypes.c_void_p]
    L.seccomp_arch_add.argtypes = [ctypes.c_void_p, ctypes.c_uint32]
    L.seccomp_arch_exist.argtypes = [ctypes.c_void_p, ctypes.c_uint32]
    L.seccomp_arch_resolve_name.argtypes = [ctypes.c_char_p]
    L.seccomp_arch_resolve_name.restype = ctypes.c_uint32
    L.seccomp_api_get.restype = ctypes.c_uint
    L.seccomp_attr_set.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32]
    L.seccomp_rule_add_array.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int,
                                         ctypes.c_uint, ctypes.POINTER(ArgCmp)]
    L.seccomp_export_bpf.argtypes = [ctypes.c_void_p, ctypes.c_int]
    L.seccomp_syscall_resolve_name_arch.argtypes = [ctypes.c_uint32, ctypes.c_char_p]
    L.seccomp_syscall_resolve_num_arch.argtypes = [ctypes.c_uint32, ctypes.c_int]
    L.seccomp_syscall_resolve_num_arch.restype = ctypes.c_void_p
    L.seccomp_version.restype = ctypes.POINTER(ctypes.c_uint * 3)
    _LIB = L
    return L


def version():
    """libseccomp's version as 'M.m.p', or None without it."""
    try:
        v = lib().seccomp_version().contents
    except NoLibseccomp:
        return None
    return ".".join(str(x) for x in v)


def resolve(name, arch):
    """libseccomp's number of system call `name` in arch's table, or None where it has none.
    Negative numbers are libseccomp's pseudo-calls (i386's socket, multiplexed through
    socketcall): None too, since no instruction makes them under that number."""
    nr = lib().seccomp_syscall_resolve_name_arch(arch, name.encode())
    return nr if nr >= 0 else None


# ---- numbers without libseccomp ------------------------------------------------------------

def number(name, arch):
    """The number of `name` in arch's table (x86_64 or i386), from the kernel's UAPI headers
    (machine.sysnr), or None: what the analysis uses, which needs no native library."""
    table = {AUDIT_ARCH_X86_64: "x86_64", AUDIT_ARCH_I386: "i386"}.get(arch)
    return sysnr.syscall_numbers(table).get(name) if table else None


def names(arch):
    """{number: name} of arch's table (x86_64 or i386), from the UAPI headers."""
    table = {AUDIT_ARCH_X86_64: "x86_64", AUDIT_ARCH_I386: "i386"}[arch]
    return {nr: n for n, nr in sysnr.syscall_numbers(table).items()}


def cell_call(abi, op):
    """(name, nr, arch, args) of the call a syscost cell makes, as seccomp_data shows it:
    arch from the variant's table (registry's abi: i386 for every 32-bit way in and for
    int 0x80 from 64-bit code), or None where the call has no number in that table."""
    arch = ABI_ARCH[abi]
    name = OP_CALL.get(op)
    nr = number(name, arch) if name else NULL_NR
    if nr is None:
        return None
    return name, nr, arch, ((WRITE_FD, 0, 1) if name == "write" else (0, 0, 0))


def native_arch():
    """seccomp_data.arch of this machine's native calls, or None off x86-64."""
    return AUDIT_ARCH_X86_64 if platform.machine() == "x86_64" else None


# ---- what a process runs behind -----------------------------------------------------------

def status(pid="self", root="/proc"):
    """{'mode': 0|1|2, 'filters': N or None, 'no_new_privs': 0|1 or None} from
    /proc/PID/status (Seccomp: 0 none, 1 strict, 2 filter; Seccomp_filters since Linux
    5.9), or None when the process is gone or unreadable."""
    try:
        with open(f"{root}/{pid}/status", "rb") as f:
            text = f.read(1 << 16)
    except OSError:
        return None
    out = {"mode": None, "filters": None, "no_new_privs": None}
    for line in text.splitlines():
        k, _, v = line.partition(b":")
        v = v.strip()
        if not v.isdigit():
            continue
        if k == b"Seccomp":
            out["mode"] = int(v)
        elif k == b"Seccomp_filters":
            out["filters"] = int(v)
        elif k == b"NoNewPrivs":
            out["no_new_privs"] = int(v)
    return out


def cache_file(pid="self", root="/proc"):
    """/proc/PID/seccomp_cache as {arch name: set of numbers the cache allows}, or None
    where the kernel does not offer the file (it needs CONFIG_SECCOMP_CACHE_DEBUG)."""
    try:
        with open(f"{root}/{pid}/seccomp_cache", "rb") as f:
            text = f.read(1 << 20)
    except OSError:
        return None
    out = {}
    for line in text.decode("ascii", "replace").splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1].isdigit() and parts[2] == "ALLOW":
            out.setdefault(parts[0], set()).add(int(parts[1]))
    return out


def kernel_has_cache(release=None):
    """Whether this kernel keeps seccomp's constant-action cache (Linux 5.11, commit
    f9d480b6ffbe, on x86): a call every filter allows whatever its arguments skips them."""
    nums = re.findall(r"\d+", release or platform.release())[:2]
    return len(nums) == 2 and (int(nums[0]), int(nums[1])) >= (5, 11)
