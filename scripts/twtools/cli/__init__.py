"""The `tw` command: one subcommand per module, each with add_arguments() and main().

main() is also the one place where failures become what the user sees.  An expected failure
(core.ui.UserError and its kinds, an OSError the system raised about a path, an interrupt, a
closed pipe, a child that outlived its timeout) is one line on stderr, `tw CMD: what; what to
do`, and an exit status from core.ui.EXIT_STATUSES.  Anything else is a bug: its traceback is
printed, with exit status 70.  `tw --debug CMD ...` (or TW_DEBUG=1) prints the traceback of
expected failures too.
"""
import argparse
import contextlib
import errno
import importlib
import os
import subprocess
import sys
import traceback

from ..core import escape, proc, ui

# name -> (module, one-line help).  Modules are imported only when their
# command runs, so a broken or slow import in one never affects the others.
COMMANDS = {
    "doctor": ("cli.doctor", "which instruments work here, and why not"),
    "explain": ("cli.explain", "how this machine enters the kernel, with live disassembly and costs"),
    "vdso": ("cli.vdso", "disassemble the live 32-bit vDSO's __kernel_vsyscall"),
    "classify-libc": ("cli.classify_libc", "tell how a libc's write() enters the kernel"),
    "classify": ("cli.classify", "every kernel-entry site of any ELF program or library, by function"),
    "scan": ("cli.scan", "every ELF file under some paths: IA32 emulation needed, entry sites by kind"),
    "diagnose": ("cli.diagnose", "trace a program: its entry paths, latencies, and what they cost here"),
    "census": ("cli.census", "every process on the machine: its entry paths, their cost per second, "
                             "and what ia32_emulation=0 would stop"),
    "watch": ("cli.watch", "the census kept for weeks: every exec, entry paths in windows, "
                           "Prometheus export, what ia32_emulation=0 would have stopped"),
    "bench": ("cli.bench", "per-call cost of each mechanism and operation (syscost matrix)"),
    "sweep": ("cli.stages", "the seed and TLPI buffer-size sweeps over every variant"),
    "trace": ("cli.stages", "run variants under perf, strace and bpftrace"),
    "attribute": ("cli.stages", "split each call into loop, entry/exit, body and waiting"),
    "observer": ("cli.stages", "nanoseconds per call each tracer adds"),
    "legs": ("cli.stages", "each null call's way in, body and way out, on one clock (root, bpftrace)"),
    "run": ("cli.run", "the whole investigation: measure everything, then report"),
    "report": ("cli.report", "write report.md/report.html from a results directory"),
    "compare": ("cli.compare", "compare several results directories, with decisions"),
    "ab": ("cli.ab", "alternate two settings round by round and decide which is faster"),
    "neighbour": ("cli.neighbour", "a noisy neighbour on purpose: cache and memory thrashing in "
                                   "bursts on the other CPU, to reproduce a noisy host"),
    "fleet": ("cli.fleet", "one view of many machines: groups, outliers, what explains them"),
    "unpack": ("cli.unpack", "unpack a results archive fetched from a host, refusing hostile ones"),
    "atlas": ("cli.atlas", "add a results directory's run to the atlas of machines measured"),
    "lesson": ("cli.lesson", "a lesson page: each way into the kernel, with this machine's costs "
                             "and live evidence; --class: one page over many students"),
}

EPILOG = ("exit status (every command):\n" + ui.exit_status_text() + "\n\n"
          "--debug (or TW_DEBUG=1) prints a traceback for expected failures too.")

# What to do about an OSError, by errno: the second half of its one line.
OS_HINTS = {
    errno.ENOSPC: "the file system is full: free space there, or write elsewhere (--out DIR, "
                  "or TW_RESULTS=DIR for tw run)",
    errno.EDQUOT: "your disk quota is used up: free space, or write elsewhere (--out DIR)",
    errno.EROFS: "the file system is read-only: write elsewhere (--out DIR, or TW_RESULTS=DIR "
                 "for tw run)",
    errno.EIO: "the device reported an I/O error: see `dmesg`",
    errno.ENOENT: "check the path",
    errno.ENOTDIR: "a component of the path is not a directory",
    errno.EISDIR: "it is a directory; give a file",
    errno.EEXIST: "it exists already; choose another name",
    errno.ELOOP: "too many symbolic links, or one tw will not follow",
    errno.ENAMETOOLONG: "choose a shorter path",
}


def _owner_hint(path):
    """For EACCES/EPERM: who owns the nearest existing directory, and what to do."""
    import pwd
    p = os.path.abspath(path) if path else None
    while p and not os.path.exists(p):
        p = os.path.dirname(p)
    me = os.geteuid()
    try:
        my = pwd.getpwuid(me).pw_name
    except KeyError:
        my = f"uid {me}"
    if p:
        uid = os.stat(p).st_uid
        try:
            owner = pwd.getpwuid(uid).pw_name
        except KeyError:
            owner = f"uid {uid}"
        if uid != me:
            return (f"{p} belongs to {owner} and this is {my}: run as {owner}"
                    + (" (sudo make report)" if uid == 0 else "")
                    + ", or write in a directory you own (--out DIR, or TW_RESULTS=DIR for "
                      "tw run)")
    return f"{my} may not write there: write in a directory you own (--out DIR)"


# tw report has no --out: it writes beside the stage files it reads.
# tw watch writes only its state (--state DIR): --out and TW_RESULTS would not help.
ELSEWHERE = {"report": "copy the results directory somewhere writable and run tw report on "
                       "the copy",
             "watch": "give --state a folder on a writable file system with room"}


def describe_oserror(e, command=None):
    """One line for an OSError: the path, the system's words and their errno name, and what
    to do (for that command)."""
    name = proc.errno_name(e.errno) if e.errno else None
    what = e.strerror or str(e)
    if name and name not in what:
        what += f" ({name})"
    where = f"{e.filename}: " if e.filename else ""
    if e.filename2:
        where = f"{e.filename} -> {e.filename2}: "
    if e.errno in (errno.EACCES, errno.EPERM):
        hint = _owner_hint(e.filename)
    else:
        hint = OS_HINTS.get(e.errno)
    if hint and command in ELSEWHERE and "write elsewhere" in hint:
        hint = hint.split("write elsewhere")[0] + ELSEWHERE[command]
    return where + what + (f"; {hint}" if hint else "")


def _quiet_stdout():
    """After EPIPE on stdout: point it at /dev/null, so that Python's flush at exit does not
    raise a second time."""
    try:
        fd = os.open(os.devnull, os.O_WRONLY)
        os.dup2(fd, 1)
        os.close(fd)
    except (OSError, ValueError):
        pass


def _err(line):
    """One line on stderr, escaped for the terminal (a message names files, hosts and
    programs, any of which can hold control characters).  A stderr whose reader left is not
    a second failure: the exit status still says what happened."""
    try:
        print(escape.terminal(line), file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass


def _open_std_streams():
    """Give closed standard streams (`tw doctor >&-`, `2>&-`) /dev/null, and say so.

    A closed fd 1 or 2 is not only a stream that cannot be written: the next file tw opens
    would get that number, and every print, and every child that inherits it, would write
    into that file (a stage file, a report).  So each closed one is opened on /dev/null
    first, as setuid programs do, and sys.stdout/sys.stderr, which Python sets to None for a
    closed fd, are made again.  Returns the names of the streams that were closed."""
    closed = []
    for fd, name in ((0, "stdin"), (1, "stdout"), (2, "stderr")):
        try:
            os.fstat(fd)
        except OSError:
            new = os.open(os.devnull, os.O_RDONLY if fd == 0 else os.O_WRONLY)
            if new != fd:
                os.dup2(new, fd)
                os.close(new)
            closed.append(name)
            mode = "r" if fd == 0 else "w"
            setattr(sys, name, open(fd, mode, closefd=False, errors="backslashreplace",
                                    buffering=1 if fd else -1))
    return closed


def failure(name, e, debug=False):
    """Print what the user must see of exception e raised by command `name`; return the exit
    status.  The one place an exception becomes a message."""
    prog = f"tw {name}" if name else "tw"
    from ..machine.registry import RegistryError
    if isinstance(e, BrokenPipeError) and getattr(e, "filename", None) is None:
        _quiet_stdout()
        return ui.EXIT_PIPE
    if debug:
        with contextlib.suppress(OSError, ValueError):
            traceback.print_exception(e)
    if isinstance(e, KeyboardInterrupt):
        signum = getattr(e, "signum", 2)
        msg = getattr(e, "message", None) or \
            f"interrupted by {ui.Interrupted(signum).name}; child processes stopped"
        _err(f"{prog}: {msg}")
        return ui.EXIT_SIGNAL_BASE + signum
    if isinstance(e, ui.UserError):
        _err(f"{prog}: {e.line()}")
        return e.code
    if isinstance(e, RegistryError):
        _err(f"{prog}: {e}; fix that line of variants/registry")
        return ui.EXIT_DATA
    if isinstance(e, OSError) and (e.filename or e.errno in OS_HINTS
                                   or e.errno in (errno.EACCES, errno.EPERM)):
        _err(f"{prog}: {describe_oserror(e, name)}")
        return ui.EXIT_SYSTEM
    if isinstance(e, subprocess.TimeoutExpired):
        cmd = e.cmd[0] if isinstance(e.cmd, (list, tuple)) and e.cmd else e.cmd
        _err(f"{prog}: {cmd} ran longer than {e.timeout:g} s and was stopped with its "
             "process group; the machine may be overloaded: raise the program's time limit, "
             "or run it when the load average is below the number of CPUs")
        return ui.EXIT_FAILED
    if not debug:
        with contextlib.suppress(OSError, ValueError):
            traceback.print_exception(e)
    _err(f"{prog}: internal error ({type(e).__name__}: {e}): this is a bug in tw; please "
         "report it with the traceback above")
    return ui.EXIT_BUG


def _preflight(name, args):
    """Checks made for a command before its own main() runs: `tw report` reads only a results
    directory, and writes only inside it (core.files.confined).  Returns the directory to
    confine writes to, or None."""
    if name != "report":
        return None
    from ..analyse import results
    d = getattr(args, "dir", None)
    if d is None:
        return None
    results.require_results_dir(d)
    out = getattr(args, "out", None) or d
    from ..core import files
    from ..present import report
    files.refuse_links(out, report.OUTPUTS, report.OUTPUT_DIRS)
    return out


def top_parser():
    """tw's own parser and its (empty) subparsers action: main() adds each command's name,
    cli.manual each command's whole parser."""
    parser = ui.ArgumentParser(
        prog="tw", epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
        description="timewrite: compare, trace and explain how programs enter the Linux kernel.")
    parser.add_argument("--debug", action="store_true",
                        help="print tracebacks for expected failures too (also TW_DEBUG=1)")
    parser.add_argument("--version", action="store_true",
                        help="print tw's version (git describe, or the package's) and exit")
    return parser, parser.add_subparsers(dest="command", metavar="COMMAND")


def main(argv=None):
    closed = _open_std_streams()
    if "stdout" in closed:
        ui.warn("standard output is closed", "what tw prints there is discarded (give it a "
                "file or a pipe to keep it)")
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = bool(os.environ.get("TW_DEBUG"))
    while argv and argv[0] == "--debug":
        debug, argv = True, argv[1:]
    parser, sub = top_parser()
    for name, (_, helptext) in COMMANDS.items():
        sub.add_parser(name, help=helptext, add_help=False)
    if argv and argv[0] == "--version":
        from ..core import version
        print(f"tw {version.get()}")
        return ui.EXIT_OK
    if not argv or argv[0] in ("-h", "--help") or argv[0] not in COMMANDS:
        if argv and argv[0] not in ("-h", "--help"):
            parser.print_usage(sys.stderr)
            _err(f"tw: unknown command '{argv[0]}'; see tw --help")
            return ui.EXIT_USAGE
        parser.print_help()
        return ui.EXIT_OK if argv else ui.EXIT_USAGE
    name = argv[0]
    previous = proc.install_signal_handlers()
    try:
        module = importlib.import_module(f"twtools.{COMMANDS[name][0]}")
        cmd = ui.ArgumentParser(prog=f"tw {name}", description=COMMANDS[name][1],
                                epilog=EPILOG,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
        module.add_arguments(cmd, name)
        args = cmd.parse_args(argv[1:])
        root = _preflight(name, args)
        if root is not None:
            from ..core import files
            with files.confined(root):
                return module.main(args, name) or ui.EXIT_OK
        return module.main(args, name) or ui.EXIT_OK
    except SystemExit:
        raise           # argparse's exit 2 (or 0 for --help), already printed
    except BaseException as e:      # noqa: B902 - the one top-level handler
        proc.kill_all()
        return failure(name, e, debug)
    finally:
        try:
            sys.stdout.flush()
        except (OSError, ValueError):
            # the reader left (EPIPE) or the stream failed: what was lost is lost, and
            # Python's own flush at exit must not fail a second time
            _quiet_stdout()
        proc.restore_signal_handlers(previous)
