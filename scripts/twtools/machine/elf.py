"""The one ELF reader: every part of the toolkit that looks inside an ELF file asks here.

This first piece reads the identification and the file header, which is all that telling a
32-bit program from a 64-bit one needs (`header`, `is_i386`).  Segments, sections, symbols and
the load address follow in the same module, so that classify, scan, entrypath, diagnose and
census share one parser and one set of bounds checks.

Every function takes bytes already read (through core.files, bounded), never a path: a file
is opened once, and what is parsed is what was read.  Damaged or hostile bytes raise ElfError
with one line saying why; nothing else escapes.
"""
import struct
from collections import namedtuple

from ..core.ui import DataError

ELFCLASS32, ELFCLASS64 = 1, 2
ELFDATA2LSB = 1
EM_386, EM_X86_64 = 3, 62
ET_EXEC, ET_DYN = 2, 3
MACHINES = {EM_386: "i386", EM_X86_64: "x86-64"}
# e_ident (16) + e_type, e_machine (2 + 2): enough to tell class and machine.
HEADER_MIN = 20

Header = namedtuple("Header", "bits machine type machine_name")


class ElfError(DataError):
    """Not an ELF file this toolkit reads, or a damaged one: the message says why, in one line."""


def header(data, name="the file"):
    """The Header of ELF bytes (at least HEADER_MIN of them).  ElfError when they are not a
    little-endian 32- or 64-bit ELF file."""
    if len(data) < 4 or data[:4] != b"\x7fELF":
        raise ElfError(f"{name} is not an ELF file")
    if len(data) < HEADER_MIN or data[4] not in (ELFCLASS32, ELFCLASS64) or data[5] != ELFDATA2LSB:
        raise ElfError(f"{name} is not a little-endian 32- or 64-bit ELF file")
    typ, mach = struct.unpack_from("<HH", data, 16)
    return Header(32 if data[4] == ELFCLASS32 else 64, mach, typ, MACHINES.get(mach))


def is_i386(data):
    """Whether ELF bytes are 32-bit i386 code: what needs IA32 emulation to run."""
    try:
        h = header(data)
    except ElfError:
        return False
    return h.bits == 32 and h.machine == EM_386
