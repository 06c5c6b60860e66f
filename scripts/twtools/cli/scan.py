"""`tw scan PATH... [--json] [--jobs N] [--bench]`: every ELF file under the paths, what it is,
whether it needs IA32 emulation, and where it enters the kernel.

The work is machine/scan.py's; the text is present/scan.py's.  Text: the readiness answer
first, the table, one line per file that could not be scanned, then what was scanned.
--json: JSON lines (machine/scan.SCHEMA and VERSION in the first, a summary in the last).
--bench: only the figures a benchmark needs (wall time, files, bytes, jobs, CPU)."""
import json
import os
import sys

from ..core import ui
from . import options
from ..machine import doctor
from ..machine import scan as engine
from ..present import scan as text


def add_arguments(parser, name):
    parser.description = (
        "Every ELF file under the paths (a root file system, /opt, a Steam library, an unpacked "
        "container image): its class and machine, whether it needs the kernel's IA32 emulation "
        "(what booting with ia32_emulation=0 would stop), and its kernel-entry sites by kind "
        "(inline int 0x80, sysenter, syscall, calls to __kernel_vsyscall through %gs:0x10 or "
        "an AT_SYSINFO pointer, calls into the vsyscall page; int 0x80 in 64-bit code is "
        "flagged, as it cuts pointers to 32 bits).  Candidate bytes are found in the code and "
        "each is confirmed with a decoder, so the counts are those of `tw classify`.  "
        "Symbolic links found in the tree are not followed, each file is read once however many "
        "hard links it has, and the walk stays on each PATH's file system (as find -xdev) "
        "unless --cross-filesystems; /proc, /sys, /dev and the kernel's other pseudo file "
        "systems are never entered.  Each file has a budget (candidate sites, seconds of "
        "decoding; a sparse file is not read).  Files that cannot be scanned "
        "(unreadable, special, a link loop, a damaged ELF file) get a line each.  "
        "Exit status: 0 every file scanned, 1 some could not be, 2 bad usage.")
    parser.add_argument("paths", nargs="+", metavar="PATH", help="files or directories to scan")
    parser.add_argument("--json", action="store_true",
                        help=f"print JSON lines: a header ({engine.SCHEMA} version "
                             f"{engine.VERSION}), one record per ELF file and per problem, a "
                             "summary")
    parser.add_argument("--jobs", type=options.jobs, default=os.cpu_count() or 1, metavar="N",
                        help="processes to scan with (default: the number of CPUs)")
    parser.add_argument("--cross-filesystems", action="store_true",
                        help="enter other file systems mounted under a PATH (never the kernel's "
                             "pseudo file systems: proc, sysfs, devtmpfs, ...)")
    parser.add_argument("--bench", action="store_true",
                        help="print only the wall time, file count, bytes read, jobs and CPU")


def _progress(s):
    ui.progress(f"scan: {s['files']} files, {s['elf']} ELF, {s['bytes'] / 1e6:.0f} MB so far")


def main(args, name):
    for p in args.paths:
        if not os.path.lexists(p):
            raise FileNotFoundError(2, "No such file or directory", p)
    records = engine.scan(args.paths, jobs=args.jobs, cross=args.cross_filesystems,
                          progress=_progress if sys.stderr.isatty() or args.bench else None)
    if args.json:
        print(json.dumps(engine.header(args.paths, args.jobs)))
        for r in records:
            print(json.dumps(r))
            if r["record"] == "summary":
                summary = r
        return ui.EXIT_FAILED if summary["problems"] else ui.EXIT_OK
    files, problems = [], []
    for r in records:
        {"file": files, "problem": problems}.get(r["record"], []).append(r)
        if r["record"] == "summary":
            summary = r
    if args.bench:
        cpu = doctor.Doctor().cpu().get("model_name")
        print("\n".join(text.bench(summary, cpu)))
        return ui.EXIT_OK
    out = text.readiness(summary, args.paths)
    tab = text.table(files)
    if tab:
        out += [""] + tab
    if problems:
        out += [""] + [text.problem(p) for p in sorted(problems, key=lambda p: p["path"])]
    out += ["", text.summary_line(summary)]
    print("\n".join(out))
    return ui.EXIT_FAILED if summary["problems"] else ui.EXIT_OK
