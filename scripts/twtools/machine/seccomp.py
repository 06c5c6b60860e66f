"""seccomp on this machine: filters compiled by libseccomp, and what a process runs behind.

A container runtime (runc, crun) turns its OCI profile into a seccomp filter with libseccomp:
seccomp_init with the profile's defaultAction, seccomp_arch_add for each of its
architectures, one seccomp_rule_add_array per name and argument set, then seccomp_load.  This
module does the same through Debian's libseccomp2 (ctypes on libseccomp.so.2), except that it
exports the program (seccomp_export_bpf) instead of loading it into itself: `syscost
--seccomp FILE` loads those bytes into the measured child only.  The same bytes are what
analyse.seccompsim runs in user space, so what is measured and what is explained are one
program.

What this module does not do that runc does: runc (libcontainer/seccomp/patchbpf) prepends a
stub that answers -ENOSYS for system call numbers newer than the profile knows; crun and
podman rely on the profile's defaultErrnoRet instead.  The profile formats are docs/walls.md's.

The names are the kernel's and libseccomp's: SCMP_ACT_* actions, SCMP_ARCH_* architectures
(each the AUDIT_ARCH_* value seccomp_data.arch carries), SCMP_CMP_* comparisons.
"""
import ctypes
import ctypes.util
import json
import os
import platform
import re
import struct

# struct seccomp_data.arch values (include/uapi/linux/audit.h): what the kernel's
# syscall_get_arch() says for a call.  int 0x80 from 64-bit code is I386: the kernel takes
# it as a compat call (TS_COMPAT), numbers from the i386 table.
AUDIT_ARCH_X86_64 = 0xC000003E
AUDIT_ARCH_I386 = 0x40000003
AUDIT_ARCH_X32 = 0x4000003E       # libseccomp's SCMP_ARCH_X32 token (x86-64 table, bit 30)
ARCHES = {"SCMP_ARCH_X86_64": AUDIT_ARCH_X86_64, "SCMP_ARCH_X86": AUDIT_ARCH_I386,
          "SCMP_ARCH_X32": AUDIT_ARCH_X32}
ARCH_NAMES = {AUDIT_ARCH_X86_64: "x86_64", AUDIT_ARCH_I386: "i386", AUDIT_ARCH_X32: "x32"}
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

# One instruction, BPF_RET|BPF_K SECCOMP_RET_ALLOW: the price of being filtered at all.
ALLOW_ALL = struct.pack("<HBBI", 0x06, 0, 0, RET_ALLOW)
# A filter written the way that leaves the architecture hole: getppid (110) and mount (165)
# denied by their x86-64 numbers, the architecture never loaded.  int 0x80 from 64-bit code
# makes getppid as i386's 64 and mount as 21, which it lets through (and it refuses i386's
# 110 and 165, iopl and getresuid, which it never meant to).  For teaching and tests only:
# libseccomp never writes such a filter.
NUMBERS_ONLY = b"".join(struct.pack("<HBBI", *i) for i in (
    (0x20, 0, 0, 0), (0x15, 0, 1, 110), (0x06, 0, 0, RET_ERRNO | 1),
    (0x15, 0, 1, 165), (0x06, 0, 0, RET_ERRNO | 1), (0x06, 0, 0, RET_ALLOW)))

# libseccomp's comparison operators (enum scmp_compare) by the OCI profile's words.
CMP = {"SCMP_CMP_NE": 1, "SCMP_CMP_LT": 2, "SCMP_CMP_LE": 3, "SCMP_CMP_EQ": 4,
       "SCMP_CMP_GE": 5, "SCMP_CMP_GT": 6, "SCMP_CMP_MASKED_EQ": 7}
# libseccomp's filter attribute for the bad-architecture action (enum scmp_filter_attr).
_FLTATR_ACT_BADARCH = 2
# A profile's size limits: no container profile comes near them; beyond is not a profile.
MAX_PROFILE_BYTES = 4 << 20
MAX_RULES = 5000


class ProfileError(ValueError):
    """The profile is not one this tool (or a runtime) can compile: says where and why."""


class NoLibseccomp(OSError):
    """libseccomp.so.2 is not on this machine."""


def action_value(word, errno_ret=None):
    """An OCI action word (SCMP_ACT_ERRNO, ...) as the filter's return value."""
    base = {"SCMP_ACT_KILL": RET_KILL_THREAD, "SCMP_ACT_KILL_THREAD": RET_KILL_THREAD,
            "SCMP_ACT_KILL_PROCESS": RET_KILL_PROCESS, "SCMP_ACT_TRAP": RET_TRAP,
            "SCMP_ACT_ALLOW": RET_ALLOW, "SCMP_ACT_LOG": RET_LOG,
            "SCMP_ACT_NOTIFY": RET_USER_NOTIF}
    if word in base:
        return base[word]
    if word == "SCMP_ACT_ERRNO":
        e = 1 if errno_ret is None else errno_ret       # runc's and crun's default: EPERM
        return RET_ERRNO | (e & RET_DATA)
    if word == "SCMP_ACT_TRACE":
        return RET_TRACE | ((errno_ret or 0) & RET_DATA)
    raise ProfileError(f"unknown action {word!r} (one of {', '.join(sorted(base))}, "
                       "SCMP_ACT_ERRNO, SCMP_ACT_TRACE)")


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

class _ArgCmp(ctypes.Structure):
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
        raise NoLibseccomp("libseccomp is not installed (Debian's libseccomp2): tw compiles "
                           "seccomp profiles with it, as container runtimes do") from None
    L.seccomp_init.restype = ctypes.c_void_p
    L.seccomp_init.argtypes = [ctypes.c_uint32]
    L.seccomp_release.argtypes = [ctypes.c_void_p]
    L.seccomp_arch_add.argtypes = [ctypes.c_void_p, ctypes.c_uint32]
    L.seccomp_arch_exist.argtypes = [ctypes.c_void_p, ctypes.c_uint32]
    L.seccomp_attr_set.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32]
    L.seccomp_rule_add_array.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int,
                                         ctypes.c_uint, ctypes.POINTER(_ArgCmp)]
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
    """The number of system call `name` in arch's table, or None where it has none.
    Negative numbers are libseccomp's pseudo-calls (i386's socket, multiplexed through
    socketcall): None too, since no instruction makes them under that number."""
    nr = lib().seccomp_syscall_resolve_name_arch(arch, name.encode())
    return nr if nr >= 0 else None


def name_of(nr, arch):
    """The name of number nr in arch's table, or None."""
    p = lib().seccomp_syscall_resolve_num_arch(arch, nr)
    if not p:
        return None
    s = ctypes.string_at(p).decode()
    ctypes.CDLL(None).free(ctypes.c_void_p(p))
    return s


def cell_call(abi, op):
    """(name, nr, arch, args) of the call a syscost cell makes, as seccomp_data shows it:
    arch from the variant's table (registry's abi: i386 for every 32-bit way in and for
    int 0x80 from 64-bit code), or None where the call has no number in that table."""
    arch = ABI_ARCH[abi]
    name = OP_CALL.get(op)
    nr = resolve(name, arch) if name else NULL_NR
    if nr is None:
        return None
    return name, nr, arch, ((WRITE_FD, 0, 1) if name == "write" else (0, 0, 0))


def native_arch():
    """seccomp_data.arch of this machine's native calls, or None off x86-64."""
    return AUDIT_ARCH_X86_64 if platform.machine() == "x86_64" else None


# ---- OCI profiles -----------------------------------------------------------------------

def load_profile(path):
    """An OCI profile from a JSON file, checked for shape; ProfileError says what is wrong."""
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_PROFILE_BYTES + 1)
    except OSError as e:
        raise ProfileError(f"{path}: {e.strerror}") from None
    if len(raw) > MAX_PROFILE_BYTES:
        raise ProfileError(f"{path}: larger than {MAX_PROFILE_BYTES >> 20} MiB, not a profile")
    try:
        doc = json.loads(raw)
    except (ValueError, RecursionError) as e:
        raise ProfileError(f"{path}: not JSON ({str(e)[:80]})") from None
    check_profile(doc, str(path))
    return doc


def _int(v, what, lo=0, hi=(1 << 64) - 1):
    if not isinstance(v, int) or isinstance(v, bool) or not lo <= v <= hi:
        raise ProfileError(f"{what} is {str(v)[:40]!s}, not a whole number from {lo} to {hi}")
    return v


def check_profile(doc, where="the profile"):
    """Raise ProfileError unless doc has an OCI profile's shape (defaultAction, optional
    defaultErrnoRet, architectures, syscalls[] with names, action, errnoRet, args)."""
    if not isinstance(doc, dict):
        raise ProfileError(f"{where}: not a JSON object")
    action_value(doc.get("defaultAction", "?"), None)
    if "defaultErrnoRet" in doc:
        _int(doc["defaultErrnoRet"], f"{where}: defaultErrnoRet", 0, 4095)
    arches = doc.get("architectures", [])
    if not isinstance(arches, list) or any(a not in ARCHES for a in arches):
        raise ProfileError(f"{where}: architectures must be a list of "
                           f"{', '.join(ARCHES)}")
    rules = doc.get("syscalls", [])
    if not isinstance(rules, list) or len(rules) > MAX_RULES:
        raise ProfileError(f"{where}: syscalls must be a list of at most {MAX_RULES} rules")
    for i, r in enumerate(rules):
        at = f"{where}: syscalls[{i}]"
        if not isinstance(r, dict):
            raise ProfileError(f"{at} is not an object")
        names = r.get("names", [r["name"]] if "name" in r else None)
        if (not isinstance(names, list) or not names
                or not all(isinstance(n, str) and re.fullmatch(r"[a-z0-9_]{1,64}", n)
                           for n in names)):
            raise ProfileError(f"{at}: names must be a list of system call names")
        action_value(r.get("action", "?"), None)
        if "errnoRet" in r:
            _int(r["errnoRet"], f"{at}.errnoRet", 0, 4095)
        args = r.get("args") or []
        if not isinstance(args, list) or len(args) > 6:
            raise ProfileError(f"{at}: args must be a list of at most 6 comparisons")
        for j, a in enumerate(args):
            if not isinstance(a, dict) or a.get("op") not in CMP:
                raise ProfileError(f"{at}.args[{j}]: op must be one of {', '.join(CMP)}")
            _int(a.get("index"), f"{at}.args[{j}].index", 0, 5)
            _int(a.get("value", 0), f"{at}.args[{j}].value")
            _int(a.get("valueTwo", 0), f"{at}.args[{j}].valueTwo")
        for key in ("includes", "excludes"):
            c = r.get(key, {})
            if not isinstance(c, dict):
                raise ProfileError(f"{at}.{key} is not an object")


def _applies(rule, arch_words, caps=()):
    """Whether a Docker-style rule's includes/excludes let it into a filter for these
    architectures and a container without extra capabilities (Docker's default)."""
    inc, exc = rule.get("includes", {}), rule.get("excludes", {})
    if inc.get("caps") and not set(inc["caps"]) <= set(caps):
        return False
    if exc.get("caps") and set(exc["caps"]) & set(caps):
        return False
    if inc.get("arches") and not set(inc["arches"]) & set(arch_words):
        return False
    if exc.get("arches") and set(exc["arches"]) & set(arch_words):
        return False
    if inc.get("minKernel"):
        want = tuple(int(x) for x in re.findall(r"\d+", str(inc["minKernel"]))[:2])
        have = tuple(int(x) for x in re.findall(r"\d+", platform.release())[:2])
        if have < want:
            return False
    return True


# Docker's words for the x86 family: "amd64" in includes.arches means SCMP_ARCH_X86_64.
_DOCKER_ARCH = {"SCMP_ARCH_X86_64": "amd64", "SCMP_ARCH_X86": "x86", "SCMP_ARCH_X32": "x32"}


def compile_profile(doc):
    """(filter bytes, notes): the OCI profile doc compiled by libseccomp as runc and crun
    compile it, exported as raw BPF.  notes list what was left out and why (a name this
    libseccomp does not know, a rule for capabilities a default container lacks), as a
    runtime leaves them out."""
    check_profile(doc)
    L = lib()
    default = action_value(doc["defaultAction"], doc.get("defaultErrnoRet"))
    ctx = L.seccomp_init(default)
    if not ctx:
        raise ProfileError("libseccomp refused the default action")
    notes = []
    try:
        arch_words = list(doc.get("architectures") or [])
        for w in arch_words:
            a = ARCHES[w]
            if L.seccomp_arch_exist(ctx, a) != 0:
                rc = L.seccomp_arch_add(ctx, a)
                if rc < 0:
                    raise ProfileError(f"libseccomp refused architecture {w}: "
                                       f"{os.strerror(-rc)}")
        docker_words = [_DOCKER_ARCH[w] for w in arch_words] + arch_words
        for i, r in enumerate(doc.get("syscalls", [])):
            if not _applies(r, docker_words):
                notes.append(f"syscalls[{i}] left out: its includes/excludes do not apply "
                             "to a default container here")
                continue
            act = action_value(r["action"], r.get("errnoRet"))
            if act == default:
                continue            # libseccomp refuses a rule that repeats the default
            args = r.get("args") or []
            cmps = (_ArgCmp * max(1, len(args)))()
            for j, a in enumerate(args):
                cmps[j] = _ArgCmp(a["index"], CMP[a["op"]], a.get("value", 0),
                                  a.get("valueTwo", 0))
            for name in r.get("names", [r.get("name")]):
                nr = L.seccomp_syscall_resolve_name_arch(0, name.encode())  # 0: native
                if nr == -1:              # __NR_SCMP_ERROR: libseccomp knows no such name
                    notes.append(f"{name}: unknown to libseccomp {version()}, left out (as "
                                 "runc and crun leave it out)")
                    continue
                rc = L.seccomp_rule_add_array(ctx, act, nr, len(args), cmps)
                if rc < 0:
                    raise ProfileError(f"syscalls[{i}] {name}: libseccomp refused the rule "
                                       f"({os.strerror(-rc)})")
        r_fd, w_fd = os.pipe()
        try:
            rc = L.seccomp_export_bpf(ctx, w_fd)
            os.close(w_fd)
            w_fd = None
            if rc < 0:
                raise ProfileError(f"libseccomp could not export the filter: "
                                   f"{os.strerror(-rc)}")
            chunks = []
            while True:
                b = os.read(r_fd, 65536)
                if not b:
                    break
                chunks.append(b)
        finally:
            os.close(r_fd)
            if w_fd is not None:
                os.close(w_fd)
    finally:
        L.seccomp_release(ctx)
    return b"".join(chunks), notes


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
