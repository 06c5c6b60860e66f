"""What `tw watch` keeps: the exec batches and windows of twtools.measure.watch folded into one
bounded state, priced, and the readiness report drawn from it.

  programs   one row per (program, 32-bit or not): execs counted by the kernel, first and
             last seen (an exec, or a sighting in /proc or in a window).  A program is its
             file, as it is now: the kernel gives each exec's device, inode and generation (a
             reused inode number is another file) and the file's absolute path, resolved from
             the file's own dentry and mount (exec.bpf.c).  The program is named by that path
             (the first one seen for the file: a hard link of a known file is that file);
             where the kernel could not give one (the file deleted before its exec, a path
             past the walk's bounds) by "[file dev M:m inode N]", and an anonymous file (a
             memfd) by "[memfd:NAME dev M:m inode N]", each with a note saying why.  The name
             it was started by (execve's argument, maybe relative) is kept beside it as a
             label (the last one seen), never as its identity.
  bounds     at most `max_programs` programs of each budget and `max_kinds` file-system types:
             programs that entered a compat path (32-bit, or a 64-bit one a window saw
             entering by int 0x80) have a budget of their own, so that no number of 64-bit
             programs can crowd them out.  Past its budget a new program is folded into
             "other" (its bitness kept), and `folded` counts what went there, by reason and
             bitness: "cap", or "map_full" (execs the kernel counted in @n, by bitness, that
             no map key holds: a full kernel map dropped them; `full` says on which days and
             in how many intervals).
  windows    per program and entry path, the calls a window counted; per path the excess
             CPU time per second over the fastest path open to the program (analyse.census's
             price, from the per-call matrix, with its 95% interval, or why unknown); write
             latency per program, kind of file and sync, as log2 buckets with their sum.
  report     in the last N days, the programs booting with ia32_emulation=0 would have
             stopped: every 32-bit program seen, and every 64-bit one seen entering by a compat
             path (int 0x80), with the evidence (execs, first and last seen, the windows that
             saw it) and what its old entry path cost.

Every figure with an interval carries it, or says why it is unknown.
"""
import math
import time


SCHEMA = "timewrite-watch-report/1"
OTHER = "other"
MAX_PROGRAMS = 500
MAX_KINDS = 16
TTY_MAJORS = {4, 5} | set(range(136, 144))

# Entry paths as short label values (bounded: one per kind of way in).
PATH_NAMES = {
    ("native", "syscall"): "native_syscall",
    ("compat", "vdso32-call"): "compat_vdso",
    ("compat", "int80", "text"): "compat_int80_text",
    ("compat", "int80", "other"): "compat_int80_library",
    ("compat", "int80", "vdso"): "compat_int80_library",
    ("native", "vsyscall-call"): "vsyscall_page",
}


def path_name(g):
    """A census path ({abi, entry, origin}) as one of a bounded set of label values."""
    for key in ((g["abi"], g["entry"], g["origin"]), (g["abi"], g["entry"])):
        if key in PATH_NAMES:
            return PATH_NAMES[key]
    entry = g["entry"] if g["entry"] in ("sysenter", "syscall", "int80") else "unknown"
    return f"{g['abi']}_{entry}_{'text' if g['origin'] == 'text' else 'library'}"


def file_kind(ifmt, fstype, major):
    """The kind of file a write went to: file:<fs type>, pipe, socket, tty or device."""
    if ifmt == 8:
        return f"file:{fstype}"
    if ifmt == 1:
        return "pipe"
    if ifmt == 12:
        return "socket"
    if ifmt == 2:
        return "tty" if major in TTY_MAJORS else "device"
    if ifmt == 6:
        return "device"
    return "other"


def program_of(p):
    """A census process's program name: its executable, else [comm]."""
    return p.get("exe") or f"[{p.get('comm') or '?'}]"


def utf8(name):
    """A name as text SQLite and the exposition can hold: bytes that are not UTF-8 (a /proc
    path read with surrogateescape) as the four characters \\xNN, as build/watchbpf writes
    them; any other lone surrogate as \\uDCxx."""
    try:
        name.encode("utf-8")
        return name
    except UnicodeEncodeError:
        try:
            return name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
        except UnicodeEncodeError:
            return name.encode("utf-8", "backslashreplace").decode("utf-8")


def _add(a, b):
    if a is None or b is None:
        return None
    return {k: a[k] + b[k] for k in ("median", "ci_low", "ci_high")}


def _summary(v):
    """{median, ci_low, ci_high} of a summary, or None when any is unknown."""
    if not v or any(v.get(k) is None for k in ("median", "ci_low", "ci_high")):
        return None
    return {k: v[k] for k in ("median", "ci_low", "ci_high")}


def _walls(d):
    """The window's walls (analyse.census.walls_of), kept small for the state and /metrics:
    for seccomp and audit, how many processes, their calls per second by ABI and what the
    wall adds to them (ns per second, priced with the walls a results directory measured)
    or why not; audit's state; the other programs on raw_syscalls."""
    w = d.get("walls") or {}
    if not w or w.get("why"):
        return {"why": w.get("why") or "the window read no walls"}
    out = {}
    for k in ("seccomp", "audit"):
        g = w.get(k) or {}
        out[k] = {"processes": g.get("processes", 0),
                  "native_calls_per_s": g.get("native_calls_per_s"),
                  "compat_calls_per_s": g.get("compat_calls_per_s"),
                  "ns_per_s": g.get("ns_per_s"), "why": g.get("why")}
    if not w.get("work_read"):
        out["audit"] = {"processes": None, "native_calls_per_s": None, "compat_calls_per_s": None,
                        "ns_per_s": None, "why": "unknown: the window does not read the calls' "
                                                 "work flags (tw census does)"}
    a = w.get("audit_state") or {}
    out["audit_enabled"] = a.get("enabled")
    out["tracers"] = len(w.get("tracers") or [])
    out["tracers_why"] = w.get("tracers_why")
    return out


def window_summary(raw, percall_doc=None, percall_source=None, walls=None):
    """One window's figures per program: {t0, t1, seconds, added_ns, why_not, blind, programs:
    [{program, is32, stops, paths: {name: {calls, ns_per_s, why, label}}}], wlat: [{program,
    kind, sync, buckets: [{lo_ns, hi_ns, count}], sum_ns}]}.  The census's analysis (and with
    it numpy and scipy) is imported here, not with the module: tw watch runs this in a child
    process, so that the long-lived watch never holds them (docs/watch.md, "What it costs")."""
    from . import census as acensus
    d = acensus.analyse(raw, percall_doc, percall_source, walls)
    out = {"t0": raw.get("utc_start"), "t1": raw.get("utc_end"), "seconds": d.get("window_s"),
           "why_not": raw.get("why_not"), "blind": d.get("blind") or [],
           "percall_why": d.get("percall_why"), "percall_source": d.get("percall_source"),
           "added_ns": None, "added_why": None, "programs": [], "wlat": [],
           "walls": _walls(d)}
    tc = d.get("tracer_cost") or {}
    added = [a for a in (tc.get("added_ns") or {}).values() if a.get("median") is not None]
    if added:
        a = added[0]
        out["added_ns"] = {k: a[k] for k in ("median", "ci_low", "ci_high")}
    else:
        out["added_why"] = next((a.get("why") for a in (tc.get("added_ns") or {}).values()),
                                None) or "the window's cost was not measured"
    progs = {}
    images = {}
    for p in d["processes"]:
        name = program_of(p)
        images[(p["pid"], p.get("start"), p.get("gen") or 0)] = name
        row = progs.setdefault((name, p.get("bits") == 32), {
            "program": name, "is32": p.get("bits") == 32, "stops": None, "paths": {},
            "seccomp_filters": None})
        if p.get("seccomp") == 2:
            # behind a seccomp filter (/proc's Seccomp 2), with how many filters: the most
            # any of its processes had
            row["seccomp_filters"] = max(row["seccomp_filters"] or 0, p.get("seccomp_filters") or 1)
        if p.get("stops_because"):
            row["stops"] = p["stops_because"]
        for g in p.get("paths") or []:
            n = path_name(g)
            q = row["paths"].setdefault(n, {"calls": 0, "ns_per_s": {"median": 0.0, "ci_low": 0.0,
                                                                      "ci_high": 0.0},
                                            "why": None,
                                            "label": g.get("label") if g["abi"] == "compat" else
                                            "native syscall (the window does not read where a "
                                            "native call came from)"})
            q["calls"] += g["calls"]
            q["ns_per_s"] = _add(q["ns_per_s"], g.get("ns_per_s"))
            if g["entry"] == "int80":
                # VM exits per second the path cost (analyse.causes: fitted exits per call x
                # calls per second), where the matrix prices one exit.
                q["exits_per_s"] = _add(q.get("exits_per_s", {"median": 0.0, "ci_low": 0.0,
                                                              "ci_high": 0.0}),
                                        _summary(g.get("exits_per_s")))
                if g.get("exits_per_s") is None:
                    q["exits_why"] = g.get("exits_why") or "unknown: not priced"
            if g.get("ns_per_s") is None:
                q["why"] = g.get("why") or "not priced"
    for (name, is32), row in progs.items():
        if row["stops"] is None and not is32 and any(k.startswith("compat") for k in row["paths"]):
            row["stops"] = "64-bit, enters by int 0x80"
        if is32:
            row["stops"] = "32-bit"
    out["programs"] = list(progs.values())
    for w in raw.get("wlat") or []:
        name = images.get((w["pid"], w["start"], w["gen"])) or _image_name(raw, w)
        out["wlat"].append({"program": name, "kind": file_kind(w["ifmt"], w["fstype"], w["major"]),
                            "sync": w["sync"], "buckets": w["buckets"], "sum_ns": w["sum_ns"]})
    return out


def _image_name(raw, w):
    """A writer no call row named (it wrote, but its other calls were left out as tw's own):
    its /proc executable if the snapshots know its pid."""
    for s in (raw.get("snapshot_end") or []) + (raw.get("snapshot") or []):
        if s["pid"] == w["pid"]:
            return s.get("exe") or f"[{s.get('comm') or '?'}]"
    return f"[pid {w['pid']}]"


def file_name(dev, ino, kind="file"):
    """A file the kernel gave no path for, named by its device and inode (kind: "file", or
    the kernel's name for an anonymous one, "memfd:NAME")."""
    import os
    return f"[{kind} dev {os.major(dev)}:{os.minor(dev)} inode {ino}]"


PATH_ANON, PATH_DETACHED = 6, 7
ANON_NOTE = ("an anonymous file (memfd_create, run by fexecve): it has no path; named by the "
             "kernel's name for it, its device and inode")


def path_note(why, path):
    """Why a file is named by device and inode (watch/maps.h's PATH_* code), in words."""
    return {1: f"deleted before its exec (it was {path})" if path else "deleted before its exec",
            2: "its path has more components than the kernel's walk takes (48)",
            3: "its path is longer than the kernel's walk takes (1023 bytes)",
            4: "the kernel's path map let it go before it was read",
            5: "this kernel has no bpf_loop (Linux 5.17): no path walked",
            PATH_ANON: ANON_NOTE,
            PATH_DETACHED: (f"its mount is in no mount namespace (detached: umount -l); below "
                            f"that mount it was {path}" if path else
                            "its mount is in no mount namespace (detached: umount -l)"),
            }.get(why, "the kernel gave no path")


def day(t):
    """The UTC day of Unix time t, as YYYY-MM-DD."""
    return time.strftime("%Y-%m-%d", time.gmtime(t))


class State:
    """The watch's bounded state in memory (the Prometheus export reads it; store.watchdb
    keeps it on disk)."""

    def __init__(self, max_programs=MAX_PROGRAMS, max_kinds=MAX_KINDS):
        self.max_programs, self.max_kinds = max_programs, max_kinds
        # (program, is32) -> {execs, first, last, dev, ino, gen, note, started}
        self.programs = {}
        self.files = {}          # (dev, ino, gen) -> program: the file a kept program is
        self.folded = {(r, b): 0 for r in ("cap", "map_full") for b in (False, True)}
        self.compat = set()      # (program, False): 64-bit programs a window saw enter by compat
        self.named = {False: 0, True: 0}   # programs named, per budget (True: compat)
        self.calls = {}          # (program, is32, path) -> calls, summed over windows
        self.cost = {}           # (program, is32, path) -> last window's ns_per_s or None
        self.wlat = {}           # (program, kind, sync) -> {buckets {hi_ns: count}, sum_ns, count}
        self.seccomp = {}        # (program, is32) -> seccomp filters, in the last window
        self.kinds = set()
        self.windows = {"n": 0, "seconds": 0.0, "last": None, "added_ns": None, "added_why": None}
        self.intervals = 0
        self.started = None
        self.dirty = set()       # (program, is32) rows changed since the last save
        self.days = {}           # (UTC day, program, is32) -> {execs, first, last}: not yet saved
        # (UTC day, is32) -> {intervals, execs, first, last}: the exec map's drops, not yet saved
        self.full = {}
        self.on_disk_only = {}   # is32 -> [programs, execs] in the state file past the cap at load

    # ---- bounds
    def compat_budget(self, program, is32):
        """Whether a program counts in the compat budget: 32-bit, or seen entering by compat."""
        return bool(is32) or (program, is32) in self.compat

    def label(self, program, is32, compat=False):
        """The program's label: itself if known or its budget has room, else OTHER.  A program
        that entered a compat path (32-bit, or compat=True: a window saw it enter by int 0x80)
        is in the compat budget, which 64-bit-only programs never take."""
        if (program, is32) in self.programs or program == OTHER:
            return program
        if self.named[bool(is32 or compat)] < self.max_programs:
            return program
        return OTHER

    def kind(self, k):
        if k in self.kinds or not k.startswith("file:"):
            return k
        if len(self.kinds) < self.max_kinds:
            self.kinds.add(k)
            return k
        return "file:other"

    def _see(self, program, is32, t, execs=0, file=None, compat=False):
        """file: {dev, ino, gen, note, started} the kernel gave for this exec (None: a
        sighting).  compat: a window saw it enter by a compat path."""
        program = utf8(program)
        name = self.label(program, is32, compat)
        if name == OTHER and program != OTHER:
            self.folded[("cap", bool(is32))] += execs
        if (name, is32) not in self.programs and name != OTHER:
            self.named[bool(is32 or compat)] += 1
        if compat and not is32 and name != OTHER and (name, is32) not in self.compat:
            if (name, is32) in self.programs:       # named in the 64-bit budget: moved over
                self.named[False] -= 1
                self.named[True] += 1
            self.compat.add((name, is32))
        row = self.programs.setdefault((name, is32), {"execs": 0, "first": t, "last": t})
        if file and name != OTHER:
            old = (row.get("dev"), row.get("ino"), row.get("gen"))
            row.update({k: v for k, v in file.items() if v is not None})
            if file.get("dev") is not None:
                new = (file["dev"], file["ino"], file.get("gen"))
                row["gen"] = file.get("gen")
                # One file a program, its newest: a path rebuilt a million times (a new inode
                # each time) keeps one entry here, so memory stays bounded by the program cap.
                if old != new and self.files.get(old) == name:
                    del self.files[old]
                self.files[new] = name
        row["execs"] += execs
        self.dirty.add((name, is32))
        row["first"] = min(row["first"], t) if row["first"] is not None else t
        row["last"] = max(row["last"], t) if row["last"] is not None else t
        if t is not None:
            d = self.days.setdefault((day(t), name, is32), {"execs": 0, "first": t, "last": t})
            d["execs"] += execs
            d["first"], d["last"] = min(d["first"], t), max(d["last"], t)
        return name

    # ---- inputs
    def add_batch(self, batch, offset, now):
        """One exec batch (measure.watch.ExecTracer); offset turns its monotonic ns into Unix
        seconds; now is when it was read.  Returns the rows changed: {(program, is32)}."""
        changed = set()
        counted = {False: 0, True: 0}
        for key, r in batch["execs"].items():
            first = r["first_ns"] / 1e9 + offset if r.get("first_ns") else None
            last = r["last_ns"] / 1e9 + offset if r.get("last_ns") else first
            prog, is32, file = self.identify(key, r, batch)
            counted[is32] += r["n"]
            name = self._see(prog, is32, first if first is not None else (last or now), r["n"], file)
            if last is not None and last != first:
                self._see(name, is32, last, 0)
            changed.add((name, is32))
        total = batch.get("n") or {}
        for is32 in (False, True):
            dropped = max(0, int(total.get(is32) or 0) - counted[is32])
            if not dropped:
                continue
            # The kernel counted them by bitness (@n) but no key held them: a full map.  They
            # are counted under "other" of their own bitness, and the day says so.
            self.folded[("map_full", is32)] += dropped
            self._see(OTHER, is32, now, dropped)
            changed.add((OTHER, is32))
            f = self.full.setdefault((day(now), is32), {"intervals": 0, "execs": 0,
                                                        "first": now, "last": now})
            f["intervals"] += 1
            f["execs"] += dropped
            f["first"], f["last"] = min(f["first"], now), max(f["last"], now)
        return changed

    def identify(self, key, r, batch):
        """(program, is32, file) of one exec key: (dev, ino, gen, is32) from the exec tracer
        (r["started"] the name it was last started by), named by its file (a file known already
        keeps its name: a hard link or another name for it is the same program; a reused inode
        number is another file, its generation another); or (name, is32), a name taken as it
        is."""
        if len(key) == 2:
            return key[0], key[1], None
        dev, ino, gen, is32 = key
        started = utf8(r["started"]) if r.get("started") is not None else None
        if not dev and not ino:       # no file (never for an ELF or a script's interpreter)
            return started or "[no file]", is32, {"started": started,
                                                  "note": "the kernel gave no file"}
        file = {"dev": dev, "ino": ino, "gen": gen, "started": started, "note": None}
        known = self.files.get((dev, ino, gen))
        if known is not None and (known, is32) in self.programs:
            return known, is32, file
        path = batch.get("paths", {}).get((dev, ino, gen))
        why = batch.get("why", {}).get((dev, ino, gen), 0 if path else 4)
        if why == 0 and path:
            return path, is32, file
        file["note"] = path_note(why, path)
        if why == PATH_ANON and path and path.strip("/"):
            return file_name(dev, ino, path[1:] if path.startswith("/") else path), is32, file
        return file_name(dev, ino), is32, file

    def add_snapshot(self, rows, t):
        """Processes /proc shows running now: each executable seen at t (execs 0), found by its
        file (device, inode and generation, when /proc gave them) first, else by its path."""
        changed = set()
        for r in rows:
            if not r.get("exe"):
                continue
            ident = (r.get("dev"), r.get("ino"), r.get("gen"))
            name, file = (self.files.get(ident) if None not in ident else None), None
            if name is None and r["exe"].endswith(" (deleted)") and None not in ident[:2]:
                # running, its file deleted since, and not seen at its exec: by device and inode
                name = file_name(*ident[:2])
                file = {"dev": ident[0], "ino": ident[1], "gen": ident[2],
                        "note": f"deleted while it ran (it was {r['exe'][:-len(' (deleted)')]})"}
            is32 = bool(r.get("needs_ia32"))
            changed.add((self._see(name or r["exe"], is32, t, 0, file), is32))
        return changed

    def _by_started(self, w):
        """{(name as started, is32): [programs]} of the kept programs, for the window's names
        that are no path (built once a window, and only when it has such a name)."""
        names = [p["program"] for p in w["programs"]] + [x["program"] for x in w["wlat"]]
        if all(n.startswith(("/", "[")) for n in names):
            return {}
        out = {}
        for (name, is32), row in self.programs.items():
            if row.get("started") and name != OTHER:
                out.setdefault((row["started"], is32), []).append(name)
        return out

    def _window_name(self, program, is32, by_started):
        """The program a window's process is.  The window names a process by /proc/PID/exe
        (an absolute path, the exec tracer's name for the file); one that started and ended
        inside the window, never seen in /proc, by the name execve was given, maybe relative
        (`./a.out`).  That one is the program the exec tracer last saw started by that name,
        of the same bitness (either, for write latency: is32 None), when exactly one program
        was; two (two ./a.out in two folders) or none leave the name as it is, so that a
        guess never merges two programs."""
        if program.startswith(("/", "[")) or not by_started:
            return program
        hits = {n for b in ((True, False) if is32 is None else (is32,))
                for n in by_started.get((program, b), ())}
        return hits.pop() if len(hits) == 1 else program

    def add_window(self, w):
        """One window_summary."""
        t = w.get("t1") or w.get("t0")
        self.windows["n"] += 1
        self.windows["seconds"] += w.get("seconds") or 0.0
        self.windows["last"] = t
        self.windows["added_ns"], self.windows["added_why"] = w.get("added_ns"), w.get("added_why")
        self.windows["walls"] = w.get("walls")
        self.seccomp = {}
        rows = []
        by_started = self._by_started(w)
        for p in w["programs"]:
            compat = any(k.startswith("compat") for k in p["paths"])
            name = self._see(self._window_name(p["program"], p["is32"], by_started), p["is32"], t,
                             compat=compat)
            if p.get("seccomp_filters"):
                # the last window's programs behind a filter (bounded: named ones and other)
                k = (name, p["is32"])
                self.seccomp[k] = max(self.seccomp.get(k, 0), p["seccomp_filters"])
            for path, q in p["paths"].items():
                k = (name, p["is32"], path)
                self.calls[k] = self.calls.get(k, 0) + q["calls"]
                self.cost[k] = q["ns_per_s"]
                rows.append({"program": name, "is32": p["is32"], "path": path, "calls": q["calls"],
                             "ns_per_s": q["ns_per_s"], "why": q["why"], "stops": p["stops"],
                             "exits_per_s": q.get("exits_per_s"),
                             "exits_why": q.get("exits_why")})
        lat = []
        for x in w["wlat"]:
            x = dict(x, program=self._window_name(utf8(x["program"]), None, by_started))
            name = self.label(x["program"], False)
            if (x["program"], False) not in self.programs and (x["program"], True) in self.programs:
                name = x["program"]
            k = (name, self.kind(x["kind"]), x["sync"])
            h = self.wlat.setdefault(k, {"buckets": {}, "sum_ns": 0, "count": 0})
            for b in x["buckets"]:
                hi = b["hi_ns"] if b["hi_ns"] is not None else math.inf
                h["buckets"][hi] = h["buckets"].get(hi, 0) + b["count"]
                h["count"] += b["count"]
            h["sum_ns"] += x["sum_ns"]
            lat.append({"program": k[0], "kind": k[1], "sync": k[2], "buckets": x["buckets"],
                        "sum_ns": x["sum_ns"]})
        return rows, lat


def _count(v):
    return v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else 0


def _file(p):
    """A program's file as the report gives it: dev and ino (None when unknown), the note (why
    it is named by them, or what an old row is) and started_as (the name it was last started
    by: a label, not its identity)."""
    return {"dev": p.get("dev"), "ino": p.get("ino"), "note": p.get("note"),
            "started_as": p.get("started")}


def unnamed_note(execs, full32):
    """Why a 32-bit "other" row holds execs: how many the kernel's full exec map dropped
    (full32, from the state's per-day log) and how many went past the program cap."""
    dropped = min(execs, full32)
    return (f"{execs} 32-bit exec(s) counted but not named: {dropped} dropped by the kernel's "
            f"full exec map, {execs - dropped} past the program cap (--max-programs); what "
            "they were is unknown, and they would have stopped")


def readiness(programs, paths, since_t, now, full=None):
    """The report: programs = [{program, is32, execs, first_seen, last_seen}] from the state
    (execs counted within the period where the state keeps them per day); paths = window rows
    [{program, is32, path, calls, seconds, ns_per_s..., t}] in the period; full = the exec
    map's drops in the period ({intervals: {"64", "32"}, execs: {"64", "32"}, first, last},
    store.watchdb.full_since, or None).
    Returns {since, until, stop: [...], map_full}.  32-bit execs the watch counted but could
    not name (program "other") are listed as a program that would stop, with a note: a full
    map or a cap never turns "would stop" into "nothing".  A count that is not a whole number
    of at least 0 (a state edited by hand, a value SQLite kept as text) is taken as 0: a
    negative count of execs is never reported."""
    full = full or {"intervals": {"64": 0, "32": 0}, "execs": {"64": 0, "32": 0},
                    "first": None, "last": None}
    programs = [{**p, "execs": _count(p.get("execs"))} for p in programs]
    programs = [dict(p, note=unnamed_note(p["execs"], _count(full["execs"].get("32"))))
                if p["program"] == OTHER and p["is32"] else p for p in programs]
    paths = [{**r, "calls": _count(r.get("calls"))} for r in paths]
    stop = {}
    for p in programs:
        if p["is32"] and p["last_seen"] is not None and p["last_seen"] >= since_t:
            stop[(p["program"], True)] = {"program": p["program"], "why": "32-bit",
                                          "execs": p["execs"], "first_seen": p["first_seen"],
                                          "last_seen": p["last_seen"], "windows": 0,
                                          "paths": {}, **_file(p)}
    for r in paths:
        compat = r["path"].startswith("compat")
        if not (r["is32"] or compat) or r["t"] < since_t:
            continue
        key = (r["program"], r["is32"])
        s = stop.get(key)
        if s is None:
            s = stop[key] = {"program": r["program"], "why": "64-bit, enters by int 0x80",
                             "execs": 0, "first_seen": r["t"], "last_seen": r["t"], "windows": 0,
                             "paths": {}, **_file({})}
            for p in programs:
                if (p["program"], p["is32"]) == key:
                    s.update(execs=p["execs"], first_seen=p["first_seen"], last_seen=p["last_seen"],
                             **_file(p))
        q = s["paths"].setdefault(r["path"], {"calls": 0, "seconds": 0.0, "ns": [], "ex": [],
                                              "why": None})
        q["calls"] += r["calls"]
        q["seconds"] += r["seconds"] or 0.0
        if r.get("exits_per_s") is not None:
            q["ex"].append(r["exits_per_s"])
        elif r.get("exits_why"):
            q["exits_why"] = r["exits_why"]
        if r.get("ns_per_s") is not None:
            q["ns"].append(r["ns_per_s"])
        elif r.get("why"):
            q["why"] = r["why"]
        s.setdefault("_w", set()).add(r["t"])
    for s in stop.values():
        s["windows"] = len(s.pop("_w", ()))
        for q in s["paths"].values():
            # The mean over the windows that saw the path: each window's figure is an excess
            # CPU rate with its interval; the bounds are averaged with it (they move together).
            ns, ex = q.pop("ns"), q.pop("ex")
            q["ns_per_s"] = ({k: sum(x[k] for x in ns) / len(ns) for k in ("median", "ci_low", "ci_high")}
                             if ns else None)
            q["exits_per_s"] = ({k: sum(x[k] for x in ex) / len(ex) for k in ("median", "ci_low", "ci_high")}
                                if ex else None)
            if ex:
                q.pop("exits_why", None)
            q["windows"] = len(ns)
    return {"schema": SCHEMA, "since": since_t, "until": now,
            "stop": sorted(stop.values(), key=lambda s: (-(s["last_seen"] or 0), s["program"])),
            "map_full": full}


def share(window_s, period_s):
    """The share of time a window is open: window / period, or None."""
    if not window_s or not period_s:
        return None
    return min(1.0, window_s / period_s)

