"""The seccomp cache's answers checked against the kernel (tw explain --wall ... --check-cache).

machine.seccompsim says which calls the kernel's cache allows without running a filter: a
number below its architecture's table size, native or compat, that every filter allows on
number and architecture alone.  The kernel can say so itself in two ways:

  /proc/PID/seccomp_cache   with CONFIG_SECCOMP_CACHE_DEBUG, the allowed numbers of each
                            architecture's bitmap, for a process behind the filter;
  the price of the call     otherwise: behind a long filter that allows everything on
                            number and architecture alone (LONG instructions of compares
                            of the number, each false), a cached call runs none of it and
                            costs what it costs behind a one-instruction filter; an
                            uncached one runs them all.  The same chain headed by a load
                            of the first argument, which no cache holds, is the uncached
                            price beside it.

Per way in (the native 64-bit syscall; a compat one) it checks a call the cache should hold
(getppid), a number below the table's size that no call has, and one past the table (512:
past every x86 table, which no filter's bitmap reaches).  Raw figures only: analyse.cachecheck
decides.  syscost makes the unassigned numbers (--op null --nr N, each checked to answer
ENOSYS).
"""
import ctypes
import os
import platform
import tempfile
from pathlib import Path

from ...core import files
from ...machine import probe, registry, seccomp, seccompsim, sysnr
from ..syscost import Launch, Sampling, SyscostError, calibrate, measure
from ..trace import tmp_dir

LONG = 2000
ROUNDS = 7
COMPAT_WAYS = ("32-vdso", "32-sysenter", "32-syscall", "32-int80")
# A number no table assigns, below each table's size (syscost --nr takes it), and one past.
UNASSIGNED = {"x86_64": 400, "i386": 222}
PAST = 512


def long_filter(read_arg):
    """LONG compares of the number, each false, then allow; headed by a load of args[0]
    (which no cache holds) when read_arg."""
    prog = [(0x20, 0, 0, 16)] if read_arg else []
    prog += [(0x20, 0, 0, 0)] + [(0x15, 0, 0, 0xFFFF0000 + i) for i in range(LONG)]
    prog += [(0x06, 0, 0, seccomp.RET_ALLOW)]
    return b"".join(seccomp.pack(i) for i in prog)


def _compat_way():
    for v in COMPAT_WAYS:
        if v in registry.names() and probe.check("syscost", v)[0]:
            return v
    return None


def kernel_cache(program):
    """/proc/PID/seccomp_cache of a child behind `program`: {arch name: set of numbers}, or
    None where the kernel has no such file (CONFIG_SECCOMP_CACHE_DEBUG off)."""
    if not Path("/proc/self/seccomp_cache").exists() and \
            not Path(f"/proc/{os.getpid()}/seccomp_cache").exists():
        return None
    libc = ctypes.CDLL(None, use_errno=True)
    buf = ctypes.create_string_buffer(program)

    class Fprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    fprog = Fprog(len(program) // 8, ctypes.cast(buf, ctypes.c_void_p))
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:                                        # the child: filtered, then waits
        try:
            os.close(w)
            libc.prctl(38, 1, 0, 0, 0)                  # PR_SET_NO_NEW_PRIVS
            if libc.syscall(317, 1, 0, ctypes.byref(fprog)) != 0:   # seccomp(SET_MODE_FILTER)
                os._exit(3)
            os.read(r, 1)
        finally:
            os._exit(0)
    os.close(r)
    try:
        for _ in range(100):
            st = seccomp.status(pid)
            if st and st["mode"] == 2:
                break
            os.sched_yield()
        return seccomp.cache_file(pid)
    finally:
        os.close(w)
        os.waitpid(pid, 0)


def _price(variant, op, nr, filt, tsc_hz, cpu):
    extra = ["--nr", str(nr)] if nr is not None else []
    if filt is not None:
        extra += ["--seccomp", str(filt)]
    r = measure(variant, op, sampling=Sampling(batches=5, batch_ms=0.3, warmup_ms=2, cpu=cpu,
                                               tsc_hz=tsc_hz, realtime=True),
                launch=Launch(extra_args=extra))
    if not r.get("supported"):
        raise SyscostError(r.get("reason") or "not supported")
    return min(r["samples_ns"])


def run(rounds=ROUNDS):
    """The check's raw figures: {'kernel', 'table_sizes', 'source' ('seccomp_cache' or
    'price'), 'long', 'rows': [{'way', 'arch', 'what', 'nr', 'op', 'cache_file' or
    'bare'/'const'/'args': [ns per call, a round each]}]}."""
    sizes = sysnr.table_sizes()
    compat = _compat_way()
    cells = [("64-syscall", "x86_64", "a call the cache holds (getppid)", "getppid", None),
             ("64-syscall", "x86_64", "a number below the table's size that no call has",
              "null", UNASSIGNED["x86_64"]),
             ("64-syscall", "x86_64", "a number past the table", "null", PAST)]
    if compat:
        cells += [(compat, "i386", "a call the cache holds (getppid)", "getppid", None),
                  (compat, "i386", "a number below the table's size that no call has",
                   "null", UNASSIGNED["i386"]),
                  (compat, "i386", "a number past the table", "null", PAST)]
    doc = {"kernel": platform.release(), "table_sizes": sizes, "long": LONG,
           "compat_way": compat, "rows": []}
    const, args = long_filter(False), long_filter(True)
    doc["const_hex"], doc["args_hex"] = const.hex(), args.hex()
    for variant, arch, what, op, nr in cells:
        call = seccomp.cell_call(registry.get(variant).abi, op) if nr is None else None
        doc["rows"].append({"way": variant, "arch": arch, "what": what, "op": op,
                            "nr": call[1] if call else nr})
    cache = kernel_cache(const)
    if cache is not None:
        doc["source"] = "seccomp_cache"
        for r in doc["rows"]:
            r["cache_file"] = sorted(cache.get(r["arch"], set()) & {r["nr"]})
        doc["cache_file_sizes"] = {k: len(v) for k, v in cache.items()}
        return doc
    doc["source"] = "price"
    with tempfile.TemporaryDirectory(prefix="tw-cachecheck-", dir=tmp_dir()) as tmp:
        fc, fa = Path(tmp) / "const.bpf", Path(tmp) / "args.bpf"
        files.write_bytes(fc, const)
        files.write_bytes(fa, args)
        tsc_hz, _, cpu = calibrate("64-syscall", "getppid")
        for r in doc["rows"]:
            r["bare"], r["const"], r["args"] = [], [], []
        for k in range(rounds):
            for r in doc["rows"]:
                nr = None if r["op"] == "getppid" else r["nr"]
                order = [("bare", None), ("const", fc), ("args", fa)]
                if k % 2:
                    order.reverse()
                for key, f in order:
                    r[key].append(_price(r["way"], r["op"], nr, f, tsc_hz, cpu))
    return doc
