"""What every tracer plug-in provides, and the helpers they share.

A tracer plug-in is one module in this package defining TRACER, an instance of a Tracer
subclass.  The package finds them itself (twtools.machine.tracers.plugins()), so adding a tracer
touches only its own module.  Each one says:

  check(doctor)        whether it works on this machine, and why not: instrument rows for
                       tw doctor, each with the figures that are lost when it does not
  blind(mech, root)    what it cannot see: None when it sees a mechanism's calls, else why
                       (a compat call it mislabels, a vsyscall fault that is no system call,
                       no root)
  observer_wrapper()   the command prefix whose cost per call the observer-effect stage
                       measures (tw observer), and wrap_command() to put a command under it
  trace(...)           run the known workload of the trace stage under it: its stage-file
                       records (raw output kept) and the writes it counted per variant
  summaries            which of its records' sample lists the analysis summarises, and
                       under what name (raw samples stay in the stage file)
  tables(stage)        its report section, as (caption, headers, rows) tables built from its
                       own (analysed) stage-file records: data the present layer renders

Runs go through argument lists, never a shell.  Where a tool takes one command string
(bpftrace -c), that string holds plain words only (command_word): bpftrace splits it at spaces
and passes quotes through literally (seen with bpftrace 0.17), so no quoting could carry a
path with a space or a quote in it.  A command with such a word runs from a small script, in
the scratch directory, that execs it with every word shlex-quoted; the tool then runs with
that directory as its working directory and is given the script's plain relative name.
"""
import json
import re
import shlex
import subprocess
from pathlib import Path

from ...core import paths, proc


class Tracer:
    name = "tracer"
    title = "tracer"
    order = 50
    # instrument name -> what is not measured when it does not work here (tw doctor)
    skips = {}
    # stage key -> {samples field: summary field}, summarised by twtools.analyse.tracers
    summaries = {}

    def check(self, doctor):
        return []

    def blind(self, mech, root):
        return None

    def observer_wrapper(self, tmp, root):
        return None, f"{self.title} has no observer-effect wrapper"

    def wrap_command(self, wrapper, cmd):
        """The argv that runs cmd under this tracer's wrapper (a prefix, by default)."""
        return list(wrapper) + list(cmd)

    def trace(self, variants, workload, tmp, root):
        return {"records": {}, "counts": {}, "files": {}}

    def tables(self, stage):
        return []

    # -- helpers for subclasses ----------------------------------------------------------
    def instrument(self, name, works, why, **extra):
        return dict({"name": name, "works": works, "why": why,
                     "skipped": [] if works else self.skips.get(name, [])}, **extra)


def observer_why_not(program, root, not_root):
    """Why an observer wrapper cannot run program here (not installed, or not root: not_root),
    or None."""
    if not proc.which(program):
        return f"{program} is not installed"
    if not root:
        return not_root
    return None


def observer_argv(program, root, not_root, argv):
    """(argv, None) when program can wrap the observer stage's commands here, else (None,
    why) as observer_why_not says it."""
    why = observer_why_not(program, root, not_root)
    return (None, why) if why else (argv, None)


def kernel_entry_blind(mech, tool, root=True, not_root=None):
    """The part of blindness every syscall tracer shares: a vsyscall call raises a page
    fault that the kernel emulates, and a vDSO call never enters the kernel; for a tracer that
    needs root, not being root (not_root says so) comes first."""
    if not root:
        return not_root
    if mech.seen_as == "fault":
        return (f"{tool} sees system calls; a call into the vsyscall page is a page fault the "
                "kernel emulates without one (exceptions:page_fault_user sees it)")
    if mech.seen_as == "none":
        return f"{mech.name} does not enter the kernel: there is nothing for {tool} to see"
    return None


# bpftrace 0.17's JSON writes every byte of a string above 0x7f as a sign-extended escape,
# \uffffffXX: still JSON, but "é" (c3 a9) would read as U+FFFF "ffc3" U+FFFF "ffa9".  A run of
# them (after an even number of backslashes, so that an escaped backslash followed by the
# same letters is left alone) is turned back into its bytes, decoded as UTF-8 (a byte that
# is not UTF-8 as \xNN, as tw watch's loader writes it) and escaped again.
_BPFTRACE_BYTES = re.compile(r"(?<!\\)((?:\\\\)*)((?:\\uffffff[0-9a-f]{2})+)")


def _unmangle(line):
    def repl(m):
        raw = bytes.fromhex(m.group(2).replace("\\uffffff", ""))
        return m.group(1) + json.dumps(raw.decode("utf-8", "backslashreplace"))[1:-1]
    return _BPFTRACE_BYTES.sub(repl, line)


def _merged(pairs):
    """A JSON object whose repeated keys are one: their counts summed.  bpftrace 0.17 prints a
    map keyed by strings and integers with entries whose keys print alike but differ in bytes
    that do not print (on Linux 6.18 here: 1333 entries printing as 33 keys for one dd run,
    shared/FIELD-NOTES.md); summed, they give every call, where a dict kept the last."""
    out = {}
    for k, v in pairs:
        if k in out and isinstance(v, int) and isinstance(out[k], int) and \
                not isinstance(v, bool) and not isinstance(out[k], bool):
            out[k] += v
        else:
            out[k] = v
    return out


def json_lines(text):
    """The JSON objects of an NDJSON text (perf stat -j, bpftrace -f json), skipping the
    other lines those tools mix in (warnings, 'Attaching N probes', blank lines), a map's
    repeated keys summed (_merged).  Lines end at "\n" only: str.splitlines() and str.strip()
    would also cut at U+2028, U+2029, U+0085 and \x1c-\x1e, \x0b, \x0c, which a program's
    name may hold (raw, inside a JSON string), and a whole map line would be lost."""
    for line in (text or "").split("\n"):
        line = line.strip(" \t\r")
        if line.startswith("{"):
            if "\\uffffff" in line:
                line = _unmangle(line)
            try:
                yield json.loads(line, object_pairs_hook=_merged)
            except json.JSONDecodeError:
                continue


def first_line(text, default=""):
    for line in (text or "").split("\n"):
        line = line.strip()
        if line and "RLIMIT_MEMLOCK" not in line:   # bpftrace's harmless warning
            return line
    return default


def run_with_stdin(cmd, stdin_path, timeout=120):
    """Run an argument list with a file on stdin; (returncode, stdout, stderr)."""
    try:
        with open(stdin_path, "rb") as f:
            p = proc.run(cmd, stdin=f, timeout=timeout)
        return p.returncode, p.stdout, p.stderr
    except (OSError, subprocess.TimeoutExpired) as e:
        return 127, "", str(e)


def quote_command(argv):
    """One shell-safe string, for a line of a shell script (a driver) that runs argv."""
    return shlex.join(str(a) for a in argv)


# A word every way of splitting a command string leaves whole and unchanged.
PLAIN = re.compile(r"^[A-Za-z0-9_./:=,+@%-]+$")


def command_word(argv, scratch, name):
    """The command string for a tool's one-word command option (bpftrace -c) that runs argv:
    argv joined by spaces when every word is plain; else `/bin/sh NAME`, NAME being a script
    written into scratch that execs argv, every word quoted.  In the second case the tool must
    run with scratch as its working directory (the returned flag says so)."""
    words = [str(a) for a in argv]
    if all(PLAIN.match(w) for w in words):
        return " ".join(words), False
    if not PLAIN.match(name) or "/" in name:
        raise ValueError(f"script name {name!r} is not a plain file name")
    (Path(scratch) / name).write_text("exec " + quote_command(words) + "\n")
    return f"/bin/sh {name}", True


class Workload:
    """The trace stage's known workload: timewrite writing full*chunk+tail bytes in chunk-byte
    writes, so each run makes full+1 write() calls to its output file (plus one write of its
    report to stdout), a count every tracer must reproduce."""

    # timewrite prints its one tsv row at exit: one more write(), to stdout, that a tracer
    # following the whole process counts beside the file writes.
    REPORT_WRITES = 1

    def __init__(self, input_path, full, chunk=256, tail=17):
        self.input, self.full, self.chunk, self.tail = input_path, full, chunk, tail
        self.expected = full + 1

    def command(self, variant, outfile, sync=False):
        cmd = [str(paths.binary("timewrite", variant)), str(outfile)]
        if sync:
            cmd.append("sync")
        return cmd + ["--sizes", str(self.chunk)]

    def own_count(self, stdout):
        """timewrite's own count of write() calls, from its tsv row."""
        for line in (stdout or "").split("\n"):
            f = line.split("\t")
            if len(f) >= 5 and f[0] == str(self.chunk):
                return int(f[4])
        return None
