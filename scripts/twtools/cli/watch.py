"""`tw watch`: the census kept for weeks.  A long-running command, as root.

  tw watch [--listen ADDR:PORT] [--state DIR] [--results DIR | --measure] [--interval S]
           [--window S] [--window-period S] [--max-programs N] [--max-state-mb N] [--keep-days N]
           [--state-reset] [--allow-unsafe-state]
  tw watch --report [--since 30d] [--state DIR] [--json] [--allow-unsafe-state]
  tw watch --overhead [--rounds N] [--idle-seconds S] [--json]

The service itself (the run loop, the windows, the state's lock and saving, the report) is
twtools.service.watch; this module is the command: its arguments, --overhead's text, and the
signals.

Signals: SIGTERM and SIGINT stop the watch cleanly (the exec tracer's last counts are read
and saved, an open window is closed, exit 0; exit 4 when a save failed on the way, said); SIGHUP saves now, re-reads the per-call matrix
and says so (exit status unchanged: the watch goes on).
"""
import os
import re
import signal

from ..analyse import watch as analyse
from ..store import watchdb
from ..core import proc, ui
from ..present import watch as present
from ..service import watch as service
from . import options

DEFAULT_STATE = "/var/lib/timewrite-watch"


def _listen(text):
    m = re.fullmatch(r"\[?([0-9A-Za-z.:-]*?)\]?:(\d{1,5})", text)
    if not m or not 0 < int(m.group(2)) < 65536:
        raise ValueError(f"'{text}' is not ADDR:PORT (e.g. 127.0.0.1:9864)")
    return m.group(1) or "0.0.0.0", int(m.group(2))


def _since(text):
    m = re.fullmatch(r"(\d+(?:\.\d+)?)([smhd])", text)
    if not m:
        raise ValueError(f"'{text}' is not a period such as 30d, 12h, 90m or 600s")
    v = float(m.group(1)) * {"s": 1, "m": 60, "h": 3600, "d": 86400}[m.group(2)]
    if not 0 < v <= 10 * 366 * 86400:
        raise ValueError(f"{text}: give a period above 0 and at most 10 years")
    return v


def _seconds(lo, hi):
    def parse(text):
        try:
            v = float(text)
        except ValueError:
            raise ValueError(f"'{text}' is not a number of seconds")
        if not lo <= v <= hi:
            raise ValueError(f"{text}: give a number of seconds from {lo:g} to {hi:g}")
        return v
    parse.__name__ = "seconds"
    return parse


def add_arguments(parser, name):
    parser.description = (
        "Keep the census for weeks: every exec on this machine (its file: the absolute path the "
        "kernel resolves, device and inode, and the name it was started by; 32-bit or not, how "
        "often, first and last seen: a program that lives one millisecond is counted in the "
        "kernel) all the time, and per program its system calls by entry path (priced with the "
        "per-call matrix) and its write latency in short windows (a duty cycle: an attached "
        "raw_syscalls tracepoint slows every call on the machine).  Exported in Prometheus's "
        "text format on --listen, kept in --state DIR/watch.sqlite across restarts.  "
        "--report says what booting with ia32_emulation=0 would have stopped.  Needs root.")
    parser.usage = ("tw watch [--listen ADDR:PORT] [--state DIR] [--results DIR | --measure] "
                    "[--interval S] [--window S] [--window-period S]\n       tw watch --report "
                    "[--since 30d] [--state DIR] [--json]\n       tw watch --overhead [--rounds N] "
                    "[--idle-seconds S] [--json]")
    parser.add_argument("--listen", type=options.checked(_listen), metavar="ADDR:PORT",
                        help="serve the metrics here (Prometheus text format, /metrics); none "
                             "by default")
    parser.add_argument("--state", metavar="DIR", default=DEFAULT_STATE,
                        help=f"where the state is kept (default {DEFAULT_STATE})")
    parser.add_argument("--results", metavar="DIR",
                        help="price entry paths with DIR/percall.json, and the calls of "
                             "processes behind seccomp filters with DIR/walls.json (default: "
                             "results/latest if it was measured on this host; else costs are "
                             "unknown)")
    parser.add_argument("--measure", action="store_true",
                        help="measure the per-call costs and the container profile's price "
                             "here at the start (about a minute) instead of reading them from "
                             "--results or results/latest")
    parser.add_argument("--interval", type=options.int_range(1, 3600), default=60, metavar="S",
                        help="read the kernel's exec counts and save every S seconds (default 60)")
    parser.add_argument("--window", type=options.checked(_seconds(0, 3600)), default=5.0,
                        metavar="S", help="seconds each per-call window stays open (default 5; "
                                          "0: no windows, execs only)")
    parser.add_argument("--window-period", type=options.checked(_seconds(1, 86400)),
                        default=1200.0, metavar="S",
                        help="open a window every S seconds (default 1200: 5 s of 1200 is 0.42%% "
                             "of the time; a window slows every call on the machine while it "
                             "is open: tw watch --overhead measures by how much)")
    parser.add_argument("--max-programs", type=options.int_range(1, 100000),
                        default=analyse.MAX_PROGRAMS, metavar="N",
                        help=f"programs kept before the rest fold into 'other' (default "
                             f"{analyse.MAX_PROGRAMS})")
    parser.add_argument("--max-state-mb", type=options.int_range(1, 100000), default=64,
                        metavar="N", help="cap on the state file (default 64 MB)")
    parser.add_argument("--keep-days", type=options.int_range(1, 3660), default=400, metavar="N",
                        help="window and per-day rows older than this are deleted (default 400)")
    parser.add_argument("--save-wait", type=options.checked(_seconds(0.1, 3600)),
                        default=watchdb.LOCK_WAIT_S, metavar="S",
                        help=f"how long an interval's save waits for another process holding "
                             f"the state (a report reading it) before it says the save failed "
                             f"and keeps the counts for the next interval (default "
                             f"{watchdb.LOCK_WAIT_S:g})")
    parser.add_argument("--state-reset", action="store_true",
                        help="start a fresh state: DIR/watch.sqlite is renamed beside itself "
                             "(watch.sqlite.reset-<UTC time>, kept, said) first.  A state the "
                             "watch did not write, or a damaged one, is otherwise refused")
    parser.add_argument("--allow-unsafe-state", action="store_true",
                        help="read and write a state folder or file that a user other than "
                             "root (and the one running tw) owns, or that group or others may "
                             "write (refused otherwise, as sshd's StrictModes refuses such "
                             "files: that user could erase or forge the history)")
    parser.add_argument("--for", dest="duration", type=options.checked(_seconds(1, 10 ** 8)),
                        metavar="S", help="stop after S seconds (a trial run; default: until "
                                          "SIGTERM)")
    parser.add_argument("--report", action="store_true",
                        help="say what booting with ia32_emulation=0 would have stopped, from "
                             "the state, and exit")
    parser.add_argument("--since", type=options.checked(_since), default=30 * 86400.0,
                        metavar="PERIOD", help="with --report: the period, e.g. 30d, 12h (default 30d)")
    parser.add_argument("--json", action="store_true", help="with --report or --overhead: print JSON")
    parser.add_argument("--overhead", action="store_true",
                        help="measure what the watch costs other programs (a paired A/B of a "
                             "null call and a /dev/null write: off, exec tracer, window) and exit")
    parser.add_argument("--rounds", type=options.int_range(2, 100), default=6, metavar="N",
                        help="with --overhead: rounds (default 6)")
    parser.add_argument("--idle-seconds", type=options.int_range(0, 3600), default=60, metavar="S",
                        help="with --overhead: run a real watch this long for its CPU and "
                             "memory (default 60; 0: not)")


def _overhead(args):
    from ..analyse import watchcost as acost
    from ..measure import watchcost as mcost
    raw = mcost.run(rounds=args.rounds, progress=ui.progress, idle_s=args.idle_seconds)
    d = acost.analyse(raw)
    d["raw"] = raw
    if args.json:
        print(present.to_json(d))
        return ui.EXIT_OK
    for leg, ops in d["legs"].items():
        for op, r in ops.items():
            q, u, a, b = r["ratio"], r["undisturbed_ratio"], r["added_ns"], r["off_ns"]
            und = (f"x{u['median']:.3f} [{u['ci_low']:.3f}, {u['ci_high']:.3f}]"
                   if u.get("median") is not None else "unknown")
            print(f"{leg:6} {op:13} off {b['median']:.1f} ns; slowdown (paired medians) "
                  f"x{q['median']:.3f} [{q['ci_low']:.3f}, {q['ci_high']:.3f}], undisturbed "
                  f"{und}; added {a['median']:.1f} ns [{a['ci_low']:.1f}, {a['ci_high']:.1f}] "
                  f"per call ({q['n_rounds']} rounds)")
    r = d.get("resources")
    if r:
        print(f"a real tw watch (--window 0) for {r['seconds']:.0f} s: {r['cpu_s']:.2f} s of CPU, "
              f"{100 * r['cpu_share_of_one_core']:.2f}% of one core")
        mem = r.get("memory") or {}
        for what, m in (("execs only", mem.get("execs_only")),
                        (f"with a {mem.get('window', {}).get('seconds')} s window open",
                         mem.get("with_a_window"))):
            if not m:
                continue
            procs = "; ".join(f"{c} {v['pss'] / 2 ** 20:.0f}" for c, v in
                              sorted(m["by_process"].items(), key=lambda x: -x[1]["pss"]))
            print(f"memory, {what} (peaks of the sums over the watch's processes, MiB): "
                  f"proportional {m['pss'] / 2 ** 20:.0f}, anonymous {m['anon'] / 2 ** 20:.0f}, "
                  f"resident {m['rss'] / 2 ** 20:.0f} (shared library pages counted in each "
                  f"process), BPF maps {m['maps'] / 2 ** 20:.1f} of kernel memory; at one "
                  f"instant, proportional plus maps {m['pss_and_maps'] / 2 ** 20:.0f}, resident "
                  f"plus maps {m['rss_and_maps'] / 2 ** 20:.0f}; proportional by process: {procs}")
    return ui.EXIT_OK


def main(args, name):
    if args.overhead:
        if not proc.is_root():
            raise ui.UserError("tw watch --overhead loads BPF programs: run it as root")
        return _overhead(args)
    if args.report:
        doc = service.report(args.state, args.since, allow_unsafe=args.allow_unsafe_state)
        print(present.to_json(doc) if args.json else present.format_text(doc))
        return ui.EXIT_OK
    if not proc.is_root():
        raise ui.UserError("tw watch traces every process: run it as root", code=ui.EXIT_USAGE)
    if os.path.lexists(args.state) and not os.path.isdir(args.state):
        raise ui.UserError(f"--state {args.state} is not a folder",
                           f"give the folder that keeps (or will keep) {watchdb.FILE}")
    w = service.Watch(args)
    # The watch's own signal handling replaces tw's (which raises Interrupted): SIGTERM and
    # SIGINT end the loop after the current step, SIGHUP asks for a save and a reload.
    prev = {s: signal.signal(s, lambda *_: w.stop.set()) for s in (signal.SIGTERM, signal.SIGINT)}
    prev[signal.SIGHUP] = signal.signal(signal.SIGHUP, lambda *_: w.hup.set())
    try:
        return w.run()
    finally:
        for s, h in prev.items():
            signal.signal(s, h)

