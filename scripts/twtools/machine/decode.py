"""x86 machine code as instructions, decoded with capstone from bytes already read.

Why capstone (PyPI `capstone`, the engine behind most binary-analysis tools): it decodes the
bytes classify and scan already hold, so a file is never opened a second time by another
program (objdump used to reopen the path, and a file swapped in between gave a mixed
answer), and it decodes one short stretch as cheaply as a whole file, which `tw scan` needs to
confirm a candidate byte pattern without disassembling everything.  objdump stays where a
person reads its text (`tw vdso`'s listing).

How a file is walked, the same way objdump -d walks it, so that both count the same sites:
linearly through each code region (elf.Elf.code_regions), restarting at every symbol inside
a region (a symbol is where a function, or a label, begins: decoding from there is what
puts the instruction boundaries where the compiler put them).  Bytes that are not an
instruction are skipped one at a time (capstone's SKIPDATA, objdump's "(bad)").  Each
instruction carries the restart point it was decoded from, `label`, which is what the
register tracking of machine/classify.py resets at.

The text is AT&T, as objdump prints it: `int $0x80`, `call *%gs:0x10`, `mov 0x804f128,%eax`.
capstone's size suffix on control-flow and stack mnemonics is dropped (`calll` -> `call`) and
operands are joined without spaces, so that a site reads the same as it did.
"""
import bisect
import functools
from collections import namedtuple

from ..core.ui import UserError
from . import elf as elfmod

# addr: vaddr; size: bytes; op: mnemonic; ops: operand strings; label: the restart point
# (vaddr) it was decoded from; off: its offset in the file.
Insn = namedtuple("Insn", "addr size op ops label off")
# capstone's mnemonics whose size suffix objdump does not print.
_SUFFIXED = {f"{m}{s}": m for m in ("call", "jmp", "ret", "push", "pop") for s in "lqw"}


class NoDecoder(UserError):
    """capstone is not installed: classify, classify-libc and scan cannot decode."""


@functools.lru_cache(maxsize=None)
def _engine(bits):
    # Imported here, so that tw doctor and tw vdso still run before `make venv`.
    try:
        import capstone
    except ImportError:
        raise NoDecoder("the capstone disassembler (PyPI capstone) is not installed",
                        "run make venv, which installs requirements.txt") from None
    md = capstone.Cs(capstone.CS_ARCH_X86, capstone.CS_MODE_32 if bits == 32 else capstone.CS_MODE_64)
    md.syntax = capstone.CS_OPT_SYNTAX_ATT
    md.skipdata = True
    return md


def operands(op_str):
    """capstone's operand string split at its top-level commas: '(%ebx, %eax, 4), %ecx' ->
    ['(%ebx,%eax,4)', '%ecx']."""
    if not op_str:
        return []
    if "(" not in op_str:
        return op_str.replace(" ", "").split(",")
    out, depth, cur = [], 0, []
    for ch in op_str:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            out.append("".join(cur).replace(" ", ""))
            cur = []
        else:
            cur.append(ch)
    out.append("".join(cur).replace(" ", ""))
    return out


def text(ins):
    """An instruction as objdump prints it (AT&T): `call *%esi`, `int $0x80`."""
    return f"{ins.op} {','.join(ins.ops)}" if ins.ops else ins.op


def mem_target(ins, operand):
    """The absolute address a memory operand names, or None: `0x804f128`, `*0x804f128`,
    `%ds:0x804f128` (32-bit absolute), `0x2f3e(%rip)` (next instruction + displacement)."""
    o = operand.lstrip("*")
    if o.startswith("%ds:"):
        o = o[4:]
    if o.endswith("(%rip)"):
        disp = o[:-6] or "0"
        try:
            return (ins.addr + ins.size + int(disp, 0)) & 0xFFFFFFFFFFFFFFFF
        except ValueError:
            return None
    if not o or o[0] in "%$(" or "(" in o or ":" in o:
        return None
    try:
        return int(o, 0)
    except ValueError:
        return None


class Decoder:
    """The instructions of one x86 Elf, walked as the module docstring says."""

    def __init__(self, elf):
        if elf.machine not in (elfmod.EM_386, elfmod.EM_X86_64):
            raise elfmod.NotElf(f"{elf.path} is not x86 machine code (e_machine {elf.machine})")
        self.elf = elf
        self.md = _engine(elf.bits)
        self.regions = elf.code_regions
        self._starts = [r.vaddr for r in self.regions]
        self._values = elf.symbol_values

    @functools.cached_property
    def syncs(self):
        """Every restart point, sorted: region starts and the symbols inside regions."""
        return sorted(set(self._starts) | {v for v in self._values if self.region(v)})

    def region(self, va):
        """The code Region holding vaddr va, or None."""
        i = bisect.bisect_right(self._starts, va) - 1
        if i >= 0:
            r = self.regions[i]
            if va < r.vaddr + r.size:
                return r
        return None

    def sync_before(self, va):
        """The restart point at or before vaddr va (in code), and the next one (or the end
        of va's region)."""
        r = self.region(va)
        end = r.vaddr + r.size
        j = bisect.bisect_right(self._values, va)
        s = self._values[j - 1] if j and self._values[j - 1] >= r.vaddr else r.vaddr
        nxt = self._values[j] if j < len(self._values) and self._values[j] < end else end
        return s, nxt

    def run(self, start, stop, label, skip_to=None):
        """Instructions decoded linearly from vaddr start (inside one region) to stop, each
        labelled `label`; with skip_to, only those from the one holding vaddr skip_to on
        (the ones before are decoded, to find the boundaries, but not built)."""
        r = self.region(start)
        off = r.offset + (start - r.vaddr)
        data = self.elf.data[off:off + (stop - start)]
        it = self.md.disasm_lite(data, start)
        if skip_to is not None:
            for addr, size, op, op_str in it:
                if addr + size > skip_to:
                    yield Insn(addr, size, _SUFFIXED.get(op, op), operands(op_str), label,
                               off + (addr - start))
                    break
        for addr, size, op, op_str in it:
            yield Insn(addr, size, _SUFFIXED.get(op, op), operands(op_str), label,
                       off + (addr - start))

    def all(self):
        """Every instruction of every code region, restarting at each symbol."""
        for i, s in enumerate(self.syncs):
            r = self.region(s)
            end = r.vaddr + r.size
            nxt = self.syncs[i + 1] if i + 1 < len(self.syncs) else end
            yield from self.run(s, min(nxt, end), s)
