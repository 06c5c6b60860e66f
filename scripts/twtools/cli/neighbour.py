"""`tw neighbour [--share S] [--burst-ms B] [--mb M] [--cpu N] [--seconds T] [--seed X]`: a noisy
neighbour in the foreground, so that a noisy cloud host can be reproduced on any machine with two
CPUs: `tw neighbour --share 0.9 --burst-ms 3000` in one terminal, `tw bench` in another.

The work is build/neighbour's (syscost/neighbour.c, measure/neighbour.py).  Ctrl-C (or --seconds)
stops it; its JSON line (seconds run, noisy share achieved, bursts) goes to stdout."""
import os

from ..core import ui
from ..measure import neighbour
from . import options


def add_arguments(parser, name):
    parser.add_argument("--share", type=options.real_range(0, 1, "share"), default=0.9,
                        help="the noisy share of the time, 0 to 1 (default 0.9)")
    parser.add_argument("--burst-ms", type=options.real_range(1, 3600000, "burst"), default=3000,
                        help="the noisy bursts' mean length in ms (default 3000); the quiet "
                             "stretches' mean is burst x (1 - share) / share")
    parser.add_argument("--mb", type=options.int_range(1, 65536), default=64,
                        help="the buffer thrashed, in MiB (default 64: larger than the "
                             "last-level cache of most CPUs)")
    parser.add_argument("--cpu", type=options.allowed_cpu, default=None,
                        help="the CPU to run on (default: the first allowed; tw bench pins "
                             "syscost to the last)")
    parser.add_argument("--seconds", type=options.real_range(0.001, 31536000, "seconds"), default=None,
                        help="stop after this long (default: on Ctrl-C)")
    parser.add_argument("--kind", choices=neighbour.KINDS, default="cache",
                        help="cache: thrash the caches and memory; shootdown: send the measured "
                             "CPU TLB-shootdown interrupts; both (default cache)")
    parser.add_argument("--seed", type=options.int_range(0, 2 ** 63 - 1), default=None,
                        help="the seed of the burst lengths (default: from the time)")


def main(args, name):
    cpus = sorted(os.sched_getaffinity(0))
    cpu = args.cpu if args.cpu is not None else cpus[0]
    ui.say(
        f"tw neighbour: noisy {100 * args.share:g}% of the time in bursts of {args.burst_ms:g} ms "
        f"(mean), {'thrashing ' + str(args.mb) + ' MiB' if args.kind != 'shootdown' else ''}"
        f"{' and ' if args.kind == 'both' else ''}"
        f"{'TLB shootdowns' if args.kind != 'cache' else ''} from CPU {cpu}; run `tw bench` in "
        "another terminal"
        + ("" if args.seconds else "; Ctrl-C stops it")
        + ("" if cpu != cpus[-1] else f" (CPU {cpu} is the one tw bench measures on: give "
                                      "--cpu another)"))
    p = neighbour.start(args.share, args.burst_ms, args.mb, args.cpu, args.seconds, args.seed,
                        capture=False, kind=args.kind)
    try:
        p.wait()
    except KeyboardInterrupt:
        # Ctrl-C reached the neighbour too (one process group); a SIGTERM from elsewhere
        # did not: either way it prints its line and exits, and is killed if it does not.
        neighbour.stop(p)
        return 0
    finally:
        if p.poll() is None:
            neighbour.stop(p)
    if p.returncode:
        err = (p.stderr.read() or "").strip().splitlines()
        raise ui.UserError(f"neighbour stopped with exit status {p.returncode}"
                           + (f": {err[0]}" if err else ""))
    return 0
