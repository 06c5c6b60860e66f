"""The `tw` command: one subcommand per module, each with add_arguments() and main()."""
import argparse
import importlib
import sys

# name -> (module, one-line help).  Modules are imported only when their
# command runs, so a broken or slow import in one never affects the others.
COMMANDS = {
    "doctor": ("machine.doctor", "which instruments work here, and why not"),
    "explain": ("present.explain", "how this machine enters the kernel, with live disassembly and costs"),
    "vdso": ("machine.entrypath", "disassemble the live 32-bit vDSO's __kernel_vsyscall"),
    "classify-libc": ("machine.entrypath", "tell how a libc's write() enters the kernel"),
    "classify": ("cli.classify", "every kernel-entry site of any ELF program or library, by function"),
    "diagnose": ("cli.diagnose", "trace a program: its entry paths, latencies, and what they cost here"),
    "bench": ("cli.bench", "per-call cost of each mechanism and operation (syscost matrix)"),
    "sweep": ("cli.stages", "the seed and TLPI buffer-size sweeps over every variant"),
    "trace": ("cli.stages", "run variants under perf, strace and bpftrace"),
    "attribute": ("cli.stages", "split each call into loop, entry/exit, body and waiting"),
    "observer": ("cli.stages", "nanoseconds per call each tracer adds"),
    "run": ("cli.run", "the whole investigation: measure everything, then report"),
    "report": ("present.report", "write report.md/report.html from a results directory"),
    "compare": ("present.compare", "compare several results directories, with decisions"),
    "ab": ("cli.ab", "alternate two settings round by round and decide which is faster"),
}


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(
        prog="tw",
        description="timewrite: compare, trace and explain how programs enter the Linux kernel.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (_, helptext) in COMMANDS.items():
        sub.add_parser(name, help=helptext, add_help=False)
    if not argv or argv[0] in ("-h", "--help") or argv[0] not in COMMANDS:
        if argv and argv[0] not in ("-h", "--help"):
            parser.print_usage(sys.stderr)
            print(f"tw: unknown command '{argv[0]}'; see tw --help", file=sys.stderr)
            return 2
        parser.print_help()
        return 0 if argv else 2
    name = argv[0]
    module = importlib.import_module(f"twtools.{COMMANDS[name][0]}")
    cmd = argparse.ArgumentParser(prog=f"tw {name}", description=COMMANDS[name][1])
    module.add_arguments(cmd, name)
    args = cmd.parse_args(argv[1:])
    return module.main(args, name) or 0
