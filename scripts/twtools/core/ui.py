"""What the user sees on the terminal besides results: progress, warnings, the one-line errors
of expected failures with their exit statuses, commands quoted so that they can be pasted,
and the value of a blind figure.  Every line printed here goes through core.escape.terminal
(say()): the messages name files and hosts, which can hold control characters."""
import argparse
import shlex
import signal
import sys

from . import escape

# Exit statuses of every tw command (README, "Exit status"; `tw --help` prints them).
EXIT_OK = 0
EXIT_FAILED = 1        # the command ran to its end, but something it measured failed
EXIT_USAGE = 2         # a bad command line: nothing was done
EXIT_DATA = 3          # a results directory or stage file is damaged, hostile or not one
EXIT_SYSTEM = 4        # the system refused: disk full, read-only, permission, missing path
EXIT_BUG = 70          # an internal error (a bug): the traceback is printed (EX_SOFTWARE)
EXIT_PIPE = 141        # stdout's reader went away (`tw ... | head`): 128 + SIGPIPE, silent
# An interrupted command exits 128 + the signal's number, as a shell reports a killed one:
# 130 for SIGINT (Ctrl-C), 143 for SIGTERM, 129 for SIGHUP.
EXIT_SIGNAL_BASE = 128

EXIT_STATUSES = [
    (EXIT_OK, "success"),
    (EXIT_FAILED, "the command finished, but a stage, a variant that must work here or a "
                  "measurement failed (the results say which)"),
    (EXIT_USAGE, "bad usage: an unknown option or a bad value; nothing was done"),
    (EXIT_DATA, "a results directory is damaged, hostile or not one (the message names the "
                "file and what is wrong)"),
    (EXIT_SYSTEM, "the system refused: disk full, read-only file system, permission, a missing "
                  "or existing path (the message names it)"),
    (EXIT_BUG, "an internal error: a bug in tw (the traceback is printed; please report it)"),
    (130, "interrupted by SIGINT (Ctrl-C); 143 by SIGTERM, 129 by SIGHUP: children stopped, "
          "temporary files removed, the results directory marked interrupted"),
    (EXIT_PIPE, "the reader of stdout went away (`tw ... | head`); nothing is printed"),
]


class ArgumentParser(argparse.ArgumentParser):
    """argparse, with its error line escaped for the terminal (it quotes the bad value, which
    may be a file name holding control characters) and exit status EXIT_USAGE: the parser of
    tw and of each of its commands."""

    def error(self, message):
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, escape.terminal(f"{self.prog}: error: {message}") + "\n")


class UserError(Exception):
    """An expected failure the user can act on: printed as one line, `tw CMD: message; hint`,
    and the command exits with `code`.  Never a traceback."""

    code = EXIT_USAGE

    def __init__(self, message, hint=None, code=None):
        super().__init__(message)
        self.message, self.hint = message, hint
        if code is not None:
            self.code = code

    def line(self):
        return self.message + (f"; {self.hint}" if self.hint else "")


class DataError(UserError, ValueError):
    """A results directory or one of its files is damaged, hostile or not a results directory:
    the message names the file and what is wrong.  A ValueError too, so that callers which
    already treat bad values as ValueError keep working."""

    code = EXIT_DATA


class SystemRefused(UserError):
    """The system said no (a full disk, a read-only file system, a permission)."""

    code = EXIT_SYSTEM


class Interrupted(KeyboardInterrupt):
    """SIGINT, SIGTERM or SIGHUP arrived (core.proc turns each into this exception, so that
    every `finally` runs and every child process group is killed on the way out).  A
    KeyboardInterrupt, so that no `except Exception` swallows it.  `message` is set by
    whoever cleaned up and knows what was saved."""

    def __init__(self, signum=signal.SIGINT, message=None):
        super().__init__(signum)
        self.signum, self.message = int(signum), message

    @property
    def name(self):
        return signal.Signals(self.signum).name

    @property
    def code(self):
        return EXIT_SIGNAL_BASE + self.signum


def exit_status_text():
    """The exit statuses as the help epilog and the README print them."""
    return "\n".join(f"  {code:>3}  {what}" for code, what in EXIT_STATUSES)


def command_line(argv):
    """A command as one line a user can paste into a POSIX shell: every word quoted where it
    needs to be (spaces, quotes, `$(...)`, globs), so that pasting runs exactly this command
    and nothing a directory name smuggles in.  A word starting with '-' that is meant as a
    file name must be written as such by the caller (./-x): quoting cannot say that."""
    return shlex.join(str(a) for a in argv)


def path_word(path):
    """A path as a command-line word that no program can take for an option: './-x' for a
    relative '-x' (command_line() then quotes it like any other word)."""
    p = str(path)
    return "./" + p if p.startswith("-") else p


def say(line):
    """One line on stderr, escaped for the terminal (core.escape.terminal): a message names
    files, programs and hosts, and any of them can hold an escape sequence or a newline.
    Callers pass the raw text; this is where it is escaped, once."""
    print(escape.terminal(line), file=sys.stderr, flush=True)


def progress(msg):
    """One progress line on stderr, so stdout stays machine-readable."""
    say(f"tw: {msg}")


def warn(msg, todo):
    """A warning that says what happened and what to do next."""
    say(f"tw: warning: {msg}; {todo}")


def blind(why):
    """The value of a figure an instrument could not see: never 0."""
    return {"value": None, "why": why}
