"""perf trace: strace-like tracing through perf's syscall tracepoints, with a summary (-s).

perf trace decodes every process with the x86-64 syscall table, so it prints wrong names
for i386 (compat) calls: it runs only for mechanisms on the x86-64 ABI.  It needs root (or a
low perf_event_paranoid) and the raw_syscalls tracepoints, and like every syscall tracer it
cannot see a vsyscall-page call.
"""
import re
from pathlib import Path

from .base import (Tracer, Workload, first_line, kernel_entry_blind, observer_argv,
                   run_with_stdin)

_PROC = re.compile(r"^\s*(.+?) \((\d+)\), (\d+) events, ([\d.]+)%\s*$")


def parse_s(text):
    """perf trace -s summary -> [{comm, pid, events, rows: [{syscall, calls, errors,
    total_ms, min_ms, avg_ms, max_ms, stddev_pct}]}] (one block per process)."""
    procs, cur = [], None
    for line in (text or "").split("\n"):
        m = _PROC.match(line)
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


class PerfTrace(Tracer):
    name = "perf-trace"
    title = "perf trace"
    order = 30
    skips = {"perf-trace": ["tracers.json perf_trace", "observer.json perf-trace rows"]}

    def check(self, d):
        if not d.which("perf"):
            return [self.instrument("perf-trace", False, "perf is not installed (linux-perf)")]
        r = d.run(["perf", "trace", "-s", "--", d.true_path()], timeout=60)
        out = (r.stdout or "") + (r.stderr or "")
        if r.returncode == 0 and re.search(r"\bcalls\b|\bexecve\b|\bbrk\b", out):
            return [self.instrument("perf-trace", True, None,
                                    note="perf trace decodes 32-bit processes with the x86-64 "
                                         "syscall table: names for 32-bit variants are wrong")]
        return [self.instrument("perf-trace", False,
                                f"perf trace failed: {first_line(out, f'exit status {r.returncode}')}"
                                + ("" if d.euid == 0 else " (not root)"))]

    def blind(self, mech, root):
        if not root:
            return "perf trace needs root here"
        if mech.abi != "x86_64":
            return ("perf trace decodes every process with the x86-64 table: i386 numbers "
                    "would get wrong names, so it runs for x86-64-ABI mechanisms only")
        return kernel_entry_blind(mech, "perf trace")

    def observer_wrapper(self, tmp, root):
        return observer_argv("perf", root, "needs root for raw_syscalls tracepoints",
                             ["perf", "trace", "-o", "/dev/null", "--"])

    def trace(self, variants, workload, tmp, root):
        from ...core import proc
        from .. import registry
        recs = []
        for v in variants:
            why = self.blind(registry.get(v), root) or \
                (None if proc.which("perf") else "perf is not installed")
            if why:
                recs.append({"variant": v, "supported": False, "reason": why, "rows": []})
                continue
            out = Path(tmp) / f"perftrace-{v}.txt"
            cmd = ["perf", "trace", "-s", "-o", out, "--"] + workload.command(v, Path(tmp) / f"out-pt-{v}")
            rc, stdout, stderr = run_with_stdin(cmd, workload.input)
            text = out.read_text() if out.exists() else ""
            procs = parse_s(text)
            if not procs:
                recs.append({"variant": v, "supported": False, "rows": [],
                             "reason": f"perf trace printed no summary (exit {rc}): {stderr.strip()[-200:]}"})
                continue
            main = max(procs, key=lambda q: q["events"])
            recs.append({"variant": v, "supported": True, "reason": None, "pid": main["pid"],
                         "rows": main["rows"], "raw": text,
                         "processes": [{k: q[k] for k in ("comm", "pid", "events")} for q in procs],
                         **self.shortfall(main["rows"], workload.own_count(stdout), text)})
        return {"records": {"perf_trace": recs}, "counts": {}, "own": {}, "files": {}}

    @staticmethod
    def shortfall(rows, own, text, report_writes=Workload.REPORT_WRITES):
        """How many of the program's writes perf trace did not count.  The program makes its
        `own` file writes plus `report_writes` to stdout (Workload).  perf trace reads
        per-CPU ring buffers and can drop an event without printing LOST (seen once, in a CI
        run on a 2-CPU AMD guest; never in 450 runs by hand there); a count that falls short
        is then perf trace's loss, and is said, not passed off as the program's behaviour."""
        if own is None:
            return {"own_writes": None, "missed_writes": None}
        seen = next((x["calls"] for x in rows if x["syscall"] == "write"), 0) or 0
        made = own + report_writes
        missed = made - seen
        out = {"own_writes": own, "missed_writes": missed}
        if missed > 0:
            out["note"] = (f"perf trace counted {seen} of the program's {made} writes: it "
                           f"dropped {missed} event(s)" + ("" if "LOST" in text else
                                                            " without reporting LOST"))
        elif missed < 0:
            out["note"] = (f"perf trace counted {seen} writes, {-missed} more than the "
                           f"program's {made}")
        return out

    def tables(self, stage):
        rows = []
        for r in stage.get("perf_trace") or []:
            if not r.get("supported"):
                rows.append([r["variant"], "—", "—", "—", f"not traced: {r.get('reason')}"])
                continue
            w = next((x for x in r["rows"] if x["syscall"] == "write"), None)
            rows.append([r["variant"], w["calls"] if w else 0,
                         f"{w['avg_ms'] * 1000:.2f}" if w else "—",
                         f"{w['max_ms'] * 1000:.2f}" if w else "—", r.get("note") or ""])
        if not rows:
            return []
        return [("perf trace -s: the writes of the workload's main process (all of its writes, "
                 "its report to stdout included)",
                 ["variant", "write calls", "avg µs", "max µs", "note"], rows)]


TRACER = PerfTrace()
