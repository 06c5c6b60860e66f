"""strace: ptrace stops at every system call entry and exit.

It counts the workload's writes twice: `strace -c -w` (a wall-clock summary table per ABI:
a 32-bit process's calls come in a second table headed "System call usage summary for 32
bit mode") and `strace -T -P outfile -e trace=write` (each write to the output file with its
time).  It sees compat and native calls alike; it cannot see a vsyscall-page call (the
kernel emulates it without a syscall stop) and it costs tens of microseconds per call.
"""
import re
from pathlib import Path

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
    for line in (text or "").splitlines():
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


def parse_T(text, syscall="write"):
    """strace -T lines -> [{fd, ret, us}] for `syscall` (unfinished/resumed lines skipped)."""
    out = []
    for line in (text or "").splitlines():
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
            rec["strace_c"].append({"variant": v, "tables": parse_c(text), "rc": rc, "raw": text})
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
        return out


TRACER = Strace()
