"""Options shared by several commands, and the argparse types that check a value before any
work is done: a bad value is one line from argparse and exit 2, never a traceback later."""
import argparse
import json
import os

from ..core import files, proc, ui
from ..machine import seccompprofile, seccompruntime


def add_mode_arguments(parser, quick_help, long_help):
    """--quick / --long (default: mode 'default'), the same three modes in every command."""
    g = parser.add_mutually_exclusive_group()
    g.add_argument("--quick", dest="mode", action="store_const", const="quick", help=quick_help)
    g.add_argument("--long", dest="mode", action="store_const", const="long", help=long_help)
    parser.set_defaults(mode="default")


def names_of(choices, what):
    """A type for a comma list whose items must all be among choices."""
    choices = list(choices)

    def parse(text):
        items = [x.strip() for x in text.split(",") if x.strip()]
        bad = [x for x in items if x not in choices]
        if not items or bad:
            raise argparse.ArgumentTypeError(
                f"unknown {what} {bad[0] if bad else repr(text)}; choose from {', '.join(choices)}")
        return items
    return parse


def checked(fn):
    """A type from a parser that raises ValueError with a message."""
    def parse(text):
        try:
            return fn(text)
        except ValueError as e:
            raise argparse.ArgumentTypeError(str(e))
    parse.__name__ = fn.__name__
    return parse


def int_range(lo, hi):
    return _number_range(int, "an integer", lo, hi)


def real_range(lo, hi, what="value"):
    """A finite real number in [lo, hi] ('nan', 'inf' and '1e999' are refused)."""
    return _number_range(float, "a number", lo, hi, what)


def _number_range(kind, name, lo, hi, what=None):
    def parse(text):
        try:
            v = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"'{text}' is not {name}")
        if not lo <= v <= hi:     # NaN fails every comparison, and inf is out of range
            raise argparse.ArgumentTypeError(
                (f"{what} " if what else "") + f"{v:g} is out of range [{lo:g}, {hi:g}]"
                if kind is float else f"{v} is out of range [{lo}, {hi}]")
        return v
    return parse


def jobs(text):
    """--jobs N: worker processes, 1 to core.proc.max_jobs() (a few per CPU): a larger number
    would only fork workers that share the same CPUs, each with its own memory."""
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a whole number of jobs")
    if not 1 <= v <= proc.max_jobs():
        raise argparse.ArgumentTypeError(
            f"{v} is not 1 to {proc.max_jobs()} ({proc.JOBS_PER_CPU} per CPU on this machine's "
            f"{os.cpu_count() or 1}): more workers only share the same CPUs")
    return v


def allowed_cpu(text):
    """A CPU this process may run on (sched_getaffinity), so that pinning cannot fail later."""
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a CPU number")
    allowed = sorted(os.sched_getaffinity(0))
    if v not in allowed:
        raise argparse.ArgumentTypeError(
            f"CPU {v} is not one this process may use ({', '.join(map(str, allowed))})")
    return v


def _dir(text, mode, what):
    if not os.path.isdir(text):
        raise argparse.ArgumentTypeError(f"{text} is not an existing directory")
    if not os.access(text, mode | os.X_OK):
        raise argparse.ArgumentTypeError(f"{text} is not {what} by this user")
    return text


def writable_dir(text):
    """An existing directory this user can create files in."""
    return _dir(text, os.W_OK, "writable")


def readable_dir(text):
    """An existing directory this user can read programs from (it may be read-only)."""
    return _dir(text, os.R_OK, "readable")


def fresh_dir(text):
    """--out of a measuring command: a new directory, or an empty one.  Never a directory
    that holds anything (its old files would be read as this run's), a file, or a symbolic
    link (writes are not made through one)."""
    if os.path.islink(text):
        raise argparse.ArgumentTypeError(f"{text} is a symbolic link; give the path of a directory")
    if os.path.exists(text) and not os.path.isdir(text):
        raise argparse.ArgumentTypeError(f"{text} exists and is not a directory; give a new one")
    if os.path.isdir(text) and os.listdir(text):
        raise argparse.ArgumentTypeError(
            f"{text} is not empty; give a new or empty directory (results are never merged)")
    return text


def add_costs_source(parser):
    """--results DIR | --measure: where tw diagnose and tw census take the per-call costs they
    price a program's entry paths with."""
    g = parser.add_mutually_exclusive_group()
    g.add_argument("--results", metavar="DIR",
                   help="take per-call costs from DIR/percall.json (default: results/latest, "
                        "or measured here when there is none)")
    g.add_argument("--measure", action="store_true",
                   help="measure the per-call costs here, now, even if results exist")


def duration(text):
    """Seconds from '90', '90s', '10m' or '1h' (finite, positive); ValueError says what is
    wrong."""
    import re
    m = re.fullmatch(r"(\d{1,7}(?:\.\d{1,3})?)([smh]?)", text.strip())
    if not m or float(m.group(1)) <= 0:
        raise ValueError(f"'{text}' is not a duration: give seconds, or a number with s, m or h "
                         "(90s, 10m, 1h)")
    return float(m.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600}[m.group(2)]


# --target's default budget in every command that has one: ten minutes (issue 42's example).
TARGET_BUDGET_S = 600.0


def add_target_arguments(parser, target_help, budget_help):
    """--target PCT (a relative half-width, `percent`) and --budget TIME (`duration`), as tw
    bench, tw legs and tw sweep take them, each with its command's words."""
    parser.add_argument("--target", metavar="PCT", type=checked(percent), help=target_help)
    parser.add_argument("--budget", metavar="TIME", type=checked(duration), help=budget_help)


def budget_needs_target(args):
    """--budget without --target is a one-line user error: the budget is a --target run's."""
    if args.budget is not None and args.target is None:
        raise ui.UserError("--budget is the time a --target run may take",
                           "give --target PCT with it")


def target_argv(target, budget_s=None):
    """The words that ask a tw command for this target and budget again ([] without one)."""
    if target is None:
        return []
    return ["--target", f"{100 * target:g}%"] + ([] if budget_s is None else
                                                 ["--budget", f"{budget_s:g}s"])


def percent(text):
    """A relative precision from '1%' or '0.01' (between 0.01% and 50%)."""
    import re
    t = text.strip()
    m = re.fullmatch(r"(\d{1,3}(?:\.\d{1,4})?)(%?)", t)
    if not m:
        raise ValueError(f"'{text}' is not a precision: give a percentage such as 1% or 0.5%")
    v = float(m.group(1)) / (100 if m.group(2) else 1)
    if not 0.0001 <= v <= 0.5:
        raise ValueError(f"'{text}': the precision must be between 0.01% and 50%")
    return v


def selfcheck_end(cmd, path, f, lines, short, also, as_json):
    """The end of tw bench's and tw sweep's --selfcheck: the figures f written to path and
    printed (as JSON with --json, else as lines(f)); the exit status, EXIT_FAILED with a warning
    when the check fell short (short: what did)."""
    files.write_json(path, f)
    print(json.dumps(f, indent=1) if as_json else "\n".join(lines(f)))
    ui.progress(f"{cmd}: wrote {path} ({also})")
    if short:
        ui.warn(f"{cmd}: the self-check fell short: " + "; ".join(short),
                "rerun on a quieter host, or with --long for more rounds")
        return ui.EXIT_FAILED
    return 0


def _caps(text):
    """--caps's argument type: the bounding set, checked (a bad word is exit 2)."""
    try:
        return seccompprofile.caps_set(text), text
    except seccompprofile.ProfileError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def add_wall_arguments(p):
    """--runtime and --caps: how a seccomp profile is read and laid out (tw ab, tw explain)."""
    p.add_argument("--runtime", choices=seccompruntime.RUNTIMES,
                   default=seccompruntime.DEFAULT_RUNTIME,
                   help="with --wall seccomp:PROFILE: lay the filter out as this runtime does "
                        "(runc: its -ENOSYS stub first, libseccomp's binary tree past 32 rules, "
                        "SPEC_ALLOW unless the profile names flags; crun: libseccomp's chain, "
                        "SPEC_ALLOW; libseccomp: the rules as written, the profile's flags "
                        "only); default runc")
    p.add_argument("--caps", metavar="CAPS", type=_caps, default=None,
                   help="with --wall seccomp:PROFILE: the container's capabilities, which "
                        "decide the rules a profile's includes/excludes.caps keep: "
                        + seccompprofile.CAPS_HELP)
