"""`tw classify-libc [PATH...] [--json]`: how a C library's write() enters the kernel.

The work is machine/entrypath.classify_libc's; the text is present/entrypath.format_libc's."""
import json

from ..machine import entrypath
from ..present.entrypath import format_libc


def add_arguments(parser, name):
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")
    parser.add_argument("paths", nargs="*", metavar="PATH",
                        help="libraries or programs to classify (default: this machine's "
                             "32-bit and 64-bit libc.so.6)")


def main(args, name):
    if not args.paths:
        results = list(entrypath.libc_entries().values())
    else:
        results = [entrypath.classify_libc(p) for p in args.paths]
    if args.json:
        print(json.dumps(results, indent=1))
    else:
        for r in results:
            print(format_libc(r))
            print()
    return 0 if all(r["entry"] != "unknown" for r in results) else 1
