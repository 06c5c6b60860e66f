"""`tw trace`: run the variants under perf stat, strace, perf trace and bpftrace.

Every instrument reads a known workload: timewrite writing FULL*256+17 bytes
in 256-byte chunks, so each run makes FULL+1 write() calls to its output file
(22+1 = 23 in quick mode), plus one write of its report to stdout.  Each tool
is asked to count only the file's writes, in its own way, so the counts must
agree with timewrite's own `calls`:

  perf stat   raw_syscalls:sys_exit filtered on id == write (of the variant's
              ABI) and ret == 256 / ret == 17: the full chunks and the tail;
  strace      -P outfile -e trace=write -T (per-call microseconds too);
  bpftrace    traces/writelat.bt, keyed by [pid, abi, fd]: the fd >= 3.

Machine formats are parsed where a tool has one (perf stat -j, bpftrace -f
json); strace's and perf trace's text tables are parsed by pinned columns
and tested on recorded output in tests/fixtures/.  perf trace -s names
32-bit calls from the x86-64 table, so it runs for 64-bit variants only.
"""
import csv
import json
import os
import re
import tempfile
from pathlib import Path

from ..analyse import stats
from ..cli import options
from ..core import files, paths, proc, ui
from ..machine import probe, registry, sysnr

CHUNK = 256
TAIL = 17
FULL = {"quick": 22, "default": 200, "long": 2000}
WRITE_NR = {abi: sysnr.syscall_nr(abi, "write") for abi in ("i386", "x86_64")}


# ---------------------------------------------------------------- parsers

def json_lines(text):
    """The JSON objects of an NDJSON text (perf stat -j, bpftrace -f json), skipping the
    other lines those tools mix in (warnings, 'Attaching N probes', blank lines)."""
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                yield json.loads(line)
            except json.JSONDecodeError:
                continue


def parse_perf_stat_json(text, names):
    """perf stat -j output (one JSON object per line, string values) -> (events, why).

    `names` are the keys to give the counters in the order they were asked
    for (perf names repeated tracepoints alike, so order is what tells them
    apart).  '<not supported>'/'<not counted>' become None with a reason."""
    objs = [o for o in json_lines(text) if "counter-value" in o and "event" in o]
    events, why = {}, {}
    for i, name in enumerate(names):
        if i >= len(objs):
            events[name] = None
            why[name] = "perf stat printed no line for this event"
            continue
        raw = str(objs[i]["counter-value"]).strip()
        if raw.startswith("<"):
            events[name] = None
            why[name] = (f"perf stat: {raw} (event {objs[i]['event']}"
                         + ("; no PMU in this guest" if raw == "<not supported>" else "") + ")")
            continue
        try:
            v = float(raw)
        except ValueError:
            events[name] = None
            why[name] = f"perf stat: unreadable value {raw!r}"
            continue
        events[name] = int(v) if v.is_integer() and objs[i].get("unit") != "msec" else v
    return events, why


_STRACE_HEAD = re.compile(r"^% time\s+seconds\s+usecs/call\s+calls\s+errors\s+syscall\s*$")
_STRACE_32 = "System call usage summary for 32 bit mode:"
_STRACE_X32 = "System call usage summary for x32 mode:"


def parse_strace_c(text):
    """strace -c [-w] summary -> {"64": rows, "32": rows}; rows with the 'total' row removed.

    Columns are pinned to the header `% time seconds usecs/call calls errors
    syscall`; the errors column is blank when zero.  A 32-bit process's calls
    come in a second table after 'System call usage summary for 32 bit mode'."""
    tables, cur, key, seen_head = {}, None, "64", False
    for line in text.splitlines():
        s = line.strip()
        if s == _STRACE_32:
            key, seen_head = "32", False
            continue
        if s == _STRACE_X32:
            key, seen_head = "x32", False
            continue
        if _STRACE_HEAD.match(s):
            cur = tables.setdefault(key, [])
            seen_head = True
            continue
        if not seen_head or not s or s.startswith("---"):
            continue
        f = s.split()
        if len(f) not in (5, 6):
            continue
        if f[-1] == "total":
            seen_head = False
            continue
        try:
            row = {"syscall": f[-1], "calls": int(f[3]),
                   "errors": int(f[4]) if len(f) == 6 else 0,
                   "seconds": float(f[1]), "usecs_per_call": float(f[2]),
                   "pct_time": float(f[0])}
        except ValueError:
            continue
        cur.append(row)
    return tables


_STRACE_T = re.compile(r"^(?:\[pid\s+\d+\]\s+|\d+\s+)?(\w+)\((\d+),.*\)\s+=\s+(-?\d+)(?:\s+\w+\s+\(.*\))?\s+<(\d+\.\d+)>\s*$")


def parse_strace_T(text, syscall="write"):
    """strace -T lines -> [{fd, ret, us}] for `syscall` (unfinished/resumed lines skipped)."""
    out = []
    for line in text.splitlines():
        m = _STRACE_T.match(line.strip())
        if m and m.group(1) == syscall:
            out.append({"fd": int(m.group(2)), "ret": int(m.group(3)),
                        "us": float(m.group(4)) * 1e6})
    return out


_PT_PROC = re.compile(r"^\s*(.+?) \((\d+)\), (\d+) events, ([\d.]+)%\s*$")


def parse_perf_trace_s(text):
    """perf trace -s summary -> [{comm, pid, events, rows: [{syscall, calls, errors,
    total_ms, min_ms, avg_ms, max_ms, stddev_pct}]}] (one block per process)."""
    procs, cur = [], None
    for line in text.splitlines():
        m = _PT_PROC.match(line)
        if m:
            cur = {"comm": m.group(1).strip(), "pid": int(m.group(2)),
                   "events": int(m.group(3)), "rows": []}
            procs.append(cur)
            continue
        if cur is None:
            continue
        f = line.split()
        if len(f) == 8 and f[-1].endswith("%") and f[1].isdigit():
            try:
                cur["rows"].append({"syscall": f[0], "calls": int(f[1]), "errors": int(f[2]),
                                    "total_ms": float(f[3]), "min_ms": float(f[4]),
                                    "avg_ms": float(f[5]), "max_ms": float(f[6]),
                                    "stddev_pct": float(f[7].rstrip("%"))})
            except ValueError:
                pass
    return procs


def parse_bpftrace_json(text):
    """bpftrace -f json NDJSON -> {map name: {key tuple: value}}.

    Keys are split on ',' into a tuple of strings (a one-key map gives a
    1-tuple, a keyless map the empty tuple); histograms stay lists of
    {min, max, count} buckets."""
    maps = {}
    for o in json_lines(text):
        if o.get("type") not in ("map", "hist", "stats"):
            continue
        for name, val in o.get("data", {}).items():
            d = maps.setdefault(name, {})
            if isinstance(val, dict):
                for k, v in val.items():
                    d[tuple(k.split(","))] = v
            else:
                d[()] = val
    return maps


def hist_buckets(buckets, scale=1):
    """bpftrace JSON hist buckets -> [{lo_ns, hi_ns, count}] (hi None for overflow)."""
    out = []
    for b in buckets:
        lo = b.get("min")
        hi = b.get("max")
        out.append({"lo_ns": (lo * scale if lo is not None else 0),
                    "hi_ns": ((hi + 1) * scale if hi is not None and hi >= 0 else None),
                    "count": int(b.get("count", 0))})
    return out


def percentile_best(ps_hists, ps=(50, 90, 99)):
    """Each percentile from whichever histogram puts it in the narrowest bucket."""
    out = {}
    for p in ps:
        best = None
        for h in ps_hists:
            v, w = _pct(h, p)
            if v is not None and (best is None or w < best[1]):
                best = (v, w)
        out[f"p{p}"] = best[0] if best else None
    return out


def _pct(buckets, p):
    total = sum(b["count"] for b in buckets)
    if total == 0:
        return None, None
    target, acc = total * p / 100.0, 0
    for b in buckets:
        if b["count"] and acc + b["count"] >= target:
            if b["hi_ns"] is None:
                return None, None
            frac = (target - acc) / b["count"]
            return b["lo_ns"] + frac * (b["hi_ns"] - b["lo_ns"]), b["hi_ns"] - b["lo_ns"]
        acc += b["count"]
    return None, None


def percentiles(buckets, ps=(50, 90, 99)):
    """Percentiles from [{lo_ns, hi_ns, count}] by linear interpolation inside the
    bucket; None when a percentile falls in an open (overflow) bucket."""
    total = sum(b["count"] for b in buckets)
    out = {}
    for p in ps:
        if total == 0:
            out[f"p{p}"] = None
            continue
        target = total * p / 100.0
        acc = 0
        val = None
        for b in buckets:
            if b["count"] and acc + b["count"] >= target:
                if b["hi_ns"] is None:
                    val = None
                else:
                    frac = (target - acc) / b["count"]
                    val = b["lo_ns"] + frac * (b["hi_ns"] - b["lo_ns"])
                break
            acc += b["count"]
        out[f"p{p}"] = val
    return out


# ---------------------------------------------------------------- runners

def _bits_abi(variant):
    m = registry.get(variant)
    return m.bits, m.abi


def _workload(tmp, mode):
    full = FULL.get(mode, FULL["default"])
    inp = Path(tmp) / f"input-{full}x{CHUNK}+{TAIL}"
    if not inp.exists():
        inp.write_bytes(b"x" * (full * CHUNK + TAIL))
    return inp, full + 1


def _tw_cmd(variant, outfile, sync=False):
    cmd = [probe.binary("timewrite", variant), outfile]
    if sync:
        cmd.append("sync")
    return cmd + ["--sizes", str(CHUNK)]


def _tw_calls(stdout):
    """timewrite's own count of write() calls from its tsv row."""
    for line in stdout.splitlines():
        f = line.split("\t")
        if len(f) >= 5 and f[0] == str(CHUNK):
            return int(f[4])
    return None


PERF_EVENTS = ["task-clock", "context-switches", "page-faults", "cycles", "instructions",
               "raw_syscalls:sys_enter"]


def perf_stat(variant, tmp, inp, root=True):
    """One timewrite run under perf stat -j; counters by name, blind ones null with why.

    Without root the software counters (task-clock, context switches, page
    faults) still count a process of one's own at perf_event_paranoid <= 2;
    only the tracepoint counters are blind, and say so."""
    if not proc.which("perf"):
        return {"variant": variant, "events": {}, "why": {"*": "perf is not installed"}}
    _, abi = _bits_abi(variant)
    nr = WRITE_NR[abi]
    out = Path(tmp) / f"perfstat-{variant}.json"
    outfile = Path(tmp) / f"out-perfstat-{variant}"
    tracepoint_names = ["raw_syscalls:sys_enter", "write_exit_ret_256", "write_exit_ret_17"]
    names = PERF_EVENTS[:5] + (tracepoint_names if root else [])
    cmd = ["perf", "stat", "-j", "-o", out, "-e", ",".join(PERF_EVENTS[:5])]
    if root:
        cmd += ["-e", "raw_syscalls:sys_enter",
                "-e", "raw_syscalls:sys_exit", "--filter", f"id == {nr} && ret == {CHUNK}",
                "-e", "raw_syscalls:sys_exit", "--filter", f"id == {nr} && ret == {TAIL}"]
    cmd += ["--"] + _tw_cmd(variant, outfile)
    with open(inp, "rb") as f:
        p = proc.run(cmd, stdin=f, timeout=120)
    text = out.read_text() if out.exists() else ""
    events, why = parse_perf_stat_json(text, names)
    if p.returncode != 0 and not any(v is not None for v in events.values()):
        why = {n: f"perf stat failed ({p.returncode}): {p.stderr.strip()[-200:]}" for n in names}
    if not root:
        for n in tracepoint_names:
            events[n], why[n] = None, "needs root: tracepoints are not open to other users"
    w = [events.get("write_exit_ret_256"), events.get("write_exit_ret_17")]
    writes = sum(w) if all(x is not None for x in w) else None
    return {"variant": variant, "events": events, "why": why, "file_writes": writes,
            "timewrite_calls": _tw_calls(p.stdout), "raw": text}


def strace_c(variant, tmp, inp):
    out = Path(tmp) / f"strace-c-{variant}.txt"
    cmd = ["strace", "-f", "-c", "-w", "-o", out, "--"] + _tw_cmd(variant, Path(tmp) / f"out-sc-{variant}")
    with open(inp, "rb") as f:
        p = proc.run(cmd, stdin=f, timeout=120)
    text = out.read_text() if out.exists() else ""
    return {"variant": variant, "tables": parse_strace_c(text), "rc": p.returncode, "raw": text}


def strace_T(variant, tmp, inp, sync=False):
    outfile = Path(tmp) / f"out-sT-{variant}"
    out = Path(tmp) / f"strace-T-{variant}{'-sync' if sync else ''}.txt"
    cmd = ["strace", "-T", "-e", "trace=write", "-P", outfile, "-o", out, "--"] + \
        _tw_cmd(variant, outfile, sync)
    with open(inp, "rb") as f:
        p = proc.run(cmd, stdin=f, timeout=120)
    text = out.read_text() if out.exists() else ""
    calls = [c for c in parse_strace_T(text) if c["ret"] >= 0]
    return {"variant": variant, "calls": len(calls),
            "write_us": stats.summarize([c["us"] for c in calls]) if calls else
            ui.blind(f"strace saw no write to the output file (exit {p.returncode})"),
            "timewrite_calls": _tw_calls(p.stdout), "raw": text}


def perf_trace(variant, tmp, inp):
    _, abi = _bits_abi(variant)
    if abi != "x86_64":
        return {"variant": variant, "supported": False,
                "reason": "perf trace -s decodes every process with the x86-64 table; "
                          "i386 numbers would get wrong names, so it runs for native "
                          "64-bit variants only", "rows": []}
    out = Path(tmp) / f"perftrace-{variant}.txt"
    cmd = ["perf", "trace", "-s", "-o", out, "--"] + _tw_cmd(variant, Path(tmp) / f"out-pt-{variant}")
    with open(inp, "rb") as f:
        p = proc.run(cmd, stdin=f, timeout=120)
    text = out.read_text() if out.exists() else ""
    procs = parse_perf_trace_s(text)
    if not procs:
        return {"variant": variant, "supported": False,
                "reason": f"perf trace printed no summary (exit {p.returncode}): "
                          f"{p.stderr.strip()[-200:]}", "rows": []}
    main = max(procs, key=lambda q: q["events"])
    return {"variant": variant, "supported": True, "reason": None, "pid": main["pid"],
            "rows": main["rows"], "processes": [{k: q[k] for k in ("comm", "pid", "events")}
                                                for q in procs], "raw": text}


def _bpftrace_session(script, driver_lines, tmp, tag):
    """Run traces/<script> with -c '/bin/sh driver'; the driver records 'label pid' lines."""
    pids = Path(tmp) / f"pids-{tag}"
    pids.write_text("")
    drv = Path(tmp) / f"driver-{tag}.sh"
    body = ["set -u"]
    for label, cmd, stdin in driver_lines:
        q = " ".join(_shq(c) for c in cmd)
        body.append(f"{q} < {_shq(stdin)} > /dev/null 2>&1 & p=$!; wait $p; "
                    f"echo \"{label} $p $?\" >> {_shq(pids)}")
    drv.write_text("\n".join(body) + "\n")
    out = Path(tmp) / f"bpftrace-{tag}.ndjson"
    p = proc.run(["bpftrace", "-f", "json", "-o", out, paths.TRACES / script,
                    "-c", f"/bin/sh {drv}"], timeout=300)
    text = out.read_text() if out.exists() else ""
    labels = {}
    for line in pids.read_text().splitlines():
        f = line.split()
        if len(f) == 3:
            labels[f[1]] = (f[0], int(f[2]))
    return parse_bpftrace_json(text), labels, p, text


def _shq(s):
    s = str(s)
    return "'" + s.replace("'", "'\\''") + "'"


def bpftrace_latency(variants, tmp, inp, mode):
    """writelat.bt over every variant, async and sync, in one bpftrace session."""
    lines = []
    for v in variants:
        for m in ("async", "sync"):
            lines.append((f"{v}/{m}", _tw_cmd(v, Path(tmp) / f"out-bt-{v}-{m}", m == "sync"), inp))
    maps, labels, p, text = _bpftrace_session("writelat.bt", lines, tmp, "writelat")
    runs, counts = [], {}
    for pid, (label, rc) in labels.items():
        v, m = label.split("/")
        keys = [k for k in maps.get("@count", {}) if k[0] == pid and int(k[2]) >= 3]
        if not keys:
            runs.append({"variant": v, "mode": m, "buffsize": CHUNK, "count": None,
                         "log2": [], "linear": [], "percentiles": {},
                         "why": f"bpftrace saw no write to a file from pid {pid} "
                                f"(timewrite exit {rc}; bpftrace exit {p.returncode})"})
            continue
        k = max(keys, key=lambda k: maps["@count"][k])
        n = int(maps["@count"][k])
        lin_ns = hist_buckets(maps.get("@lin_ns", {}).get(k, []))
        lin_us = hist_buckets(maps.get("@lin_us", {}).get(k, []), scale=1000)
        over = sum(b["count"] for b in lin_ns if b["hi_ns"] is None)
        # the fine histogram (100 ns steps up to 10 us) when most calls fit in
        # it; else the coarse one (50 us steps up to 5 ms: O_SYNC writes)
        linear = lin_ns if over <= n * 0.10 else lin_us
        log2 = hist_buckets(maps.get("@ns", {}).get(k, []))
        pct = percentile_best([lin_ns, log2, lin_us])
        runs.append({"variant": v, "mode": m, "buffsize": CHUNK, "count": n, "abi": k[1],
                     "fd": int(k[2]), "pid": int(pid),
                     "sum_ns": maps.get("@sum_ns", {}).get(k),
                     "min_ns": maps.get("@min_ns", {}).get(k),
                     "max_ns": maps.get("@max_ns", {}).get(k),
                     "log2": log2, "linear": linear,
                     "linear_step_ns": (linear[0]["hi_ns"] - linear[0]["lo_ns"]) if linear and linear[0]["hi_ns"] else None,
                     "percentiles": pct, "why": None})
        if m == "async":
            counts[v] = n
    runs.sort(key=lambda r: (r["variant"], r["mode"]))
    return runs, counts, text


def bpftrace_entry(variants, tmp, inp):
    """entrypath.bt over every variant (async) in one session: ABI and origin counts."""
    lines = [(v, _tw_cmd(v, Path(tmp) / f"out-ep-{v}"), inp) for v in variants]
    maps, labels, p, text = _bpftrace_session("entrypath.bt", lines, tmp, "entrypath")
    rows = []
    for pid, (v, rc) in labels.items():
        counts = {"compat": 0, "native": 0}
        origin = {"vdso": 0, "text": 0, "other": 0}
        classes = []
        for k, n in maps.get("@calls", {}).items():
            # k = (pid, comm, abi, origin, insn, caller, cs); calls the driver
            # shell's fork made before execve carry its comm, not timewrite's
            if k[0] != pid or not k[1].startswith("timewrite"):
                continue
            counts[k[2]] = counts.get(k[2], 0) + n
            origin[k[3]] = origin.get(k[3], 0) + n
            classes.append({"abi": k[2], "origin": k[3], "insn": k[4], "caller": k[5],
                            "cs": int(k[6]), "calls": n})
        writes = [{"abi": k[2], "origin": k[3], "id": int(k[4]), "calls": n}
                  for k, n in maps.get("@write_like", {}).items()
                  if k[0] == pid and k[1].startswith("timewrite")]
        classes.sort(key=lambda c: -c["calls"])
        rows.append({"variant": v, "pid": int(pid), "counts": counts, "origin": origin,
                     "classes": classes, "writes": writes,
                     "regs_ok": maps.get("@regs_ok", {}).get(("1",))})
    rows.sort(key=lambda r: r["variant"])
    return rows, text


# ---------------------------------------------------------------- stage

def _supported(variants):
    out = []
    for v in probe.check_all("timewrite"):
        if variants and v["name"] not in variants:
            continue
        out.append(v)
    return out


def run_tracers(out_dir, mode="default", variants=None):
    """Run every instrument over the supported variants; write tracers.json,
    latency.json and CSVs into out_dir.  Returns the tracers.json dict."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    vs = _supported(variants)
    ok = [v["name"] for v in vs if v["supported"]]
    res = {"workload": {}, "variants": [{k: v[k] for k in ("name", "bits", "abi", "mechanism",
                                                         "supported", "reason")} for v in vs],
           "perf_stat": [], "strace_c": [], "strace_T": [], "perf_trace": [],
           "bpftrace_abi": [], "counts": [], "notes": []}
    latency = {"runs": []}
    root = proc.is_root()
    with tempfile.TemporaryDirectory(prefix="tw-trace-", dir=_tmp_dir()) as tmp:
        inp, expected = _workload(tmp, mode)
        res["workload"] = {"program": "timewrite", "input_bytes": inp.stat().st_size,
                           "buffsize": CHUNK, "expected_file_writes": expected,
                           "note": "each run also writes its one-line report to stdout; "
                                   "the counts below are of writes to the output file"}
        for v in vs:
            if not v["supported"]:
                cell = {"variant": v["name"], "supported": False, "reason": v["reason"]}
                res["counts"].append(dict(cell, expected=expected, timewrite=None, strace=None,
                                          bpftrace=None, perf=None))
                continue
        per = {}
        for name in ok:
            ui.progress(f"trace: {name}: perf stat, strace -c, strace -T, perf trace")
            ps = perf_stat(name, tmp, inp, root=root)
            res["perf_stat"].append({k: ps.get(k) for k in ("variant", "events", "why", "file_writes")})
            if proc.which("strace"):
                sc = strace_c(name, tmp, inp)
                res["strace_c"].append({"variant": name, "tables": sc["tables"]})
                st = strace_T(name, tmp, inp)
                res["strace_T"].append({"variant": name, "calls": st["calls"],
                                        "write_us": st["write_us"]})
            else:
                st = {"calls": None, "timewrite_calls": None}
                res["strace_c"].append({"variant": name, "tables": {}, "why": "strace not installed"})
            pt = perf_trace(name, tmp, inp) if (root and proc.which("perf")) else {
                "variant": name, "supported": False, "reason": "needs root and perf", "rows": []}
            res["perf_trace"].append({k: pt.get(k) for k in ("variant", "supported", "reason", "pid", "rows")})
            per[name] = {"timewrite": st.get("timewrite_calls") or ps.get("timewrite_calls"),
                         "strace": st.get("calls"), "perf": ps.get("file_writes")}
        bt_counts = {}
        if root and proc.which("bpftrace") and ok:
            ui.progress(f"trace: bpftrace writelat.bt over {len(ok)} variants, async and sync")
            latency["runs"], bt_counts, _ = bpftrace_latency(ok, tmp, inp, mode)
            ui.progress(f"trace: bpftrace entrypath.bt over {len(ok)} variants")
            res["bpftrace_abi"], _ = bpftrace_entry(ok, tmp, inp)
        else:
            why = "bpftrace needs root" if not root else "bpftrace is not installed"
            ui.warn(why, "run as root with bpftrace installed for ABI/origin and latency")
            res["notes"].append(why)
            for name in ok:
                for m in ("async", "sync"):
                    latency["runs"].append({"variant": name, "mode": m, "buffsize": CHUNK,
                                            "count": None, "log2": [], "linear": [],
                                            "percentiles": {}, "why": why})
        for name in ok:
            c = per[name]
            res["counts"].append({"variant": name, "supported": True, "expected": expected,
                                  "timewrite": c["timewrite"], "strace": c["strace"],
                                  "bpftrace": bt_counts.get(name), "perf": c["perf"]})
    res["notes"].append("perf trace -s runs for native 64-bit variants only: it names "
                        "i386 calls from the x86-64 table")
    files.write_json(out_dir / "tracers.json", res)
    files.write_json(out_dir / "latency.json", latency)
    _csvs(out_dir, res, latency)
    return res


def _tmp_dir():
    return os.environ.get("TW_TMPDIR") or None


def _csvs(out_dir, res, latency):
    with open(out_dir / "tracers_counts.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["variant", "expected", "timewrite", "strace", "bpftrace", "perf"])
        for r in res["counts"]:
            w.writerow([r["variant"], r["expected"], r["timewrite"], r["strace"], r["bpftrace"], r["perf"]])
    with open(out_dir / "tracers_perf_stat.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["variant", "event", "value", "why"])
        for r in res["perf_stat"]:
            for k, v in r["events"].items():
                w.writerow([r["variant"], k, "" if v is None else v, r["why"].get(k, "")])
    with open(out_dir / "tracers_strace_c.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["variant", "table", "syscall", "calls", "errors", "seconds", "usecs_per_call"])
        for r in res["strace_c"]:
            for t, rows in r["tables"].items():
                for x in rows:
                    w.writerow([r["variant"], t, x["syscall"], x["calls"], x["errors"],
                                x["seconds"], x["usecs_per_call"]])
    with open(out_dir / "tracers_abi.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["variant", "abi", "origin", "insn", "caller", "cs", "calls"])
        for r in res["bpftrace_abi"]:
            for c in r["classes"]:
                w.writerow([r["variant"], c["abi"], c["origin"], c["insn"], c["caller"], c["cs"], c["calls"]])
    with open(out_dir / "latency.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["variant", "mode", "buffsize", "count", "p50_ns", "p90_ns", "p99_ns", "why"])
        for r in latency["runs"]:
            p = r.get("percentiles") or {}
            w.writerow([r["variant"], r["mode"], r["buffsize"], r["count"], p.get("p50"),
                        p.get("p90"), p.get("p99"), r.get("why") or ""])


# ---------------------------------------------------------------- CLI

def add_arguments(p, name):
    p.add_argument("--out", default=None, help="results directory (default: a new one under results/)")
    options.add_mode_arguments(p, "short workloads, few repetitions (about 5-20 s)",
                              "more repetitions for tighter intervals")
    p.add_argument("--variants", default=None, help="comma list, e.g. 64-libc,32-int80")


def _out(args, stage):
    if args.out:
        return Path(args.out)
    import socket
    import time
    return paths.ROOT / "results" / f"{socket.gethostname()}-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{stage}"


def main(args, name):
    out = _out(args, "trace")
    vs = args.variants.split(",") if args.variants else None
    res = run_tracers(out, mode=args.mode, variants=vs)
    print(f"{'variant':12} {'expected':>8} {'timewrite':>9} {'strace':>6} {'bpftrace':>8} {'perf':>5}")
    for r in res["counts"]:
        print(f"{r['variant']:12} {r['expected']:>8} {str(r['timewrite']):>9} {str(r['strace']):>6} "
              f"{str(r['bpftrace']):>8} {str(r['perf']):>5}")
    for r in res["bpftrace_abi"]:
        print(f"{r['variant']:12} abi {r['counts']} origin {r['origin']}")
    print(f"tracers.json, latency.json in {out}")
    return 0
