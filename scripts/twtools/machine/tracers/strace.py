"""strace: ptrace stops at every system call entry and exit.

It counts the workload's writes twice: `strace -c -w` (a wall-clock summary table per ABI:
a 32-bit process's calls come in a second table headed "System call usage summary for 32
bit mode") and `strace -T -P outfile -e trace=write` (each write to the output file with its
time).  It sees compat and native calls alike; it cannot see a vsyscall-page call (the
kernel emulates it without a syscall stop) and it costs tens of microseconds per call.
"""
import re
from pathlib import Path

from .. import sysnr

from ...core.fmt import fmt
from .base import Tracer, first_line, kernel_entry_blind, run_with_stdin

_HEAD = re.compile(r"^% time\s+seconds\s+usecs/call\s+calls\s+errors\s+syscall\s*$")
_TABLE_32 = "System call usage summary for 32 bit mode:"
_TABLE_X32 = "System call usage summary for x32 mode:"
_T_LINE = re.compile(r"^(?:\[pid\s+\d+\]\s+|\d+\s+)?(\w+)\((\d+),.*\)\s+=\s+(-?\d+)"
                     r"(?:\s+\w+\s+\(.*\))?\s+<(\d+\.\d+)>\s*$")


def parse_c(text):
    """strace -c [-w] summary -> {"64": rows, "32": rows}; rows without the 'total' row.

    Columns are pinned to the header `% time seconds usecs/call calls errors syscall`; the
    errors column is blank when zero."""
    tables, cur, key, seen_head = {}, None, "64", False
    for line in (text or "").split("\n"):
        s = line.strip()
        if s == _TABLE_32:
            key, seen_head = "32", False
            continue
        if s == _TABLE_X32:
            key, seen_head = "x32", False
            continue
        if _HEAD.match(s):
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
            cur.append({"syscall": f[-1], "calls": int(f[3]),
                        "errors": int(f[4]) if len(f) == 6 else 0,
                        "seconds": float(f[1]), "usecs_per_call": float(f[2]),
                        "pct_time": float(f[0])})
        except ValueError:
            continue
    return tables


def check_c(text, tables=None):
    """The second witness of a strace -c summary: each table's rows summed against its own
    total row (calls and errors).  [disagreement text], empty when they agree; a table
    without a total row (cut short) is one."""
    tables = parse_c(text) if tables is None else tables
    totals, key = {}, "64"
    for line in (text or "").split("\n"):
        s = line.strip()
        if s == _TABLE_32:
            key = "32"
        elif s == _TABLE_X32:
            key = "x32"
        f = s.split()
        if f and f[-1] == "total" and len(f) in (5, 6):
            try:
                totals[key] = (int(f[3]), int(f[4]) if len(f) == 6 else 0)
            except ValueError:
                pass
    out = []
    for key, rows in tables.items():
        got = (sum(r["calls"] for r in rows), sum(r["errors"] for r in rows))
        if key not in totals:
            out.append(f"the {key}-bit table has no total row (cut short?)")
        elif got != totals[key]:
            out.append(f"the {key}-bit table's rows sum to {got[0]} calls and {got[1]} errors; "
                       f"its total row says {totals[key][0]} and {totals[key][1]}")
    return out


def parse_T(text, syscall="write"):
    """strace -T lines -> [{fd, ret, us}] for `syscall` (unfinished/resumed lines skipped)."""
    out = []
    for line in (text or "").split("\n"):
        m = _T_LINE.match(line.strip())
        if m and m.group(1) == syscall:
            out.append({"fd": int(m.group(2)), "ret": int(m.group(3)),
                        "us": float(m.group(4)) * 1e6})
    return out


class Strace(Tracer):
    name = "strace"
    title = "strace"
    order = 20
    skips = {"strace": ["tracers.json strace_c and strace_T", "observer.json strace rows",
                        "counts.strace"]}

    def check(self, d):
        if not d.which("strace"):
            return [self.instrument("strace", False, "strace is not installed")]
        r = d.run(["strace", "-f", "-c", "-o", "/dev/null", "--", d.true_path()], timeout=60)
        if r.returncode == 0:
            return [self.instrument("strace", True, None)]
        scope = d.int_sysctl("ptrace_scope", "/proc/sys/kernel/yama/ptrace_scope", "")
        return [self.instrument(
            "strace", False, f"strace cannot ptrace: {first_line(r.stderr, f'exit status {r.returncode}')}"
            + (f" (kernel.yama.ptrace_scope={scope})" if scope is not None else ""))]

    def blind(self, mech, root):
        return kernel_entry_blind(mech, "strace")

    def observer_wrapper(self, tmp, root):
        from ...core import proc
        if not proc.which("strace"):
            return None, "strace is not installed"
        return ["strace", "-f", "-o", "/dev/null", "--"], None

    def trace(self, variants, workload, tmp, root):
        from ...core import proc
        rec = {"strace_c": [], "strace_T": []}
        counts, own = {}, {}
        if not proc.which("strace"):
            for v in variants:
                rec["strace_c"].append({"variant": v, "tables": {}, "why": "strace is not installed"})
            return {"records": rec, "counts": counts, "own": own, "files": {}}
        tmp = Path(tmp)
        for v in variants:
            out = tmp / f"strace-c-{v}.txt"
            cmd = ["strace", "-f", "-c", "-w", "-o", out, "--"] + workload.command(v, tmp / f"out-sc-{v}")
            rc, _, _ = run_with_stdin(cmd, workload.input)
            text = out.read_text() if out.exists() else ""
            tables = parse_c(text)
            rec["strace_c"].append({"variant": v, "tables": tables, "rc": rc, "raw": text,
                                    "disagree": check_c(text, tables)})
            outfile = tmp / f"out-sT-{v}"
            out = tmp / f"strace-T-{v}.txt"
            cmd = ["strace", "-T", "-e", "trace=write", "-P", outfile, "-o", out, "--"] + \
                workload.command(v, outfile)
            rc, stdout, _ = run_with_stdin(cmd, workload.input)
            text = out.read_text() if out.exists() else ""
            calls = [c for c in parse_T(text) if c["ret"] >= 0]
            rec["strace_T"].append({"variant": v, "calls": len(calls),
                                    "write_us_samples": [c["us"] for c in calls], "rc": rc,
                                    "why": None if calls else
                                    f"strace saw no write to the output file (exit {rc})"})
            counts[v] = len(calls) if calls or rc == 0 else None
            own[v] = workload.own_count(stdout)
        return {"records": rec, "counts": counts, "own": own, "files": {}}

    # samples the analysis summarises: stage key -> {samples field: summary field}
    summaries = {"strace_T": {"write_us_samples": "write_us"}}

    def tables(self, stage):
        rows = []
        for r in stage.get("strace_T") or []:
            w = r.get("write_us")
            rows.append([r["variant"], r.get("calls"),
                         fmt(w, "µs") if w else f"unknown ({r.get('why') or 'no calls'})"])
        out = []
        if rows:
            out.append(("strace -T: writes to the output file and their time under strace "
                        "(each call stops the process twice)", ["variant", "writes", "µs per write"], rows))
        bad = [[r["variant"], "; ".join(r["disagree"])] for r in stage.get("strace_c") or []
               if r.get("disagree")]
        if bad:
            out.append(("strace -c: tables whose rows do not add up to their own total row",
                                                ["variant", "what disagrees"], bad))
        return out


TRACER = Strace()


# ---------------------------------------------------------------- strace -f -i -T (tw diagnose)

_ST_LINE = re.compile(r"^(\d+)\s+\[([0-9a-f?]+)\]\s+(.*)$")
_ST_CALL = re.compile(r"^(\w+)\((.*?)(?:\)\s+=\s+(0x[0-9a-f]+|-?\d+|\?)(.*?))?(?:\s+<(\d+\.\d+)>)?\s*$")
_ST_UNFIN = re.compile(r"^(\w+)\((.*)<unfinished \.\.\.>$")
_ST_RESUMED = re.compile(r"^<\.\.\. (\w+) resumed>(.*?)\)\s+=\s+(0x[0-9a-f]+|-?\d+|\?).*?(?:<(\d+\.\d+)>)?\s*$")
_ST_MODE = re.compile(r"\[ Process PID=(\d+) runs in (32|64) bit mode\. \]")


def parse_strace(text, bits0, skip_until_exec=False):
    """strace -f -i -T output -> {calls: [{pid, abi, name, id, ip, us}], mmaps: [...]}.

    The ABI of a call follows strace's "[ Process PID=N runs in 32 bit mode. ]" notes (bits0
    until the first); numbers come from the UAPI tables (twtools.machine.sysnr).  The
    libraries' mappings come from openat/open and mmap/mmap2 calls with a file descriptor.
    skip_until_exec: the output of `strace -- CMD`, whose first process makes its execve
    (and, when the first fails, more) before it is the program: those calls are left out."""
    mode, calls, pending, fds, mmaps = {}, [], {}, {}, []
    first, execd = None, not skip_until_exec    # strace -- CMD: its child's calls before execve
    tables = {"compat": sysnr.syscall_numbers("i386"), "native": sysnr.syscall_numbers("x86_64")}
    for line in text.split("\n"):
        m = _ST_MODE.search(line)
        if m:
            mode[int(m.group(1))] = int(m.group(2))
            continue
        m = _ST_LINE.match(line.strip())
        if not m:
            continue
        pid, ip, rest = int(m.group(1)), m.group(2), m.group(3)
        if first is None:
            first = pid
        if not execd and pid == first:
            # the forked strace child until its execve returns: not the program yet
            if re.match(r"^execve\(.*\)\s+=\s+0\b", rest):
                execd = True
            continue
        abi = "compat" if mode.get(pid, bits0) == 32 else "native"
        u = _ST_UNFIN.match(rest)
        if u:
            pending[pid] = (u.group(1), int(ip, 16) if "?" not in ip else None, abi, u.group(2))
            continue
        r = _ST_RESUMED.match(rest)
        if r and pid in pending:
            name, ipv, abi, args = pending.pop(pid)
            ret, secs = r.group(3), r.group(4)
        else:
            c = _ST_CALL.match(rest)
            if not c or "?" in ip:
                continue
            name, ipv, args, ret, secs = c.group(1), int(ip, 16), c.group(2), c.group(3), c.group(5)
        nr = tables[abi].get(name)
        calls.append({"pid": pid, "abi": abi, "name": name, "id": nr, "ip": ipv,
                      "us": float(secs) * 1e6 if secs else None})
        _track_files(name, args, ret, fds, mmaps, pid)
    # A call left unfinished (its thread killed inside it, or the trace stopped) entered the
    # kernel all the same: it counts, without a time.
    for pid, (name, ipv, abi, _) in pending.items():
        calls.append({"pid": pid, "abi": abi, "name": name, "id": tables[abi].get(name),
                      "ip": ipv, "us": None})
    return {"calls": calls, "mmaps": mmaps}


def _track_files(name, args, ret, fds, mmaps, pid):
    if ret is None or ret == "?":
        return
    try:
        rv = int(ret, 0)
    except ValueError:
        return
    if name in ("open", "openat") and rv >= 0:
        m = re.search(r'"([^"]+)"', args)
        if m:
            fds[(pid, rv)] = m.group(1)
    elif name in ("mmap", "mmap2") and rv > 0:
        f = [x.strip() for x in args.split(",")]
        if len(f) >= 6:
            try:
                fd, length, off = int(f[4]), int(f[1], 0), int(f[5], 0)
            except ValueError:
                return
            if (pid, fd) in fds:
                # mmap2's offset is in pages
                mmaps.append({"lo": rv, "hi": rv + length, "perms": f[2],
                              "offset": off * (4096 if name == "mmap2" else 1),
                              "path": fds[(pid, fd)]})


def log2_buckets(values_ns):
    """[{lo_ns, hi_ns, count}] in powers of two, as bpftrace's hist() prints them."""
    counts = {}
    for v in values_ns:
        b = 0 if v < 1 else 1 << (int(v).bit_length() - 1)
        counts[b] = counts.get(b, 0) + 1
    return [{"lo_ns": b, "hi_ns": (b * 2 if b else 1), "count": counts[b]} for b in sorted(counts)]


def strace_rows(parsed):
    """strace calls in the rows bpftrace gives: sites, latency, write_linear, and the witness:
    the calls strace printed against those the rows hold (a call whose name this machine's
    UAPI tables do not have has no number, so no row: it is counted as left out)."""
    sites, lat = {}, {}
    unnamed = {}
    for c in parsed["calls"]:
        if c["id"] is None:
            unnamed[c["name"]] = unnamed.get(c["name"], 0) + 1
            continue
        k = (c["pid"], c["abi"], c["id"], c["ip"])
        sites[k] = sites.get(k, 0) + 1
        if c["us"] is not None:
            lat.setdefault((c["pid"], c["abi"], c["id"]), []).append(c["us"] * 1000)
    rows = [{"pid": k[0], "comm": None, "abi": k[1], "origin": None, "insn": None, "id": k[2],
             "cs": None, "ip": k[3], "ret12": 0, "ret0": 0, "calls": n} for k, n in sites.items()]
    lrows, wlin = [], []
    for (pid, abi, nr), v in lat.items():
        lrows.append({"pid": pid, "abi": abi, "id": nr, "log2": log2_buckets(v), "exits": len(v),
                      "sum_ns": sum(v)})
        if (abi, nr) in (("compat", 4), ("native", 1)):
            step = 250
            cnt = {}
            for x in v:
                b = min(int(x // step), 80) * step
                cnt[b] = cnt.get(b, 0) + 1
            wlin.append({"pid": pid, "abi": abi, "linear": [
                {"lo_ns": b, "hi_ns": (b + step if b < 20000 else None), "count": cnt[b]}
                for b in sorted(cnt)]})
    return {"sites": rows, "latency": lrows, "write_linear": wlin, "regs_ok": None,
            "witness": {"lines": len(parsed["calls"]), "sites_total": sum(sites.values()),
                        "exits_total": sum(r["exits"] for r in lrows),
                        "unnamed": dict(sorted(unnamed.items()))}}
