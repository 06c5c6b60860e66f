"""The one reader of a process: start a program stopped, and read what /proc says about it.

Every part of the toolkit that looks at a live process asks here: `tw vdso` (entrypath), `tw
diagnose` (measure.diagnose) and `tw census` (measure.census).

How a program is started stopped: the child calls ptrace(PTRACE_TRACEME) before execve, so
the kernel stops it right after execve, before its first instruction, and we are its tracer
and parent; /proc/<pid>/auxv and /proc/<pid>/mem are then readable without root.  `read`
gives the executable, its bitness (elf.header on the first bytes of /proc/<pid>/exe, read
bounded), the memory map, the auxiliary vector (pairs of u32 in a 32-bit process, u64 in a
64-bit one: AT_SYSINFO_EHDR is the vDSO's ELF header, AT_SYSINFO the 32-bit
__kernel_vsyscall) and the vDSO image itself, classified for a 32-bit process
(vdso32.classify_vdso32).  `snapshot` is what /proc shows of every process without
ptrace: pid, command, executable and bitness, or why not (another user's process is
unreadable without root).
"""
import ctypes
import os
import signal
import stat
import struct
import subprocess
import time
from pathlib import Path

from ..core import escape, files
from . import elf
from .seccomp import status as seccomp_status
from .vdso32 import classify_vdso32

PTRACE_TRACEME, PTRACE_CONT, PTRACE_SETOPTIONS = 0, 7, 0x4200
PTRACE_O_TRACEEXIT, PTRACE_EVENT_EXIT = 0x40, 6
AT_NULL, AT_SYSINFO, AT_SYSINFO_EHDR = 0, 32, 33
ADDR_NO_RANDOMIZE = 0x0040000
# /proc/<pid>/comm is TASK_COMM_LEN (16) bytes at most; /proc/<pid>/maps of a large process
# is a few hundred KiB: both are read with a bound, as every file is.
COMM_MAX, MAPS_MAX, AUXV_MAX, STAT_MAX = 64, 16 << 20, 4096, 4096
PF_KTHREAD = 0x00200000     # include/linux/sched.h: the task is a kernel thread


class ProcessError(RuntimeError):
    """A program could not be started stopped: the message says why, in one line.  usage: the
    user named something that is not there (a command), as opposed to the system refusing."""

    def __init__(self, msg, usage=False):
        super().__init__(msg)
        self.usage = usage


def _libc():
    lib = ctypes.CDLL(None, use_errno=True)
    lib.ptrace.argtypes = [ctypes.c_long, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]
    lib.ptrace.restype = ctypes.c_long
    return lib


def ptrace(req, pid, data=0):
    if _libc().ptrace(req, pid, None, ctypes.c_void_p(data)) == -1:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))


# ---------------------------------------------------------------- bounded reads of /proc

def _read_bounded(path, limit):
    """Up to `limit` bytes of a /proc file (these report size 0, so a size check cannot bound
    them: the read does)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        return files.read_fd(fd, limit)
    finally:
        os.close(fd)


def exe_header(pid):
    """The first elf.HEADER_MIN bytes of /proc/<pid>/exe: a regular file, opened without
    blocking and read no further than the header."""
    fd = os.open(f"/proc/{pid}/exe", os.O_RDONLY | os.O_NONBLOCK)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(0, "the executable is not a regular file")
        return os.read(fd, elf.HEADER_MIN)
    finally:
        os.close(fd)


FS_IOC_GETVERSION = 0x80087601      # _IOR('v', 1, long): the inode's i_generation
GEN_CTIME = 1 << 63                 # watch/maps.h TW_GEN_CTIME


def generation(path):
    """The generation of the file at path (a program's /proc/<pid>/exe, or any file), as
    watch/exec.bpf.c computes it (maps.h): its i_generation (FS_IOC_GETVERSION), or, where
    that is 0, its change time in ns with bit 63 set.  None when the file system does not
    answer the ioctl (tmpfs): then the file cannot be told from another that had its inode
    number, and no file is found by it.  OSError when it cannot be opened."""
    import fcntl
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        try:
            buf = fcntl.ioctl(fd, FS_IOC_GETVERSION, bytes(8))
        except OSError:
            return None
        gen = int.from_bytes(buf[:4], "little")
        return gen if gen else os.fstat(fd).st_ctime_ns | GEN_CTIME
    finally:
        os.close(fd)


def exe_generation(pid):
    """generation() of a process's executable."""
    return generation(f"/proc/{pid}/exe")


def bits_of(header_bytes):
    """32 or 64 from an executable's first bytes; None when they are not an ELF header."""
    try:
        return elf.header(header_bytes).bits
    except elf.ElfError:
        return None


def parse_maps(text):
    """/proc/<pid>/maps -> [{lo, hi, perms, offset, path}]."""
    out = []
    for line in text.splitlines():
        f = line.split(None, 5)
        if len(f) < 5:
            continue
        try:
            lo, hi = (int(x, 16) for x in f[0].split("-"))
            off = int(f[2], 16)
        except ValueError:
            continue
        out.append({"lo": lo, "hi": hi, "perms": f[1], "offset": off,
                    "path": f[5].strip() if len(f) > 5 else ""})
    return out


def maps(pid):
    """The memory map of a process (OSError when it is gone or unreadable)."""
    return parse_maps(_read_bounded(f"/proc/{pid}/maps", MAPS_MAX).decode("utf-8", "replace"))


def parse_auxv(raw, bits):
    """/proc/<pid>/auxv bytes -> {type: value}, words of the process's own size."""
    fmt = "<II" if bits == 32 else "<QQ"
    size = struct.calcsize(fmt)
    out = {}
    for off in range(0, len(raw) - size + 1, size):
        t, v = struct.unpack_from(fmt, raw, off)
        if t == AT_NULL:
            break
        out[t] = v
    return out


def comm(pid):
    """The command name of a process (its comm, as escape.name keeps a name from the kernel:
    any process may give itself bytes that are not UTF-8), or None when it is gone."""
    try:
        return escape.name(_read_bounded(f"/proc/{pid}/comm", COMM_MAX).rstrip(b"\n"))
    except OSError:
        return None


def exe_name(pid):
    """/proc/<pid>/exe's target as escape.name keeps it: the path is bytes (any user may name
    a file with bytes that are not UTF-8) and every document and the watch's state hold text."""
    return escape.name(os.readlink(f"/proc/{pid}/exe".encode()))


def vdso_image(pid, mapping):
    """The bytes of a process's [vdso] mapping, from /proc/<pid>/mem (our tracee, or root);
    OSError when it cannot be read."""
    with open(f"/proc/{pid}/mem", "rb", buffering=0) as mem:
        mem.seek(mapping["lo"])
        return mem.read(mapping["hi"] - mapping["lo"])


def own_vdso():
    """(address, bytes) of this process's own [vdso] mapping, or None when it has none;
    OSError when it cannot be read."""
    for line in Path("/proc/self/maps").read_text().splitlines():
        if line.rstrip().endswith("[vdso]"):
            lo, hi = (int(x, 16) for x in line.split()[0].split("-"))
            return lo, vdso_image("self", {"lo": lo, "hi": hi})
    return None


def _stat_fields(pid):
    """/proc/<pid>/stat's fields from the state on (field 3 is [0]), or None when it is gone."""
    try:
        stat_ = _read_bounded(f"/proc/{pid}/stat", STAT_MAX).decode("utf-8", "replace")
        # the command, in parentheses, may hold spaces and ')': the fields follow the last one
        return stat_[stat_.rindex(")") + 2:].split()
    except (OSError, ValueError):
        return None


def start_ticks(pid):
    """When the process started, in clock ticks since boot (/proc/<pid>/stat field 22, its
    group leader's start_boottime): with the pid it names one process, since a pid is reused
    once freed.  None when it is gone."""
    f = _stat_fields(pid)
    try:
        return int(f[19]) if f else None
    except (ValueError, IndexError):
        return None


def is_kernel_thread(pid):
    """Whether a process is a kernel thread (PF_KTHREAD in /proc/<pid>/stat's flags, which
    anyone may read: /proc/<pid>/exe of a kernel thread is refused to other users, not
    absent); None when it is gone."""
    f = _stat_fields(pid)
    try:
        return bool(int(f[6]) & PF_KTHREAD) if f else None
    except (ValueError, IndexError):
        return None


def read(pid, vdso=True):
    """What /proc says about a process: {pid, exe, bits, maps, auxv, vdso, why}.  vdso: read
    the vDSO image from /proc/<pid>/mem (our tracee, or root) and, in a 32-bit process,
    classify its __kernel_vsyscall from the live image (vdso32.classify_vdso32)."""
    out = {"pid": pid, "exe": None, "bits": None, "maps": [], "auxv": {}, "vdso": None,
           "why": None}
    try:
        out["exe"] = os.readlink(f"/proc/{pid}/exe")
        out["bits"] = bits_of(exe_header(pid))
        out["maps"] = maps(pid)
        raw = _read_bounded(f"/proc/{pid}/auxv", AUXV_MAX)
    except OSError as e:
        out["why"] = f"cannot read /proc/{pid}: {e.strerror}"
        return out
    out["auxv"] = parse_auxv(raw, out["bits"])
    if not vdso:
        return out
    v = next((m for m in out["maps"] if m["path"] == "[vdso]"), None)
    if v is None:
        out["vdso"] = {"base": None, "why": "no [vdso] mapping (vdso=0 or vdso32=0?)"}
        return out
    vd = {"base": v["lo"], "end": v["hi"], "image": None}
    try:
        vd["image"] = vdso_image(pid, v)
    except OSError as e:
        vd["why"] = f"cannot read the vDSO from /proc/{pid}/mem: {e.strerror}"
    if out["bits"] == 32 and vd["image"]:
        si = out["auxv"].get(AT_SYSINFO)
        c = classify_vdso32(vd["image"], v["lo"], None if si is None else si - v["lo"])
        vd.update({k: c.get(k) for k in ("form", "instruction", "landing_pad", "kernel_vsyscall",
                                          "why")})
    out["vdso"] = vd
    return out


def snapshot(generation=False):
    """Every process /proc lists now: [{pid, start, comm, exe, dev, ino, bits, needs_ia32,
    why, seccomp, seccomp_filters}] (and gen with generation=True: tw watch finds a file by
    it); seccomp is /proc/PID/status's mode (0 none, 1 strict, 2 filter:
    machine.seccomp.status); start is in clock ticks since boot (start_ticks); comm and exe as
    escape.name keeps them; dev, ino and gen the executable file's (exe_generation; None when
    unreadable).  Kernel threads (no executable; PF_KTHREAD) are
    left out.  Without root, another user's executable cannot be read: its bitness is None and
    why says so."""
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        pid = int(name)
        row = {"pid": pid, "start": start_ticks(pid), "comm": comm(pid), "exe": None,
               "dev": None, "ino": None, "bits": None, "needs_ia32": None, "why": None}
        sc = seccomp_status(pid) or {}
        row["seccomp"], row["seccomp_filters"] = sc.get("mode"), sc.get("filters")
        try:
            row["exe"] = exe_name(pid)
            try:
                st = os.stat(f"/proc/{pid}/exe")
                row["dev"], row["ino"] = st.st_dev, st.st_ino
                if generation:
                    row["gen"] = exe_generation(pid)
            except OSError:
                pass
        except FileNotFoundError:
            continue                 # a kernel thread, or gone already
        except OSError as e:
            if is_kernel_thread(pid) is not False:
                continue             # a kernel thread (no executable), or gone already
            row["why"] = f"cannot read /proc/{pid}/exe: {e.strerror}"
            out.append(row)
            continue
        try:
            head = exe_header(pid)
            row["bits"] = bits_of(head)
            row["needs_ia32"] = elf.is_i386(head)
            if row["bits"] is None:
                row["why"] = "its executable is not an ELF file"
        except FileNotFoundError:
            continue
        except OSError as e:
            row["why"] = f"cannot read /proc/{pid}/exe: {e.strerror or e}"
        out.append(row)
    return sorted(out, key=lambda r: r["pid"])


# ---------------------------------------------------------------- starting one stopped

def _norandom():
    """In a child before exec: turn address-space randomisation off (personality(2), kept
    across exec), so that two runs of a program get the same layout."""
    lib = ctypes.CDLL(None, use_errno=True)
    lib.personality.argtypes = [ctypes.c_ulong]
    cur = lib.personality(0xFFFFFFFF)
    if cur != -1:
        lib.personality(cur | ADDR_NO_RANDOMIZE)


def _traceme():
    _libc().ptrace(PTRACE_TRACEME, 0, None, None)


def _traceme_norandom():
    _norandom()
    _traceme()


def popen_norandom(cmd, **kw):
    """subprocess.Popen(cmd) with address-space randomisation off in the child."""
    return subprocess.Popen(cmd, preexec_fn=_norandom, close_fds=True, **kw)


def start_stopped(cmd, stdin=None, stdout=None, stderr=None, norandom=False):
    """Popen(cmd) stopped at its first instruction.  The OSError of a command that cannot be
    run propagates (its errno says why: ENOENT, EACCES, ENOEXEC for a 32-bit program where
    IA32 emulation is off); ProcessError when it ran but did not stop (ptrace refused).
    norandom: with address-space randomisation off (see _norandom)."""
    p = subprocess.Popen(cmd, stdin=stdin, stdout=stdout, stderr=stderr,
                         preexec_fn=_traceme_norandom if norandom else _traceme, close_fds=True)
    _, status = os.waitpid(p.pid, 0)
    if not os.WIFSTOPPED(status):
        code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else -os.WTERMSIG(status)
        p.returncode = code
        raise ProcessError(f"{cmd[0]} did not stop at execve (exit {code}): ptrace was refused "
                           "(kernel.yama.ptrace_scope 3, or a seccomp filter); /proc/<pid>/mem "
                           "is then unreadable too")
    return p


def kill(p):
    """Kill a child started here and reap it."""
    try:
        os.kill(p.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    try:
        p.wait(timeout=10)
    except (subprocess.TimeoutExpired, ChildProcessError):
        pass


def run_to_exit(p):
    """Continue a process stopped by start_stopped, pass its signals on, stop it once more as
    it exits to read its map.  {wall_s, status, maps_at_exit}."""
    pid = p.pid
    ptrace(PTRACE_SETOPTIONS, pid, PTRACE_O_TRACEEXIT)
    t0 = time.monotonic()
    ptrace(PTRACE_CONT, pid, 0)
    t1, at_exit, status = None, [], None
    while True:
        try:
            _, st = os.waitpid(pid, 0)
        except InterruptedError:
            continue
        if os.WIFEXITED(st) or os.WIFSIGNALED(st):
            status = os.WEXITSTATUS(st) if os.WIFEXITED(st) else -os.WTERMSIG(st)
            t1 = t1 or time.monotonic()
            break
        if os.WIFSTOPPED(st):
            sig, event = os.WSTOPSIG(st), st >> 16
            if sig == signal.SIGTRAP and event == PTRACE_EVENT_EXIT:
                t1 = time.monotonic()
                try:
                    at_exit = maps(pid)
                except OSError:
                    at_exit = []
                sig = 0
            elif sig == signal.SIGTRAP:
                sig = 0
            try:
                ptrace(PTRACE_CONT, pid, sig)
            except OSError:
                pass
    p.returncode = status
    return {"wall_s": t1 - t0, "status": status, "maps_at_exit": at_exit}
