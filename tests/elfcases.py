"""Hostile ELF files made from real ones: each function takes a real file's bytes and returns
them with one field rewritten, as issue 19 lists (a section-name table at 0x7fffffff, a huge
section size, a string table without its NUL, a symbol table running off the end, 65535
section headers past the end, a truncated file).  Offsets are found with struct, not with
the reader under test."""
import struct


def _hdr(data):
    """(bits, shoff, shentsize, shnum, shstrndx, phoff, phentsize, phnum)."""
    if data[4] == 2:
        phoff, shoff = struct.unpack_from("<QQ", data, 0x20)
        phentsize, phnum, shentsize, shnum, shstrndx = struct.unpack_from("<HHHHH", data, 0x36)
        return 64, shoff, shentsize, shnum, shstrndx, phoff, phentsize, phnum
    phoff, shoff = struct.unpack_from("<II", data, 0x1C)
    phentsize, phnum, shentsize, shnum, shstrndx = struct.unpack_from("<HHHHH", data, 0x2A)
    return 32, shoff, shentsize, shnum, shstrndx, phoff, phentsize, phnum


# Offsets of sh_type, sh_offset, sh_size, sh_link in a section header, and their formats.
SHF = {64: {"type": (4, "<I"), "offset": (0x18, "<Q"), "size": (0x20, "<Q"), "link": (0x28, "<I")},
       32: {"type": (4, "<I"), "offset": (0x10, "<I"), "size": (0x14, "<I"), "link": (0x18, "<I")}}
# e_shoff and e_shnum in the file header.
EHF = {64: {"shoff": (0x28, "<Q"), "shnum": (0x3C, "<H"), "phoff": (0x20, "<Q"), "phnum": (0x38, "<H")},
       32: {"shoff": (0x20, "<I"), "shnum": (0x30, "<H"), "phoff": (0x1C, "<I"), "phnum": (0x2C, "<H")}}


def sections(data):
    """[(index, header offset, type, offset, size, link)]."""
    bits, shoff, shentsize, shnum, *_ = _hdr(data)
    out = []
    for i in range(shnum):
        h = shoff + i * shentsize
        f = {k: struct.unpack_from(fmt, data, h + o)[0] for k, (o, fmt) in SHF[bits].items()}
        out.append((i, h, f["type"], f["offset"], f["size"], f["link"]))
    return out


def set_section(data, index, field, value):
    bits = _hdr(data)[0]
    h = sections(data)[index][1]
    o, fmt = SHF[bits][field]
    b = bytearray(data)
    struct.pack_into(fmt, b, h + o, value % (1 << (8 * struct.calcsize(fmt))))
    return bytes(b)


def set_header(data, field, value):
    bits = _hdr(data)[0]
    o, fmt = EHF[bits][field]
    b = bytearray(data)
    struct.pack_into(fmt, b, o, value % (1 << (8 * struct.calcsize(fmt))))
    return bytes(b)


def shstrtab_far(data):
    """The section-name table's offset set to 0x7fffffff."""
    return set_section(data, _hdr(data)[4], "offset", 0x7FFFFFFF)


def huge_section(data):
    """A symbol table's size set to 2**63 (2**31 in a 32-bit file)."""
    i = next(s[0] for s in sections(data) if s[2] in (2, 11))
    return set_section(data, i, "size", 1 << (63 if _hdr(data)[0] == 64 else 31))


def strtab_without_nul(data):
    """The string table of the symbols with every NUL replaced: no name ends."""
    sym = next(s for s in sections(data) if s[2] in (2, 11))
    st = sections(data)[sym[5]]
    b = bytearray(data)
    b[st[3]:st[3] + st[4]] = bytes(x or 0x41 for x in b[st[3]:st[3] + st[4]])
    return bytes(b)


def symtab_off_the_end(data):
    """A symbol table that starts 8 bytes before the end of the file."""
    i = next(s[0] for s in sections(data) if s[2] in (2, 11))
    return set_section(data, i, "offset", len(data) - 8)


def many_sections_past_end(data):
    """65535 section headers, the table starting 64 bytes before the end of the file."""
    return set_header(set_header(data, "shnum", 0xFFFF), "shoff", len(data) - 64)


def truncated(data):
    """The first third of the file: headers that name bytes it no longer has."""
    return data[:len(data) // 3]


HOSTILE = {"shstrtab at 0x7fffffff": shstrtab_far, "huge section size": huge_section,
           "string table without NUL": strtab_without_nul,
           "symbol table off the end": symtab_off_the_end,
           "65535 section headers past the end": many_sections_past_end,
           "truncated": truncated}
