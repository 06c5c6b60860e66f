"""perf stat: counters for a whole run, no per-event output.

The trace stage counts the workload's writes to its file with tracepoint counters
(raw_syscalls:sys_exit filtered on id == the ABI's write and ret == the chunk or the tail),
beside the software counters (task-clock, context switches, page faults) and the hardware
ones where a PMU exists.  `perf stat -j` prints one JSON object per counter; counters are
told apart by the order they were asked in, since perf names repeated tracepoints alike.
Without root the software counters still count a process of one's own (perf_event_paranoid
<= 2); the tracepoints are then blind.  A vsyscall-page call raises a page fault, which
`page-faults` counts while the raw_syscalls tracepoints do not fire.
"""
from pathlib import Path

from .. import sysnr
from .base import (Tracer, first_line, json_lines, kernel_entry_blind, observer_argv,
                   run_with_stdin)

EVENTS = ["task-clock", "context-switches", "page-faults", "cycles", "instructions"]
WRITE_EVENTS = ["raw_syscalls:sys_enter", "write_exit_ret_chunk", "write_exit_ret_tail"]


def asked_event(name):
    """The perf event a counter's name stands for: the write counters are raw_syscalls:sys_exit
    with a filter (perf prints that name for each), every other name is its event."""
    return "raw_syscalls:sys_exit" if name.startswith("write_exit_ret") else name


def parse_json(text, names):
    """perf stat -j output -> (events, why): values by the names given, in the order the
    counters were asked for; '<not supported>'/'<not counted>' become None with a reason.
    perf names the repeated, filtered tracepoints alike, so the order tells them apart; each
    line's event is checked against the one asked for in its place (a user's ':u' suffix
    aside), and from the first that is not, no line is taken for another's value."""
    objs = [o for o in json_lines(text) if "counter-value" in o and "event" in o]
    events, why = {}, {}
    shifted = None
    for i, name in enumerate(names):
        if i >= len(objs):
            events[name] = None
            why[name] = "perf stat printed no line for this event"
            continue
        got = str(objs[i]["event"]).split(":u")[0] if str(objs[i]["event"]).endswith(":u") \
            else str(objs[i]["event"])
        if shifted is None and got != asked_event(name):
            shifted = f"perf stat printed {got!r} where {asked_event(name)!r} was asked"
        if shifted:
            events[name] = None
            why[name] = shifted + ": its lines do not line up with the counters asked for"
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


def check_events(d, events):
    """(works, why, text) for `perf stat -x, -e EVENTS -- true` run by a doctor."""
    if not d.which("perf"):
        return False, "perf is not installed (linux-perf)", ""
    r = d.run(["perf", "stat", "-x,", "-e", events, "--", d.true_path()], timeout=60)
    text = (r.stderr or "") + (r.stdout or "")
    rows = [l.split(",") for l in text.split("\n") if l.count(",") >= 2]
    values = {}
    for row in rows:
        values[row[2].split(":u")[0] if len(row) > 2 else "?"] = row[0]
    if r.returncode != 0 or not values:
        low = text.lower()
        if "paranoid" in low or "permission" in low or "access to performance" in low:
            par = d.read("/proc/sys/kernel/perf_event_paranoid")
            who = "root" if d.euid == 0 else "not root"
            return False, (f"perf_event_paranoid={par} and {who}: perf may not open these events "
                           "(run as root, or sysctl kernel.perf_event_paranoid=-1)"), first_line(text)
        if "tracepoint" in low and "not found" in low or "no such file" in low:
            return False, ("the tracepoint is not found: is tracefs mounted? (mount -t tracefs "
                           "nodev /sys/kernel/tracing)"), text
        return False, f"perf stat failed: {first_line(text, f'exit status {r.returncode}')}", text
    bad = {k: v for k, v in values.items() if v.startswith("<")}
    if bad:
        k, v = next(iter(bad.items()))
        return False, f"{k} reads {v}", text
    return True, None, text


class PerfStat(Tracer):
    name = "perf-stat"
    title = "perf stat"
    order = 10
    skips = {"perf-stat": ["tracers.json perf_stat (software events)", "observer.json perf-stat rows"],
             "perf-tracepoints": ["raw_syscalls counts in tracers.json perf_stat"]}

    def check(self, d):
        out = []
        ok, why, _ = check_events(d, "task-clock,context-switches")
        out.append(self.instrument("perf-stat", ok, why))
        ok, why, _ = check_events(d, "raw_syscalls:sys_enter")
        out.append(self.instrument("perf-tracepoints", ok, why))
        return out

    def blind(self, mech, root):
        return kernel_entry_blind(mech, "raw_syscalls", root,
                                  "the raw_syscalls tracepoints need root")

    def observer_wrapper(self, tmp, root):
        return observer_argv("perf", root, "needs root for raw_syscalls tracepoints",
                             ["perf", "stat", "-e", "raw_syscalls:sys_enter,raw_syscalls:sys_exit",
                              "-o", "/dev/null", "--"])

    def trace(self, variants, workload, tmp, root):
        from ...core import proc
        from .. import registry
        recs, counts, own = [], {}, {}
        for v in variants:
            if not proc.which("perf"):
                recs.append({"variant": v, "events": {}, "why": {"*": "perf is not installed"}})
                continue
            nr = sysnr.syscall_nr(registry.get(v).abi, "write")
            out = Path(tmp) / f"perfstat-{v}.json"
            names = EVENTS + (WRITE_EVENTS if root else [])
            cmd = ["perf", "stat", "-j", "-o", out, "-e", ",".join(EVENTS)]
            if root:
                cmd += ["-e", "raw_syscalls:sys_enter",
                        "-e", "raw_syscalls:sys_exit", "--filter", f"id == {nr} && ret == {workload.chunk}",
                        "-e", "raw_syscalls:sys_exit", "--filter", f"id == {nr} && ret == {workload.tail}"]
            cmd += ["--"] + workload.command(v, Path(tmp) / f"out-perfstat-{v}")
            rc, stdout, stderr = run_with_stdin(cmd, workload.input)
            text = out.read_text() if out.exists() else ""
            events, why = parse_json(text, names)
            if rc != 0 and not any(x is not None for x in events.values()):
                why = {n: f"perf stat failed ({rc}): {stderr.strip()[-200:]}" for n in names}
            if not root:
                for n in WRITE_EVENTS:
                    events[n], why[n] = None, "needs root: tracepoints are not open to other users"
            w = [events.get("write_exit_ret_chunk"), events.get("write_exit_ret_tail")]
            writes = sum(w) if all(x is not None for x in w) else None
            recs.append({"variant": v, "events": events, "why": why, "file_writes": writes,
                         "raw": text})
            counts[v] = writes
            own[v] = workload.own_count(stdout)
        return {"records": {"perf_stat": recs}, "counts": counts, "own": own, "files": {}}

    def tables(self, stage):
        ps = stage.get("perf_stat") or []
        if not ps:
            return []
        evs = []
        for r in ps:
            evs += [e for e in (r.get("events") or {}) if e not in evs]
        rows = [[r["variant"]] + [r["events"].get(e) if r["events"].get(e) is not None else
                                  f"unknown ({(r.get('why') or {}).get(e, 'not counted')})" for e in evs]
                for r in ps]
        return [("perf stat counters for the same run (write_exit_ret_*: writes to the output "
                 "file, counted by raw_syscalls:sys_exit filtered on the ABI's write number)",
                 ["variant"] + evs, rows)]


TRACER = PerfStat()
