"""The mechanism registry: variants/registry, read once, as Mechanism rows.

Every list of mechanisms in the tools, the documentation generator and the tests comes from
here; the Makefile reads the same file.  See the file's header for what each column means.
"""
import functools
from dataclasses import dataclass

from ..core.paths import ROOT

REGISTRY = ROOT / "variants" / "registry"

ENTRIES = ("syscall", "sysenter", "int80", "vdso32-call", "vsyscall-call", "vdso-call", "libc")
NEEDS = ("ia32", "vdso32", "sysenter32", "syscall32", "vsyscall", "vdso64")
SHAPES = ("inline", "ret", "jmp")
SEEN_AS = ("syscall", "fault", "none")
ABIS = ("x86_64", "i386")
# Entries that reach the kernel by a fast instruction from 32-bit code; the verdict compares
# int 0x80 with the first of these that works here.
FAST_32 = ("vdso32-call", "sysenter", "syscall")


class RegistryError(ValueError):
    """variants/registry is malformed: the message names the line."""


@dataclass(frozen=True)
class Mechanism:
    name: str            # the variant: '64-syscall'
    abi: str
    entry: str
    bytes: str | None
    needs: tuple
    ops: tuple
    shapes: tuple
    seen_as: str
    objects: tuple

    @property
    def bits(self):
        return int(self.name.split("-", 1)[0])

    @property
    def mechanism(self):
        return self.name.split("-", 1)[1]

    def row(self):
        """The dict the stage files have always carried for a variant."""
        return {"name": self.name, "bits": self.bits, "abi": self.abi, "mechanism": self.mechanism}


def parse(text, where="variants/registry"):
    """(groups, [Mechanism]) from the registry's text; RegistryError names the bad line."""
    groups, rows, seen = {}, [], set()
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].split()
        if not line:
            continue

        def bad(msg):
            raise RegistryError(f"{where}:{n}: {msg}: {raw.strip()}")
        if line[0] == "ops":
            if len(line) != 4 or line[2] != "=":
                bad("an ops group reads `ops NAME = op,op,...`")
            groups[line[1]] = tuple(line[3].split(","))
            continue
        if len(line) < 9:
            bad("expected variant, abi, entry, bytes, needs, ops, shapes, seen-as and objects")
        name, abi, entry, byts, needs, ops, shapes, seen_as = line[:8]
        bits, _, mech = name.partition("-")
        if bits not in ("32", "64") or not mech:
            bad("the variant must read <32|64>-<mechanism>")
        if name in seen:
            bad(f"{name} appears twice")
        seen.add(name)
        if abi not in ABIS:
            bad(f"abi must be one of {', '.join(ABIS)}")
        if entry not in ENTRIES:
            bad(f"entry must be one of {', '.join(ENTRIES)}")
        needs_t = () if needs == "-" else tuple(needs.split(","))
        unknown = [x for x in needs_t if x not in NEEDS]
        if unknown:
            bad(f"unknown need {unknown[0]} (one of {', '.join(NEEDS)})")
        ops_t = []
        for o in ops.split(","):
            ops_t.extend(groups.get(o, (o,)))
        shapes_t = tuple(shapes.split(","))
        if any(s not in SHAPES for s in shapes_t):
            bad(f"shapes must come from {', '.join(SHAPES)}")
        if seen_as not in SEEN_AS:
            bad(f"seen-as must be one of {', '.join(SEEN_AS)}")
        objs = tuple(line[8:])
        if sum(o in ("alloc", "alloc_low") for o in objs) != 1:
            bad("exactly one allocator object (alloc or alloc_low)")
        rows.append(Mechanism(name, abi, entry, None if byts == "-" else byts, needs_t,
                              tuple(ops_t), shapes_t, seen_as, objs))
    return groups, rows


@functools.lru_cache(maxsize=None)
def _load():
    return parse(REGISTRY.read_text())


def mechanisms():
    """Every registry row, in file order."""
    return list(_load()[1])


def get(name):
    """The row of one variant; KeyError naming the registry when it is not there."""
    for m in _load()[1]:
        if m.name == name:
            return m
    raise KeyError(f"{name} is not in variants/registry")


# Operations that are no system call and run in syscost's C loop in place of the stub, so
# that they have no inline form (the stub's own loop holds the entry instruction).
NOT_INLINE = ("cpuid", "verw", "lfence")


def shapes_for(m, op):
    """The loop shapes a mechanism's operation can be timed in: its shapes, less inline for
    the operations syscost times in its own loop (cpuid)."""
    return tuple(s for s in m.shapes if not (op in NOT_INLINE and s == "inline"))


def names():
    return [m.name for m in _load()[1]]


def variants():
    """The rows as dicts (name, bits, abi, mechanism), as stage files record them."""
    return [m.row() for m in _load()[1]]


def find(bits, entry):
    """The name of the first mechanism with this bitness and entry ('32-int80' for (32,
    'int80')), or None: analyses name the roles they need, not variant strings."""
    for m in _load()[1]:
        if m.bits == bits and m.entry == entry:
            return m.name
    return None


def fast32():
    """The 32-bit mechanisms that enter by a fast instruction, vDSO first: the path a 32-bit
    program takes when it does not use int 0x80."""
    rows = [m for m in _load()[1] if m.bits == 32 and m.entry in FAST_32]
    return [m.name for m in sorted(rows, key=lambda m: FAST_32.index(m.entry))]
