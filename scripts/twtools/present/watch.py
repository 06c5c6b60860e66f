"""`tw watch`'s two outputs: the Prometheus exposition of its state (a prometheus_client
collector, served on --listen) and the text of `tw watch --report`.

Metric names follow Prometheus's conventions: the `timewrite_` prefix, the unit in the name
(`_seconds`, `_ratio`, `_timestamp_seconds`), `_total` on counters.  Label values are bounded
by analyse.watch.State (a cap on programs, folded into "other", and on file-system types) and
escaped by prometheus_client's text exposition (backslash, double quote and newline, as the
format requires); other control characters are legal in a label value and pass through as
UTF-8.  A program name arrives here as core.escape.name keeps it (build/watchbpf and
machine.process write it so): a byte that is not UTF-8 as a backslash, x and two hex digits, a
backslash doubled; the report shows it with escape.shown_name, which leaves those alone.
"""
import json
import math
import os
import time

from ..core import escape

# Write-latency buckets: every power of two from 256 ns to 2^34 ns (17 s), as seconds.  One
# fixed set for every series, so that histogram_quantile() can add series up.
LE_NS = [2 ** k for k in range(8, 35)]
ESTIMATES = ("median", "ci_low", "ci_high")


def _bits(is32):
    return "32" if is32 else "64"


# A label value is at most this many characters: a kept name is at most a 4096-byte path, each
# byte at most four characters as escape.name keeps it.
LABEL_MAX = 4 * 4096 + 64


def _label(v):
    """A label value from the state, whatever a row holds: text as it is, bytes (a BLOB) as
    escape.name keeps a name, a number as its digits; bounded (LABEL_MAX)."""
    if isinstance(v, (bytes, bytearray, memoryview)):
        v = escape.name(bytes(v))
    elif not isinstance(v, str):
        v = str(v)
    return v if len(v) <= LABEL_MAX else v[:LABEL_MAX] + "...(cut)"


def _num(v):
    """A sample value: a finite int or float, else None (a text, a BLOB, NULL, inf: the
    sample is left out)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return float(v) if math.isfinite(v) else None


def _sync(v):
    return "true" if v else "false"


def _rows(items, *conv):
    """(labels, value) of a state table's items, each key's fields through conv (one function
    a label: _label, _bits, _sync), in a stable order whatever types the keys hold, each label
    set once (two keys that coerce to one, a BLOB and a text of the same name, keep the
    first); a key of another shape is left out."""
    out = {}
    for k, v in items:
        k = k if isinstance(k, tuple) else (k,)
        if len(k) != len(conv):
            continue
        out.setdefault(tuple(f(x) for f, x in zip(conv, k)), v)
    return sorted(out.items())


class Collector:
    """A prometheus_client collector over a snapshot function returning the state's figures
    (service.watch takes it under the state's lock)."""

    def __init__(self, snapshot):
        self.snapshot = snapshot

    def describe(self):
        return []

    def collect(self):
        """Every family; one that a hostile row makes fail is left out, not the scrape (a
        BLOB name, an integer beside text names, a text timestamp in the state made every
        scrape answer 500 for the watch's life): each row is coerced or left out first."""
        s = self.snapshot()
        for build in (self._programs, self._rest, self._walls):
            try:
                yield from build(s)
            except Exception:              # a family this row breaks: the others still go
                continue

    def _programs(self, s):
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
        execs = CounterMetricFamily("timewrite_exec", "Programs started (execve), counted in the "
                                    "kernel at sched_process_exec, by program path and bitness",
                                    labels=["program", "bits"])
        first = GaugeMetricFamily("timewrite_exec_first_seen_timestamp_seconds",
                                  "When the program was first seen (an exec or running)",
                                  labels=["program", "bits"])
        last = GaugeMetricFamily("timewrite_exec_last_seen_timestamp_seconds",
                                 "When the program was last seen (an exec or running)",
                                 labels=["program", "bits"])
        for lab, r in _rows(s["programs"].items(), _label, _bits):
            lab = list(lab)
            r = r if isinstance(r, dict) else {}
            n, t0, t1 = _num(r.get("execs")), _num(r.get("first")), _num(r.get("last"))
            if n is not None and n >= 0:
                execs.add_metric(lab, n)
            if t0 is not None:
                first.add_metric(lab, t0)
            if t1 is not None:
                last.add_metric(lab, t1)
        yield from (execs, first, last)

    def _rest(self, s):
        from prometheus_client.core import (CounterMetricFamily, GaugeMetricFamily,
                                            HistogramMetricFamily)
        folded = CounterMetricFamily("timewrite_folded", "Execs counted under program=\"other\", "
                                     "by bitness: past the cap on programs (reason=cap), or "
                                     "dropped from a full kernel map and known only from the "
                                     "kernel's exec total of that bitness (reason=map_full)",
                                     labels=["reason", "bits"])
        for (k, b), v in _rows(s["folded"].items(), _label, _bits):
            if _num(v) is not None and v >= 0:
                folded.add_metric([k, b], v)
        yield folded
        progs = GaugeMetricFamily("timewrite_programs", "Programs known to the watch, by bitness",
                                  labels=["bits"])
        for b in (False, True):
            progs.add_metric([_bits(b)], sum(1 for k in s["programs"]
                                             if isinstance(k, tuple) and bool(k[-1]) is b))
        yield progs
        if s.get("on_disk_only"):
            disk = GaugeMetricFamily("timewrite_programs_on_disk_only", "Programs the state file "
                                     "held past the cap at the start: kept on disk and in the "
                                     "report, not loaded (their new execs fold into other)",
                                     labels=["bits"])
            for b, (n, _) in sorted(s["on_disk_only"].items()):
                disk.add_metric([_bits(b)], n)
            yield disk
        yield GaugeMetricFamily("timewrite_programs_cap", "The most programs the watch keeps "
                                "before folding into other", value=s["max_programs"])
        calls = CounterMetricFamily("timewrite_syscalls", "System calls counted in the watch's "
                                    "windows, by program and entry path", labels=["program", "bits", "path"])
        for (prog, bits, path), n in _rows(s["calls"].items(), _label, _bits, _label):
            if _num(n) is not None and n >= 0:
                calls.add_metric([prog, bits, path], n)
        yield calls
        cost = GaugeMetricFamily("timewrite_entry_excess_cpu_ratio",
                                 "CPU seconds per second the entry path cost over the fastest "
                                 "path open to the program, in the last window that saw it, "
                                 "priced with the per-call matrix (estimate: median, ci_low, "
                                 "ci_high of a 95% interval); absent when unknown",
                                 labels=["program", "bits", "path", "estimate"])
        for (prog, bits, path), v in _rows(s["cost"].items(), _label, _bits, _label):
            e = [_num((v or {}).get(est)) if isinstance(v, dict) else None for est in ESTIMATES]
            if None in e:
                continue
            for est, x in zip(ESTIMATES, e):
                cost.add_metric([prog, bits, path, est], x / 1e9)
        yield cost
        hist = HistogramMetricFamily("timewrite_write_latency_seconds",
                                     "write(2) latency per call in the windows, by program, kind "
                                     "of file and synchronous or not", labels=["program", "kind", "sync"])
        for (prog, kind, sync), h in _rows(s["wlat"].items(), _label, _label, _sync):
            buckets = []
            for le in LE_NS:
                buckets.append((f"{le / 1e9:.9g}", sum(c for hi, c in h["buckets"].items() if hi <= le)))
            buckets.append(("+Inf", h["count"]))
            hist.add_metric([prog, kind, sync], buckets, h["sum_ns"] / 1e9)
        yield hist
        w = s["windows"] if isinstance(s.get("windows"), dict) else {}
        if _num(w.get("n")) is not None:
            yield CounterMetricFamily("timewrite_watch_windows", "Duty-cycle windows taken",
                                      value=w["n"])
        if _num(w.get("seconds")) is not None:
            yield CounterMetricFamily("timewrite_watch_window_seconds", "Seconds the "
                                      "raw_syscalls window was open", value=w["seconds"])
        share = GaugeMetricFamily("timewrite_watch_window_share_ratio", "The share of time a "
                                  "window is open: --window / --window-period")
        if _num(s.get("share")) is not None:
            share.add_metric([], s["share"])
        yield share
        added = GaugeMetricFamily("timewrite_watch_window_added_seconds",
                                  "Per system call, what the last window added to a 64-bit "
                                  "getppid (syscost inside the window less before it; estimate: "
                                  "median, ci_low, ci_high)", labels=["estimate"])
        a = w.get("added_ns") if isinstance(w.get("added_ns"), dict) else {}
        if a and all(_num(a.get(est)) is not None for est in ESTIMATES):
            for est in ESTIMATES:
                added.add_metric([est], a[est] / 1e9)
        yield added
        if _num(s.get("intervals")) is not None:
            yield CounterMetricFamily("timewrite_watch_intervals", "Times the state was saved: "
                                      "each exec batch (--interval), each window, SIGHUP and "
                                      "the stop", value=s["intervals"])
        t = s.get("tracer") or {}
        if t.get("rss") is not None:
            yield GaugeMetricFamily("timewrite_watch_tracer_resident_memory_bytes", "The exec "
                                    "tracer's (build/watchbpf's) resident memory", value=t["rss"])
        if t.get("cpu_s") is not None:
            yield CounterMetricFamily("timewrite_watch_tracer_cpu_seconds", "CPU time the exec "
                                      "tracer (build/watchbpf) used", value=t["cpu_s"])
        if t.get("map_bytes") is not None:
            yield GaugeMetricFamily("timewrite_watch_tracer_bpf_map_bytes", "Kernel memory the "
                                    "exec tracer's BPF maps take (memlock)", value=t["map_bytes"])
        if _num(s.get("started")) is not None:
            yield GaugeMetricFamily("timewrite_watch_start_timestamp_seconds", "When the state "
                                    "began (survives restarts)", value=s["started"])


    def _walls(self, s):
        """The last window's walls: how many processes ran behind a seccomp filter or with an
        audit context, their calls per second, and what the wall added to them; the programs
        behind a filter, with how many filters.  A figure the window could not have is absent,
        never 0 (an audit count the window cannot read, a price no walls.json gives)."""
        from prometheus_client.core import GaugeMetricFamily
        w = (s.get("windows") or {}).get("walls")
        w = w if isinstance(w, dict) else {}
        procs = GaugeMetricFamily("timewrite_window_wall_processes", "Processes the last window "
                                  "saw behind a wall: a seccomp filter (/proc's Seccomp 2), or an "
                                  "audit context on their calls", labels=["wall"])
        rate = GaugeMetricFamily("timewrite_window_wall_calls_per_second", "System calls a "
                                 "second of the processes behind a wall in the last window, by "
                                 "ABI (compat: int 0x80 and 32-bit code)", labels=["wall", "abi"])
        cost = GaugeMetricFamily("timewrite_window_wall_added_cpu_ratio", "CPU seconds a second "
                                 "the wall added to those calls, priced with the walls a results "
                                 "directory measured (tw run's walls stage; estimate: median, "
                                 "ci_low, ci_high); absent when unknown",
                                 labels=["wall", "estimate"])
        for wall in ("seccomp", "audit"):
            g = w.get(wall) if isinstance(w.get(wall), dict) else {}
            if _num(g.get("processes")) is not None:
                procs.add_metric([wall], g["processes"])
            for abi in ("native", "compat"):
                if _num(g.get(f"{abi}_calls_per_s")) is not None:
                    rate.add_metric([wall, abi], g[f"{abi}_calls_per_s"])
            ns = g.get("ns_per_s") if isinstance(g.get("ns_per_s"), dict) else {}
            if ns and all(_num(ns.get(e)) is not None for e in ESTIMATES):
                for e in ESTIMATES:
                    cost.add_metric([wall, e], ns[e] / 1e9)
        yield from (procs, rate, cost)
        if _num(w.get("audit_enabled")) is not None:
            yield GaugeMetricFamily("timewrite_audit_enabled", "The kernel's audit flag when the "
                                    "last window opened (0 off, 1 on, 2 locked); once it has been "
                                    "on in this boot, every process started since pays audit's "
                                    "per-call context unless a never,task rule exempts it",
                                    value=w["audit_enabled"])
        progs = GaugeMetricFamily("timewrite_program_seccomp_filters", "Seccomp filters on the "
                                  "program's processes (the most any had) in the last window",
                                  labels=["program", "bits"])
        for (prog, bits), n in _rows((s.get("seccomp") or {}).items(), _label, _bits):
            if _num(n) is not None and n > 0:
                progs.add_metric([prog, bits], n)
        yield progs


def registry(snapshot):
    """A registry with the watch's collector and the process's own (memory, CPU)."""
    from prometheus_client import CollectorRegistry, ProcessCollector
    reg = CollectorRegistry()
    reg.register(Collector(snapshot))
    ProcessCollector(registry=reg)
    return reg


def exposition(snapshot):
    from prometheus_client import generate_latest
    return generate_latest(registry(snapshot)).decode()


# ---------------------------------------------------------------- the report

def _n(x):
    return f"{x:.3g}"


def _utc(t):
    return time.strftime("%Y-%m-%d %H:%M:%SZ", time.gmtime(t)) if t else "unknown"


def _cost(q):
    v = q.get("ns_per_s")
    if v is None:
        return f"cost unknown: {escape.terminal(q.get('why') or 'not priced')}"
    e = q.get("exits_per_s")
    exits = (f", {_n(e['median'])} VM exits per second [{_n(e['ci_low'])}, {_n(e['ci_high'])}]"
             if e else f", VM exits {escape.terminal(q['exits_why'])}" if q.get("exits_why")
             else "")
    return (f"{_n(v['median'] / 1e6)} ms of CPU per second over the fastest path "
            f"[{_n(v['ci_low'] / 1e6)}, {_n(v['ci_high'] / 1e6)}]{exits}, "
            f"mean of {q['windows']} window(s)")


def format_text(doc):
    """The report as lines of text; every program name escaped for the terminal."""
    days = (doc["until"] - doc["since"]) / 86400
    lines = [f"tw watch --report: {escape.terminal(doc.get('host') or '')}, "
             f"{_utc(doc['since'])} to {_utc(doc['until'])} ({_n(days)} days)"]
    cov = doc.get("coverage") or {}
    if cov.get("started") and cov["started"] > doc["since"]:
        lines.append(f"  the watch's state begins {_utc(cov['started'])}: nothing before it is known")
    lines.append(f"  {cov.get('windows', 0)} windows, {_n(cov.get('window_seconds', 0))} s of "
                 "per-call tracing in the period; execs counted all the time")
    full = doc.get("map_full") or {}
    fi, fe = full.get("intervals") or {}, full.get("execs") or {}
    if any(fi.values()):
        lines.append(f"  the kernel's exec map filled in the period: {fi.get('64', 0)} interval(s) "
                     f"dropped {fe.get('64', 0)} 64-bit exec(s), {fi.get('32', 0)} dropped "
                     f"{fe.get('32', 0)} 32-bit exec(s) (counted, not named), from "
                     f"{_utc(full.get('first'))} to {_utc(full.get('last'))}")
    stop = doc["stop"]
    if not stop:
        lines.append(f"In the last {_n(days)} days, booting with ia32_emulation=0 would have "
                     "stopped nothing the watch saw.")
    else:
        lines.append(f"In the last {_n(days)} days, booting with ia32_emulation=0 would have "
                     f"stopped {len(stop)} program(s):")
    for s in stop:
        lines.append(f"  {escape.shown_name(s['program'])}  ({s['why']})")
        if s.get("started_as") is not None and s["started_as"] != s["program"]:
            lines.append(f"    started as {escape.shown_name(s['started_as'])}")
        if s.get("dev") is not None and s.get("ino") is not None:
            lines.append(f"    file: device {os.major(s['dev'])}:{os.minor(s['dev'])}, inode {s['ino']}")
        if s.get("note"):
            lines.append(f"    note: {escape.controls(s['note'])}")
        lines.append(f"    {s['execs']} exec(s) in the period; first seen {_utc(s['first_seen'])}, "
                     f"last seen {_utc(s['last_seen'])}; in {s['windows']} window(s)")
        for path, q in sorted(s["paths"].items()):
            lines.append(f"    {path}: {q['calls']} calls in {_n(q['seconds'])} s of windows; "
                         + _cost(q))
        if not s["paths"]:
            lines.append("    no window saw it run: its entry path and cost are unknown")
    return "\n".join(lines)


def to_json(doc):
    def clean(o):
        if isinstance(o, float) and not math.isfinite(o):
            return None
        if isinstance(o, dict):
            return {k: clean(v) for k, v in o.items()}
        if isinstance(o, list):
            return [clean(v) for v in o]
        return o
    return json.dumps(clean(doc), indent=1)
