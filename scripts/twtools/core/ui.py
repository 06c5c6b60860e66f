"""What the user sees on the terminal besides results, and the value of a blind figure."""
import sys


def progress(msg):
    """One progress line on stderr, so stdout stays machine-readable."""
    print(f"tw: {msg}", file=sys.stderr, flush=True)


def warn(msg, todo):
    """A warning that says what happened and what to do next."""
    print(f"tw: warning: {msg}; {todo}", file=sys.stderr, flush=True)


def blind(why):
    """The value of a figure an instrument could not see: never 0."""
    return {"value": None, "why": why}


def command_line(argv):
    """A command as the user can paste it: every word shell-quoted."""
    import shlex
    return shlex.join(str(a) for a in argv)
