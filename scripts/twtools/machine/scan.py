"""`tw scan`'s engine: every ELF file under some paths, what it is and where it enters the kernel.

Per file: its class and machine, whether it needs the kernel's IA32 emulation (i386 code that
is a program, a shared library or an interpreter: what `ia32_emulation=0` would stop), and
its entry sites by kind (the registry's kinds that enter the kernel: inline int 0x80,
sysenter and syscall, calls to __kernel_vsyscall through %gs:0x10 or an AT_SYSINFO pointer,
calls into the vsyscall page).  int 0x80 in 64-bit code is flagged: it enters the 32-bit
ABI, which cuts every pointer argument to 32 bits.  Calls to vDSO functions enter nothing and
are not counted here (`tw classify` lists them).

The method, so that a machine's /usr is scanned in seconds, not the hour a full disassembly
takes: find candidate bytes in the code regions (one regular expression over each region, at
C speed: the registry's byte strings, the little-endian address of every AT_SYSINFO pointer
symbol, and the low 32 bits of an address in a target page), then confirm each candidate
with capstone by decoding only the few instructions around it, from the same restart point
`tw classify` walks from (decode.Decoder: the symbol before it), or from at most WINDOW bytes
before it when that symbol is further away (x86 decoding re-synchronises within a few
instructions).  A candidate is a site when the instruction that holds it is one: the entry
instruction itself, starting exactly at the candidate, or the load or call that
classify.find_sites' register tracking turns into a site.  The same find_sites decides in
both commands, so they agree file by file (tests/test_scan.py checks them on a mixed tree).

Every file is read once, bounded, through core.files.read_regular (only four bytes of a file
that is not ELF), never through a symbolic link found in the tree (a link is not followed: its
target is scanned where it lies, if under the paths).  Unreadable files, special files,
symbolic-link loops and damaged ELF files are records of their own ("problem"), one line
each, never a traceback.

The output is JSON lines a fleet can collect: SCHEMA and VERSION head every stream, and
`read_stream` reads one back, refusing another schema or a newer version.
"""
import collections
import errno
import itertools
import json
import os
import stat
import time

import numpy as np

from ..core import files, proc
from ..core.ui import DataError
from . import classify, decode, elf

SCHEMA = "timewrite.scan"
VERSION = 1
# How far before a candidate decoding starts when no symbol is nearer.
WINDOW = 256
# The entry kinds scan counts, in table order (classify.ENTERS).
KINDS = classify.ENTERS
# Kinds a register load or a call through memory makes (find_sites' tracking): a candidate
# for them is confirmed over this many instructions after it.
TRACKED = classify.TRACK + 2
MAGIC = b"\x7fELF"
# Files per task handed to a worker process.
BATCH = 16
# Each file's budget: candidate sites to confirm (a code segment full of `cd 80` would
# otherwise cost half a gigabyte and 18 s per MB), and seconds of decoding.  A file over it
# is a problem record of its own, and the scan goes on.
MAX_CANDIDATES = 200000
FILE_SECONDS = 30.0
# A file this large whose blocks on disk cover less than half of it is sparse: a real program
# is not, and reading one whole costs its claimed size in memory in every worker.
SPARSE_FROM = 64 << 20
# File systems that hold no programs, only the kernel's state, some of which a read changes
# (/proc/kmsg takes log lines from the system's logger): never entered, even when crossing.
PSEUDO_FS = frozenset({"proc", "sysfs", "devtmpfs", "devpts", "debugfs", "tracefs",
                       "securityfs", "cgroup", "cgroup2", "pstore", "bpf", "configfs",
                       "fusectl", "mqueue", "hugetlbfs", "autofs", "binfmt_misc", "efivarfs",
                       "selinuxfs", "rpc_pipefs", "nsfs"})


class OverBudget(Exception):
    """A file's scan would cost more than its budget: it becomes a problem record."""


def _byte_codes(mechs=None):
    """The registry's entry encodings of the kinds scan counts."""
    dec = classify.decoders(mechs)
    return sorted({bytes.fromhex(b) for k, d in dec.items() if k in KINDS for b in d["bytes"]})


def _page_codes(mechs=None):
    """[(bytes 2 and 3, the range of byte 1)] of the low 32 bits of any address in a target
    page (an imm32, or the low half of an imm64), little-endian."""
    dec = classify.decoders(mechs)
    out = []
    for k, d in dec.items():
        if k in KINDS:
            for p in d["pages"]:
                lo = p & 0xFFFFFFFF
                b1 = (lo >> 8) & 0xF0
                out.append((((lo >> 16) & 0xFFFF).to_bytes(2, "little"), b1, b1 | 0x0F))
    return out


def _find_all(data, lit, start, end):
    """Every offset of lit in data[start:end], overlapping ones too (bytes.find: C speed)."""
    i = data.find(lit, start, end)
    while i >= 0:
        yield i
        i = data.find(lit, i + 1, end)


# Candidates are looked up by their first two bytes, a little-endian u16 at every offset, in
# a table of 65536 flags: one gather per byte of code (numpy), faster than a search per
# pattern, as 0x0f (the first byte of syscall and sysenter) is common in x86 code.
CHUNK = 1 << 24


def _pairs(data, lo, hi, table):
    """The offsets i in [lo, hi - 1) where table[u16 at i] is set, sorted."""
    out = []
    for base in range(lo, hi - 1, CHUNK):
        n = min(CHUNK, hi - base)
        for par in (0, 1):
            cnt = (n - par) // 2
            if cnt <= 0:
                continue
            w = np.frombuffer(data, "<u2", count=cnt, offset=base + par)
            out.append(np.flatnonzero(table[w]) * 2 + (base + par))
    hits = np.sort(np.concatenate(out)) if out else np.zeros(0, dtype=np.int64)
    # Checked while the offsets are still one numpy array: as a list of Python ints, a code
    # segment of `cd 80` would cost 36 bytes per byte of code before any budget applied.
    if len(hits) > 4 * MAX_CANDIDATES:
        raise OverBudget(f"more than {MAX_CANDIDATES} candidate entry sites in its code: "
                         "over a file's budget, not decoded")
    return hits.tolist()


class _Confirmer:
    """Decodes just enough around each candidate (module docstring), remembering where the
    last decode stopped so that candidates close together are decoded once."""

    def __init__(self, e, mechs):
        self.e, self.mechs = e, mechs
        self.dec = decode.Decoder(e)
        self.pointers = classify.pointers_of(e, mechs, KINDS)
        self.cursor = None      # (restart point, vaddr of an instruction boundary)

    def window(self, c, after):
        """The instruction holding vaddr c and up to `after` more, decoded as classify would;
        [] when c is not in code."""
        if self.dec.region(c) is None:
            return []
        s, nxt = self.dec.sync_before(c)
        start = s if c - s <= WINDOW else c - WINDOW
        if self.cursor and self.cursor[0] == s and start <= self.cursor[1] <= c:
            start = self.cursor[1]
        stop = min(nxt, c + 16 * (after + 2))
        out = list(itertools.islice(self.dec.run(start, stop, s, skip_to=c), after + 1))
        if out:
            self.cursor = (s, out[0].addr)
        return out

    def sites(self, c, after):
        """The sites whose origin instruction holds vaddr c."""
        w = self.window(c, after)
        if not w:
            return []
        return [x for x in classify.find_sites(self.e, w, self.mechs, self.pointers)
                if x["origin"][0] <= c < x["origin"][0] + x["origin"][1] and x["kind"] in KINDS]


def candidates(e, mechs=None):
    """[(vaddr, after)] of candidate bytes in the code of Elf e, sorted: after is 0 for an
    entry encoding, TRACKED for a pointer or page address."""
    codes, pages = _byte_codes(mechs), _page_codes(mechs)
    ptrs = [(a & 0xFFFFFFFF).to_bytes(4, "little")
            for a in classify.pointers_of(e, mechs, KINDS)]
    # u16 key -> [(code, offset of the key in the candidate, the range of the byte before)]
    keys = {}
    for c in codes:
        keys.setdefault(int.from_bytes(c[:2], "little"), []).append((c, 0, None))
    for top, b1lo, b1hi in pages:
        keys.setdefault(int.from_bytes(top, "little"), []).append((None, 2, (b1lo, b1hi)))
    table = np.zeros(65536, dtype=bool)
    table[list(keys)] = True
    out, d = set(), e.data
    for r in e.code_regions:
        lo, hi = r.offset, r.offset + r.size
        base = r.vaddr - r.offset
        for i in _pairs(d, lo, hi, table):
            for code, back, rng in keys[d[i] | d[i + 1] << 8]:
                if code is not None:
                    if d.startswith(code, i) and i + len(code) <= hi:
                        out.add((base + i, 0))
                elif i - back >= lo and rng[0] <= d[i - 1] <= rng[1]:
                    out.add((base + i - back, TRACKED))
        for lit in ptrs:
            out.update((base + i, TRACKED) for i in _find_all(d, lit, lo, hi))
        if len(out) > MAX_CANDIDATES:
            raise OverBudget(f"more than {MAX_CANDIDATES} candidate entry sites in its code: "
                             "over a file's budget, not decoded")
    return sorted(out)


def scan_elf(e, mechs=None):
    """The record of one parsed Elf (see scan_file)."""
    rec = {"record": "file", "path": e.path, "bits": e.bits, "machine": e.machine_name or
           f"e_machine {e.machine}", "type": e.kind, "needs_ia32": e.needs_ia32,
           "interp": e.interp, "static": e.static, "sites": {}, "functions": {},
           "int80_in_64bit": False, "why": None}
    if e.machine not in (elf.EM_386, elf.EM_X86_64):
        rec["why"] = "not x86 machine code: entry sites not looked for"
        return rec
    cands = candidates(e, mechs)
    if not cands:
        return rec
    conf = _Confirmer(e, mechs)
    found = {}
    t0 = time.monotonic()
    for n, (c, after) in enumerate(cands):
        if n % 1024 == 0 and time.monotonic() - t0 > FILE_SECONDS:
            raise OverBudget(f"over a file's budget of {FILE_SECONDS:.0f} s of decoding "
                             f"({n} of {len(cands)} candidate sites confirmed)")
        for s in conf.sites(c, after):
            found.setdefault(s["addr"], s)
    for s in sorted(found.values(), key=lambda x: x["addr"]):
        rec["sites"][s["kind"]] = rec["sites"].get(s["kind"], 0) + 1
        fns = rec["functions"].setdefault(s["kind"], {})
        fn = s["function"] or f"(no symbol) {s['addr']:#x}"
        fns[fn] = fns.get(fn, 0) + 1
    rec["functions"] = {k: sorted(v.items(), key=lambda kv: (-kv[1], kv[0]))[:8]
                        for k, v in rec["functions"].items()}
    rec["int80_in_64bit"] = e.bits == 64 and "int80" in rec["sites"]
    return rec


def problem(path, why, kind="unreadable"):
    return {"record": "problem", "path": str(path), "kind": kind, "why": why}


def scan_file(path, limit=elf.MAX_ELF, mechs=None):
    """(record or None, bytes read) for one file: None for a file that is not ELF; a
    "problem" record for one that cannot be read or parsed; else a "file" record."""
    try:
        st = os.stat(path)
        if st.st_size >= SPARSE_FROM and st.st_blocks * 512 < st.st_size // 2:
            return problem(path, f"{path}: sparse, {st.st_size} bytes claimed and "
                           f"{st.st_blocks * 512} on disk: not read (no program is sparse)",
                           "sparse file"), 0
    except OSError:
        pass                        # read_regular says why, below
    try:
        data = files.read_regular(path, limit=limit, what="ELF file", magic=MAGIC)
    except DataError as err:
        return problem(path, str(err), "not a regular file" if "regular" in str(err)
                       else "too large"), 0
    except OSError as err:
        return problem(path, f"{path}: {err.strerror}"), 0
    if data is None:
        return problem(path, f"{path}: vanished while the tree was read", "vanished"), 0
    if data[:4] != MAGIC:
        return None, len(data)
    try:
        return scan_elf(elf.Elf(data, str(path)), mechs), len(data)
    except elf.ElfError as err:
        return problem(path, str(err), "damaged ELF"), len(data)
    except OverBudget as err:
        return problem(path, f"{path}: {err}", "over budget"), len(data)
    except MemoryError:
        return problem(path, f"{path}: ran out of memory while scanned: over a file's budget",
                       "over budget"), len(data)


def _mounts():
    """{mount point: file system type} from /proc/self/mountinfo ({} when unreadable)."""
    out = {}
    try:
        text = files.read_regular("/proc/self/mountinfo", limit=1 << 22) or b""
    except (OSError, DataError):
        return out
    for line in text.decode("utf-8", "replace").splitlines():
        f = line.split()
        if "-" in f:
            k = f.index("-")
            if k + 1 < len(f) and len(f) > 4:
                out[f[4].replace("\\040", " ")] = f[k + 1]
    return out


def _fstype_of(path, mounts):
    """The type of the file system path lies on: its longest mount point's (None unknown)."""
    path = os.path.realpath(path)
    best = None
    for m in mounts:
        if (path == m or path.startswith(m.rstrip("/") + "/")) and (best is None or len(m) > len(best)):
            best = m
    return mounts.get(best) if best is not None else None


def walk(paths, cross=False):
    """Yield ("file", path) for every regular file under paths, once per inode (("hardlink",
    path) for the other names of a file already seen), ("problem", record) for what cannot be
    scanned (unreadable directories, special files, symbolic-link loops), ("link", path) for a
    symbolic link (counted, not followed) and ("mount", path) for a file system not entered:
    another one than its root's unless cross, and the kernel's pseudo file systems
    (PSEUDO_FS) always.  The walk keeps its own stack: a tree of any depth costs memory in
    proportion to it, never Python's recursion limit."""
    seen = set()
    mounts = _mounts()
    for root in paths:
        root = str(root)
        try:
            st = os.stat(root)          # the user named it: a link here is followed
        except OSError as err:
            kind = "symbolic link loop" if err.errno == errno.ELOOP else "unreadable"
            yield "problem", problem(root, f"{root}: {err.strerror}", kind)
            continue
        if _fstype_of(root, mounts) in PSEUDO_FS:
            yield "mount", root         # named or not, the kernel's state is not a program
            continue
        if not stat.S_ISDIR(st.st_mode):
            yield from _entry(root, st, seen)
            continue
        dev = st.st_dev
        stack = [root]
        while stack:
            d = stack.pop()
            try:
                with os.scandir(d) as it:
                    entries = sorted(it, key=lambda e: e.name)
            except OSError as err:
                yield "problem", problem(d, f"{d}: {err.strerror}")
                continue
            subdirs = []
            for e in entries:
                try:
                    lst = e.stat(follow_symlinks=False)
                except OSError as err:
                    yield "problem", problem(e.path, f"{e.path}: {err.strerror}")
                    continue
                if stat.S_ISDIR(lst.st_mode):
                    # A mount point is where the device changes; only there is the mount table
                    # asked what it is.  (A bind mount of the same file system is walked.)
                    fstype = _fstype_of(e.path, mounts) if lst.st_dev != dev else None
                    if fstype in PSEUDO_FS or (lst.st_dev != dev and not cross):
                        yield "mount", e.path
                        continue
                    subdirs.append(e.path)
                else:
                    yield from _entry(e.path, lst, seen)
            stack.extend(reversed(subdirs))


def _entry(p, st, seen=None):
    m = st.st_mode
    if stat.S_ISREG(m):
        if st.st_nlink > 1 and seen is not None:
            k = (st.st_dev, st.st_ino)
            if k in seen:
                yield "hardlink", p
                return
            seen.add(k)
        yield "file", p
    elif stat.S_ISLNK(m):
        try:
            os.stat(p)
            yield "link", p
        except OSError as err:
            if err.errno == errno.ELOOP:
                yield "problem", problem(p, f"{p}: a symbolic link loop (to {os.readlink(p)})",
                                         "symbolic link loop")
            else:
                yield "link", p     # dangling: nothing there to scan
    elif not stat.S_ISDIR(m):
        kind = ("a FIFO" if stat.S_ISFIFO(m) else "a socket" if stat.S_ISSOCK(m) else
                "a device" if stat.S_ISCHR(m) or stat.S_ISBLK(m) else "a special file")
        yield "problem", problem(p, f"{p}: is {kind}, not read", "special file")


def _scan_batch(paths):
    return [scan_file(p) for p in paths]


# The mount points a summary lists by name (the count covers them all).
MOUNTS_LISTED = 50


def scan(paths, jobs=1, progress=None, cross=False):
    """Yield every record for the files under paths ("file" and "problem", in no fixed
    order when jobs > 1), then one "summary" record.  progress(summary so far) is called
    every few seconds.  cross: enter other file systems than each path's own (never the
    kernel's pseudo file systems)."""
    t0 = time.monotonic()
    summ = {"record": "summary", "files": 0, "links": 0, "hard_links": 0,
            "not_entered": [], "not_entered_count": 0, "elf": 0, "bytes": 0, "problems": 0,
            "needs_ia32": [], "int80_in_64bit": [], "sites": {}, "wall_s": None, "jobs": jobs}
    last = [t0]

    def account(rec, nbytes):
        summ["bytes"] += nbytes
        if rec is None:
            return
        if rec["record"] == "problem":
            summ["problems"] += 1
            return
        summ["elf"] += 1
        if rec["needs_ia32"]:
            summ["needs_ia32"].append(rec["path"])
        if rec["int80_in_64bit"]:
            summ["int80_in_64bit"].append(rec["path"])
        for k, n in rec["sites"].items():
            summ["sites"][k] = summ["sites"].get(k, 0) + n
        if progress and time.monotonic() - last[0] > 5:
            last[0] = time.monotonic()
            progress(summ)

    def files_of():
        for what, x in walk(paths, cross):
            if what == "file":
                summ["files"] += 1
                yield x
            elif what == "link":
                summ["links"] += 1
            elif what == "hardlink":
                summ["hard_links"] += 1
            elif what == "mount":
                summ["not_entered_count"] += 1
                if len(summ["not_entered"]) < MOUNTS_LISTED:
                    summ["not_entered"].append(x)
            else:
                pending.append(x)

    pending = []

    def problems():
        """The problems the walk met since the last record, each counted."""
        while pending:
            summ["problems"] += 1
            yield pending.pop(0)

    if jobs <= 1:
        for p in files_of():
            rec, n = scan_file(p)
            account(rec, n)
            if rec is not None:
                yield rec
            yield from problems()
    else:
        # The walk stays in this process and feeds the workers in batches, a few ahead: an
        # interrupt (core.proc raises it here) then kills the workers at once instead of
        # waiting for a queue of the whole tree.  Workers leave the signals to this process.
        pool = proc.pool(jobs)
        inflight = collections.deque()

        def drain():
            for rec, n in inflight.popleft().result():
                account(rec, n)
                if rec is not None:
                    yield rec
            yield from problems()
        try:
            batch = []
            for p in files_of():
                batch.append(p)
                if len(batch) == BATCH:
                    inflight.append(pool.submit(_scan_batch, batch))
                    batch = []
                    while len(inflight) > 4 * jobs:
                        yield from drain()
            if batch:
                inflight.append(pool.submit(_scan_batch, batch))
            while inflight:
                yield from drain()
            pool.shutdown()
        except BaseException:
            proc.stop_pool(pool)
            raise
    while pending:
        summ["problems"] += 1
        yield pending.pop(0)
    summ["needs_ia32"].sort()
    summ["int80_in_64bit"].sort()
    summ["wall_s"] = round(time.monotonic() - t0, 3)
    yield summ


def header(paths, jobs):
    """The first record of a stream: what it is and which version."""
    import datetime as dt
    import socket
    return {"record": "header", "schema": SCHEMA, "version": VERSION, "host": socket.gethostname(),
            "paths": [str(p) for p in paths], "jobs": jobs,
            "started": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")}


def read_stream(lines, name="the scan output"):
    """The records of a JSON-lines stream `tw scan --json` wrote (on any host): [dict].
    DataError when it is not one, is of another schema or a newer version, or is cut short
    (no summary)."""
    recs = []
    for i, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            r = json.loads(line)
        except ValueError as err:
            raise DataError(f"{name}: line {i} is not JSON ({err})") from None
        if not isinstance(r, dict) or r.get("record") not in ("header", "file", "problem",
                                                              "summary"):
            raise DataError(f"{name}: line {i} is not a scan record")
        if not recs:
            if r["record"] != "header" or r.get("schema") != SCHEMA:
                raise DataError(f"{name}: does not start with a {SCHEMA} header")
            if not isinstance(r.get("version"), int) or r["version"] > VERSION:
                raise DataError(f"{name}: {SCHEMA} version {r.get('version')!r}; this checkout "
                                f"reads up to version {VERSION}", "update this checkout")
        recs.append(r)
    if not recs or recs[-1]["record"] != "summary":
        raise DataError(f"{name}: ends before its summary record (cut short?)")
    return recs


def readiness(summary):
    """The readiness answer's facts: {"stops": [paths], "int80_in_64bit": [paths]}."""
    return {"stops": list(summary["needs_ia32"]), "int80_in_64bit": list(summary["int80_in_64bit"])}

