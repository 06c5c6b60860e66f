"""bpftrace: the project's own tools in traces/*.bt, on the raw_syscalls tracepoints.

raw_syscalls fire for every system call with the number of the caller's ABI (write is 4 for
i386, 1 for x86-64; tracepoint:syscalls:sys_enter_write never fires for compat calls), and
curtask->thread_info.status & 2 (TS_COMPAT) marks a compat call, so one session tells the
ABIs apart.  The trace stage runs traces/writelat.bt (per-call write latency histograms) and
traces/entrypath.bt (compat/native, and where each call will return to) over every variant
in one session each.  It needs root, tracefs and BTF; kfunc and kprobe probes are checked
and reported, since some kernels lack them.  A vsyscall-page call raises a page fault: the
raw_syscalls tracepoints do not fire for it.

Several programs run in one session through a small driver script that records each
program's pid with its label; every path in it is quoted for the shell that reads it.
bpftrace's -c takes one string that it splits at spaces, quotes and all, so it gets only
plain words: `/bin/sh driver-TAG.sh`, run in the scratch directory (base.command_word).
"""
import itertools
import re
from pathlib import Path

from ...core import paths
from .base import (Pairs, Tracer, command_word, first_line, json_lines, kernel_entry_blind,
                   observer_why_not, quote_command)

PROBE_TRACEPOINT = "tracepoint:raw_syscalls:sys_enter /pid == cpid/ { @n = count(); }"
PROBE_KFUNC = "kfunc:vmlinux:ksys_write { @n = count(); }"
PROBE_KPROBE = "kprobe:ksys_write { @n = count(); }"
OBSERVER_PROG = ("tracepoint:raw_syscalls:sys_enter /pid == cpid/ { @s[tid] = nsecs; } "
                 "tracepoint:raw_syscalls:sys_exit /@s[tid]/ { @ns = hist(nsecs - @s[tid]); "
                 "delete(@s[tid]); } END { clear(@s); }")


class Maps(dict):
    """bpftrace's maps, {map name: {key tuple: value}}, with what reading them found:

      entries    {name: entries printed}: bpftrace prints every entry of a map, and two
                 entries whose keys differ only in bytes that do not print (a string's bytes
                 after its NUL: seen with ternary string literals on Linux 6.18 builds) print
                 alike; those are summed into one key, never one kept for the others;
      collapsed  {name: entries merged into an earlier one of the same printed key};
      conflicts  {name: keys whose entries held different assigned values} (a value that is no
                 aggregation cannot be summed: the first is kept and the key counted here);
      lost       events bpftrace said it lost (its "lost_events" records, or "Lost N events"
                 on its stderr), or 0;
      warnings   the other warnings it printed on stderr (a helper's error, a map that could
                 not be updated), each once, bounded; the harmless RLIMIT_MEMLOCK one left out;
      unread     lines that opened like JSON but were not (a truncated last line)."""

    def __init__(self):
        super().__init__()
        self.entries, self.collapsed, self.conflicts = {}, {}, {}
        self.lost, self.unread, self.warnings = 0, [], []

    def total(self, name):
        """The sum of a counting map's values over every key (0 for a map not printed)."""
        return sum(v for v in self.get(name, {}).values() if isinstance(v, int))

    def witness(self):
        """What a reader says beside the counts: entries, merged entries, conflicts, losses."""
        return {"entries": dict(self.entries), "collapsed": {k: n for k, n in self.collapsed.items() if n},
                "conflicts": {k: n for k, n in self.conflicts.items() if n},
                "lost_events": self.lost, "unread_lines": len(self.unread),
                "warnings": list(self.warnings)}


def _merge_buckets(a, b):
    """Two hist()/lhist() bucket lists as one, counts summed bucket by bucket."""
    acc = {}
    for bl in (a, b):
        for x in bl or []:
            k = (x.get("min"), x.get("max"))
            acc[k] = acc.get(k, 0) + int(x.get("count", 0))
    return [{"min": lo, "max": hi, "count": n} for (lo, hi), n in
            sorted(acc.items(), key=lambda kv: (kv[0][0] is not None, kv[0][0] or 0))]


def _plain(v):
    """A value read with object_pairs_hook back to plain JSON (dicts for objects)."""
    if isinstance(v, Pairs):
        return {k: _plain(x) for k, x in v}
    if isinstance(v, list):
        return [_plain(x) for x in v]
    return v


# How two entries printed under one key are one: by the map's aggregation.  count() and sum()
# add; min() and max() keep the extreme; stats() adds counts and totals; hist()/lhist() add bucket
# by bucket.  An assigned value (@work = flags) is no aggregation: OR for flag words where the
# caller says so, else the first is kept and the key is counted as a conflict.
COMBINE = {"sum": lambda a, b: a + b, "min": min, "max": max, "or": lambda a, b: a | b}


def _combine(how, a, b):
    if isinstance(a, list) and isinstance(b, list):
        return _merge_buckets(a, b), False
    if isinstance(a, dict) and isinstance(b, dict) and "count" in a and "total" in a:
        n, t = a["count"] + b["count"], a["total"] + b["total"]
        return {"count": n, "average": t // n if n else 0, "total": t}, False
    if how in COMBINE and isinstance(a, int) and isinstance(b, int):
        return COMBINE[how](a, b), False
    return a, a != b


_LOST = re.compile(r"Lost (\d+) events")
MAX_WARNINGS = 20


def _stderr(maps, text):
    """bpftrace's stderr into maps.lost and maps.warnings."""
    for line in (text or "").split("\n"):
        line = line.strip()
        m = _LOST.search(line)
        if m:
            maps.lost += int(m.group(1))
        elif ("WARNING" in line or "ERROR" in line) and "RLIMIT_MEMLOCK" not in line \
                and line not in maps.warnings and len(maps.warnings) < MAX_WARNINGS:
            maps.warnings.append(line[:300])


def parse_json(text, combine=None, stderr=None):
    """bpftrace -f json NDJSON -> Maps {map name: {key tuple: value}}, every entry kept.

    Keys are split on ',' into a tuple of strings (a one-key map gives a 1-tuple, a keyless
    map the empty tuple); histograms stay lists of {min, max, count} buckets.  combine: {map
    name: "sum" | "min" | "max" | "or" | "first"} for maps whose entries are not counts or sums
    (the default for numbers is "sum"); entries printed under one key are combined so, and
    Maps.collapsed says how many were.  stderr: bpftrace's standard error, for the events it
    lost and its warnings."""
    maps = Maps()
    combine = combine or {}
    _stderr(maps, stderr)
    for o in json_lines(text, pairs=True, skipped=maps.unread):
        kind = o.get("type")
        if kind == "lost_events":
            data = o.get("data")
            maps.lost += int((data.get("events") if isinstance(data, Pairs) else data) or 0)
            continue
        if kind not in ("map", "hist", "stats"):
            continue
        for name, val in o.get("data") or []:
            d = maps.setdefault(name, {})
            # a keyless map prints its value alone (a stats() value is an object too)
            keyless = not isinstance(val, Pairs) or (
                kind == "stats" and [k for k, _ in val] == ["count", "average", "total"])
            entries = [("", val)] if keyless else val
            how = combine.get(name, "sum")
            for k, v in entries:
                key = tuple(k.split(",")) if k != "" else ()
                v = _plain(v)
                maps.entries[name] = maps.entries.get(name, 0) + 1
                if key in d:
                    maps.collapsed[name] = maps.collapsed.get(name, 0) + 1
                    d[key], clash = _combine(how, d[key], v)
                    if clash:
                        maps.conflicts[name] = maps.conflicts.get(name, 0) + 1
                else:
                    d[key] = v
    return maps


def hist_buckets(buckets, scale=1):
    """bpftrace JSON hist buckets -> [{lo_ns, hi_ns, count}] (hi None for overflow)."""
    out = []
    for b in buckets or []:
        lo, hi = b.get("min"), b.get("max")
        out.append({"lo_ns": (lo * scale if lo is not None else 0),
                    "hi_ns": ((hi + 1) * scale if hi is not None and hi >= 0 else None),
                    "count": int(b.get("count", 0))})
    return out


# entrypath.bt's codes (its END prints them), and the names its rows carry; a key recorded
# before the codes (a name) reads as it is.
ENTRY_ABI = {"1": "compat", "0": "native"}
ENTRY_ORIGIN = {"1": "vdso", "2": "text", "3": "other"}
ENTRY_INSN = {"0": "pad", "1": "int80", "2": "syscall", "3": "sysenter", "4": "unknown"}
ENTRY_CALLER = {"0": "-", "2": "text", "3": "other"}
# writelat.bt's ABI codes, and the names its rows carry (a key recorded before: the name).
WRITELAT_ABI = {"32": "i386", "64": "x86-64"}


def session(script, runs, tmp, tag, timeout=300, combine=None):
    """Run traces/<script> once over several programs: runs is [(label, argv, stdin path)].

    Returns (maps, {pid: (label, exit status)}, completed process, raw text)."""
    from ...core import proc
    tmp = Path(tmp)
    pids = tmp / f"pids-{tag}"
    pids.write_text("")
    lines = ["set -u"]
    for label, cmd, stdin in runs:
        lines.append(f"{quote_command(cmd)} < {quote_command([stdin])} > /dev/null 2>&1 & p=$!; "
                     f"wait $p; echo {quote_command([label])} $p $? >> {quote_command([pids])}")
    driver = tmp / f"driver-{tag}.sh"
    driver.write_text("\n".join(lines) + "\n")
    out = tmp / f"bpftrace-{tag}.ndjson"
    # The driver by its plain relative name, from the scratch directory: whatever the
    # scratch directory's path holds, bpftrace's space-splitting cannot cut it.
    p = proc.run(["bpftrace", "-f", "json", "-o", out, paths.TRACES / script,
                  "-c", f"/bin/sh {driver.name}"], timeout=timeout, cwd=tmp)
    text = out.read_text() if out.exists() else ""
    labels = {}
    for line in pids.read_text().split("\n"):
        f = line.split()
        if len(f) == 3:
            labels[f[1]] = (f[0], int(f[2]))
    return parse_json(text, combine, stderr=p.stderr), labels, p, text


class Bpftrace(Tracer):
    name = "bpftrace"
    title = "bpftrace"
    order = 40
    skips = {"bpftrace": ["tracers.json bpftrace_abi", "latency.json", "attribution.json body_ns",
                          "observer.json bpftrace rows", "counts.bpftrace"],
             "bpftrace-kfunc": ["kfunc:/kretfunc: probes on kernel functions (use tracepoints)"],
             "bpftrace-kprobe": ["kprobe:/kretprobe: probes on kernel functions (use tracepoints)"]}

    def check(self, d):
        if not d.which("bpftrace"):
            return [self.instrument(n, False, "bpftrace is not installed")
                    for n in ("bpftrace", "bpftrace-kfunc", "bpftrace-kprobe")]
        notroot = "" if d.euid == 0 else "not root: bpftrace needs CAP_BPF and CAP_PERFMON; "

        def attempt(prog):
            r = d.run(["bpftrace", "-e", prog, "-c", d.true_path()], timeout=60)
            text = (r.stdout or "") + "\n" + (r.stderr or "")
            err = [l for l in text.split("\n") if "ERROR" in l and "RLIMIT_MEMLOCK" not in l]
            return r, text, err
        out = []
        r, text, err = attempt(PROBE_TRACEPOINT)
        m = re.search(r"@n:\s*(\d+)", text)
        if r.returncode == 0 and m and int(m.group(1)) > 0:
            out.append(self.instrument("bpftrace", True, None))
        else:
            e = err[0].strip() if err else first_line(text, f"exit status {r.returncode}")
            hint = (" (is tracefs mounted? mount -t tracefs nodev /sys/kernel/tracing)"
                    if "tracepoint not found" in e else "")
            out.append(self.instrument("bpftrace", False, notroot + "tracepoint raw_syscalls:"
                                       "sys_enter did not attach: " + e + hint))
        r, text, err = attempt(PROBE_KFUNC)
        if r.returncode == 0 and not err:
            out.append(self.instrument("bpftrace-kfunc", True, None))
        else:
            e = err[0].strip() if err else first_line(text, f"exit status {r.returncode}")
            hint = ""
            if not d.exists("/sys/kernel/btf/vmlinux"):
                hint = " (no BTF at /sys/kernel/btf/vmlinux)"
            elif "not available" in e:
                hint = " (this bpftrace cannot attach kfunc/fentry probes on this kernel)"
            out.append(self.instrument("bpftrace-kfunc", False, notroot + e + hint))
        r, text, err = attempt(PROBE_KPROBE)
        if r.returncode == 0 and not err:
            out.append(self.instrument("bpftrace-kprobe", True, None))
        else:
            e = err[0].strip() if err else first_line(text, f"exit status {r.returncode}")
            hint = " (kernel built without CONFIG_KPROBES)" if d.config("CONFIG_KPROBES") == "n" else ""
            out.append(self.instrument("bpftrace-kprobe", False, notroot + e + hint))
        return out

    def blind(self, mech, root):
        return kernel_entry_blind(mech, "the raw_syscalls tracepoints", root, "bpftrace needs root")

    def observer_wrapper(self, tmp, root):
        why = observer_why_not("bpftrace", root, "bpftrace needs root")
        if why:
            return None, why
        prog = Path(tmp) / "observer.bt"
        prog.write_text(OBSERVER_PROG + "\n")
        # bpftrace -c takes the whole command as one string: wrap_command() puts the measured
        # command into it (as a script in tmp when a word is not plain; the observer stage
        # runs every command with tmp as its working directory).
        return ["bpftrace", "-o", "/dev/null", str(prog), "-c"], None

    _scripts = itertools.count()

    def wrap_command(self, wrapper, cmd):
        """The full argv: bpftrace -c with a command string of plain words
        (base.command_word), its script beside the observer program."""
        word, _ = command_word(cmd, Path(wrapper[3]).parent, f"observed-{next(self._scripts)}.sh")
        return list(wrapper) + [word]

    def trace(self, variants, workload, tmp, root):
        from ...core import proc
        why = None if root else "bpftrace needs root"
        if why is None and not proc.which("bpftrace"):
            why = "bpftrace is not installed"
        if why or not variants:
            return {"records": {"bpftrace_abi": []}, "counts": {}, "own": {},
                    "files": {"latency": {"runs": [
                        {"variant": v, "mode": m, "buffsize": workload.chunk, "count": None,
                         "log2": [], "lin_ns": [], "lin_us": [], "why": why}
                        for v in variants for m in ("async", "sync")]}},
                    "why": why}
        lat, counts = self.latency(variants, workload, tmp)
        return {"records": {"bpftrace_abi": self.entry(variants, workload, tmp)},
                "counts": counts, "own": {}, "files": {"latency": {"runs": lat}}}

    def latency(self, variants, workload, tmp):
        """writelat.bt over every variant, async and sync, in one session: raw histograms."""
        runs = []
        for v in variants:
            for m in ("async", "sync"):
                runs.append((f"{v}/{m}", workload.command(v, Path(tmp) / f"out-bt-{v}-{m}", m == "sync"),
                             workload.input))
        maps, labels, p, _ = session("writelat.bt", runs, tmp, "writelat",
                                     combine={"@min_ns": "min", "@max_ns": "max"})
        out, counts = [], {}
        for pid, (label, rc) in labels.items():
            v, m = label.split("/")
            keys = [k for k in maps.get("@count", {}) if k[0] == pid and int(k[2]) >= 3]
            if not keys:
                out.append({"variant": v, "mode": m, "buffsize": workload.chunk, "count": None,
                            "log2": [], "lin_ns": [], "lin_us": [],
                            "why": f"bpftrace saw no write to a file from pid {pid} "
                                   f"(timewrite exit {rc}; bpftrace exit {p.returncode})"})
                continue
            k = max(keys, key=lambda k: maps["@count"][k])
            n = int(maps["@count"][k])
            out.append({"variant": v, "mode": m, "buffsize": workload.chunk, "count": n,
                        "abi": WRITELAT_ABI.get(k[1], k[1]), "fd": int(k[2]), "pid": int(pid),
                        "sum_ns": maps.get("@sum_ns", {}).get(k),
                        "min_ns": maps.get("@min_ns", {}).get(k),
                        "max_ns": maps.get("@max_ns", {}).get(k),
                        "log2": hist_buckets(maps.get("@ns", {}).get(k)),
                        "lin_ns": hist_buckets(maps.get("@lin_ns", {}).get(k)),
                        "lin_us": hist_buckets(maps.get("@lin_us", {}).get(k), scale=1000),
                        "why": None})
            if m == "async":
                counts[v] = n
        out.sort(key=lambda r: (r["variant"], r["mode"]))
        return out, counts

    def entry(self, variants, workload, tmp):
        """entrypath.bt over every variant in one session: ABI and origin counts."""
        runs = [(v, workload.command(v, Path(tmp) / f"out-ep-{v}"), workload.input) for v in variants]
        maps, labels, p, _ = session("entrypath.bt", runs, tmp, "entrypath")
        rows = []
        for pid, (v, rc) in labels.items():
            counts = {"compat": 0, "native": 0}
            origin = {"vdso": 0, "text": 0, "other": 0}
            classes = []
            for k, n in maps.get("@calls", {}).items():
                # k = (pid, comm, abi, origin, insn, caller, cs), integer codes (entrypath.bt);
                # calls the driver shell's fork made before execve carry its comm, not
                # timewrite's
                if k[0] != pid or not k[1].startswith("timewrite"):
                    continue
                abi, org = ENTRY_ABI.get(k[2], k[2]), ENTRY_ORIGIN.get(k[3], k[3])
                counts[abi] = counts.get(abi, 0) + n
                origin[org] = origin.get(org, 0) + n
                classes.append({"abi": abi, "origin": org, "insn": ENTRY_INSN.get(k[4], k[4]),
                                "caller": ENTRY_CALLER.get(k[5], k[5]), "cs": int(k[6]), "calls": n})
            writes = [{"abi": ENTRY_ABI.get(k[2], k[2]), "origin": ENTRY_ORIGIN.get(k[3], k[3]),
                       "id": int(k[4]), "calls": n}
                      for k, n in maps.get("@write_like", {}).items()
                      if k[0] == pid and k[1].startswith("timewrite")]
            classes.sort(key=lambda c: -c["calls"])
            rows.append({"variant": v, "pid": int(pid), "counts": counts, "origin": origin,
                         "classes": classes, "writes": writes,
                         "regs_ok": maps.get("@regs_ok", {}).get(("1",))})
        rows.sort(key=lambda r: r["variant"])
        return rows

    def tables(self, stage):
        abi = stage.get("bpftrace_abi") or []
        if not abi:
            return []

        def n(d, k):
            return "unknown" if (d or {}).get(k) is None else d[k]
        return [("bpftrace (traces/entrypath.bt): every call of the workload by ABI and by where "
                 "the kernel returns to", ["variant", "compat", "native", "from vDSO", "from text", "other"],
                 [[r["variant"], n(r.get("counts"), "compat"), n(r.get("counts"), "native"),
                   n(r.get("origin"), "vdso"), n(r.get("origin"), "text"), n(r.get("origin"), "other")]
                  for r in abi])]


TRACER = Bpftrace()
