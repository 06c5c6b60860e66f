"""The one ELF reader: every part of the toolkit that looks inside an ELF file asks here.

What it reads: the identification and file header (`header`, `is_i386`), the program headers
(segments, PT_INTERP, PT_DYNAMIC with DT_NEEDED/DT_RUNPATH/DT_SONAME/DT_FLAGS_1), the section
headers and their names, the symbols of .symtab and .dynsym, the load address, and the code
regions a decoder walks.  `Elf(data, name)` parses bytes; `load(path)` reads a file once,
bounded, through core.files.read_regular (a regular file only: a FIFO or /dev/zero is refused,
never waited on or read without end) and parses those bytes.  Nothing here opens a path
twice: what is parsed is what was read.

Why a hand-written reader over `struct` and not pyelftools or LIEF: `tw scan` parses every
ELF file of a machine (thousands, gigabytes), and it needs only the headers and the symbol
tables.  struct.unpack_from over bytes already in memory parses a 2 MB libc's 3000 symbols in
milliseconds; pyelftools builds a Python object per field and per symbol (tens of times
slower, and its own exceptions, ELFError, struct.error and others, would all need catching);
LIEF is a large C++ wheel whose parser recovers silently from damage, where this toolkit wants
to say what is damaged.  The price is that the bounds checks are ours, and they are all here:
every offset and size of a segment, a section, a string and a symbol table is checked against
the file's length before it is used (a section header table of 65535 entries past the end, a
string table without its NUL, a symbol table running off the end, a size of 2**63).  Damaged
or hostile bytes raise ElfError (a DataError: one line, exit 3), never struct.error, IndexError
or a traceback; tests/test_elf_fuzz.py mutates real files to hold that.
"""
import bisect
import errno
import functools
import operator
import struct
from collections import namedtuple

from ..core import files
from ..core.ui import EXIT_USAGE, DataError

ELFCLASS32, ELFCLASS64 = 1, 2
ELFDATA2LSB = 1
EM_386, EM_X86_64 = 3, 62
ET_REL, ET_EXEC, ET_DYN, ET_CORE = 1, 2, 3, 4
MACHINES = {EM_386: "i386", EM_X86_64: "x86-64", 40: "arm", 183: "aarch64", 8: "mips",
            20: "ppc", 21: "ppc64", 22: "s390", 243: "riscv", 2: "sparc", 43: "sparcv9",
            258: "loongarch", 0: "none"}
# e_ident (16) + e_type, e_machine (2 + 2): enough to tell class and machine.
HEADER_MIN = 20
# The whole file header, by class.
EHDR_SIZE = {32: 52, 64: 64}
PHDR_SIZE = {32: 32, 64: 56}
SHDR_SIZE = {32: 40, 64: 64}
SYM_SIZE = {32: 16, 64: 24}

PT_LOAD, PT_DYNAMIC, PT_INTERP = 1, 2, 3
PF_X = 1
SHT_SYMTAB, SHT_STRTAB, SHT_NOBITS, SHT_DYNSYM = 2, 3, 8, 11
SHF_EXECINSTR = 4
SHN_UNDEF, SHN_LORESERVE, SHN_XINDEX = 0, 0xff00, 0xffff
STT_NOTYPE, STT_OBJECT, STT_FUNC = 0, 1, 2
DT_NULL, DT_NEEDED, DT_STRTAB, DT_STRSZ, DT_SONAME, DT_RPATH, DT_RUNPATH = 0, 1, 5, 10, 14, 15, 29
DT_FLAGS_1, DF_1_PIE = 0x6ffffffb, 0x08000000
# The largest ELF file `load` reads whole by default: larger than any program or library a
# distribution ships (chromium's is about 250 MB), small enough to hold in memory.
MAX_ELF = 1 << 30
# The most section headers a file may claim: real files hold thousands (a -ffunction-sections
# build of a large C++ program some tens of thousands), and each costs a Python tuple, so a
# sparse file claiming millions (e_shnum 0, the count in section 0) would cost gigabytes.
MAX_SECTIONS = 1 << 18

Header = namedtuple("Header", "bits machine type machine_name")
Segment = namedtuple("Segment", "type flags offset vaddr filesz memsz")
Section = namedtuple("Section", "name type flags addr offset size link entsize")
Symbol = namedtuple("Symbol", "value size type name")
# A stretch of machine code: its address, its offset in the file and its length.
Region = namedtuple("Region", "vaddr offset size")


_first = operator.itemgetter(0)


class ElfError(DataError):
    """A damaged ELF file (or one that is not a regular file): the message says why, in one
    line; exit 3."""


class NotElf(ElfError):
    """Not an ELF file this toolkit reads (no ELF magic, big-endian, not x86 where x86 code
    is wanted): a wrong file named by the user, so exit 2 as for any bad argument."""

    code = EXIT_USAGE


def header(data, name="the file"):
    """The Header of ELF bytes (at least HEADER_MIN of them).  ElfError when they are not a
    little-endian 32- or 64-bit ELF file."""
    if len(data) < 4 or data[:4] != b"\x7fELF":
        raise NotElf(f"{name} is not an ELF file")
    if len(data) < HEADER_MIN:
        raise ElfError(f"{name}: damaged ELF file: {len(data)} bytes, shorter than an ELF "
                       "identification and header")
    if data[4] not in (ELFCLASS32, ELFCLASS64) or data[5] != ELFDATA2LSB:
        raise NotElf(f"{name} is not a little-endian 32- or 64-bit ELF file")
    typ, mach = struct.unpack_from("<HH", data, 16)
    return Header(32 if data[4] == ELFCLASS32 else 64, mach, typ, MACHINES.get(mach))


def is_i386(data):
    """Whether ELF bytes are 32-bit i386 code: what needs IA32 emulation to run."""
    try:
        h = header(data)
    except ElfError:
        return False
    return h.bits == 32 and h.machine == EM_386


def read(path, limit=MAX_ELF):
    """The bytes of the file at path, read once through core.files.read_regular: DataError
    for a FIFO, a device or a file larger than limit; FileNotFoundError when absent."""
    data = files.read_regular(path, limit=limit, what="ELF file")
    if data is None:
        raise FileNotFoundError(errno.ENOENT, "No such file or directory", str(path))
    return data


def load(path, limit=MAX_ELF):
    """The Elf of the file at path, read once (see read)."""
    return Elf(read(path, limit), str(path))


class Elf:
    """A parsed little-endian ELF file: header, segments, sections, dynamic entries, symbols.

    Every offset and size is checked against the bytes before use; ElfError (one line naming
    the file and what is damaged) for anything out of bounds."""

    def __init__(self, data, name="the file"):
        self.path = self.name = str(name)
        self.data = data
        h = header(data, self.path)
        self.bits, self.machine, self.type, self.machine_name = h
        if len(data) < EHDR_SIZE[self.bits]:
            raise ElfError(f"{self.path}: damaged ELF file: {len(data)} bytes, shorter than "
                           f"its {EHDR_SIZE[self.bits]}-byte file header")
        fmt = "<IQQQIHHHHHH" if self.bits == 64 else "<IIIIIHHHHHH"
        (_, self.entry, phoff, shoff, _, _, phentsize, phnum, shentsize, shnum,
         shstrndx) = struct.unpack_from(fmt, data, 20)
        self.segments = self._segments(phoff, phentsize, phnum)
        self.sections = self._sections(shoff, shentsize, shnum, shstrndx)
        self.interp = None
        for s in self.segments:
            if s.type == PT_INTERP:
                self.interp = data[s.offset:s.offset + s.filesz].split(b"\0")[0].decode(
                    errors="replace")
        self.needed, self.runpath, self.flags_1, self.soname = [], [], 0, None
        self._dynamic()

    # --- bounds --------------------------------------------------------------

    def _damaged(self, what):
        return ElfError(f"{self.path}: damaged ELF file: {what}")

    def _within(self, off, size, what):
        """ElfError unless [off, off + size) lies inside the file."""
        if off < 0 or size < 0 or off + size > len(self.data):
            raise self._damaged(f"{what} (offset {off:#x}, {size} bytes) runs past the end of "
                                f"the file ({len(self.data)} bytes)")

    def cstr(self, off, end, what="a string"):
        """The NUL-terminated string at off, which must end before `end` (its table's end)."""
        end = min(end, len(self.data))
        if not 0 <= off < end:
            raise self._damaged(f"{what} at {off:#x} lies outside its string table")
        stop = self.data.find(b"\0", off, end)
        if stop < 0:
            raise self._damaged(f"{what} at {off:#x} has no NUL before the end of its table")
        return self.data[off:stop].decode(errors="replace")

    # --- headers -------------------------------------------------------------

    def _segments(self, phoff, phentsize, phnum):
        if not phnum:
            return []
        if phentsize < PHDR_SIZE[self.bits]:
            raise self._damaged(f"program header size {phentsize}, less than "
                                f"{PHDR_SIZE[self.bits]}")
        self._within(phoff, phnum * phentsize, f"the program header table of {phnum} entries")
        out = []
        for i in range(phnum):
            off = phoff + i * phentsize
            if self.bits == 64:
                t, flags, o, va, _, fsz, msz, _ = struct.unpack_from("<IIQQQQQQ", self.data, off)
            else:
                t, o, va, _, fsz, msz, flags, _ = struct.unpack_from("<IIIIIIII", self.data, off)
            if t in (PT_LOAD, PT_DYNAMIC, PT_INTERP):
                self._within(o, fsz, f"segment {i}")
            out.append(Segment(t, flags, o, va, fsz, msz))
        return out

    def _sections(self, shoff, shentsize, shnum, shstrndx):
        if not shoff:
            return []
        if shentsize < SHDR_SIZE[self.bits]:
            raise self._damaged(f"section header size {shentsize}, less than "
                                f"{SHDR_SIZE[self.bits]}")
        self._within(shoff, shentsize, "the section header table")
        raw = [self._shdr(shoff)]
        if shnum == 0:              # more than SHN_LORESERVE sections: the count is in [0]
            shnum = raw[0][5]
        if shnum > MAX_SECTIONS:
            raise self._damaged(f"claims {shnum} sections, more than any real file holds "
                                f"({MAX_SECTIONS} at most)")
        if shstrndx == SHN_XINDEX:
            shstrndx = raw[0][6]
        self._within(shoff, shnum * shentsize, f"the section header table of {shnum} entries")
        raw += [self._shdr(shoff + i * shentsize) for i in range(1, shnum)]
        for i, (_, t, _, _, o, size, _, _) in enumerate(raw):
            if t != SHT_NOBITS and i:
                self._within(o, size, f"section {i}")
        names = [""] * len(raw)
        if shstrndx:
            if shstrndx >= len(raw):
                raise self._damaged(f"the section-name table is section {shstrndx} of "
                                    f"{len(raw)}")
            so, ssize = raw[shstrndx][4], raw[shstrndx][5]
            names = [self.cstr(so + r[0], so + ssize, "a section name") if i else ""
                     for i, r in enumerate(raw)]
        return [Section(n, *r[1:]) for n, r in zip(names, raw)]

    def _shdr(self, off):
        if self.bits == 64:
            name, t, flags, addr, o, size, link, _, _, entsize = \
                struct.unpack_from("<IIQQQQIIQQ", self.data, off)
        else:
            name, t, flags, addr, o, size, link, _, _, entsize = \
                struct.unpack_from("<IIIIIIIIII", self.data, off)
        return name, t, flags, addr, o, size, link, entsize

    def _dynamic(self):
        dyn = next((s for s in self.segments if s.type == PT_DYNAMIC), None)
        if dyn is None:
            return
        fmt = "<qQ" if self.bits == 64 else "<iI"
        size = struct.calcsize(fmt)
        entries = []
        for off in range(dyn.offset, dyn.offset + dyn.filesz - size + 1, size):
            tag, val = struct.unpack_from(fmt, self.data, off)
            if tag == DT_NULL:
                break
            entries.append((tag, val))
        tags = dict(entries)
        strtab = tags.get(DT_STRTAB)
        stroff = self.vaddr_to_offset(strtab) if strtab is not None else None
        if stroff is None:
            self.flags_1 = tags.get(DT_FLAGS_1, 0)
            return
        # The table ends at DT_STRSZ, or at the end of the segment holding it.
        seg = next(s for s in self.segments if s.type == PT_LOAD
                   and s.vaddr <= strtab < s.vaddr + s.filesz)
        end = seg.offset + seg.filesz
        if DT_STRSZ in tags:
            end = min(end, stroff + tags[DT_STRSZ])
        for tag, val in entries:
            if tag == DT_FLAGS_1:
                self.flags_1 = val
            elif tag == DT_NEEDED:
                self.needed.append(self.cstr(stroff + val, end, "a DT_NEEDED name"))
            elif tag == DT_SONAME:
                self.soname = self.cstr(stroff + val, end, "the DT_SONAME")
            elif tag in (DT_RUNPATH, DT_RPATH):
                self.runpath.extend(p for p in self.cstr(stroff + val, end, "a run path")
                                    .split(":") if p)

    # --- addresses -----------------------------------------------------------

    def vaddr_to_offset(self, va):
        for s in self.segments:
            if s.type == PT_LOAD and s.vaddr <= va < s.vaddr + s.filesz:
                return va - s.vaddr + s.offset
        return None

    def offset_to_vaddr(self, off):
        for s in self.segments:
            if s.type == PT_LOAD and s.offset <= off < s.offset + s.filesz:
                return off - s.offset + s.vaddr
        return None

    def bytes_at(self, va, n):
        """n bytes of the file's image at vaddr va, or None outside the file's segments."""
        off = self.vaddr_to_offset(va)
        return None if off is None else self.data[off:off + n]

    @property
    def load_vaddr(self):
        """p_vaddr of the first PT_LOAD (0 for the kernel's vDSO images and most PIEs)."""
        return next((s.vaddr for s in self.segments if s.type == PT_LOAD), 0)

    def in_exec(self, va):
        """Whether vaddr va lies in an executable PT_LOAD segment."""
        return any(s.type == PT_LOAD and s.flags & PF_X and s.vaddr <= va < s.vaddr + s.memsz
                   for s in self.segments)

    @functools.cached_property
    def code_regions(self):
        """The machine code a decoder walks, as Regions sorted by address: every executable
        section with contents, or, in a file without section headers, every executable
        PT_LOAD segment.  classify and scan walk the same regions, so they can agree."""
        rs = [Region(s.addr, s.offset, s.size) for s in self.sections
              if s.flags & SHF_EXECINSTR and s.type != SHT_NOBITS and s.size]
        if not rs:
            rs = [Region(s.vaddr, s.offset, s.filesz) for s in self.segments
                  if s.type == PT_LOAD and s.flags & PF_X and s.filesz]
        return sorted(rs)

    # --- kind ----------------------------------------------------------------

    @property
    def static(self):
        return self.interp is None and not self.needed

    @property
    def pie(self):
        """ET_DYN with an interpreter or DF_1_PIE (a static-pie has only the flag)."""
        return self.type == ET_DYN and (self.interp is not None or bool(self.flags_1 & DF_1_PIE))

    @property
    def kind(self):
        if self.type == ET_EXEC:
            return "executable"
        if self.type == ET_DYN:
            if self.soname:     # glibc's libc.so.6 has an interpreter too: it runs
                return "shared library"
            return "PIE executable" if self.pie else "shared library"
        return {ET_REL: "relocatable object", ET_CORE: "core file"}.get(self.type,
                                                                        f"ELF type {self.type}")

    @property
    def needs_ia32(self):
        """Whether running (or loading) this file needs the kernel's IA32 emulation: i386
        code that is a program, a shared library or an interpreter."""
        return self.bits == 32 and self.machine == EM_386 and self.type in (ET_EXEC, ET_DYN)

    # --- symbols -------------------------------------------------------------

    def _symtabs(self):
        """[(symbol table Section, its index, its string table Section, entry count)],
        each checked: entries large enough, a string table that exists and has contents."""
        out = []
        want = SYM_SIZE[self.bits]
        for i, s in enumerate(self.sections):
            if s.type not in (SHT_SYMTAB, SHT_DYNSYM) or not s.size:
                continue
            if s.entsize < want:
                raise self._damaged(f"symbol table {s.name or i} has entries of {s.entsize} "
                                    f"bytes, less than {want}")
            if s.link >= len(self.sections) or not s.link:
                raise self._damaged(f"symbol table {s.name or i} names string table {s.link} "
                                    f"of {len(self.sections)}")
            strs = self.sections[s.link]
            if strs.type == SHT_NOBITS:
                raise self._damaged(f"symbol table {s.name or i} has a string table with no "
                                    "contents")
            out.append((s, i, strs, s.size // s.entsize))
        return out

    def _bad_name(self, s, i):
        return self._damaged(f"a name in symbol table {s.name or i} lies past the end of its "
                             "string table")

    @functools.cached_property
    def _symrows(self):
        """[(value, size, type, name offset, end of its string table)] of the defined symbols
        of .symtab and .dynsym, sorted; names are decoded only when asked for (a large
        program has 100 000 symbols, and tw scan needs the names of a few)."""
        rows = []
        want = SYM_SIZE[self.bits]
        fmt = "<IBBHQQ" if self.bits == 64 else "<IIIBBH"
        for s, i, strs, n in self._symtabs():
            if s.entsize == want:
                raw = struct.iter_unpack(fmt, memoryview(self.data)[s.offset:s.offset + n * want])
            else:
                raw = (struct.unpack_from(fmt, self.data, s.offset + j * s.entsize)
                       for j in range(n))
            if self.bits == 64:
                raw = ((nm, v, sz, info, shndx) for nm, info, _, shndx, v, sz in raw)
            else:
                raw = ((nm, v, sz, info, shndx) for nm, v, sz, info, _, shndx in raw)
            # A value of 0 is a symbol nothing maps, except in a relocatable object, where
            # values are offsets in their sections.
            rel = self.type == ET_REL
            got = [(v, sz, info & 0xF, nm) for nm, v, sz, info, shndx in raw
                   if nm and shndx != SHN_UNDEF and (v or rel)]
            if got and max(r[3] for r in got) >= strs.size:
                raise self._bad_name(s, i)
            end = strs.offset + strs.size
            rows += [(v, sz, t, strs.offset + nm, end) for v, sz, t, nm in got]
        rows.sort(key=_first)
        return rows

    def _name(self, row):
        return self.cstr(row[3], row[4], "a symbol name").split("@", 1)[0]

    @functools.cached_property
    def symbols(self):
        """[Symbol(value, size, type, name)] of .symtab and .dynsym, defined ones with a
        non-zero value (any value in a relocatable object), sorted by value; a name's
        @VERSION is dropped."""
        out, seen = [], set()
        for row in self._symrows:
            n = self._name(row)
            if (row[0], n) in seen:
                continue
            seen.add((row[0], n))
            out.append(Symbol(row[0], row[1], row[2], n))
        out.sort()
        return out

    @functools.cached_property
    def symbol_values(self):
        """The sorted values of every defined symbol (names not decoded): the same set as
        the symbols' values, read with numpy when it is there (tw scan asks this of every
        file with a candidate, and a Go program has 100 000 symbols)."""
        if "_symrows" in self.__dict__:
            return [r[0] for r in self._symrows]
        try:
            import numpy as np
        except ImportError:
            return [r[0] for r in self._symrows]
        parts = []
        names = ["name", "info", "shndx", "value"]
        offsets = [0, 4, 6, 8] if self.bits == 64 else [0, 12, 14, 4]
        formats = ["<u4", "u1", "<u2", "<u8" if self.bits == 64 else "<u4"]
        for s, i, strs, n in self._symtabs():
            dt = np.dtype({"names": names, "formats": formats, "offsets": offsets,
                           "itemsize": s.entsize})
            t = np.frombuffer(self.data, dtype=dt, count=n, offset=s.offset)
            keep = (t["name"] != 0) & (t["shndx"] != SHN_UNDEF)
            if self.type != ET_REL:
                keep &= t["value"] != 0
            if keep.any() and int(t["name"][keep].max()) >= strs.size:
                raise self._bad_name(s, i)
            parts.append(t["value"][keep].astype(np.uint64))
        if not parts:
            return []
        return np.sort(np.concatenate(parts)).tolist()

    def symbol_table(self):
        """{name: (value, size)}, the first definition of each name."""
        out = {}
        for v, size, _, n in self.symbols:
            out.setdefault(n, (v, size))
        return out

    @functools.cached_property
    def functions(self):
        """([(value, size, row)], [value]) of function symbols sorted by value; untyped
        symbols in executable segments stand in when there are none (Go and hand-written
        assembly may mark text symbols NOTYPE)."""
        fs = [(r[0], r[1], r) for r in self._symrows if r[2] == STT_FUNC]
        if not fs:
            fs = [(r[0], r[1], r) for r in self._symrows
                  if r[2] == STT_NOTYPE and self.in_exec(r[0])]
        return fs, [v for v, _, _ in fs]

    def function_at(self, va):
        """(name, offset) of the function holding vaddr va, or (None, None).  A symbol of size
        0 extends to the next one."""
        fs, starts = self.functions
        i = bisect.bisect_right(starts, va) - 1
        while i >= 0:
            v, sz, row = fs[i]
            if sz and va < v + sz:
                return self._name(row), va - v
            if not sz:
                nxt = starts[i + 1] if i + 1 < len(starts) else None
                if (nxt is None or va < nxt) and va - v < 1 << 16:
                    return self._name(row), va - v
            # an earlier, larger symbol may still cover va (nested local labels)
            if i and fs[i - 1][0] == v:
                i -= 1
                continue
            break
        return None, None

    @functools.cached_property
    def data_symbols(self):
        """{vaddr: name} of object (and untyped, non-code) symbols: what a pointer lives in."""
        out = {}
        for v, _, t, n in self.symbols:
            if t == STT_OBJECT or (t == STT_NOTYPE and not self.in_exec(v)):
                out.setdefault(v, n)
        return out
