"""`tw vdso [--binary B] [--64] [--save FILE] [--json]`: the live 32-bit vDSO's
__kernel_vsyscall, and which entry instruction the kernel patched into it.

The work is machine/entrypath.vdso32's; the text is present/entrypath.format_vdso's."""
import json

from ..machine import entrypath
from ..present.entrypath import format_vdso


def add_arguments(parser, name):
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")
    parser.add_argument("--binary", help="the 32-bit program to read the vDSO from "
                                         "(default: one from build/, else a tiny one made with nasm)")
    parser.add_argument("--64", dest="show64", action="store_true",
                        help="also list the 64-bit vDSO's functions")
    parser.add_argument("--save", metavar="FILE",
                        help="also write the vDSO image to FILE, and its size and AT_SYSINFO's "
                             "offset to FILE.txt (what tw doctor --record keeps); both are "
                             "written whole or not at all, and never through a symbolic link")


def main(args, name):
    r = entrypath.vdso32(args.binary, save=args.save)
    if args.show64:
        r["vdso64"] = entrypath.vdso64()
    if args.json:
        print(json.dumps(r, indent=1))
    else:
        print(format_vdso(r))
    return 0 if r["instruction"] else 1
